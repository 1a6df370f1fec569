import SymorvaMachines
import SymorvaRuntime
import Testing

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
    static let captchaOnlyChallenge = AuthenticationChallenge(
        session: "uia-session-2", flows: [AuthenticationFlow(stages: ["m.login.recaptcha"])])
}

/// Asserts that `event` in `state` moves to `next` with exactly `effects`.
func expectMove(
    _ machine: SessionMachine = SessionFixture.machine, from state: SessionState, on event: SessionEvent,
    to next: SessionState,
    effects: [SessionEffect] = [], sourceLocation: SourceLocation = #_sourceLocation
) {
    let transition = machine.transition(from: state, on: event)
    guard case .move(let actual, let actualEffects) = transition else {
        Issue.record("expected a move to \(next.caseName), got \(describe(transition))", sourceLocation: sourceLocation)
        return
    }
    #expect(actual == next, sourceLocation: sourceLocation)
    #expect(actualEffects == effects, sourceLocation: sourceLocation)
}

/// Asserts that `event` in `state` keeps the state and asks for exactly `effects`.
func expectStay(
    _ machine: SessionMachine = SessionFixture.machine, in state: SessionState, on event: SessionEvent,
    effects: [SessionEffect] = [],
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let transition = machine.transition(from: state, on: event)
    guard case .stay(let actualEffects) = transition else {
        Issue.record("expected stay, got \(describe(transition))", sourceLocation: sourceLocation)
        return
    }
    #expect(actualEffects == effects, sourceLocation: sourceLocation)
}

/// Asserts that `event` has no meaning in `state`.
func expectIgnored(
    _ machine: SessionMachine = SessionFixture.machine, in state: SessionState, on event: SessionEvent,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let transition = machine.transition(from: state, on: event)
    #expect(transition.isIgnored, "\(state.caseName) + \(event.caseName)", sourceLocation: sourceLocation)
}

/// Runs `events` from `state`, returning the final state and every effect asked for.
func run(_ machine: SessionMachine = SessionFixture.machine, from state: SessionState, _ events: [SessionEvent]) -> (
    SessionState, [SessionEffect]
) {
    var current = state
    var effects: [SessionEffect] = []
    for event in events {
        let transition = machine.transition(from: current, on: event)
        current = transition.nextState(after: current)
        effects += transition.effects
    }
    return (current, effects)
}

func describe(_ transition: Transition<SessionState, SessionEffect>) -> String {
    switch transition {
    case .move(let state, let effects): "move(\(state.caseName), \(effects))"
    case .stay(let effects): "stay(\(effects))"
    case .ignored: "ignored"
    }
}
