import Foundation
import SymorvaHTTP
import SymorvaRuntime
import SymorvaTesting
import Testing

@Suite("Test support: scripted HTTP transport")
struct ScriptedHTTPTransportTests {
    static func request(_ method: HTTPMethod, _ path: String, token: String? = nil) -> HTTPRequest {
        HTTPRequest(
            method: method, url: URL(string: "https://example.org\(path)")!, bearerToken: token.map { Secret($0) })
    }

    static func body(_ response: HTTPResponse) -> String { String(decoding: response.body, as: UTF8.self) }

    @Test("An exact route wins over a prefix, and the longest matching prefix over a shorter one")
    func routing() async throws {
        let transport = ScriptedHTTPTransport()
        transport.on("PUT", pathPrefix: "/rooms/") { _ in .json(200, "short") }
        transport.on("PUT", pathPrefix: "/rooms/!a:example.org/send/") { _ in .json(200, "long") }
        transport.on("PUT", "/rooms/!a:example.org/send/exact") { _ in .json(200, "exact") }
        let send = { (method: HTTPMethod, path: String) in try await transport.send(Self.request(method, path)) }
        #expect(Self.body(try await send(.put, "/rooms/!a:example.org/send/exact")) == "exact")
        #expect(Self.body(try await send(.put, "/rooms/!a:example.org/send/m.reaction/t1")) == "long")
        #expect(Self.body(try await send(.put, "/rooms/!a:example.org/redact/$e/t2")) == "short")
        #expect(try await send(.get, "/rooms/!a:example.org/send/m.reaction/t1").status == 404)
        #expect(try await send(.put, "/room").status == 404)
        #expect(transport.requests.count == 5)
        #expect(transport.count("PUT", "/rooms/!a:example.org/send/m.reaction/t1") == 1)
    }

    @Test("A held answer keeps the request on the wire until the gate opens")
    func held() async throws {
        let transport = ScriptedHTTPTransport()
        let gate = TestGate()
        transport.on("GET", "/slow", ScriptedHTTPTransport.held(by: gate) { _ in .json(200, "late") })
        transport.on("GET", "/fast") { _ in .json(200, "fast") }
        let slow = Task { try await transport.send(Self.request(.get, "/slow")) }
        try await gate.waitForWaiters(count: 1)
        #expect(Self.body(try await transport.send(Self.request(.get, "/fast"))) == "fast")
        #expect(transport.requests.map(\.url.path) == ["/slow", "/fast"])
        slow.cancel()  // a held request ignores cancellation, like I/O that cannot be interrupted
        gate.open()
        #expect(Self.body(try await slow.value) == "late")
    }

    @Test("An unreachable transport fails every request with its error and still records it")
    func unreachable() async {
        let refusing = ScriptedHTTPTransport.unreachable()
        await #expect(throws: TransportError.connectFailed) { try await refusing.send(Self.request(.get, "/a")) }
        let timingOut = ScriptedHTTPTransport.unreachable(.timedOut)
        await #expect(throws: TransportError.timedOut) { try await timingOut.send(Self.request(.post, "/b")) }
        #expect(refusing.requests.map(\.url.path) == ["/a"])
    }

    @Test("requests(_:_:) lists the recorded requests to one route, in order")
    func requestsOfOneRoute() async throws {
        let transport = ScriptedHTTPTransport()
        for (method, path, token) in [
            (HTTPMethod.get, "/whoami", "t1"), (.post, "/refresh", "r"), (.get, "/whoami", "t2"),
            (.post, "/whoami", "x"),
        ] {
            _ = try await transport.send(Self.request(method, path, token: token))
        }
        #expect(transport.requests("GET", "/whoami").map { $0.bearerToken?.exposedValue } == ["t1", "t2"])
        #expect(transport.requests("POST", "/refresh").count == 1)
    }
}
