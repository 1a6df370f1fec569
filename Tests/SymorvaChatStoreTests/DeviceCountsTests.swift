import SymorvaChatStore
import SymorvaMachines
import SymorvaStore
import SymorvaTesting
import Testing

/// The store's half of the counts computed on the device: which events it hands out for
/// evaluation, and how the rows of those that notify become a room's counts after the
/// account's read receipts, per thread.
@Suite("Device counts in the chat store")
struct DeviceCountsTests {
    static let me = "@me:example.com"
    static let bob = "@bob:example.com"
    static let room = "!enc:example.com"
    static let plainRoom = "!plain:example.com"

    static func threadReply(_ id: String, root: String, ts: Int64) -> String {
        #"{"type":"m.room.message","event_id":"\#(id)","sender":"\#(bob)","origin_server_ts":\#(ts),"content":{"msgtype":"m.text","body":"in thread","m.relates_to":{"rel_type":"m.thread","event_id":"\#(root)"}}}"#
    }

    static func receipt(_ eventID: String, thread: String?) -> String {
        let threadField = thread.map { #","thread_id":"\#($0)""# } ?? ""
        return #"{"type":"m.receipt","content":{"\#(eventID)":{"m.read":{"\#(me)":{"ts":1\#(threadField)}}}}}"#
    }

    static func response(_ batch: String, room: String, events: [String], ephemeral: [String] = [], counts: Int? = nil)
        -> [UInt8]
    {
        let unread = counts.map { #","unread_notifications":{"notification_count":\#($0),"highlight_count":0}"# } ?? ""
        return Array(
            #"{"next_batch":"\#(batch)","rooms":{"join":{"\#(room)":{"timeline":{"events":[\#(events.joined(separator: ","))]},"ephemeral":{"events":[\#(ephemeral.joined(separator: ","))]}\#(unread)}}}}"#
                .utf8)
    }

    /// The encrypted room: its state, Bob's three main-timeline messages, a thread of two
    /// replies under the first, and one of mine.
    static func seed(_ store: ChatStore) async throws {
        let ingestor = SyncIngestor(store: store)
        let encryption =
            #"{"type":"m.room.encryption","event_id":"$e","sender":"\#(bob)","state_key":"","origin_server_ts":1,"content":{"algorithm":"m.megolm.v1.aes-sha2"}}"#
        _ = try await ingestor.ingest(
            response(
                "1", room: room,
                events: [
                    encryption,
                    SyncSamples.message("$1", ts: 10, sender: bob), SyncSamples.message("$2", ts: 20, sender: bob),
                    threadReply("$t1", root: "$1", ts: 25), SyncSamples.message("$mine", ts: 27, sender: me),
                    threadReply("$t2", root: "$1", ts: 28), SyncSamples.message("$3", ts: 30, sender: bob),
                ], counts: 9))
    }

    @Test("Plaintext events of encrypted rooms are handed out once, oldest first, never the account's own")
    func candidates() async throws {
        let store = try await makeChatStore()
        try await Self.seed(store)
        let first = try await store.pushCandidates(ownUserID: Self.me, everyRoom: false, limit: 100)
        // Bob's five messages and his m.room.encryption state event; not mine.
        #expect(first.events.filter { $0.type == "m.room.message" }.count == 5)
        #expect(first.events.map(\.type).filter { $0 != "m.room.message" } == ["m.room.encryption"])
        #expect(first.events.allSatisfy { $0.sender != Self.me })
        try await store.recordPushActions([], evaluatedThrough: first.through, ownUserID: Self.me)
        let again = try await store.pushCandidates(ownUserID: Self.me, everyRoom: false, limit: 100)
        #expect(again.events.isEmpty && again.through == nil)

        // An unencrypted room is evaluated only when asked for every room.
        _ = try await SyncIngestor(store: store).ingest(
            Self.response("2", room: Self.plainRoom, events: [SyncSamples.message("$p", ts: 40, sender: Self.bob)]))
        #expect(try await store.pushCandidates(ownUserID: Self.me, everyRoom: false, limit: 100).events.isEmpty)
        let every = try await store.pushCandidates(ownUserID: Self.me, everyRoom: true, limit: 100)
        #expect(every.events.count == 1)
    }

    @Test("Counts per thread after the receipts: a threaded receipt reads its thread, an unthreaded one everything")
    func countsFollowReceipts() async throws {
        let store = try await makeChatStore()
        try await Self.seed(store)
        let candidates = try await store.pushCandidates(ownUserID: Self.me, everyRoom: false, limit: 100)
        let byID = try await nids(store)
        // $2 and $t2 highlight (as an evaluator would say for mentions).
        let actions = candidates.events.filter { $0.type == "m.room.message" }.map {
            ($0.eventNID, $0.eventNID == byID["$2"] || $0.eventNID == byID["$t2"])
        }
        try await store.recordPushActions(actions, evaluatedThrough: candidates.through, ownUserID: Self.me)

        var counts = try await store.deviceCounts(roomID: RoomID(Self.room), ownUserID: Self.me)
        #expect(counts.notifications == 5 && counts.highlights == 2)
        #expect(counts.threads["main"] == .init(notifications: 3, highlights: 1))
        #expect(counts.threads["$1"] == .init(notifications: 2, highlights: 1))
        // The list shows the device's counts for an encrypted room, not the server's 9.
        var row = try await store.loadConversationList().first { $0.roomID == Self.room }
        #expect(row?.notificationCount == 5 && row?.highlightCount == 2)

        // A receipt in the thread reads the thread only.
        let ingestor = SyncIngestor(store: store)
        _ = try await ingestor.ingest(
            Self.response("2", room: Self.room, events: [], ephemeral: [Self.receipt("$t2", thread: "$1")]))
        try await store.recomputeDeviceCounts(ownUserID: Self.me)
        counts = try await store.deviceCounts(roomID: RoomID(Self.room), ownUserID: Self.me)
        #expect(counts.notifications == 3 && counts.threads["$1"] == nil)
        // Rows a receipt of their own thread has read never count again: they go.
        #expect(try await count("push_actions", in: store) == 3)

        // A main-timeline receipt at $2 reads $1 and $2 only.
        _ = try await ingestor.ingest(
            Self.response("3", room: Self.room, events: [], ephemeral: [Self.receipt("$2", thread: "main")]))
        try await store.recomputeDeviceCounts(ownUserID: Self.me)
        counts = try await store.deviceCounts(roomID: RoomID(Self.room), ownUserID: Self.me)
        #expect(counts.notifications == 1 && counts.highlights == 0 && counts.threads["main"]?.notifications == 1)
        #expect(try await count("push_actions", in: store) == 1)

        // An unthreaded receipt at the newest event reads everything; the rows go.
        _ = try await ingestor.ingest(
            Self.response("4", room: Self.room, events: [], ephemeral: [Self.receipt("$3", thread: nil)]))
        try await store.recomputeDeviceCounts(ownUserID: Self.me)
        counts = try await store.deviceCounts(roomID: RoomID(Self.room), ownUserID: Self.me)
        #expect(counts == DeviceCounts(notifications: 0, highlights: 0, threads: [:]))
        row = try await store.loadConversationList().first { $0.roomID == Self.room }
        #expect(row?.notificationCount == 0 && row?.highlightCount == 0)
        #expect(try await count("push_actions", in: store) == 0)
    }

    @Test("An unencrypted room shows the server's counts even when the device counted it")
    func serverCountsForPlainRooms() async throws {
        let store = try await makeChatStore()
        _ = try await SyncIngestor(store: store).ingest(
            Self.response(
                "1", room: Self.plainRoom, events: [SyncSamples.message("$p", ts: 40, sender: Self.bob)], counts: 4))
        let candidates = try await store.pushCandidates(ownUserID: Self.me, everyRoom: true, limit: 100)
        try await store.recordPushActions(
            candidates.events.map { ($0.eventNID, true) }, evaluatedThrough: candidates.through, ownUserID: Self.me)
        #expect(
            try await store.deviceCounts(roomID: RoomID(Self.plainRoom), ownUserID: Self.me)
                == DeviceCounts(
                    notifications: 1, highlights: 1, threads: ["main": .init(notifications: 1, highlights: 1)]))
        let row = try await store.loadConversationList().first { $0.roomID == Self.plainRoom }
        #expect(row?.notificationCount == 4 && row?.highlightCount == 0)
    }

    func nids(_ store: ChatStore) async throws -> [String: Int64] {
        var result: [String: Int64] = [:]
        for id in ["$1", "$2", "$3", "$t1", "$t2"] {
            result[id] = try await store.databaseForTesting.queryOne(
                "SELECT event_nid FROM events WHERE event_id = ?", [.text(id)]
            ) { $0.int64(0) }
        }
        return result
    }
}
