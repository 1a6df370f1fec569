import SymorvaRuntime

/// One account's session on this device: discovery, sign-in and registration, token refresh,
/// soft logout, sign-out and restore on launch, as a pure function.
///
/// Three rules shape it (see `docs/session.md`):
/// - **Persist before use.** New tokens from `/login`, `/register` or `/refresh` go to
///   ``State/persisting(_:origin:waiting:)`` and are handed out (``Effect/activate(_:)``) only
///   after ``Event/tokensPersisted``.
/// - **One refresh in flight.** Every `401` and every "token expired" while a refresh runs
///   joins it (the `waiting` count grows); ``Effect/sendRefresh(_:)`` is keyed as well.
/// - **Soft logout keeps data, hard logout wipes it.** `M_UNKNOWN_TOKEN` with
///   `soft_logout: true` keeps the account's local data for re-authentication on the same
///   device; without it the account's local data is wiped.
///
/// The chart is `StateCharts/Session.scxml`. Whether an event is ignored depends only on the
/// state's and the event's case, never on their data, so the chart can list every pair.
package struct SessionMachine: ChartedMachine {
    package static let name = "Session"

    /// How long before expiry the access token is refreshed.
    package var refreshMargin: Duration
    /// How many times a rate-limited login or registration is sent before giving up.
    package var maxAttempts: Int
    /// The first delay of the refresh back-off; it doubles per attempt.
    package var initialRetryDelay: Duration
    /// The longest back-off between two refresh attempts.
    package var maxRetryDelay: Duration
    /// The name new devices get, as other members see it.
    package var deviceDisplayName: String?

    /// A session machine with its policy.
    package init(
        refreshMargin: Duration = .seconds(60), maxAttempts: Int = 3, initialRetryDelay: Duration = .seconds(1),
        maxRetryDelay: Duration = .seconds(300), deviceDisplayName: String? = nil
    ) {
        self.refreshMargin = refreshMargin
        self.maxAttempts = maxAttempts
        self.initialRetryDelay = initialRetryDelay
        self.maxRetryDelay = maxRetryDelay
        self.deviceDisplayName = deviceDisplayName
    }

    /// Where the session is.
    package enum State: Sendable, Equatable {
        /// No session: the starting point, and where sign-out ends.
        case signedOut
        /// Loading the stored session of an account, without the network.
        case restoring(UserID)
        /// Finding and checking the homeserver: `.well-known` first for a server name, then `/versions`.
        case discovering(target: ServerAddress, step: DiscoveryStep)
        /// A checked homeserver, waiting for the user to sign in or register.
        case awaitingCredentials(HomeserverInfo)
        /// A `/login` call is running or waiting out a rate limit.
        case authenticating(server: HomeserverInfo, attempt: LoginAttempt)
        /// A `/register` call is running, stage by stage (user-interactive authentication).
        case registering(server: HomeserverInfo, attempt: RegistrationAttempt)
        /// New tokens are being saved; nobody may use them yet. `waiting` counts requests that
        /// need a token meanwhile.
        case persisting(Session, origin: TokenOrigin, waiting: Int)
        /// Signed in with saved tokens.
        case signedIn(Session)
        /// Signed in, with one request that may need the password (user-interactive
        /// authentication) under way.
        case authorizing(Session, AuthorizationAttempt)
        /// The one `/refresh` in flight (or waiting out a back-off); `waiting` counts requests
        /// that got a `401` or found the token expired and now wait for the new token.
        case refreshing(Session, waiting: Int, attempt: Attempt)
        /// The server ended the tokens but kept the device: local data stays, and signing in
        /// again with the same account resumes on the same device.
        case softLoggedOut(Session, lastError: SessionError?)
        /// Telling the server to end this device's session (`/logout`).
        case signingOut(Session)
        /// Deleting the account's local data (store, keys, tokens).
        case wipingLocalData(UserID)
        /// Something went wrong; `server` is kept so that the user can simply try again.
        case failed(from: SessionStep, error: SessionError, server: HomeserverInfo?)
    }

    /// What happened.
    package enum Event: Sendable, Equatable {
        /// The user or the manifest asked to find a homeserver.
        case discoveryRequested(ServerAddress)
        /// `.well-known/matrix/client` answered: the base URL it names, or `nil` when the
        /// server publishes none (404), in which case `https://<server name>` is tried.
        case wellKnownResponse(Result<HomeserverURL?, SessionError>)
        /// `/versions` answered.
        case versionsResponse(Result<ServerVersions, SessionError>)
        /// The user submitted a user name and password.
        case passwordSubmitted(username: String, password: Secret<String>)
        /// The user (or single sign-on) submitted a login token.
        case loginTokenSubmitted(Secret<String>)
        /// `/login` answered.
        case loginResponse(Result<SessionGrant, SessionError>)
        /// The user asked to create an account.
        case registrationRequested(username: String, password: Secret<String>)
        /// `/register` answered: registered, another stage required, or an error.
        case registrationResponse(Result<RegistrationOutcome, SessionError>)
        /// The user gave up on the discovery, sign-in or registration under way, or dismissed an error.
        case cancelRequested
        /// The app flow asked to restore an account's stored session on launch.
        case restoreRequested(UserID)
        /// The store answered the restore: the stored session, or `nil` when there is none.
        case restored(StoredSession?)
        /// The store saved the new tokens; they may be used now.
        case tokensPersisted
        /// The store failed to load, save or wipe.
        case storeFailed(SessionError)
        /// A request was refused with `M_UNKNOWN_TOKEN` (its `soft_logout` flag as given).
        case accessTokenRejected(softLogout: Bool)
        /// A request found the access token expired before sending it.
        case refreshNeeded
        /// `/refresh` answered with new tokens (a missing refresh token means: keep the old one).
        case refreshResponse(Result<SessionTokens, SessionError>)
        /// The user asked to sign out.
        case signOutRequested
        /// `/logout` answered: `nil` when the server confirmed, the error otherwise.
        case logoutResponse(SessionError?)
        /// The account's local data is gone.
        case localDataWiped
        /// The timer set by ``Effect/scheduleRefresh(at:)`` fired: refresh before expiry.
        case refreshTimerFired
        /// The timer set by ``Effect/scheduleRetry(after:)`` fired: send the request again.
        case retryTimerFired
        /// A feature asked for a request that may need the password (a cross-signing reset,
        /// removing a device); answered by ``Effect/finishAuthorization(id:_:)`` in every state.
        case authorizationRequested(AuthorizedRequest)
        /// The authorized request's send answered.
        case authorizationResponse(Result<AuthorizationOutcome, SessionError>)
    }

    /// What the interpreter must do.
    package enum Effect: Sendable, Equatable {
        /// Read the stored session of an account; answer ``Event/restored(_:)`` or ``Event/storeFailed(_:)``.
        case loadStoredSession(UserID)
        /// `GET https://<serverName>/.well-known/matrix/client`; answer ``Event/wellKnownResponse(_:)``.
        case fetchWellKnown(serverName: String)
        /// `GET <base>/_matrix/client/versions`; answer ``Event/versionsResponse(_:)``.
        case fetchVersions(HomeserverURL)
        /// `POST /login`; answer ``Event/loginResponse(_:)``.
        case sendLogin(LoginRequest)
        /// `POST /register`; answer ``Event/registrationResponse(_:)``.
        case sendRegister(RegisterRequest)
        /// Save the session (tokens encrypted); answer ``Event/tokensPersisted`` or ``Event/storeFailed(_:)``.
        case persistSession(Session)
        /// Hand the saved session's tokens to authenticated requests and release the requests
        /// waiting for them. Only ever asked for saved tokens.
        case activate(Session)
        /// Fire ``Event/refreshTimerFired`` at this instant (at once if it has passed).
        case scheduleRefresh(at: Timestamp)
        /// Fire ``Event/retryTimerFired`` after this delay.
        case scheduleRetry(after: Duration)
        /// `POST /refresh`; answer ``Event/refreshResponse(_:)``.
        case sendRefresh(RefreshRequest)
        /// `POST /logout`; answer ``Event/logoutResponse(_:)``.
        case sendLogout(LogoutRequest)
        /// Stop the account's work and delete its local data; answer ``Event/localDataWiped``
        /// or ``Event/storeFailed(_:)``.
        case wipeLocalData(UserID)
        /// Stop the account's work (sync, send queue) but keep its local data, and mark the
        /// stored session soft logged out so that a relaunch restores that state.
        case keepLocalData(UserID)
        /// Cancel the effect running under this key; its result will never arrive.
        case cancel(EffectKey)
        /// Send an authorized request (with the password stage when the call carries one);
        /// answer ``Event/authorizationResponse(_:)``.
        case sendAuthorized(AuthorizedCall)
        /// Hand the authorized request's result (the answer's body, or why not) to its caller.
        case finishAuthorization(id: String, Result<[UInt8], SessionError>)
    }

    /// The keys of the machine's cancellable effects.
    package enum Keys {
        /// `.well-known` and `/versions`: a new discovery replaces the old one.
        package static let discovery: EffectKey = "session.discovery"
        /// `/login`.
        package static let login: EffectKey = "session.login"
        /// `/register`.
        package static let register: EffectKey = "session.register"
        /// `/refresh`: the key makes refresh single-flight at the host as well.
        package static let refresh: EffectKey = "session.refresh"
        /// The timer that refreshes before expiry.
        package static let refreshTimer: EffectKey = "session.refreshTimer"
        /// The timer that resends a rate-limited or failed request.
        package static let retryTimer: EffectKey = "session.retryTimer"
        /// `/logout`.
        package static let logout: EffectKey = "session.logout"
        /// Saving the session.
        package static let persist: EffectKey = "session.persist"
        /// The authorized request under way.
        package static let authorization: EffectKey = "session.authorization"
    }

    /// The events of the machine's two timers, which the host performs.
    package func event(firing timer: Effect) -> Event? {
        switch timer {
        case .scheduleRefresh: .refreshTimerFired
        case .scheduleRetry: .retryTimerFired
        case .loadStoredSession, .fetchWellKnown, .fetchVersions, .sendLogin, .sendRegister, .persistSession, .activate,
            .sendRefresh, .sendLogout, .wipeLocalData, .keepLocalData, .cancel, .sendAuthorized, .finishAuthorization:
            nil
        }
    }

    package func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        if case .authorizationRequested(let request) = event {
            switch state {
            case .signedIn(let session): return beginAuthorization(session, request: request)
            case .authorizing: break
            default: return refuseAuthorization(request)
            }
        }
        return dispatch(from: state, on: event)
    }

    /// The transition of `state`'s own handler for `event`.
    private func dispatch(from state: State, on event: Event) -> Transition<State, Effect> {
        switch state {
        case .signedOut: signedOut(on: event)
        case .restoring: restoring(on: event)
        case .discovering(let target, let step): discovering(target: target, step: step, on: event)
        case .awaitingCredentials(let server): awaitingCredentials(server: server, on: event)
        case .authenticating(let server, let attempt): authenticating(server: server, attempt: attempt, on: event)
        case .registering(let server, let attempt): registering(server: server, attempt: attempt, on: event)
        case .persisting(let session, let origin, let waiting):
            persisting(session, origin: origin, waiting: waiting, on: event)
        case .signedIn(let session): signedIn(session, on: event)
        case .authorizing(let session, let attempt): authorizing(session, attempt: attempt, on: event)
        case .refreshing(let session, let waiting, let attempt):
            refreshing(session, waiting: waiting, attempt: attempt, on: event)
        case .softLoggedOut(let session, _): softLoggedOut(session, on: event)
        case .signingOut(let session): signingOut(session, on: event)
        case .wipingLocalData: wipingLocalData(on: event)
        case .failed(_, _, let server): failed(server: server, on: event)
        }
    }

    // MARK: - Shared steps

    /// The delay after the `number`-th failed try of a transient failure: ``initialRetryDelay``
    /// doubling per try, capped at ``maxRetryDelay``. Used when the server names no `retry_after`.
    package func backoff(attempt number: Int) -> Duration {
        var delay = initialRetryDelay
        for _ in 1..<min(max(number, 1), 32) where delay < maxRetryDelay { delay = delay * 2 }
        return min(delay, maxRetryDelay)
    }

    /// Entering ``State/signedIn(_:)`` with saved tokens: hand them out, arm the refresh timer.
    func enterSignedIn(_ session: Session) -> Transition<State, Effect> {
        var effects: [Effect] = [.activate(session)]
        if session.tokens.refreshToken != nil, let expiry = session.tokens.expiry {
            effects.append(.scheduleRefresh(at: expiry.refreshDeadline(margin: refreshMargin)))
        }
        return .move(to: .signedIn(session), effects: effects)
    }

    /// Entering ``State/softLoggedOut(_:lastError:)``: stop the account's work, keep its data.
    func enterSoftLogout(_ session: Session, error: SessionError?, extra: [Effect] = []) -> Transition<State, Effect> {
        .move(
            to: .softLoggedOut(session, lastError: error),
            effects: extra + [.cancel(Keys.refreshTimer), .keepLocalData(session.userID)])
    }

    /// Entering ``State/wipingLocalData(_:)``: the session is gone for good.
    func enterWipe(_ account: UserID, extra: [Effect] = []) -> Transition<State, Effect> {
        .move(to: .wipingLocalData(account), effects: extra + [.wipeLocalData(account)])
    }

    /// Entering ``State/discovering(target:step:)`` for `target`.
    func startDiscovery(_ target: ServerAddress) -> Transition<State, Effect> {
        switch target {
        case .serverName(let name):
            .move(to: .discovering(target: target, step: .wellKnown), effects: [.fetchWellKnown(serverName: name)])
        case .homeserverURL(let url, _):
            .move(to: .discovering(target: target, step: .versions(url)), effects: [.fetchVersions(url)])
        }
    }
}

