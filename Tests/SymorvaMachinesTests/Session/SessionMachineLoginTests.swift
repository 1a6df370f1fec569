import SymorvaMachines
import Testing

@Suite("Session machine: login and persist-before-use")
struct SessionMachineLoginTests {
    let awaiting = SessionState.awaitingCredentials(SessionFixture.server)
    let authenticating = SessionState.authenticating(
        server: SessionFixture.server, attempt: LoginAttempt(credentials: SessionFixture.passwordCredentials))

    @Test("Submitting a password sends /login with a refresh token request")
    func passwordSendsLogin() {
        expectMove(
            from: awaiting, on: .passwordSubmitted(username: "alice", password: SessionFixture.password),
            to: authenticating,
            effects: [.sendLogin(SessionFixture.loginRequest())])
    }

    @Test("A login token is sent as m.login.token")
    func loginTokenSendsLogin() {
        let credentials = Credentials.loginToken(SessionFixture.loginToken)
        expectMove(
            from: awaiting, on: .loginTokenSubmitted(SessionFixture.loginToken),
            to: .authenticating(server: SessionFixture.server, attempt: LoginAttempt(credentials: credentials)),
            effects: [.sendLogin(SessionFixture.loginRequest(credentials: credentials))])
    }

    @Test("Login success saves the tokens before anything uses them")
    func loginSuccessPersistsFirst() {
        let session = SessionFixture.session()
        expectMove(
            from: authenticating, on: .loginResponse(.success(SessionFixture.grant())),
            to: .persisting(session, origin: .login, waiting: 0), effects: [.persistSession(session)])
    }

    @Test("Saved tokens sign in, are handed out and arm the refresh timer")
    func tokensPersistedSignsIn() {
        let session = SessionFixture.session()
        expectMove(
            from: .persisting(session, origin: .login, waiting: 0), on: .tokensPersisted, to: .signedIn(session),
            effects: [.activate(session), .scheduleRefresh(at: SessionFixture.refreshDeadline)])
    }

    @Test("Login, persist, signed in: the whole path")
    func loginPath() {
        let session = SessionFixture.session()
        let (state, effects) = run(
            from: awaiting,
            [
                .passwordSubmitted(username: "alice", password: SessionFixture.password),
                .loginResponse(.success(SessionFixture.grant())), .tokensPersisted,
            ])
        #expect(state == .signedIn(session))
        #expect(
            effects == [
                .sendLogin(SessionFixture.loginRequest()), .persistSession(session), .activate(session),
                .scheduleRefresh(at: SessionFixture.refreshDeadline),
            ])
    }

    @Test("A wrong password fails with invalidCredentials and keeps the homeserver")
    func wrongPassword() {
        expectMove(
            from: authenticating, on: .loginResponse(.failure(.invalidCredentials)),
            to: .failed(from: .login, error: .invalidCredentials, server: SessionFixture.server))
    }

    @Test("Retrying after a wrong password sends /login again")
    func retryAfterWrongPassword() {
        let failed = SessionState.failed(from: .login, error: .invalidCredentials, server: SessionFixture.server)
        expectMove(
            from: failed, on: .passwordSubmitted(username: "alice", password: SessionFixture.password),
            to: authenticating,
            effects: [.sendLogin(SessionFixture.loginRequest())])
    }

    @Test("Rate limited with retry_after: wait for the timer, then send again")
    func rateLimitedWaitsThenRetries() {
        let waiting = SessionState.authenticating(
            server: SessionFixture.server,
            attempt: LoginAttempt(
                credentials: SessionFixture.passwordCredentials, attempt: Attempt(number: 1, isWaitingToRetry: true)))
        expectMove(
            from: authenticating, on: .loginResponse(.failure(.rateLimited(retryAfter: .milliseconds(2_500)))),
            to: waiting, effects: [.scheduleRetry(after: .milliseconds(2_500))])
        expectMove(
            from: waiting, on: .retryTimerFired,
            to: .authenticating(
                server: SessionFixture.server,
                attempt: LoginAttempt(credentials: SessionFixture.passwordCredentials, attempt: Attempt(number: 2))),
            effects: [.sendLogin(SessionFixture.loginRequest())])
    }

    @Test("Rate limited without retry_after backs off by the policy")
    func rateLimitedWithoutRetryAfter() {
        let second = SessionState.authenticating(
            server: SessionFixture.server,
            attempt: LoginAttempt(credentials: SessionFixture.passwordCredentials, attempt: Attempt(number: 2)))
        expectMove(
            from: second, on: .loginResponse(.failure(.rateLimited(retryAfter: nil))),
            to: .authenticating(
                server: SessionFixture.server,
                attempt: LoginAttempt(
                    credentials: SessionFixture.passwordCredentials, attempt: Attempt(number: 2, isWaitingToRetry: true)
                )),
            effects: [.scheduleRetry(after: .seconds(2))])
    }

    @Test("Rate limited on the last attempt fails with rateLimited")
    func rateLimitedGivesUp() {
        let last = SessionState.authenticating(
            server: SessionFixture.server,
            attempt: LoginAttempt(credentials: SessionFixture.passwordCredentials, attempt: Attempt(number: 3)))
        let error = SessionError.rateLimited(retryAfter: .seconds(1))
        expectMove(
            from: last, on: .loginResponse(.failure(error)),
            to: .failed(from: .login, error: error, server: SessionFixture.server))
    }

    @Test("A retry timer that outlived its wait changes nothing")
    func lateRetryTimer() {
        expectStay(in: authenticating, on: .retryTimerFired)
    }

    @Test("Cancelling a login cancels the request and returns to the form")
    func cancelLogin() {
        expectMove(
            from: authenticating, on: .cancelRequested, to: awaiting, effects: [.cancel(SessionKeys.login)])
    }

    @Test("A store failure while saving login tokens fails without using them")
    func persistFailure() {
        let error = SessionError.store(.full)
        expectMove(
            from: .persisting(SessionFixture.session(), origin: .login, waiting: 0), on: .storeFailed(error),
            to: .failed(from: .login, error: error, server: SessionFixture.server))
    }

    @Test("A second password while authenticating is ignored")
    func secondPasswordIgnored() {
        expectIgnored(in: authenticating, on: .passwordSubmitted(username: "alice", password: SessionFixture.password))
    }

    @Test("Deactivated accounts fail with their typed error")
    func deactivated() {
        expectMove(
            from: authenticating, on: .loginResponse(.failure(.userDeactivated)),
            to: .failed(from: .login, error: .userDeactivated, server: SessionFixture.server))
    }
}
