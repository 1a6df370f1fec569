import SymorvaRuntime

/// Why an HTTP exchange produced no response.
///
/// A response with an error status (4xx, 5xx) is not a `TransportError`: it is an
/// ``HTTPResponse`` whose body ``MatrixError/decode(from:)`` can read. This enum is only for
/// exchanges that never completed. Every case is safe to log: none carries a URL, a header or a
/// body.
public enum TransportError: Error, Sendable, Hashable {
    /// The host name could not be resolved.
    case dnsFailure
    /// The server refused or did not accept the TCP connection (closed port, unreachable host).
    case connectFailed
    /// The TLS handshake failed or the server's certificate did not verify.
    case tls
    /// The connect timeout or the total timeout of the request elapsed.
    case timedOut
    /// The caller's task was cancelled; the transfer was aborted and no response is delivered.
    case cancelled
    /// The response body grew beyond the limit (in bytes) and the transfer was aborted.
    case tooLarge(limit: Int)
    /// The URL is not an absolute `http` or `https` URL that libcurl accepts.
    case invalidURL
    /// A header name or value contains a line break or other byte that cannot go on the wire.
    case invalidHeader
    /// Any other libcurl failure: its `CURLcode` and libcurl's fixed text for that code.
    case other(code: Int, message: String)
}

extension TransportError: CustomStringConvertible, LogSafe {
    /// The case name and, for ``other(code:message:)``, libcurl's code and fixed text.
    public var description: String {
        switch self {
        case .dnsFailure: "dnsFailure"
        case .connectFailed: "connectFailed"
        case .tls: "tls"
        case .timedOut: "timedOut"
        case .cancelled: "cancelled"
        case .tooLarge(let limit): "tooLarge(limit: \(limit))"
        case .invalidURL: "invalidURL"
        case .invalidHeader: "invalidHeader"
        case .other(let code, let message): "other(code: \(code), message: \(message))"
        }
    }

    /// Same as ``description``: no case carries user or server data.
    public var logDescription: String { description }

    /// Whether retrying the same request later may succeed (network trouble rather than a
    /// mistake in the request).
    public var isTransient: Bool {
        switch self {
        case .dnsFailure, .connectFailed, .timedOut, .other: true
        case .tls, .cancelled, .tooLarge, .invalidURL, .invalidHeader: false
        }
    }
}
