import SymorvaMachines
import Testing

@Suite("Session machine: sign-out and wipe")
struct SessionMachineSignOutTests {
    let session = SessionFixture.session()

    @Test("Signing out tells the server first and stops the refresh timer")
    func signOutCallsServer() {
        expectMove(
            from: .signedIn(session), on: .signOutRequested, to: .signingOut(session),
            effects: [.cancel(SessionKeys.refreshTimer), .sendLogout(SessionFixture.logoutRequest())])
    }

    @Test("After the server confirms, local data is wiped, then signed out")
    func hardLogoutWipes() {
        let (state, effects) = run(
            from: .signedIn(session), [.signOutRequested, .logoutResponse(nil), .localDataWiped])
        #expect(state == .signedOut)
        #expect(
            effects == [
                .cancel(SessionKeys.refreshTimer), .sendLogout(SessionFixture.logoutRequest()),
                .wipeLocalData(SessionFixture.account),
            ])
    }

    @Test("M_UNKNOWN_TOKEN from /logout still wipes local data")
    func logoutUnknownTokenWipes() {
        expectMove(
            from: .signingOut(session), on: .logoutResponse(.unknownToken(softLogout: false)),
            to: .wipingLocalData(SessionFixture.account), effects: [.wipeLocalData(SessionFixture.account)])
    }

    @Test("A server error from /logout still wipes local data")
    func logoutServerErrorWipes() {
        expectMove(
            from: .signingOut(session), on: .logoutResponse(.serverError(status: 500, errcode: "M_UNKNOWN")),
            to: .wipingLocalData(SessionFixture.account), effects: [.wipeLocalData(SessionFixture.account)])
    }

    @Test("An unreachable server at sign-out still wipes local data")
    func logoutOfflineWipes() {
        expectMove(
            from: .signingOut(session), on: .logoutResponse(.unreachable(.timedOut)),
            to: .wipingLocalData(SessionFixture.account), effects: [.wipeLocalData(SessionFixture.account)])
    }

    @Test("Signing out during a refresh cancels it and logs out with the saved token")
    func signOutWhileRefreshing() {
        expectMove(
            from: .refreshing(session, waiting: 1, attempt: .first), on: .signOutRequested, to: .signingOut(session),
            effects: [.cancel(SessionKeys.refresh), .sendLogout(SessionFixture.logoutRequest())])
    }

    @Test("Signing out during a refresh back-off also cancels the retry timer")
    func signOutWhileRefreshBackingOff() {
        expectMove(
            from: .refreshing(session, waiting: 0, attempt: Attempt(number: 2, isWaitingToRetry: true)),
            on: .signOutRequested, to: .signingOut(session),
            effects: [
                .cancel(SessionKeys.refresh), .cancel(SessionKeys.retryTimer),
                .sendLogout(SessionFixture.logoutRequest()),
            ])
    }

    @Test("Signing out while soft logged out wipes without calling the server")
    func signOutSoftLoggedOut() {
        expectMove(
            from: .softLoggedOut(session, lastError: .softLoggedOut), on: .signOutRequested,
            to: .wipingLocalData(SessionFixture.account), effects: [.wipeLocalData(SessionFixture.account)])
    }

    @Test("A failed wipe is a typed store error")
    func wipeFailure() {
        expectMove(
            from: .wipingLocalData(SessionFixture.account), on: .storeFailed(.store(.fileSystem)),
            to: .failed(from: .signOut, error: .store(.fileSystem), server: nil))
    }

    @Test("A second sign-out request while signing out is ignored")
    func doubleSignOut() {
        expectIgnored(in: .signingOut(session), on: .signOutRequested)
    }

    @Test("Sign-out while tokens are being saved is ignored")
    func signOutWhilePersisting() {
        expectIgnored(in: .persisting(session, origin: .login, waiting: 0), on: .signOutRequested)
    }

    @Test("Signed-out ignores account events")
    func signedOutIgnoresAccountEvents() {
        expectIgnored(in: .signedOut, on: .accessTokenRejected(softLogout: true))
        expectIgnored(in: .signedOut, on: .signOutRequested)
        expectIgnored(in: .signedOut, on: .tokensPersisted)
        expectIgnored(in: .signedOut, on: .passwordSubmitted(username: "alice", password: SessionFixture.password))
    }
}
