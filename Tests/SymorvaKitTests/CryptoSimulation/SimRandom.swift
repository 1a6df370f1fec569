/// The simulation's only source of decisions: SplitMix64, seeded from the run's seed, so that
/// what the simulated homeserver and the driver decide (which to-device message to drop, whom to
/// restart, who sends what) is a pure function of the seed. Never `SystemRandomNumberGenerator`.
struct SimRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator for `seed`; `stream` separates independent decision streams of one seed (the
    /// driver's, the network's) so that one drawing more numbers does not shift the other.
    init(seed: UInt64, stream: UInt64 = 0) {
        state = seed &* 0x9E37_79B9_7F4A_7C15 &+ stream &* 0xD1B5_4A32_D192_ED03 &+ 0x2545_F491_4F6C_DD1D
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<bound`.
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(max(bound, 1))) }

    /// True with probability `percent`/100.
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
}
