import Foundation
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaSession

@Suite("Session interpreter: discovery refuses a downgrade to plain http")
struct SessionDiscoveryInterpreterTests {
    let data = TestDataDirectory()

    func fetchWellKnown(answering baseURL: String) async -> (SessionMachine.Event?, ScriptedHTTPTransport) {
        let transport = ScriptedHTTPTransport()
        transport.on("GET", "/.well-known/matrix/client") { _ in
            .json(200, #"{"m.homeserver": {"base_url": "\#(baseURL)"}}"#)
        }
        let interpreter = SessionInterpreter(
            transport: transport, wallClock: SystemWallClock(), storage: SessionSamples.storage(data),
            logger: Logger(category: "test", center: LogCenter(threshold: .error)))
        let event = await interpreter.perform(
            .fetchWellKnown(serverName: "example.org"),
            context: EffectContext(epoch: Epoch(1), clock: ManualClock()) { _ in })
        return (event, transport)
    }

    @Test("A .well-known read over https that names a plain-http base URL fails discovery naming the field")
    func downgradeRefused() async {
        let (event, transport) = await fetchWellKnown(answering: "http://matrix.example.org")
        #expect(transport.requests.map(\.url.absoluteString) == ["https://example.org/.well-known/matrix/client"])
        #expect(
            event
                == .wellKnownResponse(
                    .failure(
                        .discoveryFailed(
                            reason:
                                "m.homeserver.base_url uses plain http to a host that is not loopback (no downgrade from https)"
                        ))))
    }

    @Test("A .well-known naming an https base URL is followed")
    func httpsFollowed() async {
        let (event, _) = await fetchWellKnown(answering: "https://matrix.example.org")
        #expect(event == .wellKnownResponse(.success(HomeserverURL("https://matrix.example.org")!)))
    }
}
