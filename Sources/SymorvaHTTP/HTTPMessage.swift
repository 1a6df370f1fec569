import SymorvaRuntime

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// An HTTP request method.
public struct HTTPMethod: RawRepresentable, Sendable, Hashable, CustomStringConvertible, LogSafe {
    /// The method token as sent on the wire (`GET`, `PUT`).
    public let rawValue: String
    /// Wraps a method token.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// `GET`: read a resource.
    public static let get = HTTPMethod(rawValue: "GET")
    /// `POST`: create or act.
    public static let post = HTTPMethod(rawValue: "POST")
    /// `PUT`: idempotent write (Matrix sends use it with a transaction ID).
    public static let put = HTTPMethod(rawValue: "PUT")
    /// `DELETE`: remove a resource.
    public static let delete = HTTPMethod(rawValue: "DELETE")
    /// `HEAD`: headers only.
    public static let head = HTTPMethod(rawValue: "HEAD")
    /// `PATCH`: partial update.
    public static let patch = HTTPMethod(rawValue: "PATCH")

    /// The method token.
    public var description: String { rawValue }
    /// The method token (methods are program vocabulary, safe to log).
    public var logDescription: String { rawValue }
}

/// HTTP header fields: ordered, with case-insensitive lookup by name.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields in the order they were added or received.
    public private(set) var fields: [(name: String, value: String)]

    /// No fields.
    public init() { fields = [] }
    /// Fields in the given order.
    public init(_ fields: [(name: String, value: String)]) { self.fields = fields }
    /// Fields from a literal, in literal order.
    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { (name: $0.0, value: $0.1) }
    }

    /// The first value for `name`, compared case-insensitively; setting replaces every field
    /// with that name (or removes them when `nil`).
    public subscript(name: String) -> String? {
        get { fields.first { Self.equalNames($0.name, name) }?.value }
        set {
            fields.removeAll { Self.equalNames($0.name, name) }
            if let newValue { fields.append((name: name, value: newValue)) }
        }
    }

    /// Every value for `name`, in order.
    public func values(for name: String) -> [String] {
        fields.filter { Self.equalNames($0.name, name) }.map(\.value)
    }

    /// Adds a field, keeping fields of the same name.
    public mutating func add(name: String, value: String) { fields.append((name: name, value: value)) }

    /// Iterates the fields in order.
    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    /// Same fields in the same order, names compared case-insensitively.
    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.count == rhs.fields.count
            && zip(lhs.fields, rhs.fields).allSatisfy { equalNames($0.name, $1.name) && $0.value == $1.value }
    }

    package static func equalNames(_ lhs: String, _ rhs: String) -> Bool {
        let left = lhs.utf8
        let right = rhs.utf8
        guard left.count == right.count else { return false }
        return zip(left, right).allSatisfy { asciiLower($0) == asciiLower($1) }
    }

    private static func asciiLower(_ byte: UInt8) -> UInt8 {
        (byte >= 0x41 && byte <= 0x5A) ? byte + 0x20 : byte
    }
}

/// One HTTP request as the SDK builds it.
///
/// The bearer token is kept apart from ``headers`` in a ``/SymorvaRuntime/Secret`` so that it cannot be
/// printed with the request: the transport adds the `Authorization` header only when it writes
/// the request to the wire. The description shows the method, host and path only (a query may
/// carry tokens), and so does its mirror: `dump`, `String(reflecting:)` and debuggers that
/// reflect show no body (a password, a message), no header value and no query.
public struct HTTPRequest: Sendable, CustomStringConvertible, CustomReflectable {
    /// The request method.
    public var method: HTTPMethod
    /// The absolute `http` or `https` URL.
    public var url: URL
    /// Header fields other than `Authorization`.
    public var headers: HTTPHeaders
    /// The request body; empty for none.
    public var body: [UInt8]
    /// The access token sent as `Authorization: Bearer …`, redacted everywhere else.
    public var bearerToken: Secret<String>?
    /// The total time allowed for the exchange; `nil` uses the transport's default.
    public var timeout: Duration?
    /// The largest response body accepted, in bytes; `nil` uses the transport's default.
    public var maximumResponseBytes: Int?
    /// Whether the request must reach the server at most once: the transport never sends it
    /// again by itself. libcurl resends a request whose reused keep-alive connection turns out
    /// to be dead before any answer byte arrives — harmless for a `GET`, but a command (a
    /// wallet confirmation) may already have executed on the server when the connection died,
    /// and its caller must see that failure rather than a second send. Such a request goes on a
    /// fresh connection, where libcurl never retries.
    public var deliversAtMostOnce = false
    /// A body streamed from a file instead of ``body`` (which must then be empty); only an
    /// ``HTTPFileTransport`` sends it.
    package var bodyFile: HTTPBodyFile?
    /// A file the response body is written to instead of ``HTTPResponse/body`` (which stays
    /// empty); ``maximumResponseBytes`` still bounds it. The transport creates or truncates it.
    package var responseFile: String?
    /// Where the transport reports the transfer's progress while it runs.
    package var progress: HTTPTransferProgress?