// Case names for traces and the chart, and descriptions that never show a payload: events
// carry passwords and tokens, states carry sessions, effects carry requests.

extension SessionMachine {
    /// Every ``State`` case name, in declaration order: the state ids of `StateCharts/Session.scxml`.
    package static var stateCaseNames: [String] {
        [
            "signedOut", "restoring", "discovering", "awaitingCredentials", "authenticating", "registering",
            "persisting", "signedIn", "authorizing", "refreshing", "softLoggedOut", "signingOut", "wipingLocalData",
            "failed",
        ]
    }

    /// Every ``Event`` case name, in declaration order: the event names of `StateCharts/Session.scxml`.
    package static var eventCaseNames: [String] {
        [
            "discoveryRequested", "wellKnownResponse", "versionsResponse", "passwordSubmitted",
            "loginTokenSubmitted", "loginResponse", "registrationRequested", "registrationResponse",
            "cancelRequested", "restoreRequested", "restored", "tokensPersisted", "storeFailed",
            "accessTokenRejected", "refreshNeeded", "refreshResponse", "signOutRequested", "logoutResponse",
            "localDataWiped", "refreshTimerFired", "retryTimerFired", "authorizationRequested",
            "authorizationResponse",
        ]
    }

    /// Every ``Effect`` case name, in declaration order.
    package static var effectCaseNames: [String] {
        [
            "loadStoredSession", "fetchWellKnown", "fetchVersions", "sendLogin", "sendRegister", "persistSession",
            "activate", "scheduleRefresh", "scheduleRetry", "sendRefresh", "sendLogout", "wipeLocalData",
            "keepLocalData", "cancel", "sendAuthorized", "finishAuthorization",
        ]
    }
}

