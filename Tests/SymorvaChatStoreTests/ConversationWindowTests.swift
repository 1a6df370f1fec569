import SymorvaChatStore
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
}
