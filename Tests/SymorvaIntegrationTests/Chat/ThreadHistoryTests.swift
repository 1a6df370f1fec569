import Foundation
import SymorvaChat
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaTransport
import Testing

/// Threads whose history the device did not sync, on the real Synapse: a synced root's bundled
/// aggregation (v2 and sliding sync), edits and reactions of old replies that only
/// `/relations` pages bring, hidden replies that take no room in the main window, and the
/// main timeline's threaded receipt (`thread_id` `main`) checked against Synapse's own
/// per-thread counts.
@Suite("Thread history against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct ThreadHistoryTests {
    let transport = CurlTransport()

    /// A small sync window and small pages, so that a few dozen events make history.
    static func smallPages(_ mode: SyncMode, syncTimelineLimit: Int = 5) -> ChatOptions {
        ChatOptions(
            longPollTimeout: .seconds(5),
            syncBackoff: RetryBackoff(initialDelay: .milliseconds(200), maximumDelay: .seconds(1)),
            sendBackoff: RetryBackoff(initialDelay: .milliseconds(200), maximumDelay: .seconds(1)),
            syncTimelineLimit: syncTimelineLimit, initialPageSize: 5, syncMode: mode)
    }

    @Test(
        "A root synced with a limited timeline shows its thread's summary before any pagination",
        arguments: [SyncMode.v2, .sliding])
    func syncedRootSummary(mode: SyncMode) async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("tb-a", transport: transport)
            let bobAccount = try await ChatTestAccount.register("tb-b", transport: transport)
            let carolAccount = try await ChatTestAccount.register("tb-c", transport: transport)
            let alice = try await aliceAccount.makeClient(in: run, transport: transport)
            let bob = try await bobAccount.makeClient(in: run, transport: transport)
            try await alice.startAndSync()
            try await bob.startAndSync()
            let roomID = try await alice.createRoom(
                name: "Synced roots", invitees: [bobAccount.userID, carolAccount.userID], isEncrypted: false)
            try await bob.waitForConversation(roomID, .invited)
            _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
            let aliceRoom = try await alice.conversation(id: roomID)
            let root = try await aliceRoom.send(.text("synced root")).sentEventID()
            let bobRoom = try await bob.conversation(id: roomID)
            var replies: [EventID] = []
            for index in 1...4 {
                replies.append(try await bobRoom.send(.text("early reply \(index)"), inThread: root).sentEventID())
            }

            // Carol's first sync of the room is limited (8 events of more): the root comes with
            // the server's aggregation, its replies with it.
            let carol = try await carolAccount.makeClient(
                in: run, transport: transport, options: Self.smallPages(mode, syncTimelineLimit: 8))
            try await carol.startAndSync()
            try await carol.waitForConversation(roomID, .invited)
            // With sliding sync the room's timeline comes with its subscription (the list asks
            // for the latest event only): the conversation is open before the join.
            let carolRoom = try await carol.conversation(id: roomID)
            let stop = mode == .sliding ? carolRoom.observe() : {}
            defer { stop() }
            _ = try await carol.join(roomIDOrAlias: roomID.rawValue)
            try await carol.waitForConversation(roomID)
            // Nothing paged: the store's list is what sync wrote.
            try await waitForThreadCondition { try await carolRoom.threads().first?.replyCount == 4 }
            let summary = try #require(try await carolRoom.threads().first)
            #expect(summary.rootEventID == root)
            #expect(summary.latestReplyEventID == replies[3])
            #expect(summary.latestReplySender == bob.userID)
            #expect(!summary.hasParticipated)
        }
    }

    @Test("Old thread replies paged from /relations show their edits and reactions; hidden replies take no window room")
    func oldRepliesAndWindow() async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("th-a", transport: transport)
            let bobAccount = try await ChatTestAccount.register("th-b", transport: transport)
            let carolAccount = try await ChatTestAccount.register("th-c", transport: transport)
            let alice = try await aliceAccount.makeClient(in: run, transport: transport)
            let bob = try await bobAccount.makeClient(in: run, transport: transport)
            try await alice.startAndSync()
            try await bob.startAndSync()
            let roomID = try await alice.createRoom(
                name: "Thread history", invitees: [bobAccount.userID, carolAccount.userID], isEncrypted: false)
            try await bob.waitForConversation(roomID, .invited)
            _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
            let aliceRoom = try await alice.conversation(id: roomID)
            let bobRoom = try await bob.conversation(id: roomID)
            for index in 1...3 { try await aliceRoom.send(.text("m\(index)")).waitUntilSent() }
            let root = try await aliceRoom.send(.text("old root")).sentEventID()
            var replies: [EventID] = []
            for index in 1...12 {
                replies.append(try await bobRoom.send(.text("reply \(index)"), inThread: root).sentEventID())
            }
            // An edit and a reaction of old replies, then enough main messages to push them, the
            // replies and the root out of a late member's sync.
            _ = try await bobRoom.edit(replies[0], newText: "reply 1 edited").sentEventID()
            try await aliceRoom.react(to: replies[1], key: "👍")
            let stopBob = bobRoom.observe()
            defer { stopBob() }
            try await bobRoom.waitForTimeline { rows in
                rows.first { $0.eventID == root }?.thread?.replyCount == 12
            }
            for index in 1...8 { try await aliceRoom.send(.text("n\(index)")).waitUntilSent() }

            let carol = try await carolAccount.makeClient(in: run, transport: transport, options: Self.smallPages(.v2))
            try await carol.startAndSync()
            try await carol.waitForConversation(roomID, .invited)
            _ = try await carol.join(roomIDOrAlias: roomID.rawValue)
            try await carol.waitForConversation(roomID)
            let carolRoom = try await carol.conversation(id: roomID)

            // The thread first: its replies, the edit and the reaction come from the server only.
            let thread = carolRoom.thread(root)
            let stopThread = thread.timeline.subscribe { _ in }
            defer { stopThread() }
            var pagination = thread.pagination.value
            for _ in 0..<10 where !pagination.hasReachedStart {
                pagination = await thread.paginateBackwards(5)
                #expect(pagination.lastError == nil)
            }
            #expect(pagination.hasReachedStart)
            let threadRows = try await thread.timeline.wait(timeout: .seconds(60)) { rows in
                rows.count == 13 && rows[1].isEdited && !rows[2].reactions.isEmpty
            }
            #expect(threadRows.first?.text == "old root")
            #expect(Array(threadRows.dropFirst()).texts == ["reply 1 edited"] + (2...12).map { "reply \($0)" })
            #expect(threadRows[2].reactions.first?.key == "👍")
            #expect(threadRows[2].reactions.first?.count == 1)

            // The main timeline: each page of 5 adds at least 5 rows, although 12 hidden replies,
            // an edit and a reaction lie between n1 and the root.
            let stopMain = carolRoom.observe()
            defer { stopMain() }
            try await carolRoom.pagination.wait { $0.isObserved && !$0.isPaginating }
            var rows = try await carolRoom.waitForTimeline { $0.texts.contains("n8") }
            var pages = 0
            // Until the root shows, every row a page adds is a message (n1…n4, the root, m3…):
            // each page must add at least 5.
            while !rows.texts.contains("old root") {
                let before = rows.count
                let page = await carolRoom.paginateBackwards(5)
                #expect(page.lastError == nil)
                rows = try await carolRoom.waitForTimeline { $0.count >= before + 5 }
                pages += 1
                try #require(pages < 5, "the root never showed")
            }
            while !carolRoom.pagination.value.hasReachedStart {
                let page = await carolRoom.paginateBackwards(10)
                #expect(page.lastError == nil)
                pages += 1
                try #require(pages < 20, "pagination never reached the start")
            }
            rows = try await carolRoom.waitForTimeline { $0.texts.contains("m1") }
            #expect(!rows.contains { $0.threadRootID != nil })
            #expect(rows.texts == ["m1", "m2", "m3", "old root"] + (1...8).map { "n\($0)" })
            #expect(rows.first { $0.eventID == root }?.thread?.replyCount == 12)
        }
    }

    @Test("The main timeline's receipt is threaded (main): Synapse's per-thread counts keep the thread unread")
    func mainReceiptIsThreaded() async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("tm-a", transport: transport)
            let bobAccount = try await ChatTestAccount.register("tm-b", transport: transport)
            let alice = try await aliceAccount.makeClient(in: run, transport: transport)
            let bob = try await bobAccount.makeClient(in: run, transport: transport)
            try await alice.startAndSync()
            try await bob.startAndSync()
            let roomID = try await alice.createRoom(
                name: "Threaded receipts", invitees: [bobAccount.userID], isEncrypted: false)
            try await bob.waitForConversation(roomID, .invited)
            _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
            let bobRoom = try await bob.conversation(id: roomID)
            let root = try await bobRoom.send(.text("a root")).sentEventID()
            let reply = try await bobRoom.send(.text("a reply"), inThread: root).sentEventID()
            let last = try await bobRoom.send(.text("after the thread")).sentEventID()

            let aliceRoom = try await alice.conversation(id: roomID)
            let stop = aliceRoom.observe()
            defer { stop() }
            try await aliceRoom.waitForTimeline { $0.last?.eventID == last }
            try await alice.conversations.wait(timeout: .seconds(60)) { $0[roomID]?.unreadCount == 3 }
            // The server's count per thread (the sync filter asks for them in an unencrypted room).
            try await waitForThreadCondition { try await aliceRoom.threads().first?.unreadCount == 1 }

            // Reading the main timeline reads the root and the message after it, not the reply.
            try await aliceRoom.markRead()
            try await alice.conversations.wait(timeout: .seconds(60)) { $0[roomID]?.unreadCount == 1 }
            let requester = FixedTokenMatrixRequester(
                homeserverURL: aliceAccount.homeserverURL, userID: aliceAccount.userID,
                accessToken: aliceAccount.account.accessToken, transport: transport)
            var room = try await Self.threadedSync(roomID, user: alice.userID, attempt: 1, requester: requester)
            #expect(room.mainNotifications == 0)
            #expect(room.threadNotifications == [root.rawValue: 1])
            #expect(room.ownReceipts[last.rawValue] == "main")
            #expect(room.fullyRead == last.rawValue)
            #expect(try await aliceRoom.threads().first?.unreadCount == 1)

            // A reply named from the conversation is read in its thread; the fully-read marker stays.
            try await aliceRoom.markRead(upTo: reply)
            try await alice.conversations.wait(timeout: .seconds(60)) { $0[roomID]?.unreadCount == 0 }
            try await waitForThreadCondition { try await aliceRoom.threads().first?.unreadCount == 0 }
            room = try await Self.threadedSync(roomID, user: alice.userID, attempt: 2, requester: requester)
            #expect(room.mainNotifications == 0)
            #expect(room.threadNotifications.values.allSatisfy { $0 == 0 })
            #expect(room.ownReceipts[reply.rawValue] == root.rawValue)
            #expect(room.fullyRead == last.rawValue)
        }
    }

    /// What Synapse says of one room to a `/sync` whose filter asks for threaded counts
    /// (`unread_thread_notifications`, MSC3773): the main timeline's count, each thread's, the
    /// account's receipts (event → thread) and its fully-read marker.
    struct ThreadedRoom {
        var mainNotifications: Int?
        var threadNotifications: [String: Int] = [:]
        var ownReceipts: [String: String] = [:]
        var fullyRead: String?
    }

    /// `attempt` varies the filter: Synapse answers an identical initial sync from its cache
    /// for a while.
    static func threadedSync(
        _ roomID: RoomID, user: UserID, attempt: Int, requester: FixedTokenMatrixRequester
    ) async throws -> ThreadedRoom {
        let filter = #"{"room":{"timeline":{"limit":\#(attempt),"unread_thread_notifications":true}}}"#
        let joined = try await joinedRooms(ofSyncFilteredBy: filter, requester: requester)
        let room = try #require(joined[roomID.rawValue] as? [String: Any])
        var result = ThreadedRoom()
        result.mainNotifications = (room["unread_notifications"] as? [String: Any])?["notification_count"] as? Int
        for (thread, counts) in room["unread_thread_notifications"] as? [String: Any] ?? [:] {
            result.threadNotifications[thread] = (counts as? [String: Any])?["notification_count"] as? Int ?? 0
        }
        for event in (room["ephemeral"] as? [String: Any])?["events"] as? [[String: Any]] ?? [] {
            guard event["type"] as? String == "m.receipt", let content = event["content"] as? [String: Any] else {
                continue
            }
            for (eventID, receipts) in content {
                guard let read = (receipts as? [String: Any])?["m.read"] as? [String: Any],
                    let mine = read[user.rawValue] as? [String: Any]
                else { continue }
                result.ownReceipts[eventID] = mine["thread_id"] as? String ?? ""
            }
        }
        for event in (room["account_data"] as? [String: Any])?["events"] as? [[String: Any]] ?? [] {
            if event["type"] as? String == "m.fully_read" {
                result.fullyRead = (event["content"] as? [String: Any])?["event_id"] as? String
            }
        }
        return result
    }
}
