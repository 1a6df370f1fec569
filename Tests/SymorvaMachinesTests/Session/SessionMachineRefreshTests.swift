import SymorvaMachines
import SymorvaRuntime
import Testing

@Suite("Session machine: refresh single-flight and soft logout")
struct SessionMachineRefreshTests {
    let session = SessionFixture.session()
    let refreshed = SessionFixture.session(2)

    @Test("A 401 with soft_logout while signed in starts the one refresh")
    func firstUnauthorizedStartsRefresh() {
        expectMove(
            from: .signedIn(session), on: .accessTokenRejected(softLogout: true),
            to: .refreshing(session, waiting: 1, attempt: .first),
            effects: [.cancel(SessionKeys.refreshTimer), .sendRefresh(SessionFixture.refreshRequest())])
    }

    @Test("Three concurrent 401s share one /refresh")
    func threeUnauthorizedOneRefresh() {
        let (state, effects) = run(
            from: .signedIn(session),
            [
                .accessTokenRejected(softLogout: true), .accessTokenRejected(softLogout: true),
                .accessTokenRejected(softLogout: true),
            ])
        #expect(state == .refreshing(session, waiting: 3, attempt: .first))
        #expect(effects == [.cancel(SessionKeys.refreshTimer), .sendRefresh(SessionFixture.refreshRequest())])
    }

    @Test("A request joining a refresh under way asks for nothing")
    func joiningRefresh() {
        expectMove(
            from: .refreshing(session, waiting: 1, attempt: .first), on: .refreshNeeded,
            to: .refreshing(session, waiting: 2, attempt: .first))
    }

    @Test("The refresh timer refreshes before expiry with nobody waiting")
    func timerRefresh() {
        expectMove(
            from: .signedIn(session), on: .refreshTimerFired, to: .refreshing(session, waiting: 0, attempt: .first),
            effects: [.cancel(SessionKeys.refreshTimer), .sendRefresh(SessionFixture.refreshRequest())])
    }

    @Test("New tokens are saved before the waiting requests get them")
    func refreshedTokensPersistFirst() {
        expectMove(
            from: .refreshing(session, waiting: 3, attempt: .first),
            on: .refreshResponse(.success(SessionFixture.tokens(2))),
            to: .persisting(refreshed, origin: .refresh, waiting: 3), effects: [.persistSession(refreshed)])
        expectMove(
            from: .persisting(refreshed, origin: .refresh, waiting: 3), on: .tokensPersisted,
            to: .signedIn(refreshed),
            effects: [.activate(refreshed), .scheduleRefresh(at: SessionFixture.refreshDeadline)])
    }

    @Test("A refresh response without a refresh token keeps the old one")
    func refreshKeepsOldRefreshToken() {
        var expected = session
        expected.tokens = SessionTokens(
            accessToken: Secret("access-2"), refreshToken: Secret("refresh-1"), expiry: SessionFixture.tokens(2).expiry)
        expectMove(
            from: .refreshing(session, waiting: 0, attempt: .first),
            on: .refreshResponse(.success(SessionFixture.tokens(2, refresh: false))),
            to: .persisting(expected, origin: .refresh, waiting: 0), effects: [.persistSession(expected)])
    }

    @Test("401s while new tokens are saved wait for them")
    func rejectedWhilePersisting() {
        expectMove(
            from: .persisting(refreshed, origin: .refresh, waiting: 1), on: .accessTokenRejected(softLogout: true),
            to: .persisting(refreshed, origin: .refresh, waiting: 2))
    }

    @Test("Refresh refused with soft_logout: soft logged out, local data kept")
    func refreshSoftLogout() {
        expectMove(
            from: .refreshing(session, waiting: 2, attempt: .first),
            on: .refreshResponse(.failure(.unknownToken(softLogout: true))),
            to: .softLoggedOut(session, lastError: .softLoggedOut),
            effects: [.cancel(SessionKeys.refreshTimer), .keepLocalData(SessionFixture.account)])
    }

    @Test("Refresh refused without soft_logout: the account's local data is wiped")
    func refreshHardLogout() {
        expectMove(
            from: .refreshing(session, waiting: 2, attempt: .first),
            on: .refreshResponse(.failure(.unknownToken(softLogout: false))),
            to: .wipingLocalData(SessionFixture.account),
            effects: [.wipeLocalData(SessionFixture.account)])
    }

    @Test("A 401 without soft_logout while signed in wipes local data")
    func hardLogoutWhileSignedIn() {
        expectMove(
            from: .signedIn(session), on: .accessTokenRejected(softLogout: false),
            to: .wipingLocalData(SessionFixture.account),
            effects: [.cancel(SessionKeys.refreshTimer), .wipeLocalData(SessionFixture.account)])
    }

    @Test("Without a refresh token a soft 401 soft-logs out at once")
    func softLogoutWithoutRefreshToken() {
        let plain = SessionFixture.session(refresh: false, lifetime: nil)
        expectMove(
            from: .signedIn(plain), on: .accessTokenRejected(softLogout: true),
            to: .softLoggedOut(plain, lastError: .softLoggedOut),
            effects: [.cancel(SessionKeys.refreshTimer), .keepLocalData(SessionFixture.account)])
    }

    @Test("An expired token without a refresh token is tokenExpired")
    func expiredWithoutRefreshToken() {
        let plain = SessionFixture.session(refresh: false, lifetime: nil)
        expectMove(
            from: .signedIn(plain), on: .refreshNeeded, to: .softLoggedOut(plain, lastError: .tokenExpired),
            effects: [.cancel(SessionKeys.refreshTimer), .keepLocalData(SessionFixture.account)])
    }

