import SymorvaRuntime

/// The tokens that authorise one device's requests.
///
/// Both tokens are ``/SymorvaRuntime/Secret``s: no description, trace or log ever shows them. They are saved
/// (encrypted) before they are used, so that a crash can never leave the device holding a
/// token the store does not know about.
package struct SessionTokens: Sendable, Equatable, CustomStringConvertible {
    /// Sent as `Authorization: Bearer …` with every authenticated request.
    package var accessToken: Secret<String>
    /// Exchanged at `/refresh` for a new access token; `nil` when the server issued none, in
    /// which case the access token does not expire or the user must sign in again when it does.
    package var refreshToken: Secret<String>?
    /// When the access token expires; `nil` when the server gave no lifetime.
    package var expiry: TokenExpiry?

    /// Creates a set of tokens.
    package init(accessToken: Secret<String>, refreshToken: Secret<String>? = nil, expiry: TokenExpiry? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiry = expiry
    }

    /// These tokens after a refresh that returned `new`: a refresh response without a refresh
    /// token means the old one stays valid (spec, `POST /refresh`).
    package func refreshed(with new: SessionTokens) -> SessionTokens {
        SessionTokens(
            accessToken: new.accessToken, refreshToken: new.refreshToken ?? refreshToken, expiry: new.expiry)
    }

    package var description: String {
        "SessionTokens(access: <redacted>, refresh: \(refreshToken == nil ? "none" : "<redacted>"), expiry: "
            + "\(expiry.map { "\($0.expiresAt)" } ?? "none"))"
    }
}

/// When an access token was issued and when it expires, as wall-clock instants stamped by the
/// interpreter from the response's `expires_in_ms`.
package struct TokenExpiry: Sendable, Hashable {
    /// When the response carrying the token arrived.
    package var issuedAt: Timestamp
    /// `issuedAt` plus the token's lifetime.
    package var expiresAt: Timestamp

    /// An expiry.
    package init(issuedAt: Timestamp, expiresAt: Timestamp) {
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }

    /// An expiry `lifetime` after `issuedAt`.
    package init(issuedAt: Timestamp, lifetime: Duration) {
        self.init(issuedAt: issuedAt, expiresAt: issuedAt.advanced(by: lifetime))
    }

    /// When to refresh: `margin` before expiry, but never earlier than three quarters of the
    /// lifetime, so that a server issuing very short tokens cannot make the client refresh in
    /// a tight loop.
    package func refreshDeadline(margin: Duration) -> Timestamp {
        let lifetime = expiresAt.duration(since: issuedAt)
        let earliest = issuedAt.advanced(by: lifetime * 3 / 4)
        return max(expiresAt.advanced(by: .zero - margin), earliest)
    }
}

/// The `/versions` answer: which spec versions and unstable features the homeserver offers.
package struct ServerVersions: Sendable, Hashable, Codable {
    /// Spec versions, e.g. `["r0.6.1", "v1.1", …, "v1.12"]`.
    package var versions: [String]
    /// Unstable features the server switched on (`org.matrix.simplified_msc3575`, …).
    package var unstableFeatures: [String: Bool]

    /// Server versions.
    package init(versions: [String], unstableFeatures: [String: Bool] = [:]) {
        self.versions = versions
        self.unstableFeatures = unstableFeatures
    }

    /// Whether the server speaks a client-server API this SDK supports: v1.1 or later.
    package var isSupported: Bool { highestMinorVersion.map { $0 >= 1 } ?? false }

    /// Whether refresh tokens are part of the spec the server speaks (v1.3 or later).
    package var supportsRefreshTokens: Bool { highestMinorVersion.map { $0 >= 3 } ?? false }

    /// Whether the server advertises simplified sliding sync (MSC3575 as implemented by Synapse).
    package var supportsSimplifiedSlidingSync: Bool {
        unstableFeatures["org.matrix.simplified_msc3575"] == true
    }

    /// The highest `N` among the `v1.N` versions, if any.
    private var highestMinorVersion: Int? {
        versions.compactMap { version -> Int? in
            guard version.hasPrefix("v1.") else { return nil }
            return Int(version.dropFirst(3))
        }.max()
    }
}

/// A homeserver that discovery found and checked.
package struct HomeserverInfo: Sendable, Hashable, Codable {
    /// Where to send client-server API requests.
    package var baseURL: HomeserverURL
    /// The server name (the part after `:` in user IDs), when known before signing in.
    package var serverName: String?
    /// What the server offers.
    package var versions: ServerVersions

    /// A homeserver.
    package init(baseURL: HomeserverURL, serverName: String?, versions: ServerVersions) {
        self.baseURL = baseURL
        self.serverName = serverName
        self.versions = versions
    }
}

