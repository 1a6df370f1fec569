import SymorvaMeetings
import Testing

/// The watch that turns a meter's received-sample count into "the room's audio flows / stopped".
@Suite("Incoming audio watch")
struct IncomingAudioWatchTests {
    @Test(
        "Flowing from the first new samples; stopped after the silent readings in a row; flowing again when samples return"
    )
    func edges() {
        var watch = IncomingAudioWatch(startingAt: 960, silentChecks: 4)
        #expect(watch.check(count: 960) == nil)  // nothing yet: not a stop, it never flowed
        #expect(watch.check(count: 1920) == true)
        #expect(watch.check(count: 2880) == nil)
        for _ in 0..<3 { #expect(watch.check(count: 2880) == nil) }
        #expect(watch.check(count: 2880) == false)  // the fourth silent reading
        #expect(watch.check(count: 2880) == nil)  // reported once
        #expect(watch.check(count: 3840) == true)
        // One silent reading between samples (a late buffer) is not a stop.
        #expect(watch.check(count: 3840) == nil)
        #expect(watch.check(count: 4800) == nil)
    }

    @Test("Samples a previous peer left on the meter count for nothing; at least one reading makes a stop")
    func start() {
        var watch = IncomingAudioWatch(startingAt: 48_000, silentChecks: 0)
        #expect(watch.check(count: 48_000) == nil)
        #expect(watch.check(count: 48_960) == true)
        #expect(watch.check(count: 48_960) == false)
    }
}
