import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaFeatureKit
@testable import SymorvaKit
@testable import SymorvaSession

@Suite("SymorvaCommunity: launch and restore without a server")
struct SymorvaCommunityTests {
    let data = TestDataDirectory()

    func community(transport: any HTTPTransport = ScriptedHTTPTransport.unreachable()) -> SymorvaCommunity {
        SymorvaCommunity(
            configuration: SymorvaConfiguration(
                community: .init(name: "Test"),
                homeserver: .init(url: SessionSamples.server.baseURL, serverName: "example.org"),
                services: .init(url: URL(string: "https://services.example.org")!),
                modules: .init(
                    meetings: .init(isEnabled: true), aiStudio: .init(isEnabled: false),
                    wallet: .init(isEnabled: false, assets: []), directory: .init(isEnabled: false))),
            environment: SymorvaEnvironment(
                dataDirectory: data.path, transport: transport, clock: ManualClock(), tracer: Tracer(),
                logCenter: LogCenter(threshold: .error)))
    }

    /// Saves alice's session and registers her as the active account, as a previous run would.
    func storeAlice() async throws {
        let storage = SessionSamples.storage(data)
        try await storage.sessionStore(for: SessionSamples.alice).save(
            SessionSamples.session(), savedAt: Timestamp(millisecondsSince1970: 1))
        try await storage.record(SessionSamples.session())
        try await storage.setActive(SessionSamples.alice)
    }

    @Test("A device without accounts launches signed out")
    func launchEmpty() async {
        let community = community()
        #expect(community.session.state.value == .launching)
        await community.launch()
        #expect(community.session.state.value == .signedOut)
        #expect(community.session.accounts.value.isEmpty)
        #expect(community.requester == nil)
    }

    @Test("A stored session is restored signed in without the network")
    func launchRestores() async throws {
        try await storeAlice()
        let community = community()
        await community.launch()
        let alice = Account(SessionSamples.session())
        #expect(community.session.state.value == .signedIn(alice))
        #expect(community.session.accounts.value == [alice])
        #expect(community.requester?.userID == SessionSamples.alice)
    }

    @Test("A tampered token makes the account unavailable with a typed error; signing out wipes it")
    func tamperedStore() async throws {
        try await storeAlice()
        let database = try await SessionSamples.storage(data).database(for: SessionSamples.alice)
        // Byte 41 becomes another value whatever it was (a fixed value misses once in 256 runs).
        try await database.database.execute(
            """
            UPDATE session_current SET refresh_token = substr(refresh_token, 1, 40)
                || CASE WHEN substr(refresh_token, 41, 1) = x'FF' THEN x'FE' ELSE x'FF' END
                || substr(refresh_token, 42)
            """)
        let community = community()
        await community.launch()
        #expect(
            community.session.state.value
                == .unavailable(SessionSamples.alice, .store(.secrets)))
        try await community.session.signOut()
        #expect(community.session.state.value == .signedOut)
        #expect(community.session.accounts.value.isEmpty)
        #expect(
            !FileManager.default.fileExists(atPath: AccountDatabase.directory(for: SessionSamples.alice, in: data.path))
        )
    }

    @Test("Operations that need an account fail with notSignedIn when there is none")
    func notSignedIn() async {
        let community = community()
        await community.launch()
        await #expect(throws: SessionError.notSignedIn) { try await community.session.signOut() }
        await #expect(throws: SessionError.notSignedIn) {
            try await community.session.reauthenticate(password: Secret("x"))
        }
        await #expect(throws: SessionError.notSignedIn) {
            try await community.session.switchAccount(to: Account(SessionSamples.session()))
        }
    }

    @Test("Sign-in against an unreachable homeserver fails with unreachable and stays signed out")
    func unreachable() async {
        let community = community()
        await #expect(throws: SessionError.unreachable(.cannotConnect)) {
            try await community.session.signIn(username: "alice", password: Secret("pw"))
        }
        #expect(community.session.state.value == .signedOut)
    }
}
