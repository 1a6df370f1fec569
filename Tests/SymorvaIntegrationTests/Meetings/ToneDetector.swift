import SymorvaRuntime
import SymorvaTesting

/// Finds a tone in decoded PCM with a Goertzel filter: per 100 ms block of mono 16-bit
/// samples, the share of the block's energy at the tone's frequency. A pure tone puts nearly
/// all of it there; speech, noise and silence do not.
final class ToneDetector: Sendable {
    let frequency: Double
    private struct Blocks {
        var pending: [Int16] = []
        var shares: [Double] = []
    }
    private let blocks = Lock(Blocks())

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
        let shares = full.map { ToneEnergy.share(of: frequency, in: $0, rate: Double(rate)) }
        blocks.withLock { $0.shares += shares }
    }

    /// The share of energy at the tone in every block analysed so far.
    var shares: [Double] { blocks.withLock { $0.shares } }

    /// Whether the last `count` blocks all carry the tone (more than half their energy in it).
    func hears(lastBlocks count: Int = 3) -> Bool {
        let recent = shares.suffix(count)
        return recent.count == count && recent.allSatisfy { $0 > 0.5 }
    }
}
