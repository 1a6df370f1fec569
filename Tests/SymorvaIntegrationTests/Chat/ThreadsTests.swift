import Foundation
import SymorvaChat
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaREPL
import SymorvaRuntime
import SymorvaTransport
import Testing

/// Threads between SymorvaKit accounts on the real Synapse: replies sent through the queue
/// with the spec's fallback, a thread's own timeline (paged through `/relations` for a member
/// who joined late), edits and reactions in it, the room's thread list, the root's summary in
/// the main timeline, and threaded receipts with unread counts per thread.
@Suite("Threads against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct ThreadsTests {
    let transport = CurlTransport()

    @Test("A thread of 30 replies: fallback on the wire, timeline paged from /relations, list, summary, edit, reaction")
    func threadTimelineAndList() async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("th-a", transport: transport)
            let bobAccount = try await ChatTestAccount.register("th-b", transport: transport)
            let carolAccount = try await ChatTestAccount.register("th-c", transport: transport)
            let alice = try await aliceAccount.makeClient(in: run, transport: transport)
            let bob = try await bobAccount.makeClient(in: run, transport: transport)
            try await alice.startAndSync()
            try await bob.startAndSync()
            let roomID = try await alice.createRoom(
                name: "Threads", invitees: [bobAccount.userID, carolAccount.userID], isEncrypted: false)
            try await bob.waitForConversation(roomID, .invited)
            _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
            let aliceRoom = try await alice.conversation(id: roomID)
            let stopMain = aliceRoom.observe()
            defer { stopMain() }
            let rootReceipt = try await aliceRoom.send(.text("root message"))
            try await rootReceipt.waitUntilSent()
            let root = try #require(rootReceipt.eventIDs.first)

            let bobRoom = try await bob.conversation(id: roomID)
            let bobThread = bobRoom.thread(root)
            let stopBobThread = bobThread.timeline.subscribe { _ in }
            defer { stopBobThread() }
            var replyIDs: [EventID] = []
            for index in 1...30 {
                let receipt = try await bobThread.send(.text("reply \(index)"))
                try await receipt.waitUntilSent()
                replyIDs.append(try #require(receipt.eventIDs.first))
            }
            // Bob's thread shows the root, then his replies in order; his main timeline does not.
            let bobRows = try await bobThread.timeline.wait(timeout: .seconds(60)) { rows in
                rows.count == 31 && rows.allSatisfy { $0.sendState == nil }
            }
            #expect(bobRows.first?.eventID == root)
            #expect(Array(bobRows.dropFirst()).texts == (1...30).map { "reply \($0)" })
            #expect(bobRows.dropFirst().allSatisfy { $0.threadRootID == root && $0.sendState == nil })

            // On the wire: rel_type m.thread, the fallback replying to the previous reply.
            let requester = FixedTokenMatrixRequester(
                homeserverURL: bobAccount.homeserverURL, userID: bobAccount.userID,
                accessToken: bobAccount.account.accessToken, transport: transport)
            let second = try await requester.send(ChatAPI.event(roomID: roomID, eventID: replyIDs[1]))
            let relation = try #require(
                (try JSONSerialization.jsonObject(with: Data(second.body)) as? [String: Any])?["content"]
                    .flatMap { ($0 as? [String: Any])?["m.relates_to"] as? [String: Any] })
            #expect(relation["rel_type"] as? String == "m.thread")
            #expect(relation["event_id"] as? String == root.rawValue)
            #expect(relation["is_falling_back"] as? Bool == true)
            #expect((relation["m.in_reply_to"] as? [String: Any])?["event_id"] as? String == replyIDs[0].rawValue)

            // Alice's main timeline: the root with its summary, no reply.
            let aliceRows = try await aliceRoom.waitForTimeline { rows in
                rows.first { $0.eventID == root }?.thread?.replyCount == 30
            }
            #expect(!aliceRows.contains { $0.threadRootID != nil })
            #expect(aliceRows.first { $0.eventID == root }?.thread?.latestReplyEventID == replyIDs[29])

            // Edit and reaction in the thread.
            _ = try await bobRoom.edit(replyIDs[29], newText: "reply 30 edited")
            try await aliceRoom.react(to: replyIDs[0], key: "👍")

            // A second, more recently active thread, for the list's pages.
            let otherRoot = try await aliceRoom.send(.text("another root")).sentEventID()
            try await bobRoom.send(.text("other reply"), inThread: otherRoot).waitUntilSent()

            // Carol joins late: her sync holds only the newest events; the rest come from /relations.
            let carol = try await carolAccount.makeClient(in: run, transport: transport)
            try await carol.startAndSync()
            try await carol.waitForConversation(roomID, .invited)
            _ = try await carol.join(roomIDOrAlias: roomID.rawValue)
            let carolRoom = try await carol.conversation(id: roomID)
            let carolThread = carolRoom.thread(root)
            let stopCarolThread = carolThread.timeline.subscribe { _ in }
            defer { stopCarolThread() }
            var pagination = carolThread.pagination.value
            for _ in 0..<10 where !pagination.hasReachedStart {
                pagination = await carolThread.paginateBackwards(20)
                #expect(pagination.lastError == nil)
            }
            #expect(pagination.hasReachedStart)
            let carolRows = try await carolThread.timeline.wait(timeout: .seconds(60)) { rows in
                rows.count == 31 && rows.last?.isEdited == true && rows.dropFirst().first?.reactions.isEmpty == false
            }
            // The root, older than anything Carol synced, was fetched when the thread reached it.
            #expect(carolRows.first?.text == "root message")
            #expect(Array(carolRows.dropFirst()).texts == (1...29).map { "reply \($0)" } + ["reply 30 edited"])
            #expect(carolRows[1].reactions.first?.key == "👍")
            // The list, one thread a page: the most recently active first (the store may already
            // know the other thread from Carol's sync).
            let firstPage = try await carolRoom.loadThreads(limit: 1)
            #expect(firstPage.first?.rootEventID == otherRoot)
            #expect(try await carolRoom.loadMoreThreads(limit: 1))
            while try await carolRoom.loadMoreThreads(limit: 1) {}
            let list = try await carolRoom.threads()
            #expect(list.map(\.rootEventID) == [otherRoot, root])
            #expect(list.last?.replyCount == 30)
            #expect(list.last?.latestReplySender == bob.userID)
            #expect(list.first?.replyCount == 1)

            // A new reply arrives live in Carol's thread and in the summary.
            _ = try await bobThread.send(.text("reply 31"))
            try await carolThread.timeline.wait(timeout: .seconds(60)) { $0.last?.text == "reply 31" }
            let summary = try await carolThread.summary()
            #expect(summary?.replyCount == 31)
        }
    }

}

