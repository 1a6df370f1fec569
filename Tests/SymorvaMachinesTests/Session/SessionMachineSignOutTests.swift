import SymorvaMachines
import SymorvaTesting
import Testing

@Suite("Session machine: sign-out and wipe")
struct SessionMachineSignOutTests {
    let session = SessionFixture.session()

    @Test("Signing out tells the server first and stops the refresh timer")
    func signOutCallsServer() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signedIn(session))
        try store.send(
            .signOutRequested, expecting: .signingOut(session),
            effects: [.cancel(SessionKeys.refreshTimer), .sendLogout(SessionFixture.logoutRequest())])
    }

    @Test("After the server confirms, local data is wiped, then signed out")
    func hardLogoutWipes() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signedIn(session))
        try store.send(
            .signOutRequested, expecting: .signingOut(session),
            effects: [.cancel(SessionKeys.refreshTimer), .sendLogout(SessionFixture.logoutRequest())])
        try store.send(
            .logoutResponse(nil), expecting: .wipingLocalData(SessionFixture.account),
            effects: [.wipeLocalData(SessionFixture.account)])
        try store.send(.localDataWiped, expecting: .signedOut)
    }

    @Test("M_UNKNOWN_TOKEN from /logout still wipes local data")
    func logoutUnknownTokenWipes() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signingOut(session))
        try store.send(
            .logoutResponse(.unknownToken(softLogout: false)), expecting: .wipingLocalData(SessionFixture.account),
            effects: [.wipeLocalData(SessionFixture.account)])
    }

    @Test("A server error from /logout still wipes local data")
    func logoutServerErrorWipes() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signingOut(session))
        try store.send(
            .logoutResponse(.serverError(status: 500, errcode: "M_UNKNOWN")),
            expecting: .wipingLocalData(SessionFixture.account), effects: [.wipeLocalData(SessionFixture.account)])
    }

    @Test("An unreachable server at sign-out still wipes local data")
    func logoutOfflineWipes() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signingOut(session))
        try store.send(
            .logoutResponse(.unreachable(.timedOut)), expecting: .wipingLocalData(SessionFixture.account),
            effects: [.wipeLocalData(SessionFixture.account)])
    }

    @Test("Signing out during a refresh cancels it and logs out with the saved token")
    func signOutWhileRefreshing() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .refreshing(session, waiting: 1, attempt: .first))
        try store.send(
            .signOutRequested, expecting: .signingOut(session),
            effects: [.cancel(SessionKeys.refresh), .sendLogout(SessionFixture.logoutRequest())])
    }

    @Test("Signing out during a refresh back-off also cancels the retry timer")
    func signOutWhileRefreshBackingOff() throws {
        let store = MachineTestStore(
            SessionFixture.machine,
            initial: .refreshing(session, waiting: 0, attempt: Attempt(number: 2, isWaitingToRetry: true)))
        try store.send(
            .signOutRequested, expecting: .signingOut(session),
            effects: [
                .cancel(SessionKeys.refresh), .cancel(SessionKeys.retryTimer),
                .sendLogout(SessionFixture.logoutRequest()),
            ])
    }

    @Test("Signing out while soft logged out wipes without calling the server")
    func signOutSoftLoggedOut() throws {
        let store = MachineTestStore(
            SessionFixture.machine, initial: .softLoggedOut(session, lastError: .softLoggedOut))
        try store.send(
            .signOutRequested, expecting: .wipingLocalData(SessionFixture.account),
            effects: [.wipeLocalData(SessionFixture.account)])
    }

    @Test("A failed wipe is a typed store error")
    func wipeFailure() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .wipingLocalData(SessionFixture.account))
        try store.send(
            .storeFailed(.store(.fileSystem)),
            expecting: .failed(from: .signOut, error: .store(.fileSystem), server: nil))
    }

    @Test("A second sign-out request while signing out is ignored")
    func doubleSignOut() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signingOut(session))
        try store.assertIgnored(.signOutRequested)
    }

    @Test("Sign-out while tokens are being saved is ignored")
    func signOutWhilePersisting() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .persisting(session, origin: .login, waiting: 0))
        try store.assertIgnored(.signOutRequested)
    }

    @Test("Signed-out ignores account events")
    func signedOutIgnoresAccountEvents() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signedOut)
        try store.assertIgnored(.accessTokenRejected(softLogout: true))
        try store.assertIgnored(.signOutRequested)
        try store.assertIgnored(.tokensPersisted)
        try store.assertIgnored(.passwordSubmitted(username: "alice", password: SessionFixture.password))
    }
}
