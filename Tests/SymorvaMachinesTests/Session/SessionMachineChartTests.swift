import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

/// The machine against `StateCharts/Session.scxml` (every sample pair, with `ChartChecker`),
/// its case-name lists, its effect keys and its redaction.
@Suite("Session machine: chart and case names")
struct SessionMachineChartTests {
    static let sampleStates = SessionSamples.sampleStates
    static let sampleEvents = SessionSamples.sampleEvents

    @Test("Samples cover every state and event case, and the name lists are complete")
    func samplesCoverEveryCase() {
        #expect(Set(Self.sampleStates.map(\.caseName)) == Set(SessionMachine.stateCaseNames))
        #expect(Set(Self.sampleEvents.map(\.caseName)) == Set(SessionMachine.eventCaseNames))
        #expect(SessionMachine.stateCaseNames.count == Set(SessionMachine.stateCaseNames).count)
        #expect(SessionMachine.eventCaseNames.count == Set(SessionMachine.eventCaseNames).count)
    }

    @Test("Whether an event is ignored depends only on the state's and event's cases")
    func ignoringIsCaseLevel() {
        var handled: [String: Bool] = [:]
        for state in Self.sampleStates {
            for event in Self.sampleEvents {
                let key = "\(state.caseName) + \(event.caseName)"
                let isIgnored = SessionFixture.machine.transition(from: state, on: event).isIgnored
                if let previous = handled[key] {
                    #expect(previous == isIgnored, "\(key) is ignored for some data only")
                }
                handled[key] = isIgnored
            }
        }
    }

    @Test("Every (state, event) pair agrees with StateCharts/Session.scxml")
    func chartMatchesCode() throws {
        try ChartChecker(machine: SessionFixture.machine)
            .assertConforms(states: Self.sampleStates, events: Self.sampleEvents, initial: .signedOut)
    }

    @Test("The checker notices a broken chart: refreshing --refreshResponse--> persisting redirected")
    func checkerIsSharp() throws {
        let checker = try ChartChecker(machine: SessionFixture.machine)
        var chart = checker.chart
        let index = try #require(
            chart.transitions.firstIndex { $0.source == "refreshing" && $0.target == "persisting" })
        chart.transitions[index].target = "signedIn"
        let found = ChartChecker(machine: SessionFixture.machine, chart: chart)
            .mismatches(states: Self.sampleStates, events: Self.sampleEvents)
        #expect(!found.isEmpty)
    }

    @Test("Descriptions, reflection and case names never show a password, a user name or a token")
    func redaction() {
        let canary = "CANARY-7f3a"
        let events: [SessionEvent] = [
            .passwordSubmitted(username: "user-\(canary)", password: Secret("pw-\(canary)")),
            .loginTokenSubmitted(Secret("lt-\(canary)")),
            .registrationRequested(username: "user-\(canary)", password: Secret("pw-\(canary)")),
            .refreshResponse(
                .success(SessionTokens(accessToken: Secret("at-\(canary)"), refreshToken: Secret("rt-\(canary)")))),
        ]
        var session = SessionFixture.session()
        session.tokens = SessionTokens(accessToken: Secret("at-\(canary)"), refreshToken: Secret("rt-\(canary)"))
        let states: [SessionState] = [
            .signedIn(session), .refreshing(session, waiting: 1, attempt: .first),
            .authenticating(
                server: SessionFixture.server,
                attempt: LoginAttempt(credentials: .password(username: "user-\(canary)", password: Secret(canary)))),
        ]
        let effects: [SessionEffect] = [
            .sendLogin(
                SessionFixture.loginRequest(
                    credentials: .password(username: "user-\(canary)", password: Secret(canary)))),
            .sendRefresh(RefreshRequest(homeserverURL: SessionFixture.baseURL, refreshToken: Secret("rt-\(canary)"))),
            .persistSession(session), .activate(session),
        ]
        var texts: [String] = []
        for value in events as [Any] + states as [Any] + effects as [Any] {
            var dumped = ""
            dump(value, to: &dumped)
            texts += [String(describing: value), String(reflecting: value), "\(value)", dumped]
            texts.append(caseLabel(of: value))
        }
        texts += events.map(\.caseName) + states.map(\.caseName) + effects.map(\.caseName)
        texts.append("\(LogMessage("event \(events[0]) session \(session)"))")
        for text in texts { #expect(!text.contains(canary), "leaked: \(text)") }
        #expect(events[0].caseName == "passwordSubmitted")
        #expect("\(events[0])" == "Session.Event.passwordSubmitted")
        #expect(caseLabel(of: SessionMachine.Event.tokensPersisted) == "tokensPersisted")
    }

    @Test("Effects are keyed so that requests and timers can be replaced and cancelled")
    func effectDirectives() {
        #expect(SessionEffect.sendRefresh(SessionFixture.refreshRequest()).directive == .keyed(SessionKeys.refresh))
        #expect(
            SessionEffect.scheduleRefresh(at: SessionFixture.issuedAt).directive
                == .timer(SessionKeys.refreshTimer, .atWallTime(SessionFixture.issuedAt)))
        #expect(
            SessionEffect.scheduleRetry(after: .seconds(1)).directive
                == .timer(SessionKeys.retryTimer, .after(.seconds(1))))
        #expect(SessionEffect.cancel(SessionKeys.login).directive == .cancel(SessionKeys.login))
        // The host fires the timers with the machine's own events; nothing else is a timer.
        #expect(SessionMachine().event(firing: .scheduleRefresh(at: SessionFixture.issuedAt)) == .refreshTimerFired)
        #expect(SessionMachine().event(firing: .scheduleRetry(after: .seconds(1))) == .retryTimerFired)
        #expect(SessionMachine().event(firing: .cancel(SessionKeys.login)) == nil)
        #expect(SessionEffect.wipeLocalData(SessionFixture.account).directive == .perform)
        #expect(SessionEffect.cancel(SessionKeys.login).description == "Session.Effect.cancel(session.login)")
    }
}

