import SymorvaKit
import SymorvaTesting
import Testing

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
}
