import SymorvaMachines
import SymorvaRuntime
import Testing

@Suite("Session machine: registration with user-interactive authentication")
struct SessionMachineRegistrationTests {
    let first = State.registering(
        server: Fixture.server, attempt: RegistrationAttempt(username: "alice", password: Fixture.password))
    let dummyStage = State.registering(
        server: Fixture.server,
        attempt: RegistrationAttempt(
            username: "alice", password: Fixture.password, auth: .dummy(session: "uia-session-1"),
            stagesSubmitted: 1))

    @Test("Registration starts with a /register call without auth to learn the flows")
    func registrationStarts() {
        expectMove(
            from: .awaitingCredentials(Fixture.server),
            on: .registrationRequested(username: "alice", password: Fixture.password), to: first,
            effects: [.sendRegister(Fixture.registerRequest())])
    }

    @Test("A 401 offering m.login.dummy completes that stage with the UIA session")
    func dummyStageSubmitted() {
        expectMove(
            from: first, on: .registrationResponse(.success(.authenticationRequired(Fixture.dummyChallenge))),
            to: dummyStage, effects: [.sendRegister(Fixture.registerRequest(auth: .dummy(session: "uia-session-1")))])
    }

    @Test("Registration with the dummy stage ends signed in after the tokens are saved")
    func registrationPath() {
        let session = Fixture.session()
        let (state, effects) = run(
            from: .awaitingCredentials(Fixture.server),
            [
                .registrationRequested(username: "alice", password: Fixture.password),
                .registrationResponse(.success(.authenticationRequired(Fixture.dummyChallenge))),
                .registrationResponse(.success(.registered(Fixture.grant()))),
                .tokensPersisted,
            ])
        #expect(state == .signedIn(session))
        #expect(
            effects == [
                .sendRegister(Fixture.registerRequest()),
                .sendRegister(Fixture.registerRequest(auth: .dummy(session: "uia-session-1"))),
                .persistSession(session), .activate(session), .scheduleRefresh(at: Fixture.refreshDeadline),
            ])
    }

    @Test("A registered response waits for the tokens to be saved")
    func registeredPersists() {
        let session = Fixture.session()
        expectMove(
            from: dummyStage, on: .registrationResponse(.success(.registered(Fixture.grant()))),
            to: .persisting(session, origin: .registration, waiting: 0), effects: [.persistSession(session)])
    }

    @Test("A taken user name fails with userInUse")
    func usernameTaken() {
        expectMove(
            from: first, on: .registrationResponse(.failure(.userInUse)),
            to: .failed(from: .registration, error: .userInUse, server: Fixture.server))
    }

    @Test("An invalid user name fails with invalidUsername")
    func invalidUsername() {
        expectMove(
            from: first, on: .registrationResponse(.failure(.invalidUsername)),
            to: .failed(from: .registration, error: .invalidUsername, server: Fixture.server))
    }

    @Test("Disabled registration fails with registrationDisabled")
    func registrationDisabled() {
        expectMove(
            from: first, on: .registrationResponse(.failure(.registrationDisabled)),
            to: .failed(from: .registration, error: .registrationDisabled, server: Fixture.server))
    }

    @Test("Flows with only unsupported stages fail with the shortest flow named")
    func unsupportedFlow() {
        expectMove(
            from: first, on: .registrationResponse(.success(.authenticationRequired(Fixture.captchaOnlyChallenge))),
            to: .failed(
                from: .registration, error: .unsupportedRegistrationFlow(stages: ["m.login.recaptcha"]),
                server: Fixture.server))
    }

    @Test("A server that keeps asking for stages is not followed forever")
    func stageLoopBounded() {
        let looping = State.registering(
            server: Fixture.server,
            attempt: RegistrationAttempt(
                username: "alice", password: Fixture.password, auth: .dummy(session: "uia-session-1"),
                stagesSubmitted: 3))
        expectMove(
            from: looping, on: .registrationResponse(.success(.authenticationRequired(Fixture.dummyChallenge))),
            to: .failed(
                from: .registration, error: .unsupportedRegistrationFlow(stages: ["m.login.dummy"]),
                server: Fixture.server))
    }

    @Test("A rate-limited stage is resent with the same auth after the wait")
    func rateLimitedStage() {
        let waiting = State.registering(
            server: Fixture.server,
            attempt: RegistrationAttempt(
                username: "alice", password: Fixture.password, auth: .dummy(session: "uia-session-1"),
                stagesSubmitted: 1, attempt: Attempt(number: 1, isWaitingToRetry: true)))
        expectMove(
            from: dummyStage, on: .registrationResponse(.failure(.rateLimited(retryAfter: .seconds(3)))), to: waiting,
            effects: [.scheduleRetry(after: .seconds(3))])
        expectMove(
            from: waiting, on: .retryTimerFired,
            to: .registering(
                server: Fixture.server,
                attempt: RegistrationAttempt(
                    username: "alice", password: Fixture.password, auth: .dummy(session: "uia-session-1"),
                    stagesSubmitted: 1, attempt: Attempt(number: 2))),
            effects: [.sendRegister(Fixture.registerRequest(auth: .dummy(session: "uia-session-1")))])
    }

    @Test("Cancelling registration cancels the request and returns to the form")
    func cancelRegistration() {
        expectMove(
            from: first, on: .cancelRequested, to: .awaitingCredentials(Fixture.server),
            effects: [.cancel(Keys.register)])
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
