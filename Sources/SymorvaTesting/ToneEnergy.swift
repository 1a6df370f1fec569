import Foundation

/// How much of a block of 16-bit PCM is one tone: the Goertzel filter's power at a frequency,
/// normalised by the block's total energy (Parseval: a pure sine at the bin's frequency gives 1,
/// silence 0). The media tests and `symorva-bench media` detect a 440 Hz tone in decoded audio
/// with it.
package enum ToneEnergy {
    /// The share, 0…1, of `block`'s energy at `frequency` for samples taken at `rate` Hz.
    package static func share(of frequency: Double, in block: [Int16], rate: Double) -> Double {
        let n = Double(block.count)
        guard n > 0 else { return 0 }
        let k = (n * frequency / rate).rounded()
        let coefficient = 2 * cos(2 * Double.pi * k / n)
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
