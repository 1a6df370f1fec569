import Foundation
import SymorvaRuntime
import SymorvaTesting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A tiny HTTP/1.1 server on 127.0.0.1 for transport tests: one thread per connection,
/// keep-alive, `Content-Length` request bodies, and scripted behaviour per request.
///
/// It records what the transport did on the wire — connections accepted, requests, and
/// whether a held connection was closed by the client — so tests can assert on it.
final class TestHTTPServer: Sendable {
    /// What the server does with one request.
    enum Action: Sendable {
        /// Sends a response with `Content-Length`.
        case respond(status: Int, headers: [(String, String)], body: [UInt8])
        /// Sends a response without a length and closes the connection to end the body.
        case respondUntilClose(status: Int, body: [UInt8])
        /// Waits, then acts.
        indirect case delay(milliseconds: Int, then: Action)
        /// Never answers; records when the client closes the connection.
        case hold
        /// Closes the connection at once, without a byte of answer (a server that committed
        /// and then died, or a keep-alive connection that timed out under the request).
        case closeWithoutAnswer
    }

    /// One request as the server read it.
    struct Request: Sendable {
        var method: String
        var path: String
        var headers: [(String, String)]
        var body: [UInt8]
        var connection: Int

        func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }
    }

    private struct State {
        var connectionsAccepted = 0
        var heldConnectionsClosed = 0
        var requests: [Request] = []
    }

    let port: Int
    private let listener: Int32
    private let state = Lock(State())
    private let handler: @Sendable (Request) -> Action

    init(handler: @escaping @Sendable (Request) -> Action) throws {
        let (socket, port) = try Self.listen()
        self.listener = socket
        self.port = port
        self.handler = handler
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    var connectionsAccepted: Int { state.withLock { $0.connectionsAccepted } }
    var heldConnectionsClosed: Int { state.withLock { $0.heldConnectionsClosed } }
    var requests: [Request] { state.withLock { $0.requests } }

    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    /// A port on 127.0.0.1 with nothing listening on it.
    static func closedPort() throws -> Int {
        let (socket, port) = try listen()
        close(socket)
        return port
    }

    // MARK: Sockets

    private static func listen() throws -> (Int32, Int) {
        #if canImport(Glibc)
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, Glibc.listen(fd, 64) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let number = state.withLock { state in
                state.connectionsAccepted += 1
                return state.connectionsAccepted
            }
            Thread.detachNewThread { [self] in serve(client, connection: number) }
        }
    }

    private func serve(_ fd: Int32, connection: Int) {
        defer { close(fd) }
        var buffer: [UInt8] = []
        while let request = readRequest(fd, buffer: &buffer, connection: connection) {
            state.withLock { $0.requests.append(request) }
            guard perform(handler(request), on: fd) else { return }
        }
    }

    /// Returns whether the connection stays open for another request.
    private func perform(_ action: Action, on fd: Int32) -> Bool {
        switch action {
        case .respond(let status, let headers, let body):
            var head = "HTTP/1.1 \(status) Status\r\nContent-Length: \(body.count)\r\n"
            for (name, value) in headers { head += "\(name): \(value)\r\n" }
            return send(fd, Array((head + "\r\n").utf8) + body)
        case .respondUntilClose(let status, let body):
            _ = send(fd, Array("HTTP/1.1 \(status) Status\r\nConnection: close\r\n\r\n".utf8) + body)
            return false
        case .delay(let milliseconds, let then):
            usleep(UInt32(milliseconds * 1000))
            return perform(then, on: fd)
        case .closeWithoutAnswer:
            return false
        case .hold:
            var byte: UInt8 = 0
            while recv(fd, &byte, 1, 0) > 0 {}
            state.withLock { $0.heldConnectionsClosed += 1 }
            return false
        }
    }

    private func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }

    private func readRequest(_ fd: Int32, buffer: inout [UInt8], connection: Int) -> Request? {
        let separator: [UInt8] = [13, 10, 13, 10]
        var headEnd: Int?
        while true {
            if let end = Self.find(separator, in: buffer) {
                headEnd = end
                break
            }
            guard receive(fd, into: &buffer) else { return nil }
        }
        guard let headEnd else { return nil }
        let head = String(decoding: buffer[..<headEnd], as: UTF8.self).components(separatedBy: "\r\n")
        let requestLine = head[0].split(separator: " ")
        guard requestLine.count >= 2 else { return nil }
        let headers: [(String, String)] = head.dropFirst().compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let length = headers.first { $0.0.lowercased() == "content-length" }.flatMap { Int($0.1) } ?? 0
        buffer.removeFirst(headEnd + 4)
        while buffer.count < length {
            guard receive(fd, into: &buffer) else { return nil }
        }
        let body = Array(buffer.prefix(length))
        buffer.removeFirst(length)
        return Request(
            method: String(requestLine[0]), path: String(requestLine[1]), headers: headers, body: body,
            connection: connection)
    }

    private func receive(_ fd: Int32, into buffer: inout [UInt8]) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16_384)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return false }
        buffer.append(contentsOf: chunk[..<count])
        return true
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for index in 0...(haystack.count - needle.count)
        where haystack[index..<index + needle.count].elementsEqual(needle) {
            return index
        }
        return nil
    }
}

/// Polls `condition` every 10 ms until it holds or `timeout` passes; returns whether it held. The
/// timeout only guards against a hang: a loaded machine running the whole suite can be slow.
func eventually(timeout: Duration = TestWaiting.defaultTimeout, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}
