import SymorvaRuntime

/// The SDK's HTTP transport: libcurl, with one multi handle on one dedicated thread.
///
/// - No thread blocks per request: every transfer is an easy handle attached to the shared
///   multi handle, which one thread drives with `curl_multi_poll`.
/// - Connections are reused across requests (and multiplexed over HTTP/2 when the server
///   offers it through ALPN).
/// - Cancelling the calling task really aborts the transfer: the easy handle leaves the multi
///   handle, its connection closes, and the call throws ``TransportError/cancelled`` — once,
///   and never after a response has been delivered to the caller.
/// - TLS peer and host verification is always on. Only tests may add a CA file.
/// - The response body is limited in size while it is received.
///
/// Nothing it logs contains a URL, a header or a body.
public final class CurlTransport: HTTPTransport {
    /// Limits and defaults for every request of a transport.
    public struct Configuration: Sendable {
        /// The time allowed to establish a connection (TCP and TLS).
        public var connectTimeout: Duration
        /// The total time allowed for a request that sets no ``HTTPRequest/timeout``.
        public var requestTimeout: Duration
        /// The largest response body accepted when a request sets no limit, in bytes.
        public var maximumResponseBytes: Int
        /// The most connections kept open to one host.
        public var maximumConnectionsPerHost: Int
        /// The `User-Agent` header.
        public var userAgent: String

        /// Creates a configuration; the defaults suit Matrix client-server traffic.
        public init(
            connectTimeout: Duration = .seconds(10),
            requestTimeout: Duration = .seconds(60),
            maximumResponseBytes: Int = 64 << 20,
            maximumConnectionsPerHost: Int = 8,
            userAgent: String = "SymorvaKit"
        ) {
            self.connectTimeout = connectTimeout
            self.requestTimeout = requestTimeout
            self.maximumResponseBytes = maximumResponseBytes
            self.maximumConnectionsPerHost = maximumConnectionsPerHost
            self.userAgent = userAgent
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

    /// Sends `request`; see ``HTTPTransport/send(_:)``.
    public func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        guard !Task.isCancelled else { throw .cancelled }
        let transfer = try CurlTransfer(
            request: request, configuration: configuration, certificateAuthorityFile: certificateAuthorityFile)
        logger.debug("transfer starting method=\(request.method) bodyBytes=\(request.body.count)")
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
