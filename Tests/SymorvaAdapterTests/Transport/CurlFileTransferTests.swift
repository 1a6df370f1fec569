import Foundation
import SymorvaHTTP
import SymorvaRuntime
import SymorvaTransport
import Testing

@Suite("CurlTransport streams bodies from files and responses to files")
struct CurlFileTransferTests {
    private static func echo(_ request: TestHTTPServer.Request) -> TestHTTPServer.Action {
        .respond(status: 200, headers: [("X-Method", request.method)], body: request.body)
    }

    private static func temporaryPath(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appending(path: "symorva-file-\(UUID().uuidString)-\(name)").path
    }

    private static func file(bytes: [UInt8]) throws -> String {
        let path = temporaryPath("body")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    private static func pattern(_ count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
    }

    @Test("A file body is sent whole, with its length, and progress reaches its size")
    func fileBodyPost() async throws {
        let server = try TestHTTPServer(handler: Self.echo)
        let bytes = Self.pattern(3 << 20 + 17)
        let path = try Self.file(bytes: bytes)
        defer { unlink(path) }
        let progress = HTTPTransferProgress { _ in }
        var request = HTTPRequest(method: .post, url: server.url("/upload"), headers: ["Content-Type": "image/png"])
        request.bodyFile = HTTPBodyFile(path: path, length: Int64(bytes.count))
        request.progress = progress
        request.maximumResponseBytes = 8 << 20
        let response = try await CurlTransport().send(request)
        #expect(response.status == 200)
        #expect(response.headers["X-Method"] == "POST")
        #expect(response.body == bytes)
        let received = try #require(server.requests.first)
        #expect(received.header("Content-Length") == String(bytes.count))
        #expect(received.header("Content-Type") == "image/png")
        #expect(progress.latest?.sent == Int64(bytes.count))
    }

    @Test("A file body goes with the request's own method (PUT)")
    func fileBodyPut() async throws {
        let server = try TestHTTPServer(handler: Self.echo)
        let path = try Self.file(bytes: Array("reserved media".utf8))
        defer { unlink(path) }
        var request = HTTPRequest(method: .put, url: server.url("/upload/localhost/abc"))
        request.bodyFile = HTTPBodyFile(path: path, length: 14)
        let response = try await CurlTransport().send(request)
        #expect(response.headers["X-Method"] == "PUT")
        #expect(response.body == Array("reserved media".utf8))
    }

    @Test("A missing body file fails with fileAccess before any request")
    func missingBodyFile() async throws {
        let server = try TestHTTPServer(handler: Self.echo)
        var request = HTTPRequest(method: .post, url: server.url("/upload"))
        request.bodyFile = HTTPBodyFile(path: Self.temporaryPath("missing"), length: 10)
        await #expect(throws: TransportError.fileAccess) { try await CurlTransport().send(request) }
        #expect(server.requests.isEmpty)
    }

    @Test("A 2xx body goes to the response file; an error's body stays in memory")
    func responseFile() async throws {
        let bytes = Self.pattern(1 << 20)
        let server = try TestHTTPServer { request in
            request.path == "/media"
                ? .respond(status: 200, headers: [], body: bytes)
                : .respond(status: 404, headers: [], body: Array(#"{"errcode":"M_NOT_FOUND"}"#.utf8))
        }
        let transport = CurlTransport()
        let path = Self.temporaryPath("download")
        defer { unlink(path) }
        let progress = HTTPTransferProgress { _ in }
        var request = HTTPRequest(url: server.url("/media"), maximumResponseBytes: 2 << 20)
        request.responseFile = path
        request.progress = progress
        let response = try await transport.send(request)
        #expect(response.status == 200)
        #expect(response.body.isEmpty)
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) == bytes)
        #expect(progress.latest?.received == Int64(bytes.count))

        request.url = server.url("/gone")
        let missing = try await transport.send(request)
        #expect(missing.status == 404)
        #expect(missing.body == Array(#"{"errcode":"M_NOT_FOUND"}"#.utf8))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)).isEmpty)
    }

    @Test("A response file is bounded by the limit, and one that cannot be created fails with fileAccess")
    func responseFileLimits() async throws {
        let server = try TestHTTPServer { _ in .respondUntilClose(status: 200, body: Self.pattern(10_000)) }
        let transport = CurlTransport()
        let path = Self.temporaryPath("limited")
        defer { unlink(path) }
        var request = HTTPRequest(url: server.url("/media"), maximumResponseBytes: 1024)
        request.responseFile = path
        await #expect(throws: TransportError.tooLarge(limit: 1024)) { try await transport.send(request) }
        request.responseFile = Self.temporaryPath("no-such-folder") + "/file"
        await #expect(throws: TransportError.fileAccess) { try await transport.send(request) }
    }

    /// Adds `offset + position` to every byte, counting restarts and bytes seen.
    final class AddingTransform: HTTPBodyTransform {
        private struct Counts {
            var position = 0
            var restarts = 0
            var failAfter: Int?
        }
        private let counts: Lock<Counts>

        init(failAfter: Int? = nil) { counts = Lock(Counts(failAfter: failAfter)) }

        var restarts: Int { counts.withLock { $0.restarts } }
        var position: Int { counts.withLock { $0.position } }

        func restart() -> Bool {
            counts.withLock {
                $0.position = 0
                $0.restarts += 1
            }
            return true
        }

        func transform(_ bytes: UnsafeMutableRawBufferPointer) -> Bool {
            counts.withLock { counts in
                if let limit = counts.failAfter, counts.position + bytes.count > limit { return false }
                for index in bytes.indices {
                    bytes[index] &+= UInt8(truncatingIfNeeded: counts.position + index)
                }
                counts.position += bytes.count
                return true
            }
        }
    }

    @Test("A transformed file body is changed chunk by chunk as it is read, from its start, and sent whole")
    func transformedBody() async throws {
        let server = try TestHTTPServer(handler: Self.echo)
        let bytes = Self.pattern(3 << 20 + 17)
        let path = try Self.file(bytes: bytes)
        defer { unlink(path) }
        let transform = AddingTransform()
        var request = HTTPRequest(method: .post, url: server.url("/upload"))
        request.bodyFile = HTTPBodyFile(path: path, length: Int64(bytes.count), transform: transform)
        request.maximumResponseBytes = 8 << 20
        let response = try await CurlTransport().send(request)
        #expect(response.status == 200)
        let expected = bytes.enumerated().map { $0.element &+ UInt8(truncatingIfNeeded: $0.offset) }
        #expect(response.body == expected)
        #expect(transform.restarts == 1 && transform.position == bytes.count)
        // The file itself is untouched.
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) == bytes)
    }

    @Test("A transform that fails stops the upload with fileAccess")
    func failingTransform() async throws {
        let server = try TestHTTPServer(handler: Self.echo)
        let bytes = Self.pattern(1 << 20)
        let path = try Self.file(bytes: bytes)
        defer { unlink(path) }
        var request = HTTPRequest(method: .post, url: server.url("/upload"))
        request.bodyFile = HTTPBodyFile(
            path: path, length: Int64(bytes.count), transform: AddingTransform(failAfter: 300_000))
        await #expect(throws: TransportError.fileAccess) { try await CurlTransport().send(request) }
    }
}
