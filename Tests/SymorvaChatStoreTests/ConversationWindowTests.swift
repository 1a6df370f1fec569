import SymorvaChatStore
import SymorvaMachines
import Testing

@Suite("Conversation window")
struct ConversationWindowTests {
    @Test("A window reads its rows by recency and the list's size, never the rest")
    func window() async throws {
        let store = try await makeChatStore()
        for index in 0..<30 {
            _ = try await SyncIngestor(store: store).ingest(
                SyncSamples.response(
                    nextBatch: "b\(index)", events: [SyncSamples.message("$e\(index)", ts: Int64(1_000 + index))],
                    roomID: "!r\(index):x"))
        }
        let first = try await store.loadConversationWindow(0..<5)
        #expect(first.total == 30)
        #expect(first.rows.map(\.roomID) == (25..<30).reversed().map { "!r\($0):x" })
        let middle = try await store.loadConversationWindow(10..<13)
        #expect(middle.rows.map(\.roomID) == ["!r19:x", "!r18:x", "!r17:x"])
        let past = try await store.loadConversationWindow(28..<40)
        #expect(past.rows.count == 2 && past.total == 30)
    }

    @Test("A window shows what the list shows: pinned rooms first, left rooms not at all")
    func pinnedFirstLeftOut() async throws {
        let store = try await makeChatStore()
        for index in 0..<30 {
            _ = try await SyncIngestor(store: store).ingest(
                SyncSamples.response(
                    nextBatch: "b\(index)", events: [SyncSamples.message("$e\(index)", ts: Int64(1_000 + index))],
                    roomID: "!r\(index):x"))
        }
        let leave =
            #"{"next_batch":"gone","rooms":{"leave":{"!gone:x":{"timeline":{"events":["#
            + SyncSamples.message("$gone", ts: 5_000) + "]}}}}}"
        _ = try await SyncIngestor(store: store).ingest(Array(leave.utf8))
        try await store.setFlag(.pinned, true, roomID: RoomID("!r3:x"))
        try await store.setFlag(.pinned, true, roomID: RoomID("!r10:x"))

        let first = try await store.loadConversationWindow(0..<5)
        #expect(first.total == 30)
        #expect(first.rows.map(\.roomID) == ["!r10:x", "!r3:x", "!r29:x", "!r28:x", "!r27:x"])
        let straddling = try await store.loadConversationWindow(1..<4)
        #expect(straddling.rows.map(\.roomID) == ["!r3:x", "!r29:x", "!r28:x"])
        let later = try await store.loadConversationWindow(2..<4)
        #expect(later.rows.map(\.roomID) == ["!r29:x", "!r28:x"])
        let all = try await store.loadConversationWindow(0..<100)
        #expect(all.rows.count == 30 && !all.rows.contains { $0.roomID == "!gone:x" })
    }
}
