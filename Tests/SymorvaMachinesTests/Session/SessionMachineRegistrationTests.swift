import SymorvaMachines
import Testing

@Suite("Session machine: registration with user-interactive authentication")
struct SessionMachineRegistrationTests {
    let first = SessionState.registering(
        server: SessionFixture.server,
        attempt: RegistrationAttempt(username: "alice", password: SessionFixture.password))
    let dummyStage = SessionState.registering(
        server: SessionFixture.server,
        attempt: RegistrationAttempt(
            username: "alice", password: SessionFixture.password, auth: .dummy(session: "uia-session-1"),
            stagesSubmitted: 1))

    @Test("Registration starts with a /register call without auth to learn the flows")
    func registrationStarts() {
        expectMove(
            from: .awaitingCredentials(SessionFixture.server),
            on: .registrationRequested(username: "alice", password: SessionFixture.password), to: first,
            effects: [.sendRegister(SessionFixture.registerRequest())])
    }

    @Test("A 401 offering m.login.dummy completes that stage with the UIA session")
    func dummyStageSubmitted() {
        expectMove(
            from: first, on: .registrationResponse(.success(.authenticationRequired(SessionFixture.dummyChallenge))),
            to: dummyStage,
            effects: [.sendRegister(SessionFixture.registerRequest(auth: .dummy(session: "uia-session-1")))])
    }

    @Test("Registration with the dummy stage ends signed in after the tokens are saved")
    func registrationPath() {
        let session = SessionFixture.session()
        let (state, effects) = run(
            from: .awaitingCredentials(SessionFixture.server),
            [
                .registrationRequested(username: "alice", password: SessionFixture.password),
                .registrationResponse(.success(.authenticationRequired(SessionFixture.dummyChallenge))),
                .registrationResponse(.success(.registered(SessionFixture.grant()))),
                .tokensPersisted,
            ])
        #expect(state == .signedIn(session))
        #expect(
            effects == [
                .sendRegister(SessionFixture.registerRequest()),
                .sendRegister(SessionFixture.registerRequest(auth: .dummy(session: "uia-session-1"))),
                .persistSession(session), .activate(session), .scheduleRefresh(at: SessionFixture.refreshDeadline),
            ])
    }

    @Test("A registered response waits for the tokens to be saved")
    func registeredPersists() {
        let session = SessionFixture.session()
        expectMove(
            from: dummyStage, on: .registrationResponse(.success(.registered(SessionFixture.grant()))),
            to: .persisting(session, origin: .registration, waiting: 0), effects: [.persistSession(session)])
    }

    @Test("A taken user name fails with userInUse")
    func usernameTaken() {
        expectMove(
            from: first, on: .registrationResponse(.failure(.userInUse)),
            to: .failed(from: .registration, error: .userInUse, server: SessionFixture.server))
    }

    @Test("An invalid user name fails with invalidUsername")
    func invalidUsername() {
        expectMove(
            from: first, on: .registrationResponse(.failure(.invalidUsername)),
            to: .failed(from: .registration, error: .invalidUsername, server: SessionFixture.server))
    }

    @Test("Disabled registration fails with registrationDisabled")
    func registrationDisabled() {
        expectMove(
            from: first, on: .registrationResponse(.failure(.registrationDisabled)),
            to: .failed(from: .registration, error: .registrationDisabled, server: SessionFixture.server))
    }

    @Test("Flows with only unsupported stages fail with the shortest flow named")
    func unsupportedFlow() {
        expectMove(
            from: first,
            on: .registrationResponse(.success(.authenticationRequired(SessionFixture.captchaOnlyChallenge))),
            to: .failed(
                from: .registration, error: .unsupportedRegistrationFlow(stages: ["m.login.recaptcha"]),
                server: SessionFixture.server))
    }

    @Test("A server that keeps asking for stages is not followed forever")
    func stageLoopBounded() {
        let looping = SessionState.registering(
            server: SessionFixture.server,
            attempt: RegistrationAttempt(
                username: "alice", password: SessionFixture.password, auth: .dummy(session: "uia-session-1"),
                stagesSubmitted: 3))
        expectMove(
            from: looping, on: .registrationResponse(.success(.authenticationRequired(SessionFixture.dummyChallenge))),
            to: .failed(
                from: .registration, error: .unsupportedRegistrationFlow(stages: ["m.login.dummy"]),
                server: SessionFixture.server))
    }

    @Test("A rate-limited stage is resent with the same auth after the wait")
    func rateLimitedStage() {
        let waiting = SessionState.registering(
            server: SessionFixture.server,
            attempt: RegistrationAttempt(
                username: "alice", password: SessionFixture.password, auth: .dummy(session: "uia-session-1"),
                stagesSubmitted: 1, attempt: Attempt(number: 1, isWaitingToRetry: true)))
        expectMove(
            from: dummyStage, on: .registrationResponse(.failure(.rateLimited(retryAfter: .seconds(3)))), to: waiting,
            effects: [.scheduleRetry(after: .seconds(3))])
        expectMove(
            from: waiting, on: .retryTimerFired,
            to: .registering(
                server: SessionFixture.server,
                attempt: RegistrationAttempt(
                    username: "alice", password: SessionFixture.password, auth: .dummy(session: "uia-session-1"),
                    stagesSubmitted: 1, attempt: Attempt(number: 2))),
            effects: [.sendRegister(SessionFixture.registerRequest(auth: .dummy(session: "uia-session-1")))])
    }

    @Test("Cancelling registration cancels the request and returns to the form")
    func cancelRegistration() {
        expectMove(
            from: first, on: .cancelRequested, to: .awaitingCredentials(SessionFixture.server),
            effects: [.cancel(SessionKeys.register)])
    }

    @Test("Next stage prefers the shortest completable flow")
    func nextStageChoice() {
        let challenge = AuthenticationChallenge(
            session: "s", flows: [AuthenticationFlow(stages: ["m.login.dummy"])], completed: [])
        #expect(SessionMachine.nextStage(for: challenge) == .dummy(session: "s"))
        let done = AuthenticationChallenge(
            session: "s", flows: [AuthenticationFlow(stages: ["m.login.dummy"])], completed: ["m.login.dummy"])
        #expect(SessionMachine.nextStage(for: done) == nil)
    }
}
