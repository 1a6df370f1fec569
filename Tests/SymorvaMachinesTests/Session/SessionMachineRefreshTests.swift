import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@Suite("Session machine: refresh single-flight and soft logout")
struct SessionMachineRefreshTests {
    let session = SessionFixture.session()
    let refreshed = SessionFixture.session(2)

    @Test("A 401 with soft_logout while signed in starts the one refresh")
    func firstUnauthorizedStartsRefresh() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signedIn(session))
        try store.send(
            .accessTokenRejected(softLogout: true), expecting: .refreshing(session, waiting: 1, attempt: .first),
            effects: [.cancel(SessionKeys.refreshTimer), .sendRefresh(SessionFixture.refreshRequest())])
    }

    @Test("Three concurrent 401s share one /refresh")
    func threeUnauthorizedOneRefresh() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signedIn(session))
        try store.send(
            .accessTokenRejected(softLogout: true), expecting: .refreshing(session, waiting: 1, attempt: .first),
            effects: [.cancel(SessionKeys.refreshTimer), .sendRefresh(SessionFixture.refreshRequest())])
        try store.send(
            .accessTokenRejected(softLogout: true), expecting: .refreshing(session, waiting: 2, attempt: .first))
        try store.send(
            .accessTokenRejected(softLogout: true), expecting: .refreshing(session, waiting: 3, attempt: .first))
    }

    @Test("A request joining a refresh under way asks for nothing")
    func joiningRefresh() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .refreshing(session, waiting: 1, attempt: .first))
        try store.send(.refreshNeeded, expecting: .refreshing(session, waiting: 2, attempt: .first))
    }

    @Test("The refresh timer refreshes before expiry with nobody waiting")
    func timerRefresh() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signedIn(session))
        try store.send(
            .refreshTimerFired, expecting: .refreshing(session, waiting: 0, attempt: .first),
            effects: [.cancel(SessionKeys.refreshTimer), .sendRefresh(SessionFixture.refreshRequest())])
    }

    @Test("New tokens are saved before the waiting requests get them")
    func refreshedTokensPersistFirst() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .refreshing(session, waiting: 3, attempt: .first))
        try store.send(
            .refreshResponse(.success(SessionFixture.tokens(2))),
            expecting: .persisting(refreshed, origin: .refresh, waiting: 3), effects: [.persistSession(refreshed)])
        try store.send(
            .tokensPersisted, expecting: .signedIn(refreshed),
            effects: [.activate(refreshed), .scheduleRefresh(at: SessionFixture.refreshDeadline)])
    }

    @Test("A refresh response without a refresh token keeps the old one")
    func refreshKeepsOldRefreshToken() throws {
        var expected = session
        expected.tokens = SessionTokens(
            accessToken: Secret("access-2"), refreshToken: Secret("refresh-1"), expiry: SessionFixture.tokens(2).expiry)
        let store = MachineTestStore(SessionFixture.machine, initial: .refreshing(session, waiting: 0, attempt: .first))
        try store.send(
            .refreshResponse(.success(SessionFixture.tokens(2, refresh: false))),
            expecting: .persisting(expected, origin: .refresh, waiting: 0), effects: [.persistSession(expected)])
    }

    @Test("401s while new tokens are saved wait for them")
    func rejectedWhilePersisting() throws {
        let store = MachineTestStore(
            SessionFixture.machine, initial: .persisting(refreshed, origin: .refresh, waiting: 1))
        try store.send(
            .accessTokenRejected(softLogout: true), expecting: .persisting(refreshed, origin: .refresh, waiting: 2))
    }

    @Test("Refresh refused with soft_logout: soft logged out, local data kept")
    func refreshSoftLogout() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .refreshing(session, waiting: 2, attempt: .first))
        try store.send(
            .refreshResponse(.failure(.unknownToken(softLogout: true))),
            expecting: .softLoggedOut(session, lastError: .softLoggedOut),
            effects: [.cancel(SessionKeys.refreshTimer), .keepLocalData(SessionFixture.account)])
    }

    @Test("Refresh refused without soft_logout: the account's local data is wiped")
    func refreshHardLogout() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .refreshing(session, waiting: 2, attempt: .first))
        try store.send(
            .refreshResponse(.failure(.unknownToken(softLogout: false))),
            expecting: .wipingLocalData(SessionFixture.account), effects: [.wipeLocalData(SessionFixture.account)])
    }

    @Test("A 401 without soft_logout while signed in wipes local data")
    func hardLogoutWhileSignedIn() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signedIn(session))
        try store.send(
            .accessTokenRejected(softLogout: false), expecting: .wipingLocalData(SessionFixture.account),
            effects: [.cancel(SessionKeys.refreshTimer), .wipeLocalData(SessionFixture.account)])
    }

    @Test("Without a refresh token a soft 401 soft-logs out at once")
    func softLogoutWithoutRefreshToken() throws {
        let plain = SessionFixture.session(refresh: false, lifetime: nil)
        let store = MachineTestStore(SessionFixture.machine, initial: .signedIn(plain))
        try store.send(
            .accessTokenRejected(softLogout: true), expecting: .softLoggedOut(plain, lastError: .softLoggedOut),
            effects: [.cancel(SessionKeys.refreshTimer), .keepLocalData(SessionFixture.account)])
    }

    @Test("An expired token without a refresh token is tokenExpired")
    func expiredWithoutRefreshToken() throws {
        let plain = SessionFixture.session(refresh: false, lifetime: nil)
        let store = MachineTestStore(SessionFixture.machine, initial: .signedIn(plain))
        try store.send(
            .refreshNeeded, expecting: .softLoggedOut(plain, lastError: .tokenExpired),
            effects: [.cancel(SessionKeys.refreshTimer), .keepLocalData(SessionFixture.account)])
    }

    @Test("An offline refresh backs off and keeps its waiters")
    func offlineRefreshBacksOff() throws {
        let waiting = SessionState.refreshing(session, waiting: 2, attempt: Attempt(number: 1, isWaitingToRetry: true))
        let store = MachineTestStore(SessionFixture.machine, initial: .refreshing(session, waiting: 2, attempt: .first))
        try store.send(
            .refreshResponse(.failure(.unreachable(.cannotConnect))), expecting: waiting,
            effects: [.scheduleRetry(after: .seconds(1))])
        try store.send(
            .retryTimerFired, expecting: .refreshing(session, waiting: 2, attempt: Attempt(number: 2)),
            effects: [.sendRefresh(SessionFixture.refreshRequest())])
    }

    @Test("A rate-limited refresh waits retry_after")
    func rateLimitedRefresh() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .refreshing(session, waiting: 0, attempt: .first))
        try store.send(
            .refreshResponse(.failure(.rateLimited(retryAfter: .seconds(7)))),
            expecting: .refreshing(session, waiting: 0, attempt: Attempt(number: 1, isWaitingToRetry: true)),
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
    func unexpectedRefreshError() throws {
        let error = SessionError.invalidResponse(reason: "access_token missing")
        let store = MachineTestStore(SessionFixture.machine, initial: .refreshing(session, waiting: 0, attempt: .first))
        try store.send(
            .refreshResponse(.failure(error)), expecting: .softLoggedOut(session, lastError: error),
            effects: [.cancel(SessionKeys.refreshTimer), .keepLocalData(SessionFixture.account)])
    }

    @Test("Re-authenticating after soft logout reuses the device and resumes the same account")
    func softLogoutReauthentication() throws {
        let soft = SessionState.softLoggedOut(session, lastError: .softLoggedOut)
        let attempt = LoginAttempt(credentials: SessionFixture.passwordCredentials, resuming: session)
        let store = MachineTestStore(SessionFixture.machine, initial: soft)
        try store.send(
            .passwordSubmitted(username: "alice", password: SessionFixture.password),
            expecting: .authenticating(server: SessionFixture.server, attempt: attempt),
            effects: [.sendLogin(SessionFixture.loginRequest(deviceID: SessionFixture.device))])
        let resumed = SessionFixture.session(3)
        try store.send(
            .loginResponse(.success(SessionFixture.grant(3))),
            expecting: .persisting(resumed, origin: .reauthentication, waiting: 0), effects: [.persistSession(resumed)])
        try store.send(
            .tokensPersisted, expecting: .signedIn(resumed),
            effects: [.activate(resumed), .scheduleRefresh(at: SessionFixture.refreshDeadline)])
    }

    @Test("A wrong password after soft logout stays soft logged out")
    func softLogoutWrongPassword() throws {
        let attempt = LoginAttempt(credentials: SessionFixture.passwordCredentials, resuming: session)
        let store = MachineTestStore(
            SessionFixture.machine, initial: .authenticating(server: SessionFixture.server, attempt: attempt))
        try store.send(
            .loginResponse(.failure(.invalidCredentials)),
            expecting: .softLoggedOut(session, lastError: .invalidCredentials))
    }

    @Test("Another user's credentials cannot take over a soft-logged-out account")
    func softLogoutAccountMismatch() throws {
        let attempt = LoginAttempt(credentials: SessionFixture.passwordCredentials, resuming: session)
        let store = MachineTestStore(
            SessionFixture.machine, initial: .authenticating(server: SessionFixture.server, attempt: attempt))
        try store.send(
            .loginResponse(.success(SessionFixture.grant(3, user: SessionFixture.bob))),
            expecting: .softLoggedOut(
                session, lastError: .accountMismatch(expected: SessionFixture.alice, received: SessionFixture.bob)))
    }

    @Test("A store failure after a refresh soft-logs out and never uses the new tokens")
    func refreshPersistFailure() throws {
        let error = SessionError.store(.full)
        let store = MachineTestStore(
            SessionFixture.machine, initial: .persisting(refreshed, origin: .refresh, waiting: 2))
        try store.send(
            .storeFailed(error), expecting: .softLoggedOut(refreshed, lastError: error),
            effects: [.cancel(SessionKeys.refreshTimer), .keepLocalData(SessionFixture.account)])
    }

    @Test("A refresh timer during a refresh is ignored")
    func timerDuringRefresh() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .refreshing(session, waiting: 1, attempt: .first))
        try store.assertIgnored(.refreshTimerFired)
    }

    @Test("Refresh deadline: margin before expiry, never before three quarters of the lifetime")
    func refreshDeadline() {
        let long = TokenExpiry(issuedAt: SessionFixture.issuedAt, lifetime: .seconds(300))
        #expect(long.refreshDeadline(margin: .seconds(60)) == SessionFixture.issuedAt.advanced(by: .seconds(240)))
        let short = TokenExpiry(issuedAt: SessionFixture.issuedAt, lifetime: .seconds(40))
        #expect(short.refreshDeadline(margin: .seconds(60)) == SessionFixture.issuedAt.advanced(by: .seconds(30)))
    }
}
