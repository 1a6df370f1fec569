import Foundation
import SymorvaHTTP
import SymorvaRuntime
import SymorvaTransport
import Testing

/// libcurl resends a request whose reused keep-alive connection closes before any answer byte.
/// A request marked `deliversAtMostOnce` must reach the server once, and fail instead.
@Suite("CurlTransport: requests delivered at most once")
struct AtMostOnceTests {
    /// A server that answers GETs, drops the first POST without an answer and answers later POSTs.
    private static func server() throws -> TestHTTPServer {
        let posts = Lock(0)
        return try TestHTTPServer { request in
            guard request.method == "POST" else { return .respond(status: 200, headers: [], body: Array("ok".utf8)) }
            let number = posts.withLock { count -> Int in
                count += 1
                return count
            }
            return number == 1 ? .closeWithoutAnswer : .respond(status: 200, headers: [], body: Array("done".utf8))
        }
    }

    private static func confirm(_ server: TestHTTPServer, atMostOnce: Bool) -> HTTPRequest {
        var request = HTTPRequest.json(.post, url: server.url("/confirm"), body: Array("{}".utf8))
        request.deliversAtMostOnce = atMostOnce
        return request
    }

    @Test("A plain POST on a reused connection that dies is resent by libcurl (why the flag exists)")
    func plainPostIsResent() async throws {
        let server = try Self.server()
        let transport = CurlTransport()
        _ = try await transport.send(HTTPRequest(url: server.url("/warm")))
        let response = try await transport.send(Self.confirm(server, atMostOnce: false))
        #expect(response.body == Array("done".utf8))
        #expect(server.requests.filter { $0.method == "POST" }.count == 2)
    }

    @Test("A request delivered at most once fails instead of being resent")
    func atMostOnceIsNotResent() async throws {
        let server = try Self.server()
        let transport = CurlTransport()
        _ = try await transport.send(HTTPRequest(url: server.url("/warm")))
        await #expect(throws: TransportError.self) {
            _ = try await transport.send(Self.confirm(server, atMostOnce: true))
        }
        #expect(server.requests.filter { $0.method == "POST" }.count == 1)
    }
}
