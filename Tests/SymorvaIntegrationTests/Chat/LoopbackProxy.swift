import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A TCP relay on 127.0.0.1 in front of the real homeserver, which a test can close and open
/// again on the same port: "the server stopped" for the client, honestly — connections are
/// refused and open ones are cut — while Synapse itself keeps running. Not a mock: every byte
/// goes to and comes from Synapse.
final class LoopbackProxy: Sendable {
    /// The port clients connect to (stable across close/open).
    let port: UInt16
    private let targetPort: UInt16
    private let state = Mutex(State())

    private struct State {
        var listener: Int32 = -1
        var connections: Set<Int32> = []
    }

    /// Starts relaying to `127.0.0.1:targetPort` on a free port.
    init(targetPort: UInt16) throws {
        self.targetPort = targetPort
        let listener = try Self.listen(port: 0)
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.port = UInt16(bigEndian: address.sin_port)
        state.withLock { $0.listener = listener }
        acceptLoop(listener)
    }

    /// The base URL to give the client.
    var url: String { "http://127.0.0.1:\(port)" }

    /// Refuses new connections and cuts every open one.
    func close() {
        // Under the lock: a relay closes its sockets under the same lock, so no descriptor
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
        let listener = try Self.listen(port: port)
        state.withLock { $0.listener = listener }
        acceptLoop(listener)
    }

    private static func listen(port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw IntegrationFailure("socket failed") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
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

    private func acceptLoop(_ listener: Int32) {
        let targetPort = self.targetPort
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }  // closed
                guard let upstream = try? Self.connect(port: targetPort) else {
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
                let pair = RelayPair()
                relay(from: client, to: upstream, pair: pair)
                relay(from: upstream, to: client, pair: pair)
            }
        }
    }

    private static func connect(port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
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

    /// Copies bytes one way until either side closes, then closes both ways.
    private func relay(from source: Int32, to destination: Int32, pair: RelayPair) {
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { break }
                var sent = 0
                while sent < count {
                    let written = buffer.withUnsafeBytes {
                        send(destination, $0.baseAddress! + sent, count - sent, Int32(MSG_NOSIGNAL))
                    }
                    guard written > 0 else { break }
                    sent += written
                }
                if sent < count { break }
            }
            shutdown(source, Int32(SHUT_RDWR))
            shutdown(destination, Int32(SHUT_RDWR))
            // The second direction to finish closes both sockets, exactly once.
            guard pair.finished.add(1, ordering: .acquiringAndReleasing).newValue == 2 else { return }
            state.withLock {
                $0.connections.remove(source)
                $0.connections.remove(destination)
                Glibc.close(source)
                Glibc.close(destination)
            }
        }
    }
}

/// The two directions of one relayed connection.
private final class RelayPair: Sendable {
    let finished = Atomic<Int>(0)
}