/// Sample states and events for the chart check: every case, with the data variants that
/// lead to different targets (waiting or not, resuming or not, homeserver known or not).
enum SessionSamples {
    static let session = SessionFixture.session()
    static let plainSession = SessionFixture.session(refresh: false, lifetime: nil)
    static let password = Credentials.password(username: "alice", password: SessionFixture.password)
    static let waiting = Attempt(number: 1, isWaitingToRetry: true)

    static let sampleStates: [SessionMachine.State] = [
        .signedOut,
        .restoring(SessionFixture.account),
        .discovering(target: .serverName("localhost"), step: .wellKnown),
        .discovering(target: .serverName("localhost"), step: .versions(SessionFixture.baseURL)),
        .discovering(
            target: .homeserverURL(SessionFixture.baseURL, serverName: nil), step: .versions(SessionFixture.baseURL)),
        .awaitingCredentials(SessionFixture.server),
        .authenticating(server: SessionFixture.server, attempt: LoginAttempt(credentials: password)),
        .authenticating(server: SessionFixture.server, attempt: LoginAttempt(credentials: password, attempt: waiting)),
        .authenticating(server: SessionFixture.server, attempt: LoginAttempt(credentials: password, resuming: session)),
        .authenticating(
            server: SessionFixture.server,
            attempt: LoginAttempt(credentials: password, resuming: session, attempt: waiting)),
        .registering(
            server: SessionFixture.server,
            attempt: RegistrationAttempt(username: "alice", password: SessionFixture.password)),
        .registering(
            server: SessionFixture.server,
            attempt: RegistrationAttempt(
                username: "alice", password: SessionFixture.password, auth: .dummy(session: "uia-session-1"),
                stagesSubmitted: 1, attempt: waiting)),
        .registering(
            server: SessionFixture.server,
            attempt: RegistrationAttempt(
                username: "alice", password: SessionFixture.password, auth: .dummy(session: "uia-session-1"),
                stagesSubmitted: 3)),
        .persisting(session, origin: .login, waiting: 0),
        .persisting(session, origin: .registration, waiting: 0),
        .persisting(session, origin: .reauthentication, waiting: 1),
        .persisting(session, origin: .refresh, waiting: 2),
        .signedIn(session),
        .signedIn(plainSession),
        .authorizing(session, AuthorizationAttempt(request: SessionFixture.authorizedRequest())),
        .authorizing(session, AuthorizationAttempt(request: SessionFixture.authorizedRequest(), passwordSent: true)),
        .authorizing(plainSession, AuthorizationAttempt(request: SessionFixture.authorizedRequest())),
        .refreshing(session, waiting: 0, attempt: .first),
        .refreshing(session, waiting: 2, attempt: waiting),
        .softLoggedOut(session, lastError: nil),
        .softLoggedOut(session, lastError: .invalidCredentials),
        .signingOut(session),
        .wipingLocalData(SessionFixture.account),
        .failed(from: .discovery, error: .unreachable(.cannotConnect), server: nil),
        .failed(from: .login, error: .invalidCredentials, server: SessionFixture.server),
    ]

