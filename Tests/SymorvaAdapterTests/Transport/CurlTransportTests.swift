import Foundation
import SymorvaHTTP
import SymorvaRuntime
import SymorvaTransport
import Testing

@Suite("CurlTransport against a local HTTP server")
struct CurlTransportTests {
    private static func echo(_ request: TestHTTPServer.Request) -> TestHTTPServer.Action {
        .respond(
            status: 200,
            headers: [("X-Method", request.method), ("X-Echo-Header", request.header("X-Test") ?? "")],
            body: request.body.isEmpty ? Array("hello".utf8) : request.body)
    }

    @Test("GET round trip returns status, headers and body")
    func getRoundTrip() async throws {
        let server = try TestHTTPServer(handler: Self.echo)
        let transport = CurlTransport()
        let response = try await transport.send(
            HTTPRequest(url: server.url("/_matrix/client/versions"), headers: ["X-Test": "abc"]))
        #expect(response.status == 200)
        #expect(response.body == Array("hello".utf8))
        #expect(response.headers["x-method"] == "GET")
        #expect(response.headers["X-ECHO-HEADER"] == "abc")
        #expect(server.requests.first?.path == "/_matrix/client/versions")
    }

    @Test("POST sends the body and the bearer token")
    func postRoundTrip() async throws {
        let server = try TestHTTPServer(handler: Self.echo)
        let transport = CurlTransport()
        let body = Array(#"{"msgtype":"m.text","body":"hi"}"#.utf8) + [UInt8](repeating: 0x20, count: 4000)
        let request = HTTPRequest.json(
            .post, url: server.url("/send"), body: body, bearerToken: Secret("syt_token_123"))
        let response = try await transport.send(request)
        #expect(response.status == 200)
        #expect(response.body == body)
        #expect(response.headers["X-Method"] == "POST")
        let received = try #require(server.requests.first)
        #expect(received.header("Authorization") == "Bearer syt_token_123")
        #expect(received.header("Content-Type") == "application/json")
        #expect(received.header("Expect") == nil)
    }

    @Test("PUT and DELETE use their methods")
    func otherMethods() async throws {
        let server = try TestHTTPServer(handler: Self.echo)
        let transport = CurlTransport()
        let put = try await transport.send(HTTPRequest(method: .put, url: server.url("/txn/1"), body: [1, 2, 3]))
        #expect(put.headers["X-Method"] == "PUT")
        #expect(put.body == [1, 2, 3])
        let delete = try await transport.send(HTTPRequest(method: .delete, url: server.url("/x")))
        #expect(delete.headers["X-Method"] == "DELETE")
    }

    @Test("An error status is a response, not a thrown error")
    func errorStatusIsResponse() async throws {
        let server = try TestHTTPServer { _ in
            .respond(
                status: 429, headers: [("Retry-After", "3")],
                body: Array(#"{"errcode":"M_LIMIT_EXCEEDED","error":"slow down"}"#.utf8))
        }
        let response = try await CurlTransport().send(HTTPRequest(url: server.url("/")))
        #expect(response.status == 429)
        #expect(response.headers["Retry-After"] == "3")
        #expect(response.body == Array(#"{"errcode":"M_LIMIT_EXCEEDED","error":"slow down"}"#.utf8))
    }

    @Test("Two sequential requests share one connection")
    func connectionReuse() async throws {
        let server = try TestHTTPServer(handler: Self.echo)
        let transport = CurlTransport()
        _ = try await transport.send(HTTPRequest(url: server.url("/one")))
        _ = try await transport.send(HTTPRequest(url: server.url("/two")))
        #expect(server.connectionsAccepted == 1)
        #expect(server.requests.map(\.connection) == [1, 1])
        let metrics = transport.metrics
        #expect(metrics.requestsStarted == 2)
        #expect(metrics.requestsCompleted == 2)
        #expect(metrics.connectionsOpened == 1)
        #expect(metrics.connectionsReused == 1)
    }

    @Test("Concurrent requests run together on the one loop thread")
    func concurrentRequests() async throws {
        let server = try TestHTTPServer { request in .delay(milliseconds: 300, then: Self.echo(request)) }
        let transport = CurlTransport(configuration: .init(maximumConnectionsPerHost: 16))
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<12 {
                group.addTask { try await transport.send(HTTPRequest(url: server.url("/\(index)"))).status }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: 12))
        // Serialised requests would have shared one connection; concurrent ones each needed their own.
        #expect(transport.metrics.connectionsOpened > 1)
    }

    @Test("A request slower than its timeout throws timedOut")
    func timeout() async throws {
        let server = try TestHTTPServer { request in .delay(milliseconds: 2000, then: Self.echo(request)) }
        let transport = CurlTransport()
        // The server would answer after 2 s; only the 300 ms timeout can make this throw.
        await #expect(throws: TransportError.timedOut) {
            try await transport.send(HTTPRequest(url: server.url("/slow"), timeout: .milliseconds(300)))
        }
    }

    @Test("Cancelling the task aborts the transfer and closes the connection")
    func cancellation() async throws {
        let server = try TestHTTPServer { _ in .hold }
        let transport = CurlTransport()
        let task = Task { () async throws(TransportError) -> HTTPResponse in
            try await transport.send(HTTPRequest(url: server.url("/hold")))
        }
        #expect(await eventually { server.requests.count == 1 })
        task.cancel()
        // The server holds the request forever: only cancellation can end it.
        let result = await task.result
        #expect(throws: TransportError.cancelled) { try result.get() }
        #expect(await eventually { server.heldConnectionsClosed == 1 })
    }

    @Test("A task cancelled before sending throws cancelled without a request")
    func cancelledBeforeStart() async throws {
        let server = try TestHTTPServer(handler: Self.echo)
        let transport = CurlTransport()
        let task = Task { () async throws(TransportError) -> HTTPResponse in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await transport.send(HTTPRequest(url: server.url("/")))
        }
        await #expect(throws: TransportError.cancelled) { try await task.value }
        #expect(server.requests.isEmpty)
    }

    @Test("A body over the limit throws tooLarge, with or without Content-Length")
    func tooLarge() async throws {
        let big = [UInt8](repeating: 0x61, count: 10_000)
        let server = try TestHTTPServer { request in
            request.path == "/length"
                ? .respond(status: 200, headers: [], body: big) : .respondUntilClose(status: 200, body: big)
        }
        let transport = CurlTransport(configuration: .init(maximumResponseBytes: 1024))
        await #expect(throws: TransportError.tooLarge(limit: 1024)) {
            try await transport.send(HTTPRequest(url: server.url("/length")))
        }
        await #expect(throws: TransportError.tooLarge(limit: 1024)) {
            try await transport.send(HTTPRequest(url: server.url("/stream")))
        }
        let fits = try await transport.send(HTTPRequest(url: server.url("/length"), maximumResponseBytes: 10_000))
        #expect(fits.body.count == 10_000)
    }

    @Test("A closed port throws connectFailed")
    func connectRefused() async throws {
        let port = try TestHTTPServer.closedPort()
        await #expect(throws: TransportError.connectFailed) {
            try await CurlTransport().send(HTTPRequest(url: URL(string: "http://127.0.0.1:\(port)/")!))
        }
    }

    @Test("Unsupported schemes and header injection are rejected before any I/O")
    func invalidRequests() async throws {
        let transport = CurlTransport()
        await #expect(throws: TransportError.invalidURL) {
            try await transport.send(HTTPRequest(url: URL(string: "ftp://127.0.0.1/file")!))
        }
        await #expect(throws: TransportError.invalidHeader) {
            try await transport.send(
                HTTPRequest(url: URL(string: "http://127.0.0.1/")!, headers: ["X-Evil": "a\r\nInjected: yes"]))
        }
        #expect(transport.metrics.requestsStarted == 0)
    }

    @Test("Tokens and bodies never reach the log or a request's description")
    func redaction() async throws {
        let sink = CapturingLogSink()
        let center = LogCenter(threshold: .trace, sinks: [sink])
        let server = try TestHTTPServer(handler: Self.echo)
        let transport = CurlTransport(logger: Logger(category: "transport", center: center))
        let request = HTTPRequest.json(
            .post, url: server.url("/send?access_token=CANARY_QUERY"), body: Array("CANARY_BODY".utf8),
            bearerToken: Secret("CANARY_TOKEN"))
        let response = try await transport.send(request)
        for text in [sink.text, request.description, response.description, "\(request)"] {
            #expect(!text.contains("CANARY"))
        }
        #expect(!sink.records.isEmpty)
    }
}
