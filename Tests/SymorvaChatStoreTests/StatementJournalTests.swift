import Foundation
import SymorvaChatStore
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import Testing

/// The ingest inserts events with `OR IGNORE` so that SQLite needs no statement journal for
/// them (`docs/benchmarks.md`, "Statement journals"); these tests keep what `OR IGNORE` would
/// otherwise hide an error.
@Suite("Sync ingest without statement journals")
struct StatementJournalTests {
    @Test("An event refused by a constraint other than its event ID still fails the ingest and keeps the token")
    func otherConstraintStillFails() async throws {
        let store = try await makeChatStore()
        _ = try await SyncIngestor(store: store).ingest(
            SyncSamples.response(nextBatch: "first", events: [SyncSamples.message("$a")]))
        // One event refused (as OR IGNORE refuses a NULL content or a taken chunk position):
        // the row is skipped without an error, and the ingest must notice it is not stored.
        try await store.databaseForTesting.executeScript(
            "CREATE TRIGGER refuse_one BEFORE INSERT ON events WHEN NEW.event_id = '$refused' BEGIN SELECT RAISE(IGNORE); END;"
        )
        let document = SyncSamples.response(
            nextBatch: "second", events: [SyncSamples.message("$b"), SyncSamples.message("$refused")])
        await #expect(throws: ChatStoreError.self) { try await SyncIngestor(store: store).ingest(document) }
        #expect(try await store.sinceToken() == "first")
        #expect(try await count("events", in: store) == 1)
    }

    @Test("A repeated event is skipped without an error, in the same response and in a later one")
    func duplicatesAreNotErrors() async throws {
        let store = try await makeChatStore()
        let events = [SyncSamples.message("$a"), SyncSamples.message("$a"), SyncSamples.message("$b")]
        let first = try await SyncIngestor(store: store).ingest(
            SyncSamples.response(nextBatch: "first", events: events))
        #expect(first.timelineEvents == 2)
        let second = try await SyncIngestor(store: store).ingest(
            SyncSamples.response(nextBatch: "second", events: [SyncSamples.message("$b"), SyncSamples.message("$c")]))
        #expect(second.timelineEvents == 1)
        #expect(try await store.sinceToken() == "second")
        #expect(try await count("events", in: store) == 3)
    }

    @Test("Events go in by batches; repeats inside a batch leave no hole: positions are as one insert per event gives")
    func batchesKeepPositions() async throws {
        let store = try await makeChatStore()
        let ingestor = SyncIngestor(store: store)
        _ = try await ingestor.ingest(
            SyncSamples.response(nextBatch: "first", events: [SyncSamples.message("$s1"), SyncSamples.message("$s2")]))
        // 45 events (batches of 32, 8, 4 and 1): stored ones and repeats at the edges and inside.
        var ids = (0..<40).map { "$n\($0)" }
        ids.insert("$s1", at: 0)
        ids.insert("$n3", at: 10)
        ids.insert("$s2", at: 31)
        ids.insert("$n31", at: 33)
        ids.append("$n39")
        let report = try await ingestor.ingest(
            SyncSamples.response(nextBatch: "second", events: ids.map { SyncSamples.message($0) }))
        // What one insert per event stores: each event once, where it first appears.
        var seen: Set<String> = ["$s1", "$s2"]
        let expected = ["$s1", "$s2"] + ids.filter { seen.insert($0).inserted }
        #expect(report.timelineEvents == 40)
        let rows = try await store.databaseForTesting.queryAll(
            "SELECT event_id, position FROM events WHERE chunk_id = (SELECT MAX(chunk_id) FROM events) ORDER BY position"
        ) { ($0.string(0), $0.int(1)) }
        #expect(rows.map(\.0) == expected)
        #expect(rows.map(\.1) == Array(0..<42))
        let page = try await store.loadTimelinePage(roomID: SyncSamples.roomID, limit: 100)
        #expect(page.items.map(\.eventID) == expected)
    }

    @Test("A row refused inside a batch fails the ingest and keeps the token")
    func refusalInsideBatch() async throws {
        let store = try await makeChatStore()
        _ = try await SyncIngestor(store: store).ingest(
            SyncSamples.response(nextBatch: "first", events: [SyncSamples.message("$a")]))
        try await store.databaseForTesting.executeScript(
            "CREATE TRIGGER refuse_one BEFORE INSERT ON events WHEN NEW.event_id = '$refused' BEGIN SELECT RAISE(IGNORE); END;"
        )
        var ids = (0..<40).map { "$b\($0)" }
        ids.insert("$a", at: 5)
        ids.insert("$refused", at: 20)
        let document = SyncSamples.response(nextBatch: "second", events: ids.map { SyncSamples.message($0) })
        await #expect(throws: ChatStoreError.self) { try await SyncIngestor(store: store).ingest(document) }
        #expect(try await store.sinceToken() == "first")
        #expect(try await count("events", in: store) == 1)
    }

    #if os(Linux) && DEBUG
        @Test("A large ingest opens no statement journal file (SQLite's etilqs_ temporary files)")
        func noStatementJournalFile() async throws {
            let path = NSTemporaryDirectory() + "symorva-statement-journal-\(UUID().uuidString).sqlite"
            defer {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            }
            let store = try await ChatStore.open(path: path)
            // 100 rooms of 50 events: before `OR IGNORE`, most event inserts spilled their
            // statement journal to a temporary file (more than 64 KB of pages each).
            let document = SyncResponseGenerator(.init(rooms: 100, eventsPerRoom: 50, membersPerRoom: 20)).generate()
            let before = Self.openJournalFiles()
            let during = Lock<Set<String>?>(nil)
            let observer = FaultPointObserver { point in
                // Reached inside the transaction, after every room was written.
                if point == .syncIngest { during.withLock { $0 = Self.openJournalFiles() } }
            }
            let report = try await FaultPoint.$observer.withValue(observer) {
                try await SyncIngestor(store: store).ingest(document)
            }
            #expect(report.rooms == 100)
            let opened = try #require(during.withLock { $0 })
            #expect(opened.subtracting(before).isEmpty)
        }

        /// The `/proc/self/fd` links of this process that point at SQLite temporary files.
        private static func openJournalFiles() -> Set<String> {
            let folder = "/proc/self/fd"
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            var files: Set<String> = []
            for entry in entries {
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: folder + "/" + entry),
                    target.contains("etilqs_")
                else { continue }
                files.insert(entry + " " + target)
            }
            return files
        }
    #endif
}
