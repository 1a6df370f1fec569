import Foundation
import SymorvaTesting
import Testing

@Suite("Tone energy (Goertzel)")
struct ToneEnergyTests {
    static func sine(_ frequency: Double, rate: Double = 48_000, count: Int = 4_800, amplitude: Double = 0.5) -> [Int16]
    {
        (0..<count).map { Int16(amplitude * 32767 * sin(2 * Double.pi * frequency * Double($0) / rate)) }
    }

    @Test("A pure 440 Hz block of 100 ms is nearly all tone; 1 kHz, silence and an empty block are not")
    func shares() {
        #expect(ToneEnergy.share(of: 440, in: Self.sine(440), rate: 48_000) > 0.95)
        #expect(ToneEnergy.share(of: 440, in: Self.sine(1_000), rate: 48_000) < 0.05)
        #expect(ToneEnergy.share(of: 440, in: [Int16](repeating: 0, count: 4_800), rate: 48_000) == 0)
        #expect(ToneEnergy.share(of: 440, in: [], rate: 48_000) == 0)
        let mixed = zip(Self.sine(440, amplitude: 0.3), Self.sine(1_000, amplitude: 0.3)).map { $0 &+ $1 }
        let share = ToneEnergy.share(of: 440, in: mixed, rate: 48_000)
        #expect(share > 0.4 && share < 0.6, "half the energy: \(share)")
    }
}
