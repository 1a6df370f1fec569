import SymorvaMeetings
import Testing

/// The meter's answer to "did the room's audio arrive?": a flag taken by each look, and a wait
/// that the engine's next buffer ends (no sleep, no polling).
@Suite("Audio meter arrivals")
struct AudioMeterArrivalTests {
    private func feed(_ meter: AudioMeter) {
        let samples = [Int16](repeating: 1_000, count: 960)
        samples.withUnsafeBufferPointer { meter.record($0, direction: .incoming, rate: 48_000, channels: 1) }
    }

    @Test("A look says whether samples arrived since the last one; outgoing samples don't count")
    func looks() {
        let meter = AudioMeter()
        #expect(!meter.takeIncomingArrival())
        feed(meter)
        #expect(meter.takeIncomingArrival())
        #expect(!meter.takeIncomingArrival())
        let samples = [Int16](repeating: 1_000, count: 960)
        samples.withUnsafeBufferPointer { meter.record($0, direction: .outgoing, rate: 48_000, channels: 1) }
        #expect(!meter.takeIncomingArrival())
    }

    @Test("The wait ends with the next buffer, and takes the arrival; an arrival before the wait ends it at once")
    func waits() async {
        let meter = AudioMeter()
        let waiting = Task { await meter.incomingArrival() }
        feed(meter)  // whether the wait registered first or not, this buffer ends it
        await waiting.value
        #expect(!meter.takeIncomingArrival())
        feed(meter)
        await meter.incomingArrival()
        #expect(!meter.takeIncomingArrival())
    }

    @Test("A cancelled wait returns without any audio")
    func cancelled() async {
        let meter = AudioMeter()
        let waiting = Task { await meter.incomingArrival() }
        waiting.cancel()
        await waiting.value
        #expect(!meter.takeIncomingArrival())
    }
}