    @Test("An offline refresh backs off and keeps its waiters")
    func offlineRefreshBacksOff() {
        let waiting = SessionState.refreshing(session, waiting: 2, attempt: Attempt(number: 1, isWaitingToRetry: true))
        expectMove(
            from: .refreshing(session, waiting: 2, attempt: .first),
            on: .refreshResponse(.failure(.unreachable(.cannotConnect))), to: waiting,
            effects: [.scheduleRetry(after: .seconds(1))])
        expectMove(
            from: waiting, on: .retryTimerFired, to: .refreshing(session, waiting: 2, attempt: Attempt(number: 2)),
            effects: [.sendRefresh(SessionFixture.refreshRequest())])
    }

    @Test("A rate-limited refresh waits retry_after")
    func rateLimitedRefresh() {
        expectMove(
            from: .refreshing(session, waiting: 0, attempt: .first),
            on: .refreshResponse(.failure(.rateLimited(retryAfter: .seconds(7)))),
            to: .refreshing(session, waiting: 0, attempt: Attempt(number: 1, isWaitingToRetry: true)),
            effects: [.scheduleRetry(after: .seconds(7))])
    }

    @Test("Back-off doubles and is capped")
    func backoffCapped() {
        let machine = SessionMachine()
        #expect(machine.backoff(attempt: 1) == .seconds(1))
        #expect(machine.backoff(attempt: 4) == .seconds(8))
        #expect(machine.backoff(attempt: 40) == .seconds(300))
    }

    @Test("An unexpected refresh error soft-logs out rather than looping")
    func unexpectedRefreshError() {
        let error = SessionError.invalidResponse(reason: "access_token missing")
        expectMove(
            from: .refreshing(session, waiting: 0, attempt: .first), on: .refreshResponse(.failure(error)),
            to: .softLoggedOut(session, lastError: error),
            effects: [.cancel(SessionKeys.refreshTimer), .keepLocalData(SessionFixture.account)])
    }

    @Test("Re-authenticating after soft logout reuses the device and resumes the same account")
    func softLogoutReauthentication() {
        let soft = SessionState.softLoggedOut(session, lastError: .softLoggedOut)
        let attempt = LoginAttempt(credentials: SessionFixture.passwordCredentials, resuming: session)
        expectMove(
            from: soft, on: .passwordSubmitted(username: "alice", password: SessionFixture.password),
            to: .authenticating(server: SessionFixture.server, attempt: attempt),
            effects: [.sendLogin(SessionFixture.loginRequest(deviceID: SessionFixture.device))])
        let (state, effects) = run(
            from: .authenticating(server: SessionFixture.server, attempt: attempt),
            [.loginResponse(.success(SessionFixture.grant(3))), .tokensPersisted])
        let resumed = SessionFixture.session(3)
        #expect(state == .signedIn(resumed))
        #expect(
            effects == [
                .persistSession(resumed), .activate(resumed), .scheduleRefresh(at: SessionFixture.refreshDeadline),
            ])
    }

    @Test("A wrong password after soft logout stays soft logged out")
    func softLogoutWrongPassword() {
        let attempt = LoginAttempt(credentials: SessionFixture.passwordCredentials, resuming: session)
        expectMove(
            from: .authenticating(server: SessionFixture.server, attempt: attempt),
            on: .loginResponse(.failure(.invalidCredentials)),
            to: .softLoggedOut(session, lastError: .invalidCredentials))
    }

    @Test("Another user's credentials cannot take over a soft-logged-out account")
    func softLogoutAccountMismatch() {
        let attempt = LoginAttempt(credentials: SessionFixture.passwordCredentials, resuming: session)
        expectMove(
            from: .authenticating(server: SessionFixture.server, attempt: attempt),
            on: .loginResponse(.success(SessionFixture.grant(3, user: SessionFixture.bob))),
            to: .softLoggedOut(
                session, lastError: .accountMismatch(expected: SessionFixture.alice, received: SessionFixture.bob)))
    }

    @Test("A store failure after a refresh soft-logs out and never uses the new tokens")
    func refreshPersistFailure() {
        let error = SessionError.store(.full)
        expectMove(
            from: .persisting(refreshed, origin: .refresh, waiting: 2), on: .storeFailed(error),
            to: .softLoggedOut(refreshed, lastError: error),
            effects: [.cancel(SessionKeys.refreshTimer), .keepLocalData(SessionFixture.account)])
    }

    @Test("A refresh timer during a refresh is ignored")
    func timerDuringRefresh() {
        expectIgnored(in: .refreshing(session, waiting: 1, attempt: .first), on: .refreshTimerFired)
    }

    @Test("Refresh deadline: margin before expiry, never before three quarters of the lifetime")
    func refreshDeadline() {
        let long = TokenExpiry(issuedAt: SessionFixture.issuedAt, lifetime: .seconds(300))
        #expect(long.refreshDeadline(margin: .seconds(60)) == SessionFixture.issuedAt.advanced(by: .seconds(240)))
        let short = TokenExpiry(issuedAt: SessionFixture.issuedAt, lifetime: .seconds(40))
        #expect(short.refreshDeadline(margin: .seconds(60)) == SessionFixture.issuedAt.advanced(by: .seconds(30)))
    }
}
