import SymorvaRuntime

/// Why signing in, staying signed in or signing out did not work.
///
/// The session feature's only error type: lower layers (transport, store, the Matrix error
/// body) are mapped into these cases by the interpreter, so callers switch over a closed set.
/// Every case is safe to log: it carries server-chosen codes, counts and durations, never a
/// token, a password or a server's free-text message.
public enum SessionError: Error, Sendable, Hashable, LogSafe, CustomStringConvertible {
    /// The server refused the user name and password or the login token (`M_FORBIDDEN` on `/login`).
    case invalidCredentials
    /// The account exists but was deactivated (`M_USER_DEACTIVATED`).
    case userDeactivated
    /// Registration: the desired user name is already taken (`M_USER_IN_USE`).
    case userInUse
    /// Registration: the desired user name is not allowed (`M_INVALID_USERNAME`, `M_EXCLUSIVE`).
    case invalidUsername
    /// Registration is switched off on this homeserver (`403 M_FORBIDDEN` on `/register`).
    case registrationDisabled
    /// Registration needs interactive stages this SDK cannot complete (only `m.login.dummy` is
    /// supported); `stages` is the shortest flow the server offered.
    case unsupportedRegistrationFlow(stages: [String])
    /// The request never got an HTTP response: the server is down, unreachable or too slow.
    case unreachable(NetworkFailure)
    /// Server discovery failed before a homeserver was found (`.well-known` unusable).
    case discoveryFailed(reason: String)
    /// The homeserver speaks no client-server API version this SDK supports (it needs v1.1+).
    case unsupportedServer(versions: [String])
    /// Credentials were submitted before any homeserver was discovered.
    case noHomeserver
    /// The server is rate-limiting this client (`M_LIMIT_EXCEEDED`); wait `retryAfter` when given.
    case rateLimited(retryAfter: Duration?)
    /// The access token expired and there is no refresh token to renew it: sign in again.
    case tokenExpired
    /// The server does not know the token (`M_UNKNOWN_TOKEN`). With `softLogout` the session
    /// can be resumed by signing in again; without it the session is gone for good.
    case unknownToken(softLogout: Bool)
    /// The session is soft logged out: sign in again with the same account to continue.
    case softLoggedOut
    /// Re-authentication after a soft logout signed in another account than the local one.
    case accountMismatch(expected: UserID, received: UserID)
    /// The operation needs a signed-in session and there is none.
    case notSignedIn
    /// Sign-in: the account is already signed in on this device. Signing in again would make a
    /// second device of it (new keys, to-device messages split between the two); switch to the
    /// account instead, and re-authenticate it if it is soft logged out.
    case alreadySignedIn(UserID)
    /// The server answered with something this SDK cannot read (bad JSON, a missing field).
    case invalidResponse(reason: String)
    /// The server answered with an error not listed above: HTTP status and Matrix `errcode`.
    case serverError(status: Int, errcode: String?)
    /// The local store failed to load, save or wipe the session.
    case store(StoreFailure)
    /// The operation was cancelled before it finished.
    case cancelled
    /// A request that needs user-interactive authentication offers no flow this SDK can
    /// complete (it completes `m.login.password`); the shortest flow's stages.
    case unsupportedAuthenticationFlow(stages: [String])
    /// Another request that may need the password is under way; try again when it is done.
    case authorizationInProgress

    /// Whether retrying the same request later may succeed without anything else changing.
    public var isTransient: Bool {
        switch self {
        case .unreachable, .rateLimited: true
        case .serverError(let status, _): status >= 500
        default: false
        }
    }

    public var description: String {
        switch self {
        case .invalidCredentials: "invalidCredentials"
        case .userDeactivated: "userDeactivated"
        case .userInUse: "userInUse"
        case .invalidUsername: "invalidUsername"
        case .registrationDisabled: "registrationDisabled"
        case .unsupportedRegistrationFlow(let stages): "unsupportedRegistrationFlow(\(stages.joined(separator: ",")))"
        case .unsupportedAuthenticationFlow(let stages):
            "unsupportedAuthenticationFlow(\(stages.joined(separator: ",")))"
        case .authorizationInProgress: "authorizationInProgress"
        case .unreachable(let failure): "unreachable(\(failure))"
        case .discoveryFailed(let reason): "discoveryFailed(\(reason))"
        case .unsupportedServer(let versions): "unsupportedServer(\(versions.joined(separator: ",")))"
        case .noHomeserver: "noHomeserver"
        case .rateLimited(let retryAfter): "rateLimited(retryAfter: \(retryAfter.map { "\($0)" } ?? "nil"))"
        case .tokenExpired: "tokenExpired"
        case .unknownToken(let softLogout): "unknownToken(softLogout: \(softLogout))"
        case .softLoggedOut: "softLoggedOut"
        case .accountMismatch(let expected, let received):
            "accountMismatch(expected: \(expected), received: \(received))"
        case .notSignedIn: "notSignedIn"
        case .alreadySignedIn(let userID): "alreadySignedIn(\(userID))"
        case .invalidResponse(let reason): "invalidResponse(\(reason))"
        case .serverError(let status, let errcode): "serverError(\(status), \(errcode ?? "nil"))"
        case .store(let failure): "store(\(failure))"
        case .cancelled: "cancelled"
        }
    }

    public var logDescription: String { description }
}

/// What went wrong when a request got no HTTP response, summarised from the transport's error.
public enum NetworkFailure: Sendable, Hashable, LogSafe, CustomStringConvertible {
    /// The request took longer than its timeout.
    case timedOut
    /// The host's name could not be resolved.
    case cannotResolveHost
    /// No connection could be made (refused, unreachable network).
    case cannotConnect
    /// The TLS handshake failed or the certificate was refused.
    case secureConnectionFailed
    /// The connection dropped before the response was complete.
    case connectionLost
    /// Anything else, summarised by the transport (never a URL query or a header).
    case other(String)

    public var description: String {
        switch self {
        case .timedOut: "timedOut"
        case .cannotResolveHost: "cannotResolveHost"
        case .cannotConnect: "cannotConnect"
        case .secureConnectionFailed: "secureConnectionFailed"
        case .connectionLost: "connectionLost"
        case .other(let summary): "other(\(summary))"
        }
    }

    public var logDescription: String { description }
}
