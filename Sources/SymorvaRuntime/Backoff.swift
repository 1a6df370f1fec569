// Exponential backoff with jitter, as pure values: the runtime's one backoff, for every machine
// that retries or polls (sync, send queue, wallet queries).
//
// Machines may not draw random numbers, yet retries from many clients must not march in
// lockstep. The jitter therefore comes in from outside as a seed (in the event that starts the
// machine or in its initial state) and is advanced deterministically by ``JitterSource``: the
// same seed replays the same delays, which is what tests and trace replays need. A backoff
// without jitter (`jitterRatio: 0`) needs no seed: any jitter value gives the same delay.

/// How long to wait before retry number `attempt`: exponential, capped, with jitter.
///
/// `delay(attempt:jitter:)` is `base × (1 − jitterRatio) + base × jitterRatio × jitter` with
/// `base = min(maximumDelay, initialDelay × multiplier^(attempt − 1))` and `jitter` in `0..<1`
/// ("equal jitter": never less than `base × (1 − jitterRatio)`, never more than `base`).
/// Arithmetic is in whole milliseconds so that every platform computes the same delay.
///
/// The feature presets (`.sync`, `.sendQueue`, `.transferQuery`) live with their machines.
public struct RetryBackoff: Sendable, Hashable {
    /// The base delay before the first retry.
    public var initialDelay: Duration
    /// How much the base grows per attempt.
    public var multiplier: Int
    /// The ceiling of the base delay.
    public var maximumDelay: Duration
    /// The share of the base that is randomised, `0...1`.
    public var jitterRatio: Double

    /// Creates a policy.
    public init(initialDelay: Duration, multiplier: Int = 2, maximumDelay: Duration, jitterRatio: Double = 0.5) {
        self.initialDelay = initialDelay
        self.multiplier = max(1, multiplier)
        self.maximumDelay = maximumDelay
        self.jitterRatio = min(1, max(0, jitterRatio))
    }

    /// The delay before retry `attempt` (1 is the first retry), given a jitter value in `0..<1`.
    public func delay(attempt: Int, jitter: Double) -> Duration {
        let cap = Self.milliseconds(maximumDelay)
        var base = Self.milliseconds(initialDelay)
        var step = 1
        while step < attempt && base > 0 && base < cap {
            let (grown, overflow) = base.multipliedReportingOverflow(by: Int64(multiplier))
            base = overflow ? cap : grown
            step += 1
        }
        base = min(base, cap)
        let clampedJitter = min(max(jitter, 0), 0.999_999_999)
        let randomised = Int64((Double(base) * jitterRatio).rounded(.down))
        let fixed = base - randomised
        let drawn = Int64((Double(randomised) * clampedJitter).rounded(.down))
        return .milliseconds(fixed + drawn)
    }

    /// The delay before retry `attempt`, honouring a server's `Retry-After` (or `retry_after_ms`)
    /// when there is one: the server's value, without jitter, clamped by ``ServerWait`` (a
    /// negative value counts as none).
    public func delay(attempt: Int, jitter: Double, retryAfter: Duration?) -> Duration {
        if let wait = ServerWait.clamp(retryAfter) { return wait }
        return delay(attempt: attempt, jitter: jitter)
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000 + attoseconds / 1_000_000_000_000_000
    }
}

/// A deterministic stream of jitter values in `0..<1` (SplitMix64), seeded from outside.
///
/// The seed is randomness supplied by the caller (the interpreter or coordinator that starts
/// the machine); the machine only advances it, so a transition stays a pure function.
public struct JitterSource: Sendable, Hashable {
    /// The generator's position. Equal positions produce equal streams.
    public private(set) var position: UInt64

    /// A stream starting at `seed`.
    public init(seed: UInt64) { self.position = seed }

    /// The next value in `0..<1`, advancing the stream.
    public mutating func next() -> Double {
        position &+= 0x9E37_79B9_7F4A_7C15
        var mixed = position
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        mixed ^= mixed >> 31
        return Double(mixed >> 11) * 0x1p-53
    }

    /// The delay before retry `attempt` under `backoff`, drawing one jitter value.
    public mutating func delay(attempt: Int, backoff: RetryBackoff, retryAfter: Duration? = nil) -> Duration {
        let jitter = next()
        return backoff.delay(attempt: attempt, jitter: jitter, retryAfter: retryAfter)
    }
}