extension SessionMachine.State: CaseNameListing, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    package var caseNameLiteral: StaticString? {
        switch self {
        case .signedOut: "signedOut"
        case .restoring: "restoring"
        case .discovering: "discovering"
        case .awaitingCredentials: "awaitingCredentials"
        case .authenticating: "authenticating"
        case .registering: "registering"
        case .persisting: "persisting"
        case .signedIn: "signedIn"
        case .authorizing: "authorizing"
        case .refreshing: "refreshing"
        case .softLoggedOut: "softLoggedOut"
        case .signingOut: "signingOut"
        case .wipingLocalData: "wipingLocalData"
        case .failed: "failed"
        }
    }

    package static var allCaseNames: [String] { SessionMachine.stateCaseNames }

    package var description: String { "Session.State.\(caseName)" }
    package var debugDescription: String { description }
    package var customMirror: Mirror { redactedMirror(self, caseName) }
}

extension SessionMachine.Event: CaseNameListing, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    package var caseNameLiteral: StaticString? {
        switch self {
        case .discoveryRequested: "discoveryRequested"
        case .wellKnownResponse: "wellKnownResponse"
        case .versionsResponse: "versionsResponse"
        case .passwordSubmitted: "passwordSubmitted"
        case .loginTokenSubmitted: "loginTokenSubmitted"
        case .loginResponse: "loginResponse"
        case .registrationRequested: "registrationRequested"
        case .registrationResponse: "registrationResponse"
        case .cancelRequested: "cancelRequested"
        case .restoreRequested: "restoreRequested"
        case .restored: "restored"
        case .tokensPersisted: "tokensPersisted"
        case .storeFailed: "storeFailed"
        case .accessTokenRejected: "accessTokenRejected"
        case .refreshNeeded: "refreshNeeded"
        case .refreshResponse: "refreshResponse"
        case .signOutRequested: "signOutRequested"
        case .logoutResponse: "logoutResponse"
        case .localDataWiped: "localDataWiped"
        case .refreshTimerFired: "refreshTimerFired"
        case .retryTimerFired: "retryTimerFired"
        case .authorizationRequested: "authorizationRequested"
        case .authorizationResponse: "authorizationResponse"
        }
    }

    package static var allCaseNames: [String] { SessionMachine.eventCaseNames }

    package var description: String { "Session.Event.\(caseName)" }
    package var debugDescription: String { description }
    package var customMirror: Mirror { redactedMirror(self, caseName) }
}

