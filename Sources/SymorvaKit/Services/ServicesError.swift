import SymorvaRuntime
import SymorvaTransport

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
        case .server(let code, let status, _, let retryAfter):
            "server(\(code), status: \(status)\(retryAfter.map { ", retryAfter: \($0)" } ?? ""))"
        case .malformedResponse(let status): "malformedResponse(status: \(status))"
        case .moduleDisabled(let module): "moduleDisabled(\(module))"
        }
    }

    public var logDescription: String { description }

    /// Whether the same request may succeed later without any change (network trouble, 5xx,
    /// rate limits).
    public var isTransient: Bool {
        switch self {
        case .transport(let error): error.isTransient
        case .server(_, let status, _, _): status >= 500 || status == 429
        case .openIDRefused, .unauthorized, .malformedResponse, .moduleDisabled: false
        }
    }
}
