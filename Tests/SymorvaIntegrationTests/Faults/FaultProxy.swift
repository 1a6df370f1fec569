import Foundation
import SymorvaRuntime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An HTTP/1.1 relay on 127.0.0.1 in front of a real server (Synapse or the reference
/// services) that injects faults into chosen exchanges, per test. Not a mock: every request
/// that is not answered by an injected fault goes to the real server, and every answer the
/// client sees comes from it (possibly cut, delayed or withheld).
///
/// A test arms a ``Rule`` (a method, a path fragment, a ``Fault``, how many times); the next
/// matching exchanges get the fault, everything else is relayed untouched. The proxy also
/// counts, per rule, the matching requests it forwarded to the server: "the server saw it".
///
/// ``close()`` and ``open()`` take the whole server away and bring it back on the same port
/// (connections refused, open ones cut), while the server itself keeps running.
final class FaultProxy: Sendable {
    /// What happens to a matching exchange.
    enum Fault: Sendable, Equatable, CustomStringConvertible {
        /// The request reaches the server and is handled; its answer is dropped and the client's
        /// connection closed without a byte of it.
        case dropResponse
        /// The server's answer is relayed up to half of its body, then the connection is reset.
        case resetMidBody
        /// The answer's head (with its full `Content-Length`) and half of its body are relayed,
        /// then the connection is closed cleanly: a truncated body.
        case truncateBody
        /// The answer is held for the duration before it is relayed.
        case delay(Duration)
        /// The proxy answers with this status itself; the request never reaches the server.
        case status(Int)

        var description: String {
            switch self {
            case .dropResponse: "drop response"
            case .resetMidBody: "reset mid-body"
            case .truncateBody: "truncate body"
            case .delay(let duration): "delay \(duration)"
            case .status(let status): "status \(status)"
            }
        }
    }

    /// Which exchanges get a fault.
    struct Rule: Sendable, Hashable {
        /// The request method, or `nil` for any.
        var method: String?
        /// A fragment of the request target (path and query) that must occur in it.
        var path: String

        func matches(method: String, target: String) -> Bool {
            (self.method == nil || self.method == method) && target.contains(path)
        }
    }

    /// The port clients connect to (stable across ``close()`` and ``open()``).
    let port: UInt16
    private let targetPort: UInt16
    private let state = Lock(State())

    private struct Armed {
        var rule: Rule
        var fault: Fault
        /// How many more matching exchanges get the fault (`nil`: all of them).
        var remaining: Int?
    }

    private struct State {
        var listener: Int32 = -1
        var connections: Set<Int32> = []
        var armed: [Armed] = []
        /// Matching requests forwarded to the server, per rule (faults or not).
        var forwarded: [Rule: Int] = [:]
        /// Exchanges that got a fault, per rule.
        var injected: [Rule: Int] = [:]
    }

    /// Starts relaying to `127.0.0.1:targetPort` on a free port.
    init(targetPort: UInt16) throws {
        self.targetPort = targetPort
        let listener = try Socket.listen(port: 0)
        self.port = try Socket.localPort(of: listener)
        state.withLock { $0.listener = listener }
        acceptLoop(listener)
    }

    /// Relays to the port of `url` (a loopback server's base URL).
    convenience init(inFrontOf server: URL) throws {
        guard let port = server.port else { throw IntegrationFailure("\(server) names no port") }
        try self.init(targetPort: UInt16(port))
    }

    /// The base URL to give the client.
    var url: String { "http://127.0.0.1:\(port)" }

    // MARK: Faults

    /// Gives the next `times` exchanges that match `rule` (all of them when `nil`) the fault.
    /// The rule also starts counting forwarded requests (``forwardedCount(_:)``).
    @discardableResult
    func inject(_ fault: Fault, method: String? = nil, path: String, times: Int? = 1) -> Rule {
        let rule = Rule(method: method, path: path)
        state.withLock { state in
            state.armed.append(Armed(rule: rule, fault: fault, remaining: times))
            state.forwarded[rule, default: 0] += 0
        }
        return rule
    }

    /// Counts the requests matching `rule` that reach the server, without any fault.
    @discardableResult
    func count(method: String? = nil, path: String) -> Rule {
        let rule = Rule(method: method, path: path)
        state.withLock { $0.forwarded[rule, default: 0] += 0 }
        return rule
    }

    /// The matching requests forwarded to the server so far: the ones the server handled.
    func forwardedCount(_ rule: Rule) -> Int { state.withLock { $0.forwarded[rule] ?? 0 } }

    /// The exchanges that got `rule`'s fault so far.
    func injectedCount(_ rule: Rule) -> Int { state.withLock { $0.injected[rule] ?? 0 } }

    /// Removes every armed fault.
    func clearFaults() { state.withLock { $0.armed.removeAll() } }

    /// The fault for an exchange, consuming one of its remaining uses; counts the request
    /// for every counting rule it matches when it will be forwarded.
    private func fault(method: String, target: String) -> Fault? {
        state.withLock { state in
            var chosen: Fault?
            if let index = state.armed.firstIndex(where: { $0.rule.matches(method: method, target: target) }) {
                let armed = state.armed[index]
                chosen = armed.fault
                state.injected[armed.rule, default: 0] += 1
                if let remaining = armed.remaining {
                    if remaining <= 1 {
                        state.armed.remove(at: index)
                    } else {
                        state.armed[index].remaining = remaining - 1
                    }
                }
            }
            if chosen.map({ if case .status = $0 { false } else { true } }) ?? true {
                for rule in state.forwarded.keys where rule.matches(method: method, target: target) {
                    state.forwarded[rule, default: 0] += 1
                }
            }
            return chosen
        }
    }

    // MARK: Outages

    /// Refuses new connections and cuts every open one.
    func close() {
        // Under the lock: a connection closes its sockets under the same lock, so no descriptor
        // shut down here can have been closed and reused meanwhile.
        state.withLock { state in
            if state.listener >= 0 {
                shutdown(state.listener, Int32(SHUT_RDWR))
                Glibc.close(state.listener)
                state.listener = -1
            }
            for fd in state.connections { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// Accepts connections again, on the same port.
    func open() throws {
        let listener = try Socket.listen(port: port)
        state.withLock { $0.listener = listener }
        acceptLoop(listener)
    }

    // MARK: Relaying

    private func acceptLoop(_ listener: Int32) {
        let targetPort = self.targetPort
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }  // closed
                guard let upstream = try? Socket.connect(port: targetPort) else {
                    Glibc.close(client)
                    continue
                }
                let accepted = state.withLock { state -> Bool in
                    guard state.listener == listener else { return false }
                    state.connections.formUnion([client, upstream])
                    return true
                }
                guard accepted else {
                    Glibc.close(client)
                    Glibc.close(upstream)
                    return
                }
                Thread.detachNewThread { [self] in
                    serve(client: client, upstream: upstream)
                    state.withLock {
                        $0.connections.remove(client)
                        $0.connections.remove(upstream)
                        Glibc.close(client)
                        Glibc.close(upstream)
                    }
                }
            }
        }
    }

    /// Relays one keep-alive connection, exchange by exchange (clients do not pipeline).
    private func serve(client: Int32, upstream: Int32) {
        var fromClient = Socket.Reader(fd: client)
        var fromServer = Socket.Reader(fd: upstream)
        while let request = try? HTTPMessage.read(from: &fromClient, isRequest: true) {
            let fault = fault(method: request.method, target: request.target)
            if case .status(let status) = fault {
                let body = Array(#"{"errcode":"M_UNKNOWN","error":"injected by the fault proxy"}"#.utf8)
                let head =
                    "HTTP/1.1 \(status) Injected\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n"
                guard Socket.write(client, Array(head.utf8) + body) else { return }
                continue
            }
            guard Socket.write(upstream, request.bytes),
                let response = try? HTTPMessage.read(
                    from: &fromServer, isRequest: false, hasNoBody: request.method == "HEAD")
            else { return }
            switch fault {
            case nil, .status:
                guard Socket.write(client, response.bytes) else { return }
            case .delay(let duration):
                Thread.sleep(
                    forTimeInterval: Double(duration.components.seconds) + Double(duration.components.attoseconds)
                        / 1e18)
                guard Socket.write(client, response.bytes) else { return }
            case .dropResponse:
                return
            case .resetMidBody:
                _ = Socket.write(client, Array(response.bytes[..<(response.headLength + response.bodyLength / 2)]))
                Socket.reset(client)
                return
            case .truncateBody:
                _ = Socket.write(client, Array(response.bytes[..<(response.headLength + response.bodyLength / 2)]))
                return
            }
            if response.closesConnection { return }
        }
    }
}

/// One HTTP/1.1 message as read off a socket: its bytes exactly as received, and what the
/// relay needs of its head.
private struct HTTPMessage {
    var bytes: [UInt8]
    var headLength: Int
    var method = ""
    var target = ""
    var closesConnection = false

    var bodyLength: Int { bytes.count - headLength }

    struct Malformed: Error {}

    /// Reads a whole message: the head, then the body by `Content-Length`, chunked transfer
    /// coding, or (responses only) up to the end of the connection.
    static func read(from reader: inout Socket.Reader, isRequest: Bool, hasNoBody: Bool = false) throws -> HTTPMessage {
        let headEnd = try reader.readThrough(Array("\r\n\r\n".utf8))
        var message = HTTPMessage(bytes: Array(reader.take(headEnd)), headLength: headEnd)
        let lines = String(decoding: message.bytes, as: UTF8.self).split(separator: "\r\n")
        guard let start = lines.first?.split(separator: " "), start.count >= 2 else { throw Malformed() }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        message.closesConnection = headers["connection"]?.lowercased() == "close"
        var status = 0
        if isRequest {
            message.method = String(start[0])
            message.target = String(start[1])
        } else {
            status = Int(start[1]) ?? 0
        }
        if hasNoBody || status / 100 == 1 || status == 204 || status == 304 { return message }
        if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            while true {
                let lineEnd = try reader.readThrough(Array("\r\n".utf8))
                let sizeLine = reader.take(lineEnd)
                message.bytes += sizeLine
                let hex = String(decoding: sizeLine.dropLast(2), as: UTF8.self).split(separator: ";").first ?? ""
                guard let size = Int(hex.trimmingCharacters(in: .whitespaces), radix: 16) else { throw Malformed() }
                if size == 0 {
                    let trailerEnd = try reader.readThrough(Array("\r\n".utf8))
                    message.bytes += reader.take(trailerEnd)
                    return message
                }
                try reader.fill(size + 2)
                message.bytes += reader.take(size + 2)
            }
        }
        if let length = headers["content-length"].flatMap({ Int($0) }) {
            try reader.fill(length)
            message.bytes += reader.take(length)
        } else if !isRequest {
            message.bytes += try reader.readToEnd()
            message.closesConnection = true
        }
        return message
    }
}

/// Blocking loopback sockets.
private enum Socket {
    struct Closed: Error {}

    /// Buffered reads from one socket.
    struct Reader {
        let fd: Int32
        var buffer: [UInt8] = []

        /// Reads until `terminator` is buffered; returns the length up to and including it.
        mutating func readThrough(_ terminator: [UInt8]) throws -> Int {
            var searched = 0
            while true {
                if buffer.count >= terminator.count {
                    for index in max(0, searched - terminator.count + 1)...(buffer.count - terminator.count)
                    where buffer[index..<(index + terminator.count)].elementsEqual(terminator) {
                        return index + terminator.count
                    }
                    searched = buffer.count
                }
                try receive()
            }
        }

        /// Reads until at least `count` bytes are buffered.
        mutating func fill(_ count: Int) throws {
            while buffer.count < count { try receive() }
        }

        /// Everything until the peer closes.
        mutating func readToEnd() throws -> [UInt8] {
            while (try? receive()) != nil {}
            defer { buffer.removeAll() }
            return buffer
        }

        /// Removes and returns the first `count` buffered bytes.
        mutating func take(_ count: Int) -> ArraySlice<UInt8> {
            let taken = buffer[..<count]
            buffer.removeFirst(count)
            return taken
        }

        private mutating func receive() throws {
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { throw Closed() }
            buffer += chunk[..<count]
        }
    }

    static func listen(port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw IntegrationFailure("socket failed") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = loopback(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, Glibc.listen(fd, 64) == 0 else {
            Glibc.close(fd)
            throw IntegrationFailure("bind/listen on port \(port) failed: errno \(errno)")
        }
        return fd
    }

    static func localPort(of fd: Int32) throws -> UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard result == 0 else { throw IntegrationFailure("getsockname failed: errno \(errno)") }
        return UInt16(bigEndian: address.sin_port)
    }

    static func connect(port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            throw IntegrationFailure("upstream connect failed")
        }
        return fd
    }

    /// Writes all of `bytes`; `false` when the peer is gone.
    static func write(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let written = bytes.withUnsafeBytes {
                send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            }
            guard written > 0 else { return false }
            sent += written
        }
        return true
    }

    /// Makes the next close send a TCP reset instead of a clean end.
    static func reset(_ fd: Int32) {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}
