import SymorvaRuntime

/// Where discovery is.
public enum DiscoveryStep: Sendable, Hashable {
    /// Reading `.well-known/matrix/client` of the server name.
    case wellKnown
    /// Checking `/versions` at this base URL.
    case versions(HomeserverURL)
}

/// Which try of a request this is, and whether it is on the wire or waiting to be resent.
public struct Attempt: Sendable, Hashable {
    /// 1 for the first try.
    public var number: Int
    /// `true` while waiting out a rate limit or back-off before the next try.
    public var isWaitingToRetry: Bool

    /// An attempt.
    public init(number: Int, isWaitingToRetry: Bool = false) {
        self.number = number
        self.isWaitingToRetry = isWaitingToRetry
    }

    /// The first try, on the wire.
    public static let first = Attempt(number: 1)

    /// This try, now waiting to be resent.
    public var waiting: Attempt { Attempt(number: number, isWaitingToRetry: true) }

    /// The next try, on the wire.
    public var next: Attempt { Attempt(number: number + 1) }
}

/// A sign-in under way.
public struct LoginAttempt: Sendable, Equatable {
    /// What the user submitted; kept (as ``Secret``s) to resend after a rate limit.
    public var credentials: Credentials
    /// The soft-logged-out session being resumed, if any: the login reuses its device and must
    /// sign in the same user.
    public var resuming: Session?
    /// Which try this is.
    public var attempt: Attempt

    /// A sign-in attempt.
    public init(credentials: Credentials, resuming: Session? = nil, attempt: Attempt = .first) {
        self.credentials = credentials
        self.resuming = resuming
        self.attempt = attempt
    }
}

/// A registration under way.
public struct RegistrationAttempt: Sendable, Equatable {
    /// The desired localpart.
    public var username: String
    /// The new account's password.
    public var password: Secret<String>
    /// The stage data sent with the last call (`nil` for the first call).
    public var auth: RegistrationAuth?
    /// How many UIA stages have been submitted; bounds a server that keeps asking.
    public var stagesSubmitted: Int
    /// Which try of the current call this is.
    public var attempt: Attempt

    /// A registration attempt.
    public init(
        username: String, password: Secret<String>, auth: RegistrationAuth? = nil, stagesSubmitted: Int = 0,
        attempt: Attempt = .first
    ) {
        self.username = username
        self.password = password
        self.auth = auth
        self.stagesSubmitted = stagesSubmitted
        self.attempt = attempt
    }
}

/// Where tokens being saved came from; decides where a save failure leads.
public enum TokenOrigin: Sendable, Hashable {
    /// A fresh `/login`.
    case login
    /// A successful `/register`.
    case registration
    /// A `/login` that resumes a soft-logged-out session.
    case reauthentication
    /// A `/refresh`.
    case refresh
}

/// The part of the session's life an error happened in.
public enum SessionStep: Sendable, Hashable {
    /// Loading the stored session.
    case restore
    /// `.well-known` or `/versions`.
    case discovery
    /// `/login`, or saving its tokens.
    case login
    /// `/register`, or saving its tokens.
    case registration
    /// Wiping local data at sign-out.
    case signOut
}
