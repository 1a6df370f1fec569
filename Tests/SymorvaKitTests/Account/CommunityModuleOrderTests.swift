import Foundation
import SymorvaFeatureKit
import SymorvaKit
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaSession

/// The community builds an account's modules in the order their factories declare, whatever
/// the order of the list it is given (issue 23).
@Suite("Community module order")
struct CommunityModuleOrderTests {
    let data = TestDataDirectory()

    /// A module that another one needs.
    final class Provider: AccountModule {
        func stop() async {}
    }

    /// A module that uses ``Provider`` when it is listed, and records whether it found it.
    final class User: AccountModule {
        let foundProvider: Bool
        init(foundProvider: Bool) { self.foundProvider = foundProvider }
        func stop() async {}
    }

    static let provider = AccountModuleFactory(name: "provider") { _ in Provider() }
    static let user = AccountModuleFactory(name: "user", uses: ["provider"]) { context in
        User(foundProvider: context.built.module(Provider.self) != nil)
    }

    @Test("The standard list in reverse still builds crypto before chat and the studio")
    func standardReversed() throws {
        let names = try AccountModuleFactory.ordered(AccountModuleFactory.standard.reversed()).map(\.name)
        let crypto = try #require(names.firstIndex(of: "crypto"))
        #expect(crypto < names.firstIndex(of: "chat")!)
        #expect(crypto < names.firstIndex(of: "studio")!)
        #expect(
            try AccountModuleFactory.ordered(AccountModuleFactory.standard).map(\.name)
                == AccountModuleFactory.standard.map(\.name))
    }

    @Test("A module listed before the one it uses (and before the standard ones) finds it built")
    func wrongOrderWorks() async throws {
        let storage = SessionSamples.storage(data)
        try await storage.sessionStore(for: SessionSamples.alice).save(
            SessionSamples.session(), savedAt: Timestamp(millisecondsSince1970: 1))
        try await storage.record(SessionSamples.session())
        try await storage.setActive(SessionSamples.alice)
        let community = SymorvaCommunity(
            configuration: SymorvaConfiguration(
                community: .init(name: "Test"),
                homeserver: .init(url: SessionSamples.server.baseURL, serverName: "example.org"),
                services: .init(url: URL(string: "https://services.example.org")!),
                modules: .init(
                    meetings: .init(isEnabled: false), aiStudio: .init(isEnabled: false),
                    wallet: .init(isEnabled: false, assets: []), directory: .init(isEnabled: false))),
            environment: SymorvaEnvironment(
                dataDirectory: data.path, transport: ScriptedHTTPTransport.unreachable(), clock: ManualClock(),
                tracer: Tracer(), logCenter: LogCenter(threshold: .error)),
            modules: [Self.user] + AccountModuleFactory.standard + [Self.provider])
        await community.launch()
        #expect(community.session.state.value == .signedIn(Account(SessionSamples.session())))
        #expect(community.module(Provider.self) != nil)
        #expect(community.module(User.self)?.foundProvider == true)
        await community.shutdown()
    }
}
