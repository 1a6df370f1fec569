import Foundation
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaFeatureKit
@testable import SymorvaKit
@testable import SymorvaMatrix
@testable import SymorvaSession

@Suite(
    "Session against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct SessionLifecycleTests {
    @Test("Registering signs the new account in and makes it active")
    func register() async throws {
        let fixture = CommunityFixture()
        await fixture.community.launch()
        #expect(fixture.community.session.state.value == .signedOut)
        let name = DevEnvironment.uniqueUsername("reg")
        let account = try await fixture.community.session.register(username: name, password: testPassword)
        #expect(account.userID.localpart == name)
        #expect(fixture.community.session.state.value == .signedIn(account))
        #expect(fixture.community.session.accounts.value == [account])
        let token = try #require(fixture.accessToken)
        #expect(try await fixture.rawWhoAmI(token) == account.userID)
        // The requester features use works as the account.
        let response = try await #require(fixture.community.requester).send(AuthAPI.whoami())
        #expect(try AuthAPI.decode(WhoAmIResponse.self, from: response.body).userID == account.userID)
    }

    @Test("Registering a taken user name fails with userInUse")
    func registerTaken() async throws {
        let name = DevEnvironment.uniqueUsername("taken")
        let first = CommunityFixture()
        try await first.community.session.register(username: name, password: testPassword)
        let second = CommunityFixture()
        await #expect(throws: SessionError.userInUse) {
            try await second.community.session.register(username: name, password: testPassword)
        }
        #expect(second.community.session.state.value == .signedOut)
    }

    @Test("Signing in with the password of a registered account creates a new device")
    func login() async throws {
        let name = DevEnvironment.uniqueUsername("login")
        let registered = try await CommunityFixture().community.session.register(username: name, password: testPassword)
        let fixture = CommunityFixture()
        let account = try await fixture.community.session.signIn(username: name, password: testPassword)
        #expect(account.userID == registered.userID)
        #expect(account.deviceID != registered.deviceID)
        #expect(fixture.community.session.state.value == .signedIn(account))
    }

    @Test("Signing in again to an account on this device makes no second device: alreadySignedIn, no request")
    func signInTwice() async throws {
        let fixture = CommunityFixture()
        let name = DevEnvironment.uniqueUsername("twice")
        let account = try await fixture.community.session.register(username: name, password: testPassword)
        for typed in [name, name.uppercased(), account.userID.rawValue] {
            await #expect(throws: SessionError.alreadySignedIn(account.userID)) {
                try await fixture.community.session.signIn(username: typed, password: testPassword)
            }
        }
        #expect(fixture.community.session.state.value == .signedIn(account))
        #expect(fixture.community.session.accounts.value == [account])
        let token = try #require(fixture.accessToken)
        #expect(try await fixture.rawDeviceIDs(token) == [account.deviceID])
    }

    @Test("A wrong password fails with invalidCredentials and stays signed out")
    func wrongPassword() async throws {
        let name = DevEnvironment.uniqueUsername("wrong")
        try await CommunityFixture().community.session.register(username: name, password: testPassword)
        let fixture = CommunityFixture()
        await #expect(throws: SessionError.invalidCredentials) {
            try await fixture.community.session.signIn(username: name, password: Secret("not the password"))
        }
        #expect(fixture.community.session.state.value == .signedOut)
        #expect(fixture.community.session.accounts.value.isEmpty)
    }

    @Test("Signing out invalidates the access token on the server and wipes the account's data")
    func signOutInvalidatesToken() async throws {
        let fixture = CommunityFixture()
        let account = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("logout"), password: testPassword)
        let token = try #require(fixture.accessToken)
        let folder = AccountDatabase.directory(for: account.userID, in: fixture.data.path)
        #expect(FileManager.default.fileExists(atPath: folder))

        try await fixture.community.session.signOut()

        #expect(fixture.community.session.state.value == .signedOut)
        #expect(fixture.community.session.accounts.value.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: folder))
        #expect(fixture.transport.count("/_matrix/client/v3/logout") == 1)
        // The services logout went first (the sign-out host exchanged a token for it).
        #expect(fixture.transport.count("/_symorva/v1/auth/logout") == 1)
        do {
            _ = try await fixture.rawWhoAmI(token)
            Issue.record("the old token still works")
        } catch {
            guard case .matrix(let matrix) = error else { throw error }
            #expect(matrix.code == .unknownToken)
        }
    }

    @Test("A new process restores the signed-in account from the store without any request")
    func restoreWithoutNetwork() async throws {
        let data = TemporaryDataDirectory()
        let first = CommunityFixture(data: data)
        let account = try await first.community.session.register(
            username: DevEnvironment.uniqueUsername("restore"), password: testPassword)
        await first.community.shutdown()

        let offline = OfflineTransport()
        let second = CommunityFixture(data: data, transport: offline)
        await second.community.launch()

        #expect(second.community.session.state.value == .signedIn(account))
        #expect(second.community.session.accounts.value == [account])
        // Every request fails, so signing in was restored from the store alone. Once signed in,
        // the account's modules may start their own work (chat begins to sync); no session
        // request (login, refresh, whoami, register) may ever have been attempted.
        let sessionPaths = ["/login", "/refresh", "/register", "/account/whoami", "/logout"]
        let attempted = offline.attemptedPaths
        #expect(!attempted.contains { path in sessionPaths.contains { path.hasSuffix($0) } }, "\(attempted)")
    }

    @Test("Login against an unreachable homeserver fails with unreachable")
    func unreachable() async throws {
        var configuration = DevEnvironment.current!.configuration
        configuration.homeserver.url = HomeserverURL("http://127.0.0.1:9")!
        let data = TemporaryDataDirectory()
        let community = SymorvaCommunity(
            configuration: configuration,
            environment: SymorvaEnvironment(
                dataDirectory: data.path, tracer: Tracer(), logCenter: LogCenter(threshold: .error)))
        await #expect(throws: SessionError.unreachable(.cannotConnect)) {
            try await community.session.signIn(username: "nobody", password: testPassword)
        }
        #expect(community.session.state.value == .signedOut)
    }
}

