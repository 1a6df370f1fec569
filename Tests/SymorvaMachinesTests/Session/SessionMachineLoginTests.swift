import SymorvaMachines
import SymorvaTesting
import Testing

@Suite("Session machine: login and persist-before-use")
struct SessionMachineLoginTests {
    let awaiting = SessionState.awaitingCredentials(SessionFixture.server)
    let authenticating = SessionState.authenticating(
        server: SessionFixture.server, attempt: LoginAttempt(credentials: SessionFixture.passwordCredentials))

    @Test("Submitting a password sends /login with a refresh token request")
    func passwordSendsLogin() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: awaiting)
        try store.send(
            .passwordSubmitted(username: "alice", password: SessionFixture.password), expecting: authenticating,
            effects: [.sendLogin(SessionFixture.loginRequest())])
    }

    @Test("A login token is sent as m.login.token")
    func loginTokenSendsLogin() throws {
        let credentials = Credentials.loginToken(SessionFixture.loginToken)
        let store = MachineTestStore(SessionFixture.machine, initial: awaiting)
        try store.send(
            .loginTokenSubmitted(SessionFixture.loginToken),
            expecting: .authenticating(server: SessionFixture.server, attempt: LoginAttempt(credentials: credentials)),
            effects: [.sendLogin(SessionFixture.loginRequest(credentials: credentials))])
    }

    @Test("Login success saves the tokens before anything uses them")
    func loginSuccessPersistsFirst() throws {
        let session = SessionFixture.session()
        let store = MachineTestStore(SessionFixture.machine, initial: authenticating)
        try store.send(
            .loginResponse(.success(SessionFixture.grant())),
            expecting: .persisting(session, origin: .login, waiting: 0), effects: [.persistSession(session)])
    }

    @Test("Saved tokens sign in, are handed out and arm the refresh timer")
    func tokensPersistedSignsIn() throws {
        let session = SessionFixture.session()
        let store = MachineTestStore(SessionFixture.machine, initial: .persisting(session, origin: .login, waiting: 0))
        try store.send(
            .tokensPersisted, expecting: .signedIn(session),
            effects: [.activate(session), .scheduleRefresh(at: SessionFixture.refreshDeadline)])
    }

    @Test("Login, persist, signed in: the whole path")
    func loginPath() throws {
        let session = SessionFixture.session()
        let store = MachineTestStore(SessionFixture.machine, initial: awaiting)
        try store.send(
            .passwordSubmitted(username: "alice", password: SessionFixture.password), expecting: authenticating,
            effects: [.sendLogin(SessionFixture.loginRequest())])
        try store.send(
            .loginResponse(.success(SessionFixture.grant())),
            expecting: .persisting(session, origin: .login, waiting: 0),
            effects: [.persistSession(session)])
        try store.send(
            .tokensPersisted, expecting: .signedIn(session),
            effects: [.activate(session), .scheduleRefresh(at: SessionFixture.refreshDeadline)])
    }

    @Test("A wrong password fails with invalidCredentials and keeps the homeserver")
    func wrongPassword() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: authenticating)
        try store.send(
            .loginResponse(.failure(.invalidCredentials)),
            expecting: .failed(from: .login, error: .invalidCredentials, server: SessionFixture.server))
    }

    @Test("Retrying after a wrong password sends /login again")
    func retryAfterWrongPassword() throws {
        let failed = SessionState.failed(from: .login, error: .invalidCredentials, server: SessionFixture.server)
        let store = MachineTestStore(SessionFixture.machine, initial: failed)
        try store.send(
            .passwordSubmitted(username: "alice", password: SessionFixture.password), expecting: authenticating,
            effects: [.sendLogin(SessionFixture.loginRequest())])
    }

    @Test("Rate limited with retry_after: wait for the timer, then send again")
    func rateLimitedWaitsThenRetries() throws {
        let waiting = SessionState.authenticating(
            server: SessionFixture.server,
            attempt: LoginAttempt(
                credentials: SessionFixture.passwordCredentials, attempt: Attempt(number: 1, isWaitingToRetry: true)))
        let store = MachineTestStore(SessionFixture.machine, initial: authenticating)
        try store.send(
            .loginResponse(.failure(.rateLimited(retryAfter: .milliseconds(2_500)))), expecting: waiting,
            effects: [.scheduleRetry(after: .milliseconds(2_500))])
        try store.send(
            .retryTimerFired,
            expecting: .authenticating(
                server: SessionFixture.server,
                attempt: LoginAttempt(credentials: SessionFixture.passwordCredentials, attempt: Attempt(number: 2))),
            effects: [.sendLogin(SessionFixture.loginRequest())])
    }

    @Test("Rate limited with a huge retry_after waits the server-wait ceiling, with 0 the floor")
    func rateLimitedClampsRetryAfter() throws {
        let waiting = SessionState.authenticating(
            server: SessionFixture.server,
            attempt: LoginAttempt(
                credentials: SessionFixture.passwordCredentials, attempt: Attempt(number: 1, isWaitingToRetry: true)))
        for (hint, wait) in [(Duration.milliseconds(999_999_999), Duration.seconds(300)), (.zero, .seconds(1))] {
            let store = MachineTestStore(SessionFixture.machine, initial: authenticating)
            try store.send(
                .loginResponse(.failure(.rateLimited(retryAfter: hint))), expecting: waiting,
                effects: [.scheduleRetry(after: wait)])
        }
    }

    @Test("Rate limited without retry_after backs off by the policy")
    func rateLimitedWithoutRetryAfter() throws {
        let second = SessionState.authenticating(
            server: SessionFixture.server,
            attempt: LoginAttempt(credentials: SessionFixture.passwordCredentials, attempt: Attempt(number: 2)))
        let store = MachineTestStore(SessionFixture.machine, initial: second)
        try store.send(
            .loginResponse(.failure(.rateLimited(retryAfter: nil))),
            expecting: .authenticating(
                server: SessionFixture.server,
                attempt: LoginAttempt(
                    credentials: SessionFixture.passwordCredentials, attempt: Attempt(number: 2, isWaitingToRetry: true)
                )), effects: [.scheduleRetry(after: .seconds(2))])
    }

    @Test("Rate limited on the last attempt fails with rateLimited")
    func rateLimitedGivesUp() throws {
        let last = SessionState.authenticating(
            server: SessionFixture.server,
            attempt: LoginAttempt(credentials: SessionFixture.passwordCredentials, attempt: Attempt(number: 3)))
        let error = SessionError.rateLimited(retryAfter: .seconds(1))
        let store = MachineTestStore(SessionFixture.machine, initial: last)
        try store.send(
            .loginResponse(.failure(error)),
            expecting: .failed(from: .login, error: error, server: SessionFixture.server))
    }

    @Test("A retry timer that outlived its wait changes nothing")
    func lateRetryTimer() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: authenticating)
        try store.send(.retryTimerFired, stayingWith: [])
    }

    @Test("Cancelling a login cancels the request and returns to the form")
    func cancelLogin() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: authenticating)
        try store.send(.cancelRequested, expecting: awaiting, effects: [.cancel(SessionKeys.login)])
    }

    @Test("A store failure while saving login tokens fails without using them")
    func persistFailure() throws {
        let error = SessionError.store(.full)
        let store = MachineTestStore(
            SessionFixture.machine, initial: .persisting(SessionFixture.session(), origin: .login, waiting: 0))
        try store.send(
            .storeFailed(error), expecting: .failed(from: .login, error: error, server: SessionFixture.server))
    }

    @Test("A second password while authenticating is ignored")
    func secondPasswordIgnored() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: authenticating)
        try store.assertIgnored(.passwordSubmitted(username: "alice", password: SessionFixture.password))
    }

    @Test("Deactivated accounts fail with their typed error")
    func deactivated() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: authenticating)
        try store.send(
            .loginResponse(.failure(.userDeactivated)),
            expecting: .failed(from: .login, error: .userDeactivated, server: SessionFixture.server))
    }
}
