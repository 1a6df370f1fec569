import Foundation
import SymorvaHTTP
import SymorvaServices
import SymorvaTesting
import Testing

/// A request body given as a value goes through the SDK's one JSON coder (`WireJSON`).
@Suite("Services client: JSON bodies")
struct ServicesJSONBodyTests {
    struct Body: Encodable, Sendable {
        var roomID: String
        var broadcast: Bool
        var url: String
        enum CodingKeys: String, CodingKey {
            case roomID = "room_id"
            case broadcast, url
        }
    }

    static func client(_ transport: ScriptedHTTPTransport) -> CommunityServicesClient {
        CommunityServicesClient(
            baseURL: URL(string: "http://services.test")!, transport: transport, tokenSource: FixedOpenIDSource())
    }

    @Test("A value is sent as JSON with sorted keys and unescaped slashes, marked application/json")
    func encodedBody() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on("POST", "/_symorva/v1/meetings/join") { _ in .json(200, "{}") }
        _ = try await Self.client(transport).send(
            .post, "/_symorva/v1/meetings/join", body: Body(roomID: "!r:localhost", broadcast: true, url: "https://a/b")
        )
        let sent = try #require(transport.requests("POST", "/_symorva/v1/meetings/join").first)
        #expect(
            String(decoding: sent.body, as: UTF8.self)
                == #"{"broadcast":true,"room_id":"!r:localhost","url":"https://a/b"}"#)
        #expect(sent.headers["Content-Type"] == "application/json")
    }

    @Test("A value that cannot be JSON is refused before anything is sent")
    func unencodable() async {
        struct Ratio: Encodable, Sendable { var value = Double.infinity }
        let transport = ScriptedHTTPTransport.communityServices()
        await #expect(throws: ServicesError.malformedResponse(status: 0)) {
            try await Self.client(transport).send(.post, "/_symorva/v1/anything", body: Ratio())
        }
        #expect(transport.requests("POST", "/_symorva/v1/anything").isEmpty)
    }
}
