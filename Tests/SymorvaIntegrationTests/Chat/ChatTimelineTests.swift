import Foundation
import SymorvaChat
import SymorvaKit
import SymorvaMachines
import SymorvaTransport
import Testing

@Suite("Chat timelines against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct ChatTimelineTests {
    let transport = CurlTransport()

    /// Small pages and a small sync window, so that a few dozen messages make gaps.
    static let smallPages = ChatOptions(
        longPollTimeout: .seconds(5),
        syncBackoff: RetryBackoff(initialDelay: .milliseconds(200), maximumDelay: .seconds(1)),
        sendBackoff: RetryBackoff(initialDelay: .milliseconds(200), maximumDelay: .seconds(1)),
        syncTimelineLimit: 5, initialPageSize: 5)

    func makeRoom(_ alice: AccountChat, inviting bob: ChatTestAccount) async throws -> RoomID {
        let roomID = try await alice.createRoom(name: "History", invitees: [bob.userID])
        return roomID
    }

    /// Sends `texts` one after the other, each confirmed by the server before the next.
    func send(_ texts: [String], in room: Conversation) async throws {
        for text in texts {
            try await room.send(.text(text)).waitUntilSent()
        }
    }

    @Test("History paginates back to the room's creation, store first then server, in order and once each")
    func paginatesToStart() async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("alice", transport: transport)
            let bobAccount = try await ChatTestAccount.register("bob", transport: transport)
            let alice = try await aliceAccount.makeClient(in: run, transport: transport, options: Self.smallPages)
            try await alice.startAndSync()
            let roomID = try await makeRoom(alice, inviting: bobAccount)
            let texts = (1...23).map { "history \($0)" }
            try await send(texts, in: try await alice.conversation(id: roomID))

            // Bob arrives late: his first sync shows only the newest events, with a gap before them.
            let bob = try await bobAccount.makeClient(in: run, transport: transport, options: Self.smallPages)
            try await bob.startAndSync()
            try await bob.waitForConversation(roomID, .invited)
            _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
            let room = try await bob.conversation(id: roomID)
            let stopObserving = room.observe()
            defer { stopObserving() }
            try await room.pagination.wait { $0.isObserved && !$0.isPaginating }
            var pagination = room.pagination.value
            var pages = 0
            while !pagination.hasReachedStart {
                pagination = await room.paginateBackwards(7)
                #expect(pagination.lastError == nil)
                pages += 1
                try #require(pages < 30, "pagination never reached the start")
            }
            let items = try await room.waitForTimeline { $0.texts == texts }
            #expect(items.texts == texts)
            // The room's creation is the first row: nothing older exists.
            let first = try #require(items.first)
            #expect(first.content == .stateChange(.created), "the first row is the room's creation")
            let eventIDs = items.compactMap(\.eventID)
            #expect(Set(eventIDs).count == eventIDs.count)
        }
    }

    @Test("A limited sync leaves a gap between stored and new events; pagination fills it from the server")
    func limitedSyncGapIsFilled() async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("alice", transport: transport)
            let bobAccount = try await ChatTestAccount.register("bob", transport: transport)
            let alice = try await aliceAccount.makeClient(in: run, transport: transport, options: Self.smallPages)
            let bob = try await bobAccount.makeClient(in: run, transport: transport, options: Self.smallPages)
            try await alice.startAndSync()
            try await bob.startAndSync()
            let roomID = try await makeRoom(alice, inviting: bobAccount)
            try await bob.waitForConversation(roomID, .invited)
            _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
            let aliceRoom = try await alice.conversation(id: roomID)
            let before = (1...3).map { "before \($0)" }
            try await send(before, in: aliceRoom)
            try await bob.conversations.wait { $0[roomID]?.lastMessage?.body == "before 3" }
            await bob.stop()

            // While Bob is away, more than one sync window of messages.
            let during = (1...12).map { "during \($0)" }
            try await send(during, in: aliceRoom)

            let bobAgain = try await bobAccount.makeClient(in: run, transport: transport, options: Self.smallPages)
            try await bobAgain.startAndSync()
            try await bobAgain.conversations.wait { $0[roomID]?.lastMessage?.body == "during 12" }
            let room = try await bobAgain.conversation(id: roomID)
            let stopObserving = room.observe()
            defer { stopObserving() }
            try await room.pagination.wait { $0.isObserved && !$0.isPaginating }
            // The newest page ends at the gap: only the last sync window is loaded.
            #expect(!room.timeline.value.texts.contains("before 3"))
            var pages = 0
            while !room.timeline.value.texts.contains("before 1") {
                let pagination = await room.paginateBackwards(6)
                #expect(pagination.lastError == nil)
                pages += 1
                try #require(pages < 20, "the gap was never filled")
            }
            let texts = room.timeline.value.texts
            #expect(texts.suffix(15) == ArraySlice(before + during))
        }
    }

    @Test("Edits, reactions and redactions made by one member are seen by the other")
    func editsReactionsRedactions() async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("alice", transport: transport)
            let bobAccount = try await ChatTestAccount.register("bob", transport: transport)
            let alice = try await aliceAccount.makeClient(in: run, transport: transport)
            let bob = try await bobAccount.makeClient(in: run, transport: transport)
            try await alice.startAndSync()
            try await bob.startAndSync()
            let roomID = try await makeRoom(alice, inviting: bobAccount)
            try await bob.waitForConversation(roomID, .invited)
            _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
            let aliceRoom = try await alice.conversation(id: roomID)
            let bobRoom = try await bob.conversation(id: roomID)
            let stopAlice = aliceRoom.observe()
            let stopBob = bobRoom.observe()
            defer {
                stopAlice()
                stopBob()
            }

            let original = try await aliceRoom.send(.text("helo wrld"))
            try await original.waitUntilSent()
            let eventID = try #require(original.eventIDs.first)
            try await aliceRoom.edit(eventID, newText: "hello world").waitUntilSent()
            let edited = try await bobRoom.waitForTimeline { items in
                items.contains { $0.eventID == eventID && $0.text == "hello world" }
            }
            #expect(edited.first { $0.eventID == eventID }?.isEdited == true)
            #expect(!edited.texts.contains("* hello world"))

            try await bobRoom.react(to: eventID, key: "👍")
            // Bob's own reaction shows at once and stays once synced.
            try await bobRoom.waitForTimeline { items in
                items.first { $0.eventID == eventID }?.reactions == [
                    ReactionSummary(key: "👍", senders: [bob.userID], includesOwn: true)
                ]
            }
            try await aliceRoom.waitForTimeline { items in
                items.first { $0.eventID == eventID }?.reactions == [
                    ReactionSummary(key: "👍", senders: [bob.userID], includesOwn: false)
                ]
            }
            try await bobRoom.unreact(to: eventID, key: "👍")
            try await aliceRoom.waitForTimeline { items in items.first { $0.eventID == eventID }?.reactions == [] }

            let doomed = try await aliceRoom.send(.text("sent by mistake"))
            try await doomed.waitUntilSent()
            let doomedID = try #require(doomed.eventIDs.first)
            try await aliceRoom.redact(doomedID)
            let redacted = try await bobRoom.waitForTimeline { items in
                items.first { $0.eventID == doomedID }?.content == .redacted
            }
            #expect(!redacted.texts.contains("sent by mistake"))
        }
    }
}