extension SessionMachine.Effect: MachineEffect, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    package var caseNameLiteral: StaticString? {
        switch self {
        case .loadStoredSession: "loadStoredSession"
        case .fetchWellKnown: "fetchWellKnown"
        case .fetchVersions: "fetchVersions"
        case .sendLogin: "sendLogin"
        case .sendRegister: "sendRegister"
        case .persistSession: "persistSession"
        case .activate: "activate"
        case .scheduleRefresh: "scheduleRefresh"
        case .scheduleRetry: "scheduleRetry"
        case .sendRefresh: "sendRefresh"
        case .sendLogout: "sendLogout"
        case .wipeLocalData: "wipeLocalData"
        case .keepLocalData: "keepLocalData"
        case .cancel: "cancel"
        case .sendAuthorized: "sendAuthorized"
        case .finishAuthorization: "finishAuthorization"
        }
    }

    /// Requests and timers are keyed so that a newer one replaces an older one and a state
    /// change can cancel them; timers are performed by the host (see
    /// ``SessionMachine/event(firing:)``); the rest are plain performs.
    package var directive: EffectDirective {
        typealias Keys = SessionMachine.Keys
        switch self {
        case .fetchWellKnown, .fetchVersions: return .keyed(Keys.discovery)
        case .sendLogin: return .keyed(Keys.login)
        case .sendRegister: return .keyed(Keys.register)
        case .persistSession: return .keyed(Keys.persist)
        case .scheduleRefresh(let instant): return .timer(Keys.refreshTimer, .atWallTime(instant))
        case .scheduleRetry(let delay): return .timer(Keys.retryTimer, .after(delay))
        case .sendRefresh: return .keyed(Keys.refresh)
        case .sendLogout: return .keyed(Keys.logout)
        case .sendAuthorized: return .keyed(Keys.authorization)
        case .cancel(let key): return .cancel(key)
        case .loadStoredSession, .activate, .wipeLocalData, .keepLocalData, .finishAuthorization: return .perform
        }
    }

    /// The case name, plus the key of a `cancel` (keys are program-chosen, safe to show).
    package var description: String {
        if case .cancel(let key) = self { return "Session.Effect.cancel(\(key))" }
        return "Session.Effect.\(caseName)"
    }

    package var debugDescription: String { description }
    package var customMirror: Mirror { redactedMirror(self, caseName) }
}

/// A mirror that shows the case name and hides the payload, so that `dump` and reflection-based
/// tools print `passwordSubmitted` and never the password or the user name next to it.
private func redactedMirror(_ subject: some Any, _ caseName: String) -> Mirror {
    Mirror(subject, children: [(label: caseName, value: "<redacted>")], displayStyle: .enum)
}
