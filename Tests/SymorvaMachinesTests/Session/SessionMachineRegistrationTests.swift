import SymorvaMachines
import SymorvaTesting
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
    func registrationStarts() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .awaitingCredentials(SessionFixture.server))
        try store.send(
            .registrationRequested(username: "alice", password: SessionFixture.password), expecting: first,
            effects: [.sendRegister(SessionFixture.registerRequest())])
    }

    @Test("A 401 offering m.login.dummy completes that stage with the UIA session")
    func dummyStageSubmitted() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: first)
        try store.send(
            .registrationResponse(.success(.authenticationRequired(SessionFixture.dummyChallenge))),
            expecting: dummyStage,
            effects: [.sendRegister(SessionFixture.registerRequest(auth: .dummy(session: "uia-session-1")))])
    }

    @Test("Registration with the dummy stage ends signed in after the tokens are saved")
    func registrationPath() throws {
        let session = SessionFixture.session()
        let store = MachineTestStore(SessionFixture.machine, initial: .awaitingCredentials(SessionFixture.server))
        try store.send(
            .registrationRequested(username: "alice", password: SessionFixture.password), expecting: first,
            effects: [.sendRegister(SessionFixture.registerRequest())])
        try store.send(
            .registrationResponse(.success(.authenticationRequired(SessionFixture.dummyChallenge))),
            expecting: dummyStage,
            effects: [.sendRegister(SessionFixture.registerRequest(auth: .dummy(session: "uia-session-1")))])
        try store.send(
            .registrationResponse(.success(.registered(SessionFixture.grant()))),
            expecting: .persisting(session, origin: .registration, waiting: 0), effects: [.persistSession(session)])
        try store.send(
            .tokensPersisted, expecting: .signedIn(session),
            effects: [.activate(session), .scheduleRefresh(at: SessionFixture.refreshDeadline)])
    }

    @Test("A registered response waits for the tokens to be saved")
    func registeredPersists() throws {
        let session = SessionFixture.session()
        let store = MachineTestStore(SessionFixture.machine, initial: dummyStage)
        try store.send(
            .registrationResponse(.success(.registered(SessionFixture.grant()))),
            expecting: .persisting(session, origin: .registration, waiting: 0), effects: [.persistSession(session)])
    }

    @Test("A taken user name fails with userInUse")
    func usernameTaken() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: first)
        try store.send(
            .registrationResponse(.failure(.userInUse)),
            expecting: .failed(from: .registration, error: .userInUse, server: SessionFixture.server))
    }

    @Test("An invalid user name fails with invalidUsername")
    func invalidUsername() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: first)
        try store.send(
            .registrationResponse(.failure(.invalidUsername)),
            expecting: .failed(from: .registration, error: .invalidUsername, server: SessionFixture.server))
    }

    @Test("Disabled registration fails with registrationDisabled")
    func registrationDisabled() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: first)
        try store.send(
            .registrationResponse(.failure(.registrationDisabled)),
            expecting: .failed(from: .registration, error: .registrationDisabled, server: SessionFixture.server))
    }

    @Test("Flows with only unsupported stages fail with the shortest flow named")
    func unsupportedFlow() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: first)
        try store.send(
            .registrationResponse(.success(.authenticationRequired(SessionFixture.captchaOnlyChallenge))),
            expecting: .failed(
                from: .registration, error: .unsupportedRegistrationFlow(stages: ["m.login.recaptcha"]),
                server: SessionFixture.server))
    }

    @Test("A server that keeps asking for stages is not followed forever")
    func stageLoopBounded() throws {
        let looping = SessionState.registering(
            server: SessionFixture.server,
            attempt: RegistrationAttempt(
                username: "alice", password: SessionFixture.password, auth: .dummy(session: "uia-session-1"),
                stagesSubmitted: 3))
        let store = MachineTestStore(SessionFixture.machine, initial: looping)
        try store.send(
            .registrationResponse(.success(.authenticationRequired(SessionFixture.dummyChallenge))),
            expecting: .failed(
                from: .registration, error: .unsupportedRegistrationFlow(stages: ["m.login.dummy"]),
                server: SessionFixture.server))
    }

    @Test("A rate-limited stage is resent with the same auth after the wait")
    func rateLimitedStage() throws {
        let waiting = SessionState.registering(
            server: SessionFixture.server,
            attempt: RegistrationAttempt(
                username: "alice", password: SessionFixture.password, auth: .dummy(session: "uia-session-1"),
                stagesSubmitted: 1, attempt: Attempt(number: 1, isWaitingToRetry: true)))
        let store = MachineTestStore(SessionFixture.machine, initial: dummyStage)
        try store.send(
            .registrationResponse(.failure(.rateLimited(retryAfter: .seconds(3)))), expecting: waiting,
            effects: [.scheduleRetry(after: .seconds(3))])
        try store.send(
            .retryTimerFired,
            expecting: .registering(
                server: SessionFixture.server,
                attempt: RegistrationAttempt(
                    username: "alice", password: SessionFixture.password, auth: .dummy(session: "uia-session-1"),
                    stagesSubmitted: 1, attempt: Attempt(number: 2))),
            effects: [.sendRegister(SessionFixture.registerRequest(auth: .dummy(session: "uia-session-1")))])
    }

    @Test("Cancelling registration cancels the request and returns to the form")
    func cancelRegistration() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: first)
        try store.send(
            .cancelRequested, expecting: .awaitingCredentials(SessionFixture.server),
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
