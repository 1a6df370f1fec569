import SymorvaHTTP
import SymorvaMachines

/// One Matrix HTTP request, described as plain data: method, path, query, JSON body, and
/// whether it carries the access token.
///
/// Endpoint builders are pure (no transport, no clock), so that they can be tested byte for
/// byte; the interpreter turns an endpoint into a transport request. The body may hold a
/// password or a token: an endpoint's descriptions and reflection show only method and path.
public struct MatrixEndpoint: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The HTTP methods the client-server API uses.
    public enum Method: String, Sendable, Hashable {
        /// `GET`.
        case get = "GET"
        /// `POST`.
        case post = "POST"
        /// `PUT`.
        case put = "PUT"
        /// `DELETE`.
        case delete = "DELETE"
    }

    /// One `name=value` pair of the query string, in order.
    public struct QueryItem: Sendable, Hashable {
        /// The parameter's name.
        public var name: String
        /// The parameter's value, not yet percent-encoded.
        public var value: String
        /// A query item.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The HTTP method.
    public var method: Method
    /// The path, percent-encoded, starting with `/` (`/_matrix/client/v3/login`).
    public var path: String
    /// Query parameters.
    public var query: [QueryItem]
    /// The JSON body, or `nil` for requests without one.
    public var body: [UInt8]?
    /// Whether the request must carry `Authorization: Bearer <access token>`.
    public var requiresAuth: Bool
    /// A media transfer's body file, response file, content type and progress (instead of a
    /// JSON body in memory).
    package var transfer: MatrixFileTransfer?

    /// An endpoint.
    public init(
        method: Method, path: String, query: [QueryItem] = [], body: [UInt8]? = nil, requiresAuth: Bool
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.body = body
        self.requiresAuth = requiresAuth
    }

    /// The full URL text on `base`: base, path and percent-encoded query.
    public func urlString(relativeTo base: HomeserverURL) -> String {
        var text = base.rawValue + path
        if !query.isEmpty {
            text += "?" + query.map { "\(percentEncoded($0.name))=\(percentEncoded($0.value))" }.joined(separator: "&")
        }
        return text
    }

    public var description: String {
        "\(method.rawValue) \(path)" + (body == nil && transfer?.bodyFile == nil ? "" : " <body redacted>")
    }

    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["endpoint": description], displayStyle: .struct) }
}

/// Percent-encodes `text` for a path segment or a query component: everything but the RFC 3986
/// unreserved characters.
public func percentEncoded(_ text: String) -> String {
    var encoded = ""
    for byte in text.utf8 {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            encoded.unicodeScalars.append(Unicode.Scalar(byte))
        default:
            let hex = Array("0123456789ABCDEF".unicodeScalars)
            encoded.unicodeScalars.append("%")
            encoded.unicodeScalars.append(hex[Int(byte >> 4)])
            encoded.unicodeScalars.append(hex[Int(byte & 0x0F)])
        }
    }
    return encoded
}

/// How a media request moves bytes: a body streamed from a file (with its content type), a
/// response written to a file, a bound on the response, progress. Only a transport that
/// streams files (``/SymorvaHTTP/HTTPFileTransport``) performs an endpoint with a file.
package struct MatrixFileTransfer: Sendable, Hashable {
    /// The body, read from this file while it is sent.
    package var bodyFile: HTTPBodyFile?
    /// The body's `Content-Type`.
    package var contentType: String?
    /// The file the 2xx response body is written to.
    package var responseFile: String?
    /// The largest response body accepted, in bytes (`nil`: the transport's default).
    package var maximumResponseBytes: Int?
    /// Where progress is reported.
    package var progress: HTTPTransferProgress?

    /// A transfer description.
    package init(
        bodyFile: HTTPBodyFile? = nil, contentType: String? = nil, responseFile: String? = nil,
        maximumResponseBytes: Int? = nil, progress: HTTPTransferProgress? = nil
    ) {
        self.bodyFile = bodyFile
        self.contentType = contentType
        self.responseFile = responseFile
        self.maximumResponseBytes = maximumResponseBytes
        self.progress = progress
    }
}
