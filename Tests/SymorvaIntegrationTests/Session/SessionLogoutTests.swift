import Foundation
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaFeatureKit
@testable import SymorvaKit
@testable import SymorvaMatrix
@testable import SymorvaSession
@testable import SymorvaTransport

/// Soft and hard logout caused by the real server.
///
/// - Soft: Synapse refuses a refresh token whose successor was already used (`403 M_FORBIDDEN`,
///   "refresh token isn't valid anymore") — what a second copy of the app, or a crash between
///   using and saving new tokens, would meet. The session soft-logs out and keeps its data.
/// - Hard: the server admin deletes the device (`DELETE /_synapse/admin/v2/users/…/devices/…`);
///   the next request gets `M_UNKNOWN_TOKEN` without `soft_logout`, and the local data is wiped.
@Suite(
    "Soft and hard logout against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct SessionLogoutTests {
    @Test(
        "A refused refresh soft-logs out, keeps local data, survives a restart and re-authenticates on the same device")
    func softLogout() async throws {
        let clock = ManualClock()
        let data = TemporaryDataDirectory()
        let fixture = CommunityFixture(data: data, clock: clock)
        let account = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("soft"), password: testPassword)
        // Somebody else uses the refresh token and then its new access token.
        try await makeRefreshTokenStale(fixture, account: account)

        // The client's refresh timer fires: its refresh token is no longer valid.
        try await clock.waitForSleepers(count: 1)
        await clock.advance(by: .seconds(3600))
        try await fixture.community.session.state.wait(for: .softLoggedOut(account))

        let folder = AccountDatabase.directory(for: account.userID, in: data.path)
        #expect(FileManager.default.fileExists(atPath: folder + "/" + AccountDatabase.fileName))
        #expect(fixture.community.session.accounts.value == [account])
        await #expect(throws: MatrixRequestError.notSignedIn) {
            _ = try await fixture.community.requester?.send(AuthAPI.whoami())
        }
        // The chat's sync loop (its long poll cut short) meets the soft logout and waits for a token.
        await fixture.community.chat.networkChanged()
        try await fixture.community.chat.syncState.wait(timeout: .seconds(60)) { state in
            if case .awaitingToken = state { return true }
            return false
        }

        // The soft logout is recorded by an effect that runs after the state is published (a
        // crash in between relaunches signed in and soft-logs out again at the first refusal):
        // wait for the record before relaunching.
        let store = try await fixture.community.sessions.storage.sessionStore(for: account.userID)
        let recordDeadline = ContinuousClock.now + .seconds(30)
        while try await store.load()?.isSoftLoggedOut != true, ContinuousClock.now < recordDeadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try await store.load()?.isSoftLoggedOut == true)

        // A relaunch (no network) comes back soft logged out.
        let relaunched = CommunityFixture(data: data, transport: OfflineTransport())
        await relaunched.community.launch()
        #expect(relaunched.community.session.state.value == .softLoggedOut(account))
        await relaunched.community.shutdown()

        // Signing in again resumes the same device with the same local data.
        let resumed = try await fixture.community.session.reauthenticate(password: testPassword)
        #expect(resumed == account)
        #expect(fixture.community.session.state.value == .signedIn(account))
        #expect(try await fixture.rawWhoAmI(try #require(fixture.accessToken)) == account.userID)
        // The new token resumes the sync loop.
        try await fixture.community.chat.syncState.wait(timeout: .seconds(60)) { state in
            if case .live = state { return true }
            return false
        }
    }

    @Test("Re-authenticating with a wrong password stays soft logged out")
    func softLogoutWrongPassword() async throws {
        let clock = ManualClock()
        let fixture = CommunityFixture(clock: clock)
        let account = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("soft2"), password: testPassword)
        try await makeRefreshTokenStale(fixture, account: account)
        try await clock.waitForSleepers(count: 1)
        await clock.advance(by: .seconds(3600))
        try await fixture.community.session.state.wait(for: .softLoggedOut(account))
        await #expect(throws: SessionError.invalidCredentials) {
            try await fixture.community.session.reauthenticate(password: Secret("wrong"))
        }
        #expect(fixture.community.session.state.value == .softLoggedOut(account))
    }

    @Test("Signing in by name to the soft-logged-out active account resumes it on the same device")
    func softLogoutSignInByName() async throws {
        let clock = ManualClock()
        let fixture = CommunityFixture(clock: clock)
        let name = DevEnvironment.uniqueUsername("soft3")
        let account = try await fixture.community.session.register(username: name, password: testPassword)
        try await makeRefreshTokenStale(fixture, account: account)
        try await clock.waitForSleepers(count: 1)
        await clock.advance(by: .seconds(3600))
        try await fixture.community.session.state.wait(for: .softLoggedOut(account))

        let resumed = try await fixture.community.session.signIn(username: name, password: testPassword)
        #expect(resumed == account)
        #expect(fixture.community.session.state.value == .signedIn(account))
        let token = try #require(fixture.accessToken)
        #expect(try await fixture.rawDeviceIDs(token) == [account.deviceID])
    }

    @Test("A device deleted by the server admin is a hard logout: the account's data is wiped")
    func hardLogout() async throws {
        let admin = try #require(DevEnvironment.admin)
        let fixture = CommunityFixture()
        let account = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("hard"), password: testPassword)
        let folder = AccountDatabase.directory(for: account.userID, in: fixture.data.path)

        let adminToken = try await login(user: admin.user, password: admin.password, fixture: fixture)
        let adminRequester = FixedTokenMatrixRequester(
            homeserverURL: account.homeserverURL, userID: UserID(admin.user)!, accessToken: adminToken,
            transport: CurlTransport())
        _ = try await adminRequester.send(
            MatrixEndpoint(
                method: .delete,
                path: "/_synapse/admin/v2/users/\(percentEncoded(account.userID.rawValue))/devices/"
                    + percentEncoded(account.deviceID.rawValue),
                requiresAuth: true))

        await #expect(throws: MatrixRequestError.notSignedIn) {
            _ = try await fixture.community.requester?.send(AuthAPI.whoami())
        }
        // The chat's sync loop (its long poll cut short) meets the refused token and waits for a
        // new one, unless another module's request (crypto's, say) met it first and the hard
        // logout already stopped the account's modules.
        await fixture.community.chat.networkChanged()
        try await fixture.community.chat.syncState.wait(timeout: .seconds(60)) { state in
            switch state {
            case .awaitingToken, .stopped: true
            default: false
            }
        }
        try await fixture.community.session.state.wait(for: .signedOut)
        #expect(fixture.community.session.accounts.value.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: folder))
    }

    /// Refreshes the account's refresh token behind the SDK's back and uses the new access token.
    func makeRefreshTokenStale(_ fixture: CommunityFixture, account: Account) async throws {
        guard case .signedIn(let session) = try #require(fixture.activeContext).sessionHost.states.value,
            let refreshToken = session.tokens.refreshToken
        else { throw TestFailure("no refresh token") }
        let other = FixedTokenMatrixRequester(
            homeserverURL: account.homeserverURL, userID: account.userID, accessToken: Secret("unused"),
            transport: CurlTransport())
        let refreshed = try await other.send(
            AuthAPI.refresh(RefreshRequest(homeserverURL: account.homeserverURL, refreshToken: refreshToken)))
        let stolen = try AuthAPI.decode(RefreshResponse.self, from: refreshed.body).tokens(
            receivedAt: Timestamp(millisecondsSince1970: 0))
        _ = try await fixture.rawWhoAmI(stolen.accessToken)
    }

    func login(user: String, password: String, fixture: CommunityFixture) async throws -> Secret<String> {
        let request = LoginRequest(
            homeserverURL: fixture.environment.configuration.homeserver.url,
            credentials: .password(username: user, password: Secret(password)), requestsRefreshToken: false)
        let requester = FixedTokenMatrixRequester(
            homeserverURL: request.homeserverURL, userID: UserID(user)!, accessToken: Secret("unused"),
            transport: CurlTransport())
        let response = try await requester.send(AuthAPI.login(request))
        return try AuthAPI.decode(LoginResponse.self, from: response.body).accessToken
    }
}