    static let sampleEvents: [SessionMachine.Event] = [
        .discoveryRequested(.serverName("localhost")),
        .discoveryRequested(.homeserverURL(SessionFixture.baseURL, serverName: "localhost")),
        .wellKnownResponse(.success(SessionFixture.baseURL)),
        .wellKnownResponse(.success(nil)),
        .wellKnownResponse(.failure(.discoveryFailed(reason: "invalid JSON"))),
        .versionsResponse(.success(SessionFixture.versions)),
        .versionsResponse(.success(SessionFixture.oldVersions)),
        .versionsResponse(.failure(.unreachable(.cannotConnect))),
        .passwordSubmitted(username: "alice", password: SessionFixture.password),
        .loginTokenSubmitted(SessionFixture.loginToken),
        .loginResponse(.success(SessionFixture.grant(2))),
        .loginResponse(.success(SessionFixture.grant(2, user: SessionFixture.bob))),
        .loginResponse(.failure(.invalidCredentials)),
        .loginResponse(.failure(.rateLimited(retryAfter: .seconds(2)))),
        .registrationRequested(username: "alice", password: SessionFixture.password),
        .registrationResponse(.success(.registered(SessionFixture.grant(2)))),
        .registrationResponse(.success(.authenticationRequired(SessionFixture.dummyChallenge))),
        .registrationResponse(.success(.authenticationRequired(SessionFixture.captchaOnlyChallenge))),
        .registrationResponse(.failure(.userInUse)),
        .registrationResponse(.failure(.rateLimited(retryAfter: nil))),
        .cancelRequested,
        .restoreRequested(SessionFixture.account),
        .restored(nil),
        .restored(StoredSession(session: session)),
        .restored(StoredSession(session: session, isSoftLoggedOut: true)),
        .tokensPersisted,
        .storeFailed(.store(.full)),
        .accessTokenRejected(softLogout: true),
        .accessTokenRejected(softLogout: false),
        .refreshNeeded,
        .refreshResponse(.success(SessionFixture.tokens(2))),
        .refreshResponse(.failure(.unknownToken(softLogout: true))),
        .refreshResponse(.failure(.unknownToken(softLogout: false))),
        .refreshResponse(.failure(.unreachable(.timedOut))),
        .refreshResponse(.failure(.rateLimited(retryAfter: .seconds(5)))),
        .refreshResponse(.failure(.invalidResponse(reason: "no access_token"))),
        .signOutRequested,
        .logoutResponse(nil),
        .logoutResponse(.unknownToken(softLogout: false)),
        .logoutResponse(.unreachable(.timedOut)),
        .localDataWiped,
        .refreshTimerFired,
        .retryTimerFired,
        .authorizationRequested(SessionFixture.authorizedRequest()),
        .authorizationResponse(.success(.completed(body: Array("{}".utf8)))),
        .authorizationResponse(.success(.authenticationRequired(SessionFixture.passwordChallenge))),
        .authorizationResponse(.success(.authenticationRequired(SessionFixture.captchaOnlyChallenge))),
        .authorizationResponse(.failure(.serverError(status: 400, errcode: "M_INVALID_SIGNATURE"))),
    ]
}
