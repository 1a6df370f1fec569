import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Finds a tone in decoded PCM with a Goertzel filter: per 100 ms block of mono 16-bit
/// samples, the share of the block's energy at the tone's frequency. A pure tone puts nearly
/// all of it there; speech, noise and silence do not.
final class ToneDetector: Sendable {
    let frequency: Double
    private struct Blocks {
        var pending: [Int16] = []
        var shares: [Double] = []
    }
    private let blocks = Mutex(Blocks())

    init(frequency: Double) { self.frequency = frequency }

    /// Takes received samples (as the meter's listener hands them over).
    func take(_ samples: [Int16], rate: Int) {
        let blockSize = rate / 10
        let full: [[Int16]] = blocks.withLock { blocks in
            blocks.pending += samples
            var out: [[Int16]] = []
            while blocks.pending.count >= blockSize {
                out.append(Array(blocks.pending.prefix(blockSize)))
                blocks.pending.removeFirst(blockSize)
            }
            return out
        }
        let shares = full.map { Self.share(of: frequency, in: $0, rate: Double(rate)) }
        blocks.withLock { $0.shares += shares }
    }

    /// The share of energy at the tone in every block analysed so far.
    var shares: [Double] { blocks.withLock { $0.shares } }

    /// Whether the last `count` blocks all carry the tone (more than half their energy in it).
    func hears(lastBlocks count: Int = 3) -> Bool {
        let recent = shares.suffix(count)
        return recent.count == count && recent.allSatisfy { $0 > 0.5 }
    }

    /// Goertzel power at `frequency`, normalised by the block's total energy (Parseval: a pure
    /// sine at the bin's frequency gives 1).
    static func share(of frequency: Double, in block: [Int16], rate: Double) -> Double {
        let n = Double(block.count)
        let k = (n * frequency / rate).rounded()
        let omega = 2 * Double.pi * k / n
        let coefficient = 2 * cos(omega)
        var previous = 0.0
        var beforePrevious = 0.0
        var energy = 0.0
        for sample in block {
            let x = Double(sample) / 32768
            energy += x * x
            let current = x + coefficient * previous - beforePrevious
            beforePrevious = previous
            previous = current
        }
        guard energy > 1e-9 else { return 0 }
        let power = previous * previous + beforePrevious * beforePrevious - coefficient * previous * beforePrevious
        return min(1, 2 * power / (n * energy))
    }
}
