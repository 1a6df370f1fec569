import SymorvaKit
import SymorvaMachines
import SymorvaTesting
import Testing

#if os(Linux)
    import SymorvaMediaGStreamer
#endif

/// The stage media engine the SDK's meetings module picks for the platform.
@Suite("Media engine choice")
struct MediaEngineChoiceTests {
    @Test("On Linux the SDK's meetings use the GStreamer engine; elsewhere the unavailable one")
    func platformEngine() {
        let engine = AccountModuleFactory.platformMediaEngine(transport: ScriptedHTTPTransport(), tracer: Tracer())
        #if os(Linux)
            #expect(engine is GStreamerMediaEngine)
        #else
            #expect(engine is UnavailableMediaEngine)
        #endif
    }

    @Test("The test tone engine is GStreamer's on Linux; elsewhere there is none")
    func toneEngine() {
        let engine = AccountModuleFactory.toneMediaEngine(
            frequency: 440, transport: ScriptedHTTPTransport(), tracer: Tracer())
        #if os(Linux)
            #expect(engine is GStreamerMediaEngine)
        #else
            #expect(engine == nil)
        #endif
    }
}
