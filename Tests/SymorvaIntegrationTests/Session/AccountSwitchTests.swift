import Foundation
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaChat
@testable import SymorvaFeatureKit
@testable import SymorvaKit
@testable import SymorvaMatrix
@testable import SymorvaSession
@testable import SymorvaStore

/// A stand-in feature module: one host per account that loads `whoami` through the account's
/// requester.
struct ProbeMachine: StateMachine {
    static let name = "Probe"

    enum State: Sendable, Equatable, CaseNamed {
        case idle
        case loading
        case loaded(UserID)
        case failed
    }

    enum Event: Sendable, Equatable, CaseNamed {
        case load
        case loaded(UserID)
        case failed
    }

    enum Effect: MachineEffect, Equatable {
        case fetchWhoAmI
    }

    func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .load: .move(to: .loading, effects: [.fetchWhoAmI])
        case .loaded(let user): .move(to: .loaded(user))
        case .failed: .move(to: .failed)
        }
    }
}

final class ProbeModule: AccountModule {
    let host: MachineHost<ProbeMachine>

    init(context: AccountModuleContext) {
        let requester = context.requester
        host = MachineHost(
            machine: ProbeMachine(), initial: .idle,
            interpreter: ClosureInterpreter<ProbeMachine> { _, _ in
                guard let response = try? await requester.send(AuthAPI.whoami()),
                    let answer = try? AuthAPI.decode(WhoAmIResponse.self, from: response.body)
                else { return .failed }
                return .loaded(answer.userID)
            },
            instance: context.userID.rawValue, scope: context.scope, clock: context.clock, tracer: context.tracer)
    }

    func stop() async { await host.stop() }

    static let factory = AccountModuleFactory(
        name: "probe",
        migrations: [
            Migration(version: 1, name: "probe_items", sql: "CREATE TABLE probe_items (id INTEGER PRIMARY KEY)")
        ]
    ) { context in ProbeModule(context: context) }
}

@Suite(
    "Several accounts against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct AccountSwitchTests {
    @Test("Two accounts side by side, each with its own store; switching makes the other active")
    func twoAccounts() async throws {
        let fixture = CommunityFixture(modules: [ProbeModule.factory])
        let session = fixture.community.session
        let alice = try await session.register(username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let bob = try await session.register(username: DevEnvironment.uniqueUsername("bob"), password: testPassword)
        #expect(session.state.value == .signedIn(bob))
        #expect(session.accounts.value == [alice, bob])
        #expect(
            AccountDatabase.directory(for: alice.userID, in: fixture.data.path)
                != AccountDatabase.directory(for: bob.userID, in: fixture.data.path))
        let database = try #require(fixture.activeContext).database.database
        #expect(try await database.schemaVersion(feature: "probe") == 1)
        #expect(try await database.schemaVersion(feature: "session") == 1)

        #expect(try await session.switchAccount(to: alice) == alice)
        #expect(session.state.value == .signedIn(alice))
        #expect(fixture.community.requester?.userID == alice.userID)

        // Removing the inactive account leaves the active one alone.
        try await session.removeAccount(bob)
        #expect(session.accounts.value == [alice])
        #expect(session.state.value == .signedIn(alice))
        #expect(
            !FileManager.default.fileExists(atPath: AccountDatabase.directory(for: bob.userID, in: fixture.data.path)))

        // The next launch restores the account that was active last.
        await fixture.community.shutdown()
        let relaunched = CommunityFixture(data: fixture.data, transport: OfflineTransport())
        await relaunched.community.launch()
        #expect(relaunched.community.session.state.value == .signedIn(alice))
        #expect(relaunched.community.session.accounts.value == [alice])
    }

    @Test("A slow request of the old account reaches its host after a switch and is dropped as stale")
    func lateResultDropped() async throws {
        let fixture = CommunityFixture(modules: [ProbeModule.factory])
        let session = fixture.community.session
        let alice = try await session.register(username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let bob = try await session.register(username: DevEnvironment.uniqueUsername("bob"), password: testPassword)
        try await session.switchAccount(to: alice)
        let aliceProbe = try #require(fixture.community.module(ProbeModule.self))

        let gate = TestGate()
        fixture.transport.hold("/account/whoami", at: gate)
        await aliceProbe.host.send(.load)
        try await gate.waitForWaiters(count: 1)  // the server answered; the answer is held

        try await session.switchAccount(to: bob)
        let bobProbe = try #require(fixture.community.module(ProbeModule.self))
        gate.open()

        let stale = try await fixture.trace.wait(for: {
            $0.kind == .stale && $0.machine == "Probe" && $0.instance == alice.userID.rawValue
        })
        #expect(stale.event == "loaded")
        #expect(await aliceProbe.host.currentState == .loading)
        #expect(await bobProbe.host.currentState == .idle)
        #expect(session.state.value == .signedIn(bob))
        #expect(fixture.community.requester?.userID == bob.userID)
    }

    @Test("community.chat and community.wallet follow a switch; alice's conversation never acts as bob")
    func clientsFollowSwitch() async throws {
        let fixture = CommunityFixture()
        let community = fixture.community
        let chat = community.chat
        let wallet = community.wallet
        let alice = try await community.session.register(
            username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let bob = try await community.session.register(
            username: DevEnvironment.uniqueUsername("bob"), password: testPassword)
        try await community.session.switchAccount(to: alice)
        #expect(chat.userID == alice.userID)
        if let wallet { #expect(wallet.member == alice.userID) }

        let seen = Lock<[ConversationList]>([])
        let stop = chat.conversations.subscribe { list in seen.withLock { $0.append(list) } }
        defer { stop() }
        let roomID = try await chat.createRoom(name: "Allotment")
        #expect(chat.conversations.value[roomID] != nil)
        let conversation = try await chat.conversation(id: roomID)
        try await conversation.send(.text("hello from alice")).waitUntilSent()

        try await community.session.switchAccount(to: bob)
        #expect(community.chat === chat)
        #expect(community.wallet === wallet)
        #expect(chat.userID == bob.userID)
        if let wallet { #expect(wallet.member == bob.userID) }
        #expect(chat.conversations.value.userID == bob.userID)
        #expect(chat.conversations.value[roomID] == nil)
        await #expect(throws: ChatError.accountEnded) { try await conversation.send(.text("as bob?")) }
        await #expect(throws: ChatError.unknownConversation(roomID)) { try await chat.conversation(id: roomID) }
        let values = seen.withLock { $0 }
        let firstBob = try #require(values.firstIndex { $0.userID == bob.userID })
        #expect(values[firstBob...].allSatisfy { $0.userID == bob.userID })
        await community.shutdown()
    }
}