    /// Creates a request.
    public init(
        method: HTTPMethod = .get,
        url: URL,
        headers: HTTPHeaders = HTTPHeaders(),
        body: [UInt8] = [],
        bearerToken: Secret<String>? = nil,
        timeout: Duration? = nil,
        maximumResponseBytes: Int? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.bearerToken = bearerToken
        self.timeout = timeout
        self.maximumResponseBytes = maximumResponseBytes
    }

    /// A request whose body is JSON (`Content-Type: application/json`).
    public static func json(
        _ method: HTTPMethod, url: URL, body: [UInt8], bearerToken: Secret<String>? = nil
    ) -> HTTPRequest {
        HTTPRequest(
            method: method, url: url, headers: ["Content-Type": "application/json"], body: body,
            bearerToken: bearerToken)
    }

    /// `METHOD host/path`, without query, headers, token or body.
    public var description: String {
        "\(method.rawValue) \(url.host ?? "")\(url.path)"
    }

    /// The method, host and path, the header names and the body's length: nothing a request
    /// may carry in secret.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "method": method.rawValue, "target": "\(url.host ?? "")\(url.path)",
                "headerNames": headers.fields.map(\.name), "bodyBytes": bodyFile?.length ?? Int64(body.count),
            ], displayStyle: .struct)
    }
}

/// One HTTP response.
///
/// Its description and mirror show the status, header names and the body's length, never the
/// body or a header value (a login answer carries tokens).
public struct HTTPResponse: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    /// The status code of the final response (after any `100 Continue`).
    public var status: Int
    /// The header fields of the final response; lookup is case-insensitive.
    public var headers: HTTPHeaders
    /// The body, decompressed when the server used a content encoding.
    public var body: [UInt8]

    /// Creates a response (transports and test fakes).
    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// Whether the status is 2xx.
    public var isSuccess: Bool { (200..<300).contains(status) }

    /// `status (N bytes)`: never the body, which may hold messages or tokens.
    public var description: String { "\(status) (\(body.count) bytes)" }

    /// The status, the header names and the body's length.
    public var customMirror: Mirror {
        Mirror(
            self, children: ["status": status, "headerNames": headers.fields.map(\.name), "bodyBytes": body.count],
            displayStyle: .struct)
    }
}

/// Performs HTTP exchanges. `CurlTransport` is the real one; tests may provide a fake.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the response, whatever its status.
    ///
    /// Cancelling the calling task aborts the exchange: the call throws
    /// ``TransportError/cancelled`` and never returns a response.
    func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse
}

/// Why an HTTP exchange produced no response.
///
/// A response with an error status (4xx, 5xx) is not a `TransportError`: it is an
/// ``HTTPResponse`` whose body `MatrixError/decode(from:)` can read. This enum is only for
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
    /// The request's body file could not be read, or its response file could not be written
    /// (missing, no permission, disk full). No path is carried.
    case fileAccess
    /// A header name or value contains a line break or other byte that cannot go on the wire.
    case invalidHeader
    /// The server closed the connection without sending any of the response: the request may
    /// or may not have been handled.
    case emptyResponse
    /// The response ended before the length it announced: the request was handled, its answer
    /// was lost on the way.
    case partialResponse
    /// Sending or receiving failed on an established connection (reset, broken pipe).
    case connectionLost
    /// Any other failure of the HTTP engine: its own code and fixed text for that code
    /// (libcurl's `CURLcode` for `CurlTransport`). For diagnostics only: callers decide on the
    /// named cases, never on these codes.
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
        case .fileAccess: "fileAccess"
        case .invalidHeader: "invalidHeader"
        case .emptyResponse: "emptyResponse"
        case .partialResponse: "partialResponse"
        case .connectionLost: "connectionLost"
        case .other(let code, let message): "other(code: \(code), message: \(message))"
        }
    }

    /// Same as ``description``: no case carries user or server data.
    public var logDescription: String { description }

    /// Whether retrying the same request later may succeed (network trouble rather than a
    /// mistake in the request).
    public var isTransient: Bool {
        switch self {
        case .dnsFailure, .connectFailed, .timedOut, .emptyResponse, .partialResponse, .connectionLost, .other: true
        case .tls, .cancelled, .tooLarge, .invalidURL, .invalidHeader, .fileAccess: false
        }
    }
}
