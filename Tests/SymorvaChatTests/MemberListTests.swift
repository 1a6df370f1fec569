import Foundation
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaChat
@testable import SymorvaChatStore

/// When a room key's recipients need `GET /members` again (chat schema 17, `member_lists`): the
/// requests are counted on the transport the chat client sends through.
struct MemberListTests {
    let fixture = ConversationEncryptionTests()
    var roomID: RoomID { ConversationEncryptionTests.roomID }
    var membersRequests: Int { fixture.transport.count("GET", ConversationEncryptionTests.membersPath) }

    /// A `/sync` v2 response whose timeline for the room is `limited` with `events`.
    static func limitedSync(_ batch: String, _ events: [String]) -> [UInt8] {
        Array(
            #"""
            {"next_batch": "\#(batch)", "rooms": {"join": {"\#(ConversationEncryptionTests.roomID.rawValue)": {
              "timeline": {"events": [\#(events.joined(separator: ", "))], "limited": true, "prev_batch": "p-\#(batch)"}
            }}}}
            """#.utf8)
    }

    static func message(_ index: Int, ts: Int = 10) -> String {
        #"{"type": "m.room.message", "event_id": "$m\#(index)", "sender": "@bob:example.org", "origin_server_ts": \#(ts + index), "content": {"msgtype": "m.text", "body": "m\#(index)"}}"#
    }

    /// An encrypted room with two messages stored, and one message sent (its members read once).
    func sentOnce() async throws -> (ChatStore, AccountChat) {
        let store = try await fixture.store(fullState: true, encrypted: true)
        _ = try await SyncIngestor(store: store).ingest(
            ConversationEncryptionTests.sync("b2", [Self.message(1), Self.message(2)]))
        let chat = fixture.chat(on: store)
        try await chat.conversation(id: roomID).send(.text("first")).sent()
        #expect(membersRequests == 1)
        #expect(try await store.memberList(roomID).isComplete)
        return (store, chat)
    }

    @Test("The member list read once stays complete across a restart: a new client on the same store does not ask")
    func notRepeatedAfterRestart() async throws {
        let (store, _) = try await sentOnce()
        let restarted = fixture.chat(on: store)
        try await restarted.conversation(id: roomID).send(.text("after the restart")).sent()
        #expect(membersRequests == 1)
        #expect(
            fixture.crypto.recipients.withLock { $0.last }
                == [ConversationEncryptionTests.me, UserID("@bob:example.org")].sorted())
    }

    @Test(
        "A limited timeline that reaches back to the newest stored event (sliding sync sending the room again) skipped nothing: no new request"
    )
    func limitedButJoinedIsNoGap() async throws {
        let (store, chat) = try await sentOnce()
        // A new connection / a room subscription's longer timeline: events already stored, then new ones.
        _ = try await SyncIngestor(store: store).ingest(
            Self.limitedSync("b3", [Self.message(1), Self.message(2), Self.message(3)]))
        #expect(try await store.memberList(roomID).isComplete)
        try await chat.conversation(id: roomID).send(.text("second")).sent()
        #expect(membersRequests == 1)
    }

    @Test(
        "A real gap (the limited timeline does not reach the stored events) makes the list incomplete: the next key share asks again and sees the new member"
    )
    func gapAsksAgain() async throws {
        let (store, chat) = try await sentOnce()
        // Carol joined while events were skipped; the server now has her.
        fixture.transport.on("GET", ConversationEncryptionTests.membersPath) { _ in
            .json(
                200,
                #"{"chunk": [{"type": "m.room.member", "state_key": "@me:example.org", "event_id": "$join-me", "sender": "@me:example.org", "origin_server_ts": 1, "content": {"membership": "join"}}, {"type": "m.room.member", "state_key": "@bob:example.org", "event_id": "$join-bob", "sender": "@bob:example.org", "origin_server_ts": 2, "content": {"membership": "join"}}, {"type": "m.room.member", "state_key": "@carol:example.org", "event_id": "$join-carol", "sender": "@carol:example.org", "origin_server_ts": 40, "content": {"membership": "join"}}]}"#
            )
        }
        _ = try await SyncIngestor(store: store).ingest(Self.limitedSync("b3", [Self.message(8), Self.message(9)]))
        let after = try await store.memberList(roomID)
        #expect(!after.isComplete)
        #expect(after.generation == 1)
        try await chat.conversation(id: roomID).send(.text("second")).sent()
        #expect(membersRequests == 2)
        #expect(
            fixture.crypto.recipients.withLock { $0.last }
                == [ConversationEncryptionTests.me, UserID("@bob:example.org"), UserID("@carol:example.org")].sorted())
        #expect(try await store.memberList(roomID).isComplete)
        try await chat.conversation(id: roomID).send(.text("third")).sent()
        #expect(membersRequests == 2)
    }

    @Test("Our own membership leaving join makes the list incomplete")
    func leavingMakesIncomplete() async throws {
        let (store, _) = try await sentOnce()
        _ = try await SyncIngestor(store: store).ingest(
            Array(
                #"""
                {"next_batch": "b3", "rooms": {"leave": {"\#(roomID.rawValue)": {
                  "timeline": {"events": [{"type": "m.room.member", "state_key": "@me:example.org", "event_id": "$leave-me", "sender": "@me:example.org", "origin_server_ts": 50, "content": {"membership": "leave"}}], "limited": false}
                }}}}
                """#.utf8))
        #expect(try await store.memberList(roomID) == MemberListState(isComplete: false, generation: 1))
    }

    @Test("A /members answer whose request left before a gap was committed does not mark the list complete")
    func answerOlderThanGapDoesNotCount() async throws {
        let store = try await fixture.store(fullState: true, encrypted: true)
        _ = try await SyncIngestor(store: store).ingest(ConversationEncryptionTests.sync("b2", [Self.message(1)]))
        let before = try await store.memberList(roomID)
        #expect(before == MemberListState(isComplete: false, generation: 0))
        // The request left; meanwhile a gap commits (a first gap for a room without a row).
        _ = try await SyncIngestor(store: store).ingest(Self.limitedSync("b3", [Self.message(5)]))
        try await store.storeMembers(roomID: roomID, page: MessagesPage(), generation: before.generation)
        #expect(try await store.memberList(roomID) == MemberListState(isComplete: false, generation: 1))
        // A request that leaves now counts.
        try await store.storeMembers(roomID: roomID, page: MessagesPage(), generation: 1)
        #expect(try await store.memberList(roomID) == MemberListState(isComplete: true, generation: 1))
    }
}
