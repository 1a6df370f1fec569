import Foundation
import SymorvaChat
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaTransport
import Testing

@Suite(
    "Chat delivery through outages and restarts", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct ChatDeliveryTests {
    let transport = CurlTransport()

    struct Setup {
        let alice: AccountChat
        let bob: AccountChat
        let aliceAccount: ChatTestAccount
        let roomID: RoomID
        let proxy: FaultProxy
    }

    /// Alice talks to Synapse through a proxy the test can close; Bob talks to it directly. The
    /// clients are stopped and the proxy closed when `run` ends.
    func makeSetup(_ run: ChatTestRun) async throws -> Setup {
        let environment = DevEnvironment.current!
        let proxy = try FaultProxy(inFrontOf: environment.homeserverURL)
        run.atEnd { proxy.close() }
        let aliceAccount = try await ChatTestAccount.register("alice", transport: transport)
        let bobAccount = try await ChatTestAccount.register("bob", transport: transport)
        let alice = try await aliceAccount.makeClient(
            in: run, transport: transport, homeserverURL: HomeserverURL(proxy.url)!)
        let bob = try await bobAccount.makeClient(in: run, transport: transport)
        try await alice.startAndSync()
        try await bob.startAndSync()
        let roomID = try await alice.createRoom(name: "Outages", invitees: [bobAccount.userID])
        try await bob.waitForConversation(roomID, .invited)
        _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
        try await alice.waitForConversation(roomID)
        return Setup(alice: alice, bob: bob, aliceAccount: aliceAccount, roomID: roomID, proxy: proxy)
    }

    /// Waits until the sync loop has noticed the outage.
    func waitForBackoff(_ client: AccountChat) async throws {
        try await client.syncState.wait(timeout: .seconds(60)) { state in
            if case .backingOff = state { return true }
            return false
        }
    }

    @Test("Messages sent while the server is unreachable are queued and arrive exactly once, in order")
    func sendDuringOutage() async throws {
        try await withChatTestRun { run in
            let setup = try await makeSetup(run)
            let bobRoom = try await setup.bob.conversation(id: setup.roomID)
            let stopObserving = bobRoom.observe()
            defer { stopObserving() }
            let aliceRoom = try await setup.alice.conversation(id: setup.roomID)

            setup.proxy.close()
            try await waitForBackoff(setup.alice)
            let texts = (1...6).map { "offline \($0)" }
            var receipts: [SendReceipt] = []
            for text in texts { receipts.append(try await aliceRoom.send(.text(text))) }
            #expect(receipts.allSatisfy { $0.state.value == .sending })

            try setup.proxy.open()
            for receipt in receipts { try await receipt.waitUntilSent() }
            let items = try await bobRoom.waitForTimeline { $0.texts.filter { $0.hasPrefix("offline") }.count >= 6 }
            #expect(items.texts.filter { $0.hasPrefix("offline") } == texts)
        }
    }

    @Test("A new client on the same database resumes the persisted queue: each message arrives once, in order")
    func restartResumesQueue() async throws {
        try await withChatTestRun { run in
            let setup = try await makeSetup(run)
            let aliceRoom = try await setup.alice.conversation(id: setup.roomID)
            setup.proxy.close()
            try await waitForBackoff(setup.alice)
            let texts = (1...4).map { "queued before restart \($0)" }
            for text in texts { _ = try await aliceRoom.send(.text(text)) }
            // The app goes away with its messages unsent.
            await setup.alice.stop()

            let restarted = try await setup.aliceAccount.makeClient(in: run, transport: transport)
            try await restarted.start()
            let bobRoom = try await setup.bob.conversation(id: setup.roomID)
            let stopObserving = bobRoom.observe()
            defer { stopObserving() }
            let items = try await bobRoom.waitForTimeline { $0.texts.filter { $0.hasPrefix("queued") }.count >= 4 }
            #expect(items.texts.filter { $0.hasPrefix("queued") } == texts)
            // The restarted client's own timeline shows each message once, synced.
            let restartedRoom = try await restarted.conversation(id: setup.roomID)
            let stopOwn = restartedRoom.observe()
            defer { stopOwn() }
            let own = try await restartedRoom.waitForTimeline { items in
                items.filter { $0.text?.hasPrefix("queued") == true && $0.sendState == nil }.count == 4
            }
            #expect(own.texts.filter { $0.hasPrefix("queued") } == texts)
        }
    }

    @Test("A favourite set while the server is unreachable shows at once and rolls back visibly")
    func optimisticFlagRollsBack() async throws {
        try await withChatTestRun { run in
            let setup = try await makeSetup(run)
            let seen = SeenValues<Bool>()
            let roomID = setup.roomID
            let unsubscribe = setup.alice.conversations.subscribe { list in
                guard let item = list[roomID] else { return }
                seen.append(item.isFavourite)
            }
            defer { unsubscribe() }
            setup.proxy.close()
            let room = try await setup.alice.conversation(id: roomID)
            await #expect(throws: ChatError.network) { try await room.setFavourite(true) }
            #expect(seen.all == [false, true, false])
            #expect(setup.alice.conversations.value[roomID]?.isFavourite == false)

            try setup.proxy.open()
            try await room.setFavourite(true)
            #expect(setup.alice.conversations.value[roomID]?.isFavourite == true)
        }
    }

    @Test("A tag refused by the server (a room the member is not in) is rolled back and reported")
    func refusedTagIsReported() async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("alice", transport: transport)
            let bobAccount = try await ChatTestAccount.register("bob", transport: transport)
            let alice = try await aliceAccount.makeClient(in: run, transport: transport)
            let bob = try await bobAccount.makeClient(in: run, transport: transport)
            try await bob.startAndSync()
            let bobsRoom = try await bob.createRoom(name: "Private")
            await #expect(throws: ChatError.server(status: 403, errorCode: "M_FORBIDDEN")) {
                try await alice.setFlag(.favourite, true, roomID: bobsRoom)
            }
            #expect(alice.conversations.value[bobsRoom] == nil)
        }
    }

    @Test("Kicking without the power level to kick is refused before any request")
    func kickNeedsPower() async throws {
        try await withChatTestRun { run in
            let setup = try await makeSetup(run)
            // Bob is an ordinary member (level 0); kicking needs 50.
            await #expect(throws: ChatError.insufficientPowerLevel(required: 50, actual: 0)) {
                try await setup.bob.kick(setup.alice.userID, from: setup.roomID)
            }
        }
    }
}

/// Values seen by a subscriber, shared with the test.
final class SeenValues<Value: Sendable & Equatable>: Sendable {
    private let values = Lock<[Value]>([])
    /// Appends `value` unless it repeats the last one.
    func append(_ value: Value) { values.withLock { if $0.last != value { $0.append(value) } } }
    var all: [Value] { values.withLock { $0 } }
}