@Suite(
    "Session log canary", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"), .shutsDownCommunities)
struct SessionLogCanaryTests {
    @Test("Passwords and tokens never reach the log or the trace during register, sign-in and sign-out")
    func canary() async throws {
        let password = Secret("canary-password-\(UUID().uuidString)")
        let name = DevEnvironment.uniqueUsername("canary")
        let fixture = CommunityFixture()
        let session = fixture.community.session
        var secrets: [String] = [password.exposedValue]

        try await session.register(username: name, password: password)
        secrets += try tokens(of: fixture)
        try await session.signOut()
        try await session.signIn(username: name, password: password)
        secrets += try tokens(of: fixture)
        try await session.signOut()
        await #expect(throws: SessionError.invalidCredentials) {
            try await session.signIn(username: name, password: Secret(password.exposedValue + "-wrong"))
        }

        let logText = fixture.logs.text
        let traceText = fixture.trace.records.map(\.description).joined(separator: "\n")
        // The lines that should be there are there: the machine's transitions, by case name.
        #expect(logText.contains("Session[sign-in] from=authenticating event=loginResponse to=persisting"))
        #expect(traceText.contains("Session[sign-in] from=registering event=registrationResponse"))
        #expect(logText.contains("AppFlow from=signedIn event=signOutRequested to=signingOut"))
        for secret in secrets {
            #expect(!logText.contains(secret), "a secret reached the log")
            #expect(!traceText.contains(secret), "a secret reached the trace")
            // Nor any 12-character piece of it (a truncated token is still a leak).
            #expect(!logText.contains(String(secret.suffix(12))))
        }
        #expect(secrets.count == 5)
    }

    func tokens(of fixture: CommunityFixture) throws -> [String] {
        guard case .signedIn(let session) = try #require(fixture.activeContext).sessionHost.states.value,
            let refreshToken = session.tokens.refreshToken
        else { throw TestFailure("not signed in with a refresh token") }
        return [session.tokens.accessToken.exposedValue, refreshToken.exposedValue]
    }
}
