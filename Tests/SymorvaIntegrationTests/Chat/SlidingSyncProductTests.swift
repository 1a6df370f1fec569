import Foundation
import SymorvaChatStore
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import SymorvaTransport
import Testing

@testable import SymorvaChat
@testable import SymorvaStore

/// Sliding sync as the product runs it: `AccountChat` hosting the sliding loop (and a community
/// choosing it from Synapse's `/versions`), compared with the v2 client on the same account.
@Suite(
    "Sliding sync in the product against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct SlidingSyncProductTests {
    let transport = CurlTransport()

    /// Sliding options with a small first window and growth, so that a few rooms take several
    /// requests.
    static let sliding: ChatOptions = {
        var options = ChatOptions.testing
        options.syncMode = .sliding
        options.slidingFirstWindow = 3
        options.slidingGrowthStep = 4
        return options
    }()

    /// A sliding client of `account` on a database of its own.
    func slidingClient(
        _ account: ChatTestAccount, in run: ChatTestRun, path: String? = nil
    ) async throws -> (AccountChat, String) {
        let path = path ?? NSTemporaryDirectory() + "symorva-sliding-product-\(UUID().uuidString).sqlite"
        let store = try await ChatStore.open(path: path)
        let requester = FixedTokenMatrixRequester(
            homeserverURL: account.homeserverURL, userID: account.userID, accessToken: account.account.accessToken,
            transport: transport)
        let chat = AccountChat(
            requester: requester, database: store.databaseForTesting, scope: AccountScope(label: "sliding"),
            options: Self.sliding)
        run.atEnd { await chat.stop() }
        return (chat, path)
    }

    @Test("Signed in with sliding sync: the first window appears, the rest follows, the list is v2's")
    func listEqualsV2() async throws {
        try await withChatTestRun { run in
            let alice = try await ChatTestAccount.register("slidingalice", transport: transport)
            let bob = try await ChatTestAccount.register("slidingbob", transport: transport)
            let aliceV2 = try await alice.makeClient(in: run, transport: transport)
            let bobV2 = try await bob.makeClient(in: run, transport: transport)
            try await aliceV2.startAndSync()
            try await bobV2.startAndSync()

            // A randomised account: rooms with and without names, some joined with bob, some
            // invites from bob, some left, activity in a shuffled order.
            var random = SystemRandomNumberGenerator()
            let seed = UInt64.random(in: 0...UInt64.max, using: &random)
            var generator = SeededGenerator(seed: seed)
            var joined: [RoomID] = []
            var left: [RoomID] = []
            for index in 0..<8 {
                let named = generator.chance(60)
                let withBob = generator.chance(40)
                let roomID = try await aliceV2.createRoom(
                    name: named ? "Room \(index) of \(seed % 1000)" : nil, invitees: withBob ? [bob.userID] : [])
                if withBob {
                    try await bobV2.waitForConversation(roomID, .invited)
                    _ = try await bobV2.join(roomIDOrAlias: roomID.rawValue)
                }
                if generator.chance(15) { left.append(roomID) } else { joined.append(roomID) }
            }
            var invites: [RoomID] = []
            for index in 0..<generator.below(3) + 1 {
                invites.append(try await bobV2.createRoom(name: "Invite \(index)", invitees: [alice.userID]))
            }
            for roomID in joined.shuffled(using: &generator) {
                let conversation = try await aliceV2.conversation(id: roomID)
                try await conversation.send(.text("activity")).waitUntilSent()
            }
            for roomID in left { try await aliceV2.leave(roomID) }
            let expectedRooms = Set(joined + invites)
            let active = joined
            let v2List = try await aliceV2.conversations.wait(timeout: .seconds(60)) { list in
                Set(list.items.map(\.id)) == expectedRooms
                    && active.allSatisfy { list[$0]?.lastMessage?.body == "activity" }
            }

            // The same account signs in again, with sliding sync, on an empty database.
            let (sliding, path) = try await slidingClient(alice, in: run)
            #expect(sliding.syncMode == .sliding)
            let firstScreen = sliding.conversationWindow(0..<3)
            let stop = firstScreen.subscribe { _ in }
            run.atEnd { stop() }
            try await sliding.start()
            // The first window appears with the most recent rooms of v2's list, and says how
            // many rows there are.
            let window = try await firstScreen.wait(timeout: .seconds(60)) { $0.items.count == 3 }
            #expect(window.items.map(\.id) == Array(v2List.items.prefix(3).map(\.id)), "seed \(seed)")
            // The rest follows.
            try await sliding.syncState.wait(timeout: .seconds(60)) { state in
                if case .live = state { return true }
                return false
            }
            let list = try await sliding.conversations.wait(timeout: .seconds(60)) {
                $0.items.count == v2List.items.count
            }
            #expect(list.items.map(\.id) == v2List.items.map(\.id), "seed \(seed)")
            #expect(list.items.map(\.name) == v2List.items.map(\.name), "seed \(seed)")
            #expect(list.items.map(\.membership) == v2List.items.map(\.membership), "seed \(seed)")
            #expect(list.items.map(\.lastMessage?.eventID) == v2List.items.map(\.lastMessage?.eventID), "seed \(seed)")
            #expect(list.items.map(\.latestActivity) == v2List.items.map(\.latestActivity), "seed \(seed)")
            let settled = try await firstScreen.wait(timeout: .seconds(60)) { $0.total == v2List.items.count }
            #expect(settled.items.map(\.id) == Array(list.items.prefix(3).map(\.id)))
            let status = try #require(sliding.syncStatus.window)
            #expect(status.roomCount.map { status.rangeEnd + 1 >= $0 } == true)
            #expect(sliding.syncStatus.lastCommit != nil)
            // v2's since-token is untouched; the connection position and the to-device `since`
            // are stored.
            let store = try await ChatStore.open(path: path)
            #expect(try await store.sinceToken() == nil)
            let position = try await store.slidingSyncPosition()
            #expect(position.pos != nil && position.toDeviceSince != nil)
        }
    }

    @Test("Unread and highlight counts under sliding sync are the device's, equal to what v2 gets from the server")
    func countsOnDevice() async throws {
        // Synapse's simplified sliding sync sends placeholder zeros for a room's counts: the
        // device evaluates the account's push rules on every room it syncs that way. It counts
        // what it has stored: events that arrive while it syncs (a first window carries only
        // each room's latest event, so older unread events of a new sign-in are not counted).
        try await withChatTestRun { run in
            let alice = try await ChatTestAccount.register("slidingcounta", transport: transport)
            let bob = try await ChatTestAccount.register("slidingcountb", transport: transport)
            let aliceV2 = try await alice.makeClient(in: run, transport: transport)
            let bobV2 = try await bob.makeClient(in: run, transport: transport)
            try await aliceV2.startAndSync()
            try await bobV2.startAndSync()
            let roomID = try await bobV2.createRoom(name: "Counted", invitees: [alice.userID])
            try await aliceV2.waitForConversation(roomID, .invited)
            _ = try await aliceV2.join(roomIDOrAlias: roomID.rawValue)
            try await bobV2.waitForConversation(roomID)
            let (sliding, _) = try await slidingClient(alice, in: run)
            try await sliding.start()
            _ = try await sliding.conversations.wait(timeout: .seconds(60)) { $0[roomID]?.membership == .joined }
            let conversation = try await bobV2.conversation(id: roomID)
            try await conversation.send(.text("first")).waitUntilSent()
            try await conversation.send(.text("second")).waitUntilSent()
            try await conversation.send(.text("you there?"), mentioning: Mentions(userIDs: [alice.userID]))
                .waitUntilSent()
            let server = try await aliceV2.conversations.wait(timeout: .seconds(60)) { list in
                (list[roomID]?.unreadCount ?? 0) >= 3 && (list[roomID]?.highlightCount ?? 0) >= 1
            }
            let device = try await sliding.conversations.wait(timeout: .seconds(60)) { list in
                list[roomID]?.unreadCount == server[roomID]?.unreadCount
                    && list[roomID]?.highlightCount == server[roomID]?.highlightCount
            }
            #expect(device[roomID]?.unreadCount == 3)
            #expect(device[roomID]?.highlightCount == 1)
        }
    }

    @Test("An open conversation is a room subscription and gets live events; M_UNKNOWN_POS loses nothing")
    func liveAndUnknownPosition() async throws {
        try await withChatTestRun { run in
            let alice = try await ChatTestAccount.register("slidinglive", transport: transport)
            let bob = try await ChatTestAccount.register("slidinglivebob", transport: transport)
            let bobV2 = try await bob.makeClient(in: run, transport: transport)
            try await bobV2.startAndSync()
            let (sliding, path) = try await slidingClient(alice, in: run)
            try await sliding.startAndSync()
            let roomID = try await sliding.createRoom(name: "Live", invitees: [bob.userID])
            try await bobV2.waitForConversation(roomID, .invited)
            _ = try await bobV2.join(roomIDOrAlias: roomID.rawValue)

            let conversation = try await sliding.conversation(id: roomID)
            let stopObserving = conversation.observe()
            run.atEnd { stopObserving() }
            #expect(sliding.subscribedRooms == [roomID])
            let bobConversation = try await bobV2.conversation(id: roomID)
            try await bobConversation.send(.text("live one")).waitUntilSent()
            try await conversation.waitForTimeline { $0.texts.contains("live one") }
            try await conversation.send(.text("mine")).waitUntilSent()
            try await conversation.waitForTimeline { $0.texts.suffix(2) == ["live one", "mine"] }

            // The server forgets the connection: the stored position names a connection it does
            // not know, and the next client on this database gets M_UNKNOWN_POS.
            await sliding.stop()
            let store = try await ChatStore.open(path: path)
            let stored = try #require(try await store.slidingSyncPosition().pos)
            let token = stored.split(separator: "/", maxSplits: 1).last.map(String.init) ?? stored
            try await store.databaseForTesting.execute(
                "UPDATE sliding_sync_state SET pos = ? WHERE id = 1", [.text("9999/" + token)])
            let before = try await store.loadConversationList()
            try await bobConversation.send(.text("while away")).waitUntilSent()

            let (restarted, _) = try await slidingClient(alice, in: run, path: path)
            let states = Lock<[String]>([])
            let unsubscribe = restarted.syncState.subscribe { state in states.withLock { $0.append(state.caseName) } }
            run.atEnd { unsubscribe() }
            try await restarted.start()
            let reopened = try await restarted.conversation(id: roomID)
            let stopReopened = reopened.observe()
            run.atEnd { stopReopened() }
            try await reopened.waitForTimeline { $0.texts.suffix(3) == ["live one", "mine", "while away"] }
            try await restarted.syncState.wait(timeout: .seconds(60)) { state in
                if case .live(let progress) = state { return progress.since?.rawValue.hasPrefix("9999/") == false }
                return false
            }
            // catching up from the stored pos, then a new connection from the first window.
            let trajectory = states.withLock { $0 }
            #expect(trajectory.contains("initialSync"), "\(trajectory)")
            let after = try await store.loadConversationList()
            #expect(Set(after.map(\.roomID)) == Set(before.map(\.roomID)))
            #expect(try await store.slidingSyncPosition().pos?.hasPrefix("9999/") == false)
            let texts = reopened.timeline.value.texts
            #expect(texts.filter { $0 == "live one" }.count == 1 && texts.filter { $0 == "mine" }.count == 1)
        }
    }

    @Test("A community signs in with sliding sync when Synapse advertises it, and with v2 when the manifest says so")
    func communityChoosesMode() async throws {
        let environment = DevEnvironment.current!
        let automatic = CommunityFixture()
        _ = try await automatic.community.session.register(
            username: DevEnvironment.uniqueUsername("slidingauto"), password: testPassword)
        #expect(automatic.community.chat.syncStatus?.mode == .sliding)
        try await automatic.community.chat.syncState.wait(timeout: .seconds(60)) { state in
            if case .live = state { return true }
            return false
        }
        let roomID = try await automatic.community.chat.createRoom(name: "Sliding community")
        let window = automatic.community.chat.conversations.window(0..<20)
        let stop = window.subscribe { _ in }
        let shown = try await window.wait(timeout: .seconds(60)) { $0.items.contains { $0.id == roomID } }
        stop()
        #expect(shown.total >= 1)

        var configuration = environment.configuration
        configuration.sync = SymorvaConfiguration.Sync(mode: .v2)
        let forced = CommunityFixture(configuration: configuration)
        _ = try await forced.community.session.register(
            username: DevEnvironment.uniqueUsername("slidingv2"), password: testPassword)
        #expect(forced.community.chat.syncStatus?.mode == .v2)
        try await forced.community.chat.syncState.wait(timeout: .seconds(60)) { state in
            if case .live = state { return true }
            return false
        }
    }
}
