import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaServices

extension TransportProblem {
    /// The SDK's one classification of an exchange that never completed: every feature module
    /// (wallet, studio, meetings and their Janus signalling, directory, push) reports a
    /// ``/SymorvaHTTP/TransportError`` as the problem this gives.
    ///
    /// - `timedOut` is a ``timeout``;
    /// - no connection could be made or the request could not be put on the wire (DNS, connect,
    ///   TLS, a URL or header libcurl refuses): ``unreachable``;
    /// - the answer was lost or unusable after it started (nothing, part of it, too large):
    ///   ``responseDropped``;
    /// - the connection broke, or the exchange was aborted, once it was under way (reset,
    ///   cancelled, any other engine failure): ``connectionReset``.
    package init(_ error: TransportError) {
        switch error {
        case .timedOut: self = .timeout
        case .dnsFailure, .connectFailed, .tls, .invalidURL, .invalidHeader, .fileAccess: self = .unreachable
        case .tooLarge, .emptyResponse, .partialResponse: self = .responseDropped
        case .cancelled, .connectionLost, .other: self = .connectionReset
        }
    }
}

/// What a failed request to the community services or the homeserver means, in the terms every
/// feature module shares: the one classification their error mappings start from.
///
/// A feature maps the error codes it knows first (`SY_GRANT_REVOKED`, `SY_STAGE_FULL`, a
/// directory's `M_FORBIDDEN` with power levels, …) and everything else by its class, so that the
/// same failure means the same thing in every module:
/// - a failed exchange, a 5xx answer and an unreadable 5xx answer are
///   ``transport(_:)`` (the server may have handled the request; retrying later may work);
/// - a rate limit is ``rateLimited(retryAfter:)`` (refused before anything happened);
/// - an answer with an error code is ``refused(code:status:)``;
/// - a member the server no longer knows (the OpenID exchange refused, an access token the
///   session could not renew, a guest turned away) is ``signInRequired``;
/// - a module the manifest disables is ``moduleDisabled``;
/// - any other answer that is not the documented JSON is ``malformedResponse``.
package enum FailureClass: Sendable, Hashable {
    /// No usable answer: the exchange failed, or the server failed (5xx).
    case transport(TransportProblem)
    /// The server turned the request away for now; wait `retryAfter` (when it said) first.
    case rateLimited(retryAfter: Duration?)
    /// The server refused with an error code (`errcode`) and HTTP status below 500.
    case refused(code: String, status: Int)
    /// The server does not take the member's credentials: sign in (again) first.
    case signInRequired
    /// The community's manifest disables the module.
    case moduleDisabled
    /// The request could not be made (an endpoint that is no URL, a body that is no JSON).
    case invalidRequest
    /// A 2xx or 4xx answer that is not the documented JSON.
    case malformedResponse

    /// The class of a community services failure. The services client has already exchanged a
    /// new token once for a rejected one, so an ``/SymorvaServices/ServicesError/unauthorized(code:)``
    /// is a refusal of the member (`refused`, status 401).
    package init(_ error: ServicesError) {
        switch error {
        case .transport(let error): self = .transport(TransportProblem(error))
        case .rateLimited(let retryAfter): self = .rateLimited(retryAfter: retryAfter)
        case .server(_, let status, _, _) where status >= 500: self = .transport(.serverError(status: status))
        case .server(let code, let status, _, _): self = .refused(code: code, status: status)
        case .unauthorized(let code): self = .refused(code: code, status: 401)
        case .openIDRefused: self = .signInRequired
        case .moduleDisabled: self = .moduleDisabled
        case .malformedResponse(let status) where status >= 500: self = .transport(.serverError(status: status))
        case .malformedResponse(0): self = .invalidRequest
        case .malformedResponse: self = .malformedResponse
        }
    }

    /// The class of a Matrix request failure. The requester has already refreshed the access
    /// token once for a rejected one, so `M_UNKNOWN_TOKEN` and `M_MISSING_TOKEN` (and a guest
    /// turned away, `M_GUEST_ACCESS_FORBIDDEN`) are ``signInRequired``.
    package init(_ error: MatrixRequestError) {
        switch error {
        case .transport(let error): self = .transport(TransportProblem(error))
        case .notSignedIn: self = .signInRequired
        case .invalidRequest: self = .invalidRequest
        case .matrix(let matrix):
            switch matrix.code {
            case .limitExceeded:
                if case .delay(let wait) = matrix.retryAfter {
                    self = .rateLimited(retryAfter: wait)
                } else {
                    self = .rateLimited(retryAfter: nil)
                }
            case .unknownToken, .missingToken, .guestAccessForbidden: self = .signInRequired
            default:
                self =
                    matrix.status >= 500
                    ? .transport(.serverError(status: matrix.status))
                    : .refused(code: matrix.code.errcode, status: matrix.status)
            }
        }
    }
}
