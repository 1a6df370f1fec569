import CCurl
import CCurlShim
import Foundation
import SymorvaHTTP
import SymorvaRuntime
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The SDK's HTTP transport: libcurl, with one multi handle on one dedicated thread.
///
/// - No thread blocks per request: every transfer is an easy handle attached to the shared
///   multi handle, which one thread drives with `curl_multi_poll`.
/// - Connections are reused across requests (and multiplexed over HTTP/2 when the server
///   offers it through ALPN).
/// - Cancelling the calling task really aborts the transfer: the easy handle leaves the multi
///   handle, its connection closes, and the call throws ``/SymorvaHTTP/TransportError/cancelled`` — once,
///   and never after a response has been delivered to the caller.
/// - TLS peer and host verification is always on. Only tests may add a CA file.
/// - The response body is limited in size while it is received.
///
/// Nothing it logs contains a URL, a header or a body.
public final class CurlTransport: HTTPFileTransport {
    /// Limits and defaults for every request of a transport.
    public struct Configuration: Sendable {
        /// The time allowed to establish a connection (TCP and TLS).
        public var connectTimeout: Duration
        /// The total time allowed for a request that sets no ``/SymorvaHTTP/HTTPRequest/timeout``.
        public var requestTimeout: Duration
        /// The largest response body accepted when a request sets no limit, in bytes.
        public var maximumResponseBytes: Int
        /// The most connections kept open to one host.
        public var maximumConnectionsPerHost: Int
        /// The `User-Agent` header.
        public var userAgent: String
        /// The proxy every request goes through (`http://proxy.example:3128`), or `nil` for
        /// direct connections. Proxy environment variables are never read: a proxy is the app's
        /// explicit choice.
        public var proxy: URL?

        /// Creates a configuration; the defaults suit Matrix client-server traffic.
        public init(
            connectTimeout: Duration = .seconds(10),
            requestTimeout: Duration = .seconds(60),
            maximumResponseBytes: Int = 64 << 20,
            maximumConnectionsPerHost: Int = 8,
            userAgent: String = "SymorvaKit",
            proxy: URL? = nil
        ) {
            self.connectTimeout = connectTimeout
            self.requestTimeout = requestTimeout
            self.maximumResponseBytes = maximumResponseBytes
            self.maximumConnectionsPerHost = maximumConnectionsPerHost
            self.userAgent = userAgent
            self.proxy = proxy
        }
    }

    /// Counters for tests and benchmarks.
    public struct Metrics: Sendable, Equatable, CustomStringConvertible {
        /// Transfers handed to libcurl.
        public var requestsStarted: Int
        /// Transfers libcurl finished, successfully or not (cancelled ones are not counted).
        public var requestsCompleted: Int
        /// New connections libcurl opened (`CURLINFO_NUM_CONNECTS` summed over transfers).
        public var connectionsOpened: Int
        /// Successful transfers that reused an open connection.
        public var connectionsReused: Int

        /// The counters on one line.
        public var description: String {
            "started=\(requestsStarted) completed=\(requestsCompleted) "
                + "opened=\(connectionsOpened) reused=\(connectionsReused)"
        }
    }

    /// The limits this transport applies.
    public let configuration: Configuration
    private let certificateAuthorityFile: String?
    private let loop: CurlMultiLoop
    private let logger: Logger

    /// Creates a transport and starts its thread.
    public convenience init(configuration: Configuration = Configuration(), logger: Logger? = nil) {
        self.init(configuration: configuration, testingCertificateAuthorityFile: nil, logger: logger)
    }

    /// Creates a transport that also trusts the CA certificates in `testingCertificateAuthorityFile`
    /// (PEM), for tests against a local TLS server. Verification stays on.
    public init(
        configuration: Configuration = Configuration(), testingCertificateAuthorityFile: String?,
        logger: Logger? = nil
    ) {
        self.configuration = configuration
        self.certificateAuthorityFile = testingCertificateAuthorityFile
        self.logger = logger ?? Logger(category: "transport")
        self.loop = CurlMultiLoop(
            maximumConnectionsPerHost: configuration.maximumConnectionsPerHost, logger: self.logger)
    }

    deinit { loop.shutdown() }

    /// The counters so far.
    public var metrics: Metrics {
        let counters = loop.counters
        return Metrics(
            requestsStarted: counters.started.load(ordering: .relaxed),
            requestsCompleted: counters.completed.load(ordering: .relaxed),
            connectionsOpened: counters.connectionsOpened.load(ordering: .relaxed),
            connectionsReused: counters.connectionsReused.load(ordering: .relaxed))
    }

    /// Sends `request`; see ``/SymorvaHTTP/HTTPTransport/send(_:)``.
    public func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        guard !Task.isCancelled else { throw .cancelled }
        let transfer = try CurlTransfer(
            request: request, configuration: configuration, certificateAuthorityFile: certificateAuthorityFile)
        logger.debug(
            "transfer starting method=\(request.method) bodyBytes=\(request.bodyFile?.length ?? Int64(request.body.count))"
        )
        let loop = self.loop
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                transfer.continuation = continuation
                loop.submit(transfer)
            }
        } onCancel: {
            loop.cancel(transfer)
        }
        return try result.get()
    }
}

