import SymorvaMachines
import SymorvaRuntime
import Testing

@Suite("Session machine: login and persist-before-use")
struct SessionMachineLoginTests {
    let awaiting = State.awaitingCredentials(Fixture.server)
    let authenticating = State.authenticating(
        server: Fixture.server, attempt: LoginAttempt(credentials: Fixture.passwordCredentials))

    @Test("Submitting a password sends /login with a refresh token request")
    func passwordSendsLogin() {
        expectMove(
            from: awaiting, on: .passwordSubmitted(username: "alice", password: Fixture.password), to: authenticating,
            effects: [.sendLogin(Fixture.loginRequest())])
    }

    @Test("A login token is sent as m.login.token")
    func loginTokenSendsLogin() {
        let credentials = Credentials.loginToken(Fixture.loginToken)
        expectMove(
            from: awaiting, on: .loginTokenSubmitted(Fixture.loginToken),
            to: .authenticating(server: Fixture.server, attempt: LoginAttempt(credentials: credentials)),
            effects: [.sendLogin(Fixture.loginRequest(credentials: credentials))])
    }

    @Test("Login success saves the tokens before anything uses them")
    func loginSuccessPersistsFirst() {
        let session = Fixture.session()
        expectMove(
            from: authenticating, on: .loginResponse(.success(Fixture.grant())),
            to: .persisting(session, origin: .login, waiting: 0), effects: [.persistSession(session)])
    }

    @Test("Saved tokens sign in, are handed out and arm the refresh timer")
    func tokensPersistedSignsIn() {
        let session = Fixture.session()
        expectMove(
            from: .persisting(session, origin: .login, waiting: 0), on: .tokensPersisted, to: .signedIn(session),
            effects: [.activate(session), .scheduleRefresh(at: Fixture.refreshDeadline)])
    }

    @Test("Login, persist, signed in: the whole path")
    func loginPath() {
        let session = Fixture.session()
        let (state, effects) = run(
            from: awaiting,
            [
                .passwordSubmitted(username: "alice", password: Fixture.password),
                .loginResponse(.success(Fixture.grant())), .tokensPersisted,
            ])
        #expect(state == .signedIn(session))
        #expect(
            effects == [
                .sendLogin(Fixture.loginRequest()), .persistSession(session), .activate(session),
                .scheduleRefresh(at: Fixture.refreshDeadline),
            ])
    }

    @Test("A wrong password fails with invalidCredentials and keeps the homeserver")
    func wrongPassword() {
        expectMove(
            from: authenticating, on: .loginResponse(.failure(.invalidCredentials)),
            to: .failed(from: .login, error: .invalidCredentials, server: Fixture.server))
    }

    @Test("Retrying after a wrong password sends /login again")
    func retryAfterWrongPassword() {
        let failed = State.failed(from: .login, error: .invalidCredentials, server: Fixture.server)
        expectMove(
            from: failed, on: .passwordSubmitted(username: "alice", password: Fixture.password), to: authenticating,
            effects: [.sendLogin(Fixture.loginRequest())])
    }

    @Test("Rate limited with retry_after: wait for the timer, then send again")
    func rateLimitedWaitsThenRetries() {
        let waiting = State.authenticating(
            server: Fixture.server,
            attempt: LoginAttempt(
                credentials: Fixture.passwordCredentials, attempt: Attempt(number: 1, isWaitingToRetry: true)))
        expectMove(
            from: authenticating, on: .loginResponse(.failure(.rateLimited(retryAfter: .milliseconds(2_500)))),
            to: waiting, effects: [.scheduleRetry(after: .milliseconds(2_500))])
        expectMove(
            from: waiting, on: .retryTimerFired,
            to: .authenticating(
                server: Fixture.server,
                attempt: LoginAttempt(credentials: Fixture.passwordCredentials, attempt: Attempt(number: 2))),
            effects: [.sendLogin(Fixture.loginRequest())])
    }

    @Test("Rate limited without retry_after backs off by the policy")
    func rateLimitedWithoutRetryAfter() {
        let second = State.authenticating(
            server: Fixture.server,
            attempt: LoginAttempt(credentials: Fixture.passwordCredentials, attempt: Attempt(number: 2)))
        expectMove(
            from: second, on: .loginResponse(.failure(.rateLimited(retryAfter: nil))),
            to: .authenticating(
                server: Fixture.server,
                attempt: LoginAttempt(
                    credentials: Fixture.passwordCredentials, attempt: Attempt(number: 2, isWaitingToRetry: true))),
            effects: [.scheduleRetry(after: .seconds(2))])
    }

    @Test("Rate limited on the last attempt fails with rateLimited")
    func rateLimitedGivesUp() {
        let last = State.authenticating(
            server: Fixture.server,
            attempt: LoginAttempt(credentials: Fixture.passwordCredentials, attempt: Attempt(number: 3)))
        let error = SessionError.rateLimited(retryAfter: .seconds(1))
        expectMove(
            from: last, on: .loginResponse(.failure(error)),
            to: .failed(from: .login, error: error, server: Fixture.server))
    }

    @Test("A retry timer that outlived its wait changes nothing")
    func lateRetryTimer() {
        expectStay(in: authenticating, on: .retryTimerFired)
    }

    @Test("Cancelling a login cancels the request and returns to the form")
    func cancelLogin() {
        expectMove(
            from: authenticating, on: .cancelRequested, to: awaiting, effects: [.cancel(Keys.login)])
    }

    @Test("A store failure while saving login tokens fails without using them")
    func persistFailure() {
        let error = SessionError.store(reason: "disk full")
        expectMove(
            from: .persisting(Fixture.session(), origin: .login, waiting: 0), on: .storeFailed(error),
            to: .failed(from: .login, error: error, server: Fixture.server))
    }

    @Test("A second password while authenticating is ignored")
    func secondPasswordIgnored() {
        expectIgnored(in: authenticating, on: .passwordSubmitted(username: "alice", password: Fixture.password))
    }

    @Test("Deactivated accounts fail with their typed error")
    func deactivated() {
        expectMove(
            from: authenticating, on: .loginResponse(.failure(.userDeactivated)),
            to: .failed(from: .login, error: .userDeactivated, server: Fixture.server))
    }
}
