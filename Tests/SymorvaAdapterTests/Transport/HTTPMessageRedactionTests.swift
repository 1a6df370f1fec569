import Foundation
import SymorvaHTTP
import SymorvaRuntime
import Testing

@Suite("HTTP messages never show what they carry")
struct HTTPMessageRedactionTests {
    static let password = "canary-password-5b1e"
    static let token = "canary-token-91ac"

    /// Everything Swift can print about `value`: description, debug description, dump.
    static func everyRendering(of value: some Any) -> String {
        var dumped = ""
        dump(value, to: &dumped)
        return [String(describing: value), String(reflecting: value), dumped].joined(separator: "\n")
    }

    @Test("A request's body, query and token stay out of dump and reflection")
    func request() {
        let request = HTTPRequest.json(
            .post, url: URL(string: "https://matrix.example.org/_matrix/client/v3/login?access_token=\(Self.token)")!,
            body: Array(#"{"type":"m.login.password","password":"\#(Self.password)"}"#.utf8),
            bearerToken: Secret(Self.token))
        let text = Self.everyRendering(of: request)
        #expect(!text.contains(Self.password))
        #expect(!text.contains(Self.token))
        #expect(text.contains("matrix.example.org/_matrix/client/v3/login"))
        #expect(text.contains("Content-Type"))
    }

    @Test("A response's body and header values stay out of dump and reflection")
    func response() {
        let response = HTTPResponse(
            status: 200, headers: ["Set-Cookie": "session=\(Self.token)"],
            body: Array(#"{"access_token":"\#(Self.token)"}"#.utf8))
        let text = Self.everyRendering(of: response)
        #expect(!text.contains(Self.token))
        #expect(text.contains("200"))
        #expect(text.contains("Set-Cookie"))
    }
}
