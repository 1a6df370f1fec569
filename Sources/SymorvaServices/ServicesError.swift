import SymorvaHTTP
import SymorvaMatrix
import SymorvaRuntime

/// Why a call to the community services failed.
///
/// Every case is safe to log: server messages (which may quote input) are kept out of
/// ``description``.
public enum ServicesError: Error, Sendable, Equatable, CustomStringConvertible, LogSafe {
    /// The exchange never completed (no connection, timeout, cancelled).
    case transport(TransportError)
    /// The homeserver refused to issue an OpenID token (the Matrix session is not valid).
    case openIDRefused(MatrixError.Code, status: Int)
    /// The services rejected the member's credentials (`SY_UNKNOWN_TOKEN`, `SY_FORBIDDEN`).
    case unauthorized(code: String)
    /// The services refused the request for now (429 `SY_LIMIT_EXCEEDED`): too many requests of
    /// this kind from this member. The services refuse before handling a request, so nothing it
    /// asked for happened (a wallet confirmation was not executed); the same request may be sent
    /// again after `retryAfter` (`retry_after_ms`, else the `Retry-After` header; `nil` when the
    /// answer gave neither).
    case rateLimited(retryAfter: Duration?)
    /// The services answered with a typed error (`errcode`), its HTTP status and retry hint.
    case server(code: String, status: Int, message: String, retryAfter: Duration?)
    /// The services answered with something that is not the documented JSON.
    case malformedResponse(status: Int)
    /// The module is disabled in the community's manifest.
    case moduleDisabled(String)

    public var description: String {
        switch self {
        case .transport(let error): "transport(\(error))"
        case .openIDRefused(let code, let status): "openIDRefused(\(code), status: \(status))"
        case .unauthorized(let code): "unauthorized(\(code))"
        case .rateLimited(let retryAfter): "rateLimited(retryAfter: \(retryAfter.map { "\($0)" } ?? "nil"))"
        case .server(let code, let status, _, let retryAfter):
            "server(\(code), status: \(status)\(retryAfter.map { ", retryAfter: \($0)" } ?? ""))"
        case .malformedResponse(let status): "malformedResponse(status: \(status))"
        case .moduleDisabled(let module): "moduleDisabled(\(module))"
        }
    }

    public var logDescription: String { description }

    /// How long the services asked to wait before the request is sent again: the hint of a
    /// ``rateLimited(retryAfter:)`` or of a ``server(code:status:message:retryAfter:)`` answer
    /// that carried one (a 503 may); `nil` otherwise.
    public var retryAfter: Duration? {
        switch self {
        case .rateLimited(let retryAfter), .server(_, _, _, let retryAfter): retryAfter
        case .transport, .openIDRefused, .unauthorized, .malformedResponse, .moduleDisabled: nil
        }
    }

    /// Whether the same request may succeed later without any change (network trouble, 5xx,
    /// rate limits).
    ///
    /// Transient is not "safe to resend": a timeout or a 5xx may hide a request that was
    /// handled. Only ``rateLimited(retryAfter:)`` says that nothing happened.
    public var isTransient: Bool {
        switch self {
        case .transport(let error): error.isTransient
        case .rateLimited: true
        case .server(_, let status, _, _): status >= 500
        case .openIDRefused, .unauthorized, .malformedResponse, .moduleDisabled: false
        }
    }
}