/// One signed-in device of one account: who, where, and the tokens to prove it.
package struct Session: Sendable, Equatable, CustomStringConvertible {
    /// The signed-in user.
    package var userID: UserID
    /// This device.
    package var deviceID: DeviceID
    /// The homeserver the session lives on.
    package var homeserver: HomeserverInfo
    /// The device's tokens.
    package var tokens: SessionTokens

    /// A session.
    package init(userID: UserID, deviceID: DeviceID, homeserver: HomeserverInfo, tokens: SessionTokens) {
        self.userID = userID
        self.deviceID = deviceID
        self.homeserver = homeserver
        self.tokens = tokens
    }

    package var description: String { "Session(\(userID), device: \(deviceID), \(homeserver.baseURL))" }
}

/// A session as the store keeps it between launches.
package struct StoredSession: Sendable, Equatable {
    /// The saved session.
    package var session: Session
    /// Whether the app quit while the session was soft logged out: restore it in that state.
    package var isSoftLoggedOut: Bool

    /// A stored session.
    package init(session: Session, isSoftLoggedOut: Bool = false) {
        self.session = session
        self.isSoftLoggedOut = isSoftLoggedOut
    }
}

/// What the user proves their identity with.
package enum Credentials: Sendable, Equatable {
    /// A user name (a localpart or a full user ID, sent as an `m.id.user` identifier) and password.
    case password(username: String, password: Secret<String>)
    /// A short-lived `m.login.token`, from single sign-on or another signed-in device.
    case loginToken(Secret<String>)
}

/// What a successful `/login` or `/register` returned, with the expiry already stamped.
package struct SessionGrant: Sendable, Equatable {
    /// The user the server signed in (it may differ in case or form from the name typed).
    package var userID: UserID
    /// The device the tokens belong to.
    package var deviceID: DeviceID
    /// The new tokens; not usable until saved.
    package var tokens: SessionTokens

    /// A grant.
    package init(userID: UserID, deviceID: DeviceID, tokens: SessionTokens) {
        self.userID = userID
        self.deviceID = deviceID
        self.tokens = tokens
    }
}

/// One flow of user-interactive authentication: the stages to complete, in order.
package struct AuthenticationFlow: Sendable, Hashable {
    /// Stage types such as `m.login.dummy` or `m.login.recaptcha`.
    package var stages: [String]
    /// A flow.
    package init(stages: [String]) { self.stages = stages }
}

/// A `401` answer of a user-interactive-authentication endpoint: what is still required.
package struct AuthenticationChallenge: Sendable, Hashable {
    /// The UIA session to send back with the next stage; absent when the server gave none.
    package var session: String?
    /// The flows the server accepts.
    package var flows: [AuthenticationFlow]
    /// The stages already completed in this UIA session.
    package var completed: [String]

    /// A challenge.
    package init(session: String?, flows: [AuthenticationFlow], completed: [String] = []) {
        self.session = session
        self.flows = flows
        self.completed = completed
    }
}

/// How a `/register` call ended when it did not fail.
package enum RegistrationOutcome: Sendable, Equatable {
    /// The account exists and the device is signed in.
    case registered(SessionGrant)
    /// The server wants another authentication stage first.
    case authenticationRequired(AuthenticationChallenge)
}

/// The stage data sent in a `/register` call's `auth` field.
package enum RegistrationAuth: Sendable, Hashable {
    /// `{"type": "m.login.dummy", "session": …}`: the stage that proves nothing and is offered
    /// by servers that allow open registration.
    case dummy(session: String?)

    /// The stage type this auth completes.
    package var stageType: String {
        switch self {
        case .dummy: "m.login.dummy"
        }
    }
}

/// Everything the interpreter needs to call `/login`.
package struct LoginRequest: Sendable, Equatable {
    /// The homeserver to call.
    package var homeserverURL: HomeserverURL
    /// What proves the user's identity.
    package var credentials: Credentials
    /// The device to sign in again (after a soft logout); `nil` creates a new device.
    package var deviceID: DeviceID?
    /// The new device's name as other members see it.
    package var deviceDisplayName: String?
    /// Whether to ask for a refresh token (`"refresh_token": true`).
    package var requestsRefreshToken: Bool

    /// A login request.
    package init(
        homeserverURL: HomeserverURL, credentials: Credentials, deviceID: DeviceID? = nil,
        deviceDisplayName: String? = nil, requestsRefreshToken: Bool = true
    ) {
        self.homeserverURL = homeserverURL
        self.credentials = credentials
        self.deviceID = deviceID
        self.deviceDisplayName = deviceDisplayName
        self.requestsRefreshToken = requestsRefreshToken
    }
}

