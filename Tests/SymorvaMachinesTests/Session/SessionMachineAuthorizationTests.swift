import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

/// User-interactive authentication with the password stage, for the signed-in account's
/// sensitive requests (a cross-signing reset, removing a device).
@Suite("Session machine: requests that may need the password")
struct SessionMachineAuthorizationTests {
    let session = SessionFixture.session()
    let request = SessionFixture.authorizedRequest()

    func call(passwordStage: AuthorizedCall.PasswordStage? = nil) -> AuthorizedCall {
        AuthorizedCall(
            request: request, homeserverURL: SessionFixture.baseURL, accessToken: Secret("access-1"),
            userID: SessionFixture.alice, passwordStage: passwordStage)
    }

    var attempt: AuthorizationAttempt { AuthorizationAttempt(request: request) }
    var passwordSentAttempt: AuthorizationAttempt { AuthorizationAttempt(request: request, passwordSent: true) }

    @Test("A request the server accepts without the password completes at once")
    func noPasswordNeeded() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signedIn(session))
        try store.send(
            .authorizationRequested(request), expecting: .authorizing(session, attempt),
            effects: [.sendAuthorized(call())])
        try store.send(
            .authorizationResponse(.success(.completed(body: Array("{}".utf8)))), expecting: .signedIn(session),
            effects: [.finishAuthorization(id: "reset-1", .success(Array("{}".utf8)))])
    }

    @Test("A 401 offering the password stage gets the password with the server's UIA session, once")
    func passwordStage() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signedIn(session))
        try store.send(
            .authorizationRequested(request), expecting: .authorizing(session, attempt),
            effects: [.sendAuthorized(call())])
        try store.send(
            .authorizationResponse(.success(.authenticationRequired(SessionFixture.passwordChallenge))),
            expecting: .authorizing(session, passwordSentAttempt),
            effects: [.sendAuthorized(call(passwordStage: .init(session: "uia-session-3")))])
        try store.send(
            .authorizationResponse(.success(.completed(body: []))), expecting: .signedIn(session),
            effects: [.finishAuthorization(id: "reset-1", .success([]))])
    }

    @Test("A second challenge after the password means a wrong password: invalidCredentials, no third send")
    func wrongPassword() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .authorizing(session, passwordSentAttempt))
        try store.send(
            .authorizationResponse(.success(.authenticationRequired(SessionFixture.passwordChallenge))),
            expecting: .signedIn(session), effects: [.finishAuthorization(id: "reset-1", .failure(.invalidCredentials))]
        )
    }

    @Test("A flow needing more than the password (or another stage after it) is refused with its stages")
    func unsupportedFlow() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .authorizing(session, attempt))
        try store.send(
            .authorizationResponse(.success(.authenticationRequired(SessionFixture.captchaOnlyChallenge))),
            expecting: .signedIn(session),
            effects: [
                .finishAuthorization(
                    id: "reset-1", .failure(.unsupportedAuthenticationFlow(stages: ["m.login.recaptcha"])))
            ])
        let twoStages = AuthenticationChallenge(
            session: "s", flows: [AuthenticationFlow(stages: ["m.login.password", "m.login.email.identity"])])
        let again = MachineTestStore(SessionFixture.machine, initial: .authorizing(session, attempt))
        try again.send(
            .authorizationResponse(.success(.authenticationRequired(twoStages))), expecting: .signedIn(session),
            effects: [
                .finishAuthorization(
                    id: "reset-1",
                    .failure(.unsupportedAuthenticationFlow(stages: ["m.login.password", "m.login.email.identity"])))
            ])
    }

    @Test("A password stage left after completed stages counts (the server's `completed`)")
    func completedStages() throws {
        let challenge = AuthenticationChallenge(
            session: "s", flows: [AuthenticationFlow(stages: ["m.login.dummy", "m.login.password"])],
            completed: ["m.login.dummy"])
        let store = MachineTestStore(SessionFixture.machine, initial: .authorizing(session, attempt))
        try store.send(
            .authorizationResponse(.success(.authenticationRequired(challenge))),
            expecting: .authorizing(session, passwordSentAttempt),
            effects: [.sendAuthorized(call(passwordStage: .init(session: "s")))])
    }

    @Test("A failed exchange ends the request with its error and the session stays signed in")
    func failure() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .authorizing(session, attempt))
        try store.send(
            .authorizationResponse(.failure(.unreachable(.timedOut))), expecting: .signedIn(session),
            effects: [.finishAuthorization(id: "reset-1", .failure(.unreachable(.timedOut)))])
    }

    @Test("One at a time: a second request is answered authorizationInProgress and the first goes on")
    func oneAtATime() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .authorizing(session, attempt))
        try store.send(
            .authorizationRequested(SessionFixture.authorizedRequest(id: "reset-2")),
            stayingWith: [.finishAuthorization(id: "reset-2", .failure(.authorizationInProgress))])
    }

    @Test("Not signed in: the request is answered notSignedIn at once, in every state but signedIn")
    func notSignedIn() throws {
        for state in SessionSamples.sampleStates {
            switch state {
            case .signedIn, .authorizing: continue
            default: break
            }
            let store = MachineTestStore(SessionFixture.machine, initial: state)
            try store.send(
                .authorizationRequested(request),
                stayingWith: [.finishAuthorization(id: "reset-1", .failure(.notSignedIn))])
        }
    }

    @Test("Cancelling ends the request; the session stays signed in")
    func cancel() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .authorizing(session, attempt))
        try store.send(
            .cancelRequested, expecting: .signedIn(session),
            effects: [.cancel(SessionKeys.authorization), .finishAuthorization(id: "reset-1", .failure(.cancelled))])
    }

    @Test("The session's own events come first: the request ends cancelled, then the refresh or sign-out runs")
    func sessionEventsInterrupt() throws {
        let ending: [SessionEffect] = [
            .cancel(SessionKeys.authorization), .finishAuthorization(id: "reset-1", .failure(.cancelled)),
        ]
        var store = MachineTestStore(SessionFixture.machine, initial: .authorizing(session, attempt))
        try store.send(
            .accessTokenRejected(softLogout: true), expecting: .refreshing(session, waiting: 1, attempt: .first),
            effects: ending + [.cancel(SessionKeys.refreshTimer), .sendRefresh(SessionFixture.refreshRequest())])
        store = MachineTestStore(SessionFixture.machine, initial: .authorizing(session, attempt))
        try store.send(
            .signOutRequested, expecting: .signingOut(session),
            effects: ending + [.cancel(SessionKeys.refreshTimer), .sendLogout(SessionFixture.logoutRequest())])
        store = MachineTestStore(SessionFixture.machine, initial: .authorizing(session, attempt))
        try store.send(
            .accessTokenRejected(softLogout: false), expecting: .wipingLocalData(SessionFixture.account),
            effects: ending + [.cancel(SessionKeys.refreshTimer), .wipeLocalData(SessionFixture.account)])
    }

    @Test("A late answer outside authorizing is ignored")
    func lateAnswer() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signedIn(session))
        try store.assertIgnored(.authorizationResponse(.success(.completed(body: []))))
    }

    @Test("The password and the request body never show in descriptions")
    func redaction() {
        let canary = "CANARY-9b1c"
        let secret = AuthorizedRequest(
            id: "r", method: "POST", path: "/p", body: Array(canary.utf8), password: Secret("pw-\(canary)"))
        let values: [Any] = [
            SessionEvent.authorizationRequested(secret),
            SessionEffect.sendAuthorized(
                AuthorizedCall(
                    request: secret, homeserverURL: SessionFixture.baseURL, accessToken: Secret("at-\(canary)"),
                    userID: SessionFixture.alice, passwordStage: nil)),
            SessionState.authorizing(session, AuthorizationAttempt(request: secret)),
        ]
        for value in values {
            var dumped = ""
            dump(value, to: &dumped)
            for text in ["\(value)", String(reflecting: value), dumped] {
                #expect(!text.contains(canary), "leaked: \(text)")
            }
        }
        #expect(SessionEffect.sendAuthorized(call()).directive == .keyed(SessionKeys.authorization))
        #expect(SessionEffect.finishAuthorization(id: "r", .success([])).directive == .perform)
    }
}
