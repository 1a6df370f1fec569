import SymorvaMachines
import SymorvaRuntime

typealias SessionState = SessionMachine.State
typealias SessionEvent = SessionMachine.Event
typealias SessionEffect = SessionMachine.Effect
typealias SessionKeys = SessionMachine.Keys

/// Values shared by the session machine's tests.
enum SessionFixture {
    static let machine = SessionMachine(deviceDisplayName: "Orbit on Linux")
    static let serverName = "localhost"
    static let baseURL = HomeserverURL("http://127.0.0.1:8008")!
    static let versions = ServerVersions(
        versions: ["r0.6.1", "v1.1", "v1.2", "v1.3", "v1.11"],
        unstableFeatures: ["org.matrix.simplified_msc3575": true])
    static let oldVersions = ServerVersions(versions: ["r0.5.0", "r0.6.1"])
    static let server = HomeserverInfo(baseURL: baseURL, serverName: serverName, versions: versions)
    static let alice = UserID("@alice:localhost")
    static let bob = UserID("@bob:localhost")
    static let device = DeviceID("ALICEPHONE")
    static let account = alice
    static let password = Secret("correct horse battery staple")
    static let loginToken = Secret("login-token-from-sso")
    static let issuedAt = Timestamp(millisecondsSince1970: 1_700_000_000_000)

    /// The `n`-th set of tokens the server issues: 5-minute access tokens, like Synapse.
    static func tokens(_ n: Int, refresh: Bool = true, lifetime: Duration? = .seconds(300)) -> SessionTokens {
        SessionTokens(
            accessToken: Secret("access-\(n)"), refreshToken: refresh ? Secret("refresh-\(n)") : nil,
            expiry: lifetime.map { TokenExpiry(issuedAt: issuedAt, lifetime: $0) })
    }

    static func session(_ n: Int = 1, refresh: Bool = true, lifetime: Duration? = .seconds(300)) -> Session {
        Session(
            userID: alice, deviceID: device, homeserver: server, tokens: tokens(n, refresh: refresh, lifetime: lifetime)
        )
    }

    static func grant(_ n: Int = 1, user: UserID = alice, refresh: Bool = true) -> SessionGrant {
        SessionGrant(userID: user, deviceID: device, tokens: tokens(n, refresh: refresh))
    }

    static var passwordCredentials: Credentials { .password(username: "alice", password: password) }

    static func loginRequest(deviceID: DeviceID? = nil, credentials: Credentials = passwordCredentials)
        -> LoginRequest
    {
        LoginRequest(
            homeserverURL: baseURL, credentials: credentials, deviceID: deviceID,
            deviceDisplayName: "Orbit on Linux", requestsRefreshToken: true)
    }

    static func registerRequest(auth: RegistrationAuth? = nil) -> RegisterRequest {
        RegisterRequest(
            homeserverURL: baseURL, username: "alice", password: password, auth: auth,
            deviceDisplayName: "Orbit on Linux", requestsRefreshToken: true)
    }

    static func refreshRequest(_ n: Int = 1) -> RefreshRequest {
        RefreshRequest(homeserverURL: baseURL, refreshToken: Secret("refresh-\(n)"))
    }

    static func logoutRequest(_ n: Int = 1) -> LogoutRequest {
        LogoutRequest(homeserverURL: baseURL, accessToken: Secret("access-\(n)"))
    }

    /// When the refresh timer of `tokens(n)` fires: 60 s before the 5-minute expiry.
    static let refreshDeadline = issuedAt.advanced(by: .seconds(240))

    static let dummyChallenge = AuthenticationChallenge(
        session: "uia-session-1",
        flows: [
            AuthenticationFlow(stages: ["m.login.recaptcha", "m.login.terms"]),
            AuthenticationFlow(stages: ["m.login.dummy"]),
        ])
    /// What Synapse answers a cross-signing reset: the password stage alone.
    static let passwordChallenge = AuthenticationChallenge(
        session: "uia-session-3", flows: [AuthenticationFlow(stages: ["m.login.password"])])

    /// A cross-signing reset that may need the password.
    static func authorizedRequest(id: String = "reset-1") -> AuthorizedRequest {
        AuthorizedRequest(
            id: id, method: "POST", path: "/_matrix/client/v3/keys/device_signing/upload",
            body: Array(#"{"master_key":{}}"#.utf8), password: password)
    }

    static let captchaOnlyChallenge = AuthenticationChallenge(
        session: "uia-session-2", flows: [AuthenticationFlow(stages: ["m.login.recaptcha"])])
}
