import Foundation
import SymorvaRuntime
import SymorvaStore
import Testing

@Suite("SQLite durability")
struct DurabilityTests {
    /// The synchronous level and the row count of `items`, read inside each commit.
    final class Commits: Sendable {
        let seen = Lock<[[Int]]>([])
        var all: [[Int]] { seen.withLock { $0 } }
    }

    static func open(_ directory: TemporaryDirectory) async throws -> (SQLiteDatabase, Commits) {
        let database = try await SQLiteDatabase.open(
            path: directory.file("durability.sqlite"),
            migrations: [Migration(version: 1, name: "items", sql: "CREATE TABLE items(id INTEGER PRIMARY KEY);")])
        let commits = Commits()
        await database.setCommitProbe { db, synchronous in
            let rows = (try? db.queryOne("SELECT COUNT(*) FROM items") { $0.int(0) }) ?? -1
            commits.seen.withLock { $0.append([synchronous, rows]) }
        }
        return (database, commits)
    }

    @Test("A full transaction commits with synchronous=FULL; the connection is NORMAL before and after")
    func fullTransaction() async throws {
        let directory = try TemporaryDirectory()
        let (database, commits) = try await Self.open(directory)
        #expect(try await database.queryOne("PRAGMA synchronous") { $0.int(0) } == 1)
        try await database.transaction(durability: .full) { db throws(StoreError) in
            try db.execute("INSERT INTO items(id) VALUES (1)")
            // Nested: inherits the outer durability.
            try db.transaction { db throws(StoreError) in try db.execute("INSERT INTO items(id) VALUES (2)") }
        }
        try await database.transaction { db throws(StoreError) in try db.execute("INSERT INTO items(id) VALUES (3)") }
        #expect(commits.all == [[2, 2], [1, 3]])
        #expect(try await database.queryOne("PRAGMA synchronous") { $0.int(0) } == 1)
    }

    @Test("A full transaction that fails rolls back and still restores NORMAL")
    func failedFullTransaction() async throws {
        let directory = try TemporaryDirectory()
        let (database, commits) = try await Self.open(directory)
        await #expect(throws: StoreError.self) {
            try await database.transaction(durability: .full) { db throws(StoreError) in
                try db.execute("INSERT INTO items(id) VALUES (1)")
                try db.execute("INSERT INTO items(id) VALUES (1)")
            }
        }
        #expect(commits.all.isEmpty)
        #expect(try await database.queryOne("PRAGMA synchronous") { $0.int(0) } == 1)
        #expect(try await database.queryOne("SELECT COUNT(*) FROM items") { $0.int(0) } == 0)
    }
}
