import SymorvaHTTP
import SymorvaMachines
import SymorvaTesting
import Testing

@testable import SymorvaMeetings

/// Janus's exchanges are classified like every other exchange of the SDK (issue 23). Before,
/// `JanusClient` had a table of its own: an empty answer was a reset connection, and a cancelled,
/// too large or otherwise failed exchange was "unreachable".
@Suite("Janus transport errors")
struct JanusTransportErrorTests {
    @Test(
        "A failed exchange with Janus is the SDK's one transport problem",
        arguments: [
            (TransportError.timedOut, TransportProblem.timeout), (.connectFailed, .unreachable),
            (.dnsFailure, .unreachable), (.tls, .unreachable), (.invalidURL, .unreachable),
            (.partialResponse, .responseDropped), (.connectionLost, .connectionReset),
            // The four that changed: classified as the services' exchanges are.
            (.emptyResponse, .responseDropped), (.tooLarge(limit: 1), .responseDropped),
            (.cancelled, .connectionReset), (.other(code: 56, message: "recv"), .connectionReset),
        ])
    func classified(error: TransportError, problem: TransportProblem) {
        #expect(JanusClient.error(transport: error) == .transport(problem))
    }

    @Test("An empty answer to a keepalive is a dropped response, as for the services")
    func emptyAnswer() async {
        let link = MediaServerLink(serverURL: "http://janus.test/janus", session: 11, handle: 12, participantID: 13)
        let transport = ScriptedHTTPTransport()
        transport.on("POST", "/janus/11") { _ in .failure(.emptyResponse) }
        let client = JanusClient(transport: transport)
        await #expect(throws: MediaSessionError.transport(.responseDropped)) {
            try await client.keepalive(link)
        }
    }
}
