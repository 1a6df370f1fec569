import SymorvaChatStore
import SymorvaMachines
import SymorvaTesting
import Testing

/// Event IDs are unique across rooms, so a relation is looked up by its target's ID alone. A
/// misbehaving (or federated) server can send a redaction, an edit, a reaction or a receipt in
/// one room that names an event of another: it must change nothing there.
@Suite("Relations across rooms")
struct CrossRoomRelationTests {
    static let roomA = "!a:example.com"
    static let roomB = "!b:example.com"

    /// Room B's timeline and receipt, all naming room A's `$a`.
    static let foreignRelations = [
        #"{"type":"m.room.redaction","event_id":"$b-redact","sender":"@alice:example.com","origin_server_ts":2000,"redacts":"$a","content":{}}"#,
        #"{"type":"m.room.message","event_id":"$b-edit","sender":"@alice:example.com","origin_server_ts":2001,"content":{"msgtype":"m.text","body":"* forged","m.new_content":{"msgtype":"m.text","body":"forged"},"m.relates_to":{"rel_type":"m.replace","event_id":"$a"}}}"#,
        #"{"type":"m.reaction","event_id":"$b-react","sender":"@mallory:example.com","origin_server_ts":2002,"content":{"m.relates_to":{"rel_type":"m.annotation","event_id":"$a","key":"x"}}}"#,
        SyncSamples.message("$b-own", body: "b's own", ts: 2003),
    ]

    static func roomBResponse(nextBatch: String) -> [UInt8] {
        let receipt = #"{"type":"m.receipt","content":{"$a":{"m.read":{"@mallory:example.com":{"ts":2004}}}}}"#
        let text =
            #"{"next_batch":"\#(nextBatch)","rooms":{"join":{"\#(roomB)":{"timeline":{"events":[\#(foreignRelations.joined(separator: ","))]},"ephemeral":{"events":[\#(receipt)]}}}}}"#
        return Array(text.utf8)
    }

    static func roomA(_ store: ChatStore) async throws -> StoredTimelineItem {
        let page = try await store.loadTimelinePage(roomID: roomA)
        try #require(page.items.map(\.eventID) == ["$a"])
        return page.items[0]
    }

    @Test("Room B's redaction, edit, reaction and receipt naming room A's event change nothing in A, and are counted")
    func foreignRelationsIgnored() async throws {
        let store = try await makeChatStore()
        let ingestor = SyncIngestor(store: store)
        _ = try await ingestor.ingest(
            SyncSamples.response(
                nextBatch: "1", events: [SyncSamples.message("$a", body: "original")], roomID: Self.roomA))
        let report = try await ingestor.ingest(Self.roomBResponse(nextBatch: "2"))

        #expect(report.crossRoomRelationsIgnored == 4)
        #expect(report.redactionsApplied == 0)
        let item = try await Self.roomA(store)
        #expect(item.redactedBy == nil && item.replacedBy == nil && item.reactions.isEmpty)
        #expect(String(decoding: item.content, as: UTF8.self).contains("original"))
        #expect(try await count("events", in: store, where: "event_id = '$a' AND redacted_by IS NULL") == 1)
        #expect(try await count("receipts", in: store) == 0)
        let preview = try await store.loadConversationList().first { $0.roomID == Self.roomA }?.preview
        #expect(preview?.body == "original" && preview?.isRedacted == false)
        let snapshot = try await store.windowSnapshot(roomID: RoomID(Self.roomA), eventIDs: [EventID("$a")])
        #expect(snapshot.items.map(\.eventID) == ["$a"] && snapshot.items[0].reactions.isEmpty)
        #expect(snapshot.readers.isEmpty)
        // Room B keeps its own events (nothing lost); its message is its only item.
        #expect(try await store.loadTimelinePage(roomID: Self.roomB).items.map(\.eventID) == ["$b-own"])
        #expect(try await count("events", in: store) == 5)
        // A room B window cannot read room A's event either.
        let foreign = try await store.windowSnapshot(roomID: RoomID(Self.roomB), eventIDs: [EventID("$a")])
        #expect(foreign.items.isEmpty)
        #expect(
            try await store.reactionEventID(
                roomID: RoomID(Self.roomA), target: EventID("$a"), key: "x", sender: "@mallory:example.com") == nil)
    }

    @Test("Relations that arrive before their target in another room are never applied to it")
    func foreignRelationsBeforeTarget() async throws {
        let store = try await makeChatStore()
        let ingestor = SyncIngestor(store: store)
        _ = try await ingestor.ingest(Self.roomBResponse(nextBatch: "1"))
        _ = try await ingestor.ingest(
            SyncSamples.response(
                nextBatch: "2", events: [SyncSamples.message("$a", body: "original")], roomID: Self.roomA))
        let item = try await Self.roomA(store)
        #expect(item.redactedBy == nil && item.replacedBy == nil && item.reactions.isEmpty)
        #expect(String(decoding: item.content, as: UTF8.self).contains("original"))
    }

    @Test("The same relations inside room A still apply")
    func sameRoomRelationsApply() async throws {
        let store = try await makeChatStore()
        let ingestor = SyncIngestor(store: store)
        _ = try await ingestor.ingest(
            SyncSamples.response(
                nextBatch: "1", events: [SyncSamples.message("$a", body: "original")], roomID: Self.roomA))
        let report = try await ingestor.ingest(
            SyncSamples.response(nextBatch: "2", events: Array(Self.foreignRelations.dropFirst()), roomID: Self.roomA))
        #expect(report.crossRoomRelationsIgnored == 0)
        let page = try await store.loadTimelinePage(roomID: Self.roomA)
        #expect(page.items.map(\.eventID) == ["$a", "$b-own"])
        #expect(page.items[0].replacedBy == "$b-edit" && page.items[0].reactions.map(\.key) == ["x"])
    }
}