/// Counters the multi loop keeps for ``CurlTransport/metrics``.
final class CurlCounters: Sendable {
    let started = Atomic<Int>(0)
    let completed = Atomic<Int>(0)
    let connectionsOpened = Atomic<Int>(0)
    let connectionsReused = Atomic<Int>(0)
}

/// One libcurl multi handle driven by one dedicated thread.
///
/// Callers never block: they queue commands (add a transfer, cancel a transfer, shut down)
/// under a mutex and wake the thread with `curl_multi_wakeup`. The thread waits in
/// `curl_multi_poll`, drives every transfer with `curl_multi_perform`, and resumes each caller
/// exactly once when its transfer completes or is cancelled. Because every easy handle runs
/// in the same multi handle, connections (and HTTP/2 streams) are reused across requests.
///
/// Safety of `@unchecked Sendable` (a C boundary object): the multi handle and `active` are
/// touched only by the loop thread, except `curl_multi_wakeup`, which libcurl documents as
/// callable from any thread. Commands cross threads only through `inbox`, a mutex.
final class CurlMultiLoop: @unchecked Sendable {
    private struct Inbox {
        var added: [CurlTransfer] = []
        var cancelled: [CurlTransfer] = []
        var shutdownRequested = false
    }

    let counters = CurlCounters()
    private let multi: UnsafeMutableRawPointer
    private let inbox = Lock(Inbox())
    private let logger: Logger
    /// Loop thread only.
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    init(maximumConnectionsPerHost: Int, logger: Logger) {
        CurlGlobal.ensureInitialized()
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        self.multi = multi
        self.logger = logger
        symorva_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        symorva_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maximumConnectionsPerHost)
        DedicatedThread.start { [self] in run() }
    }

    /// Queues `transfer` for the loop; its continuation must already be set.
    func submit(_ transfer: CurlTransfer) {
        inbox.withLock { $0.added.append(transfer) }
        curl_multi_wakeup(multi)
    }

    /// Aborts `transfer` if it is running, or makes it finish as cancelled when it arrives.
    func cancel(_ transfer: CurlTransfer) {
        transfer.cancelRequested.store(true, ordering: .sequentiallyConsistent)
        inbox.withLock { $0.cancelled.append(transfer) }
        curl_multi_wakeup(multi)
    }

    /// Stops the thread after cancelling what is left; the multi handle is cleaned up there.
    func shutdown() {
        inbox.withLock { $0.shutdownRequested = true }
        curl_multi_wakeup(multi)
    }

    // MARK: Loop thread

    private func run() {
        while true {
            let commands = inbox.withLock { inbox in
                defer { inbox = Inbox(shutdownRequested: inbox.shutdownRequested) }
                return inbox
            }
            for transfer in commands.added { attach(transfer) }
            for transfer in commands.cancelled { abort(transfer) }
            if commands.shutdownRequested { break }
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            collectCompletions()
            var ready: Int32 = 0
            curl_multi_poll(multi, nil, 0, 1000, &ready)
        }
        for transfer in Array(active.values) { abort(transfer) }
        curl_multi_cleanup(multi)
    }

    private func attach(_ transfer: CurlTransfer) {
        guard !transfer.cancelRequested.load(ordering: .sequentiallyConsistent) else {
            transfer.finish(.failure(.cancelled))
            return
        }
        let code = curl_multi_add_handle(multi, transfer.easy)
        guard code == CURLM_OK else {
            let message = curl_multi_strerror(code).map { String(cString: $0) } ?? "unknown"
            transfer.finish(.failure(.other(code: Int(code.rawValue), message: message)))
            return
        }
        active[transfer.easy] = transfer
        counters.started.add(1, ordering: .relaxed)
    }

    private func abort(_ transfer: CurlTransfer) {
        guard active.removeValue(forKey: transfer.easy) != nil else { return }
        // Removing an unfinished transfer closes its connection: the server sees it go away.
        curl_multi_remove_handle(multi, transfer.easy)
        logger.debug("transfer cancelled")
        transfer.finish(.failure(.cancelled))
    }

    private func collectCompletions() {
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result
            guard let transfer = active.removeValue(forKey: easy) else { continue }
            curl_multi_remove_handle(multi, easy)
            complete(transfer, code: code)
        }
    }

    private func complete(_ transfer: CurlTransfer, code: CURLcode) {
        counters.completed.add(1, ordering: .relaxed)
        let newConnections = transfer.newConnectionCount()
        if newConnections > 0 {
            counters.connectionsOpened.add(newConnections, ordering: .relaxed)
        } else if code == CURLE_OK {
            counters.connectionsReused.add(1, ordering: .relaxed)
        }
        if transfer.cancelRequested.load(ordering: .sequentiallyConsistent) {
            transfer.finish(.failure(.cancelled))
        } else if code == CURLE_OK {
            let response = transfer.response()
            logger.debug("transfer completed status=\(response.status) bytes=\(response.body.count)")
            transfer.finish(.success(response))
        } else {
            let error = transfer.failure(for: code)
            logger.debug("transfer failed error=\(error)")
            transfer.finish(.failure(error))
        }
    }
}

/// `curl_global_init`, once per process.
enum CurlGlobal {
    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    static func ensureInitialized() {
        precondition(initialized, "curl_global_init failed")
    }
}