/// Polls `condition` (the store's answer changes with syncs a test cannot await) for up to a minute.
func waitForThreadCondition(_ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(60)
    while try await !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("condition not met within a minute")
            return
        }
        try await Task.sleep(for: .milliseconds(100))
    }
}

/// Threads in an encrypted room between two SymorvaKit communities with crypto (v2 sync, as
/// the device-count stream test: see its note on sliding sync).
@Suite(
    "Encrypted threads against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct EncryptedThreadsTests {
    @Test("Replies sent encrypted with the relation in the clear; a threaded receipt clears that thread's count only")
    func encryptedThreadReceipts() async throws {
        var configuration = DevEnvironment.current!.configuration
        configuration.sync = SymorvaConfiguration.Sync(mode: .v2)
        let aliceFixture = CommunityFixture(configuration: configuration)
        let bobFixture = CommunityFixture(configuration: configuration)
        _ = try await aliceFixture.community.session.register(
            username: DevEnvironment.uniqueUsername("te-a"), password: testPassword)
        let bob = try await bobFixture.community.session.register(
            username: DevEnvironment.uniqueUsername("te-b"), password: testPassword)
        _ = try await aliceFixture.readyCrypto()
        _ = try await bobFixture.readyCrypto()
        let aliceChat = aliceFixture.community.chat
        let bobChat = bobFixture.community.chat
        let roomID = try await aliceChat.createRoom(name: "Sealed threads", invitees: [bob.userID], isEncrypted: true)
        try await bobChat.waitForConversation(roomID, .invited)
        _ = try await bobChat.join(roomIDOrAlias: roomID.rawValue)
        try await aliceChat.waitForConversation(roomID)
        let aliceRoom = try await aliceChat.conversation(id: roomID)
        let rootReceipt = try await aliceRoom.send(.text("sealed root"))
        try await rootReceipt.waitUntilSent()
        let root = try #require(rootReceipt.eventIDs.first)
        let bobRoom = try await bobChat.conversation(id: roomID)
        let first = try await bobRoom.send(.text("sealed reply 1"), inThread: root)
        try await first.waitUntilSent()
        let second = try await bobRoom.send(.text("sealed reply 2"), inThread: root)
        try await second.waitUntilSent()
        try await bobRoom.send(.text("in the main timeline")).waitUntilSent()

        // On the wire the reply is m.room.encrypted with the thread relation outside.
        let requester = try #require(bobFixture.community.requester)
        let wire = try await requester.send(ChatAPI.event(roomID: roomID, eventID: try #require(second.eventIDs.first)))
        let event = try #require(try JSONSerialization.jsonObject(with: Data(wire.body)) as? [String: Any])
        #expect(event["type"] as? String == "m.room.encrypted")
        let relation = (event["content"] as? [String: Any])?["m.relates_to"] as? [String: Any]
        #expect(relation?["rel_type"] as? String == "m.thread")
        #expect(relation?["event_id"] as? String == root.rawValue)
        #expect((event["content"] as? [String: Any])?["body"] == nil)

        // Alice reads the thread decrypted; the device counts two unread in it.
        let aliceThread = aliceRoom.thread(root)
        let stop = aliceThread.timeline.subscribe { _ in }
        defer { stop() }
        try await aliceThread.timeline.wait(timeout: .seconds(60)) { rows in
            Array(rows.dropFirst()).texts == ["sealed reply 1", "sealed reply 2"]
        }
        try await waitForThreadCondition { try await aliceThread.summary()?.unreadCount == 2 }
        // A threaded receipt at the latest reply reads the thread only: the main message stays unread.
        try await aliceThread.markRead()
        try await waitForThreadCondition { try await aliceThread.summary()?.unreadCount == 0 }
        #expect(try await aliceRoom.threads().first?.unreadCount == 0)
        try await aliceChat.conversations.observable.wait(timeout: .seconds(60)) { $0[roomID]?.unreadCount == 1 }
    }
}

/// The REPL's thread commands against Synapse: `send --thread`, `thread`, `threads`,
/// `thread-read`, and the root's summary in the open conversation.
@Suite("REPL threads against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct ThreadREPLTests {
    let transport = CurlTransport()

    @Test("A transcript: Alice starts a thread with send --thread; Bob lists it with threads, opens it and reads it")
    func transcript() async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("tr-a", transport: transport)
            let bobAccount = try await ChatTestAccount.register("tr-b", transport: transport)
            let alice = try await aliceAccount.makeClient(in: run, transport: transport)
            let bob = try await bobAccount.makeClient(in: run, transport: transport)
            try await alice.startAndSync()
            try await bob.startAndSync()
            let roomID = try await alice.createRoom(
                name: "Thread REPL", invitees: [bobAccount.userID], isEncrypted: false)
            try await bob.waitForConversation(roomID, .invited)
            _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
            try await alice.waitForConversation(roomID)

            let aliceOutput = ObservableREPLOutput()
            let aliceContext = REPLContext(
                output: aliceOutput, tracer: Tracer(), logCenter: LogCenter(threshold: .error))
            aliceContext[REPLChatProviderKey.self] = FixedREPLChatProvider(alice)
            let aliceREPL = REPLSession(context: aliceContext, commands: ChatCommands.all)
            var summary = await aliceREPL.run(lines: ["open \(roomID.rawValue)", "send the root"])
            #expect(summary.failures.isEmpty)
            let aliceRoom = try await alice.conversation(id: roomID)
            let rows = try await aliceRoom.waitForTimeline {
                $0.contains { $0.text == "the root" && $0.sendState == nil }
            }
            let rootID = try #require(rows.first { $0.text == "the root" }?.eventID)
            summary = await aliceREPL.run(lines: [
                "send --thread \(rootID) first reply",
                "send --thread \(rootID) second reply \(bobAccount.userID.rawValue)",
            ])
            #expect(summary.failures.isEmpty)
            // The root's row shows the thread; the replies are not rows of the main timeline.
            let aliceLines = try await aliceOutput.lines.wait { $0.contains { $0.hasSuffix("[thread: 2 replies]") } }
            #expect(!aliceLines.contains { $0.contains("first reply") })

            let bobOutput = ObservableREPLOutput()
            let bobContext = REPLContext(output: bobOutput, tracer: Tracer(), logCenter: LogCenter(threshold: .error))
            bobContext[REPLChatProviderKey.self] = FixedREPLChatProvider(bob)
            let bobREPL = REPLSession(context: bobContext, commands: ChatCommands.all)
            summary = await bobREPL.run(lines: ["open \(roomID.rawValue)", "threads"])
            #expect(summary.failures.isEmpty)
            let listed = try await bobOutput.lines.wait { $0.contains { $0.hasPrefix("1. $") } }
            let entry = try #require(listed.first { $0.hasPrefix("1. $") })
            #expect(entry.contains("2 replies, latest by \(alice.userID.rawValue)"))
            let root = try #require(entry.split(separator: " ").dropFirst().first.map(String.init))
            summary = await bobREPL.run(lines: ["thread \(root)", "thread-back 10", "thread-read"])
            #expect(summary.failures.isEmpty)
            let bobLines = try await bobOutput.lines.wait { $0.contains("marked thread read") }
            #expect(bobLines.contains("opened thread \(root)"))
            #expect(bobLines.contains { $0.hasSuffix("first reply  [in thread]") })
            // A mention in a thread reply reaches its target.
            #expect(bobLines.contains { $0.contains("second reply") && $0.hasSuffix("[mentions you]  [in thread]") })
        }
    }
}