/// Everything the interpreter needs to call `/register`.
package struct RegisterRequest: Sendable, Equatable {
    /// The homeserver to call.
    package var homeserverURL: HomeserverURL
    /// The desired localpart.
    package var username: String
    /// The new account's password.
    package var password: Secret<String>
    /// The UIA stage being completed; `nil` on the first call, which asks for the flows.
    package var auth: RegistrationAuth?
    /// The new device's name as other members see it.
    package var deviceDisplayName: String?
    /// Whether to ask for a refresh token (`"refresh_token": true`).
    package var requestsRefreshToken: Bool

    /// A register request.
    package init(
        homeserverURL: HomeserverURL, username: String, password: Secret<String>, auth: RegistrationAuth? = nil,
        deviceDisplayName: String? = nil, requestsRefreshToken: Bool = true
    ) {
        self.homeserverURL = homeserverURL
        self.username = username
        self.password = password
        self.auth = auth
        self.deviceDisplayName = deviceDisplayName
        self.requestsRefreshToken = requestsRefreshToken
    }
}

/// Everything the interpreter needs to call `/refresh`.
package struct RefreshRequest: Sendable, Equatable {
    /// The homeserver to call.
    package var homeserverURL: HomeserverURL
    /// The refresh token to exchange.
    package var refreshToken: Secret<String>

    /// A refresh request.
    package init(homeserverURL: HomeserverURL, refreshToken: Secret<String>) {
        self.homeserverURL = homeserverURL
        self.refreshToken = refreshToken
    }
}

/// Everything the interpreter needs to call `/logout`.
package struct LogoutRequest: Sendable, Equatable {
    /// The homeserver to call.
    package var homeserverURL: HomeserverURL
    /// The access token whose device is signed out.
    package var accessToken: Secret<String>

    /// A logout request.
    package init(homeserverURL: HomeserverURL, accessToken: Secret<String>) {
        self.homeserverURL = homeserverURL
        self.accessToken = accessToken
    }
}

/// Where discovery is.
package enum DiscoveryStep: Sendable, Hashable {
    /// Reading `.well-known/matrix/client` of the server name.
    case wellKnown
    /// Checking `/versions` at this base URL.
    case versions(HomeserverURL)
}

/// Which try of a request this is, and whether it is on the wire or waiting to be resent.
package struct Attempt: Sendable, Hashable {
    /// 1 for the first try.
    package var number: Int
    /// `true` while waiting out a rate limit or back-off before the next try.
    package var isWaitingToRetry: Bool

    /// An attempt.
    package init(number: Int, isWaitingToRetry: Bool = false) {
        self.number = number
        self.isWaitingToRetry = isWaitingToRetry
    }

    /// The first try, on the wire.
    package static let first = Attempt(number: 1)

    /// This try, now waiting to be resent.
    package var waiting: Attempt { Attempt(number: number, isWaitingToRetry: true) }

    /// The next try, on the wire.
    package var next: Attempt { Attempt(number: number + 1) }
}

/// A sign-in under way.
package struct LoginAttempt: Sendable, Equatable {
    /// What the user submitted; kept (as ``/SymorvaRuntime/Secret``s) to resend after a rate limit.
    package var credentials: Credentials
    /// The soft-logged-out session being resumed, if any: the login reuses its device and must
    /// sign in the same user.
    package var resuming: Session?
    /// Which try this is.
    package var attempt: Attempt

    /// A sign-in attempt.
    package init(credentials: Credentials, resuming: Session? = nil, attempt: Attempt = .first) {
        self.credentials = credentials
        self.resuming = resuming
        self.attempt = attempt
    }
}

/// A registration under way.
package struct RegistrationAttempt: Sendable, Equatable {
    /// The desired localpart.
    package var username: String
    /// The new account's password.
    package var password: Secret<String>
    /// The stage data sent with the last call (`nil` for the first call).
    package var auth: RegistrationAuth?
    /// How many UIA stages have been submitted; bounds a server that keeps asking.
    package var stagesSubmitted: Int
    /// Which try of the current call this is.
    package var attempt: Attempt

    /// A registration attempt.
    package init(
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
package enum TokenOrigin: Sendable, Hashable {
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
package enum SessionStep: Sendable, Hashable {
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
