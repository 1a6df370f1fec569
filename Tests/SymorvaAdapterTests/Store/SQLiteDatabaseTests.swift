import Foundation
import SymorvaStore
import Testing

@Suite("SQLite database")
struct SQLiteDatabaseTests {
    private static let migrations = [
        Migration(
            version: 1, name: "create_items", sql: "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL);"),
        Migration(version: 2, name: "add_rank", sql: "ALTER TABLE items ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;"),
        Migration(version: 3, name: "seed", sql: "INSERT INTO items(name, rank) VALUES ('seed', 7);"),
    ]

    private func count(_ db: SQLiteDatabase, _ table: String = "items") async throws -> Int {
        try await db.queryOne("SELECT count(*) FROM \(table)") { $0.int(0) } ?? -1
    }

    @Test("Migrations apply in order, once")
    func migrationsApplyOnce() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.file("a.sqlite")
        let first = try await SQLiteDatabase.open(path: path, migrations: Self.migrations)
        #expect(try await first.schemaVersion() == 3)
        // The seed used the column added by migration 2: they ran in order.
        #expect(try await first.queryOne("SELECT rank FROM items WHERE name = 'seed'") { $0.int(0) } == 7)
        let second = try await SQLiteDatabase.open(path: path, migrations: Self.migrations)
        #expect(try await second.schemaVersion() == 3)
        #expect(try await count(second) == 1)
    }

    @Test("An older database is brought up to date from where it is")
    func incrementalMigration() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.file("a.sqlite")
        _ = try await SQLiteDatabase.open(path: path, migrations: Array(Self.migrations.prefix(1)))
        let db = try await SQLiteDatabase.open(path: path, migrations: Self.migrations)
        #expect(try await db.schemaVersion() == 3)
        #expect(try await count(db) == 1)
    }

    @Test("A database from a newer SDK is refused")
    func newerSchemaRefused() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.file("a.sqlite")
        _ = try await SQLiteDatabase.open(path: path, migrations: Self.migrations)
        await #expect(throws: StoreError.newerSchema(found: 3, supported: 2)) {
            try await SQLiteDatabase.open(path: path, migrations: Array(Self.migrations.prefix(2)))
        }
    }

    @Test("A failing migration rolls back entirely and reports its version")
    func failingMigrationRollsBack() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.file("a.sqlite")
        let broken = Migration(version: 2, name: "broken", sql: "CREATE TABLE half(a); INSERT INTO missing VALUES (1);")
        await #expect {
            try await SQLiteDatabase.open(path: path, migrations: [Self.migrations[0], broken])
        } throws: { error in
            guard case .migration(version: 2, _) = error as? StoreError else { return false }
            return true
        }
        let db = try await SQLiteDatabase.open(path: path, migrations: [Self.migrations[0]])
        #expect(try await db.schemaVersion() == 1)
        #expect(try await db.queryOne("SELECT count(*) FROM sqlite_master WHERE name = 'half'") { $0.int(0) } == 0)
    }

    @Test("Migration versions must run 1, 2, 3")
    func invalidMigrationList() async throws {
        let folder = try TemporaryDirectory()
        await #expect(throws: StoreError.invalidMigrations) {
            try await SQLiteDatabase.open(
                path: folder.file("a.sqlite"), migrations: [Self.migrations[1], Self.migrations[0]])
        }
    }

    @Test("WAL, synchronous=NORMAL and foreign keys are on")
    func pragmas() async throws {
        let folder = try TemporaryDirectory()
        let db = try await SQLiteDatabase.open(path: folder.file("a.sqlite"))
        #expect(try await db.queryOne("PRAGMA journal_mode") { $0.string(0) } == "wal")
        #expect(try await db.queryOne("PRAGMA synchronous") { $0.int(0) } == 1)
        #expect(try await db.queryOne("PRAGMA foreign_keys") { $0.int(0) } == 1)
    }

    @Test("A throwing transaction body rolls back everything it wrote")
    func transactionRollback() async throws {
        let folder = try TemporaryDirectory()
        let db = try await SQLiteDatabase.open(path: folder.file("a.sqlite"), migrations: Self.migrations)
        await #expect(throws: StoreError.aborted) {
            try await db.transaction { db throws(StoreError) in
                try db.execute("INSERT INTO items(name) VALUES (?)", ["a"])
                try db.execute("DELETE FROM items WHERE name = 'seed'")
                throw .aborted
            }
        }
        #expect(try await db.queryAll("SELECT name FROM items") { $0.string(0) } == ["seed"])
    }

    @Test("A nested transaction is a savepoint: its failure keeps the outer work")
    func nestedTransaction() async throws {
        let folder = try TemporaryDirectory()
        let db = try await SQLiteDatabase.open(path: folder.file("a.sqlite"), migrations: Self.migrations)
        try await db.transaction { db throws(StoreError) in
            try db.execute("INSERT INTO items(name) VALUES ('outer')")
            do {
                try db.transaction { db throws(StoreError) in
                    try db.execute("INSERT INTO items(name) VALUES ('inner')")
                    throw .aborted
                }
            } catch {}
        }
        #expect(try await db.queryAll("SELECT name FROM items ORDER BY id") { $0.string(0) } == ["seed", "outer"])
    }

    @Test("Prepared statements are reused across calls")
    func statementReuse() async throws {
        let folder = try TemporaryDirectory()
        let db = try await SQLiteDatabase.open(path: folder.file("a.sqlite"), migrations: Self.migrations)
        let before = await db.statementStatistics
        for index in 0..<100 {
            try await db.execute("INSERT INTO items(name, rank) VALUES (?, ?)", [.text("n\(index)"), .int(index)])
        }
        let after = await db.statementStatistics
        #expect(after.statementsPrepared - before.statementsPrepared == 1)
        #expect(after.statementCacheHits - before.statementCacheHits == 99)
    }

    @Test("The bulk path writes many rows through one statement")
    func bulkInsert() async throws {
        let folder = try TemporaryDirectory()
        let db = try await SQLiteDatabase.open(path: folder.file("a.sqlite"), migrations: Self.migrations)
        try await db.transaction { db throws(StoreError) in
            try db.withStatement("INSERT INTO items(name, rank) VALUES (?, ?)") { statement throws(StoreError) in
                for index in 0..<10_000 {
                    statement.reset()
                    try statement.bind("event-\(index)", at: 1)
                    try statement.bind(index, at: 2)
                    try statement.step()
                }
            }
        }
        #expect(try await count(db) == 10_001)
        #expect(try await db.queryOne("SELECT sum(rank) FROM items") { $0.int64(0) } == 7 + 49_995_000)
    }

    @Test("Values round-trip with their types")
    func valueRoundTrip() async throws {
        let folder = try TemporaryDirectory()
        let db = try await SQLiteDatabase.open(path: folder.file("a.sqlite"))
        try await db.execute("CREATE TABLE v(i INTEGER, r REAL, t TEXT, b BLOB, n)")
        let blob: [UInt8] = [0, 1, 2, 0, 255]
        try await db.execute(
            "INSERT INTO v VALUES (?, ?, ?, ?, ?)",
            [.integer(.min), .real(2.5), .text("héllo 👋\u{0}x"), .blob(blob), nil])
        try await db.execute("INSERT INTO v VALUES (?, ?, ?, ?, ?)", [0, 0.0, "", .blob([]), nil])
        let rows = try await db.queryAll("SELECT i, r, t, b, n FROM v ORDER BY rowid") { row in
            [row.value(0), row.value(1), row.value(2), row.value(3), row.value(4)]
        }
        #expect(rows[0] == [.integer(.min), .real(2.5), .text("héllo 👋\u{0}x"), .blob(blob), .null])
        #expect(rows[1] == [.integer(0), .real(0), .text(""), .blob([]), .null])
        #expect(try await db.queryOne("SELECT n FROM v") { $0.optionalString(0) } == .some(nil))
    }

    @Test("Constraint violations are typed")
    func constraints() async throws {
        let folder = try TemporaryDirectory()
        let db = try await SQLiteDatabase.open(path: folder.file("a.sqlite"), migrations: Self.migrations)
        try await db.executeScript("CREATE TABLE child(item INTEGER NOT NULL REFERENCES items(id));")
        for sql in ["INSERT INTO items(id, name) VALUES (1, 'dup')", "INSERT INTO child VALUES (999)"] {
            await #expect {
                try await db.execute(sql)
            } throws: { error in
                guard case .constraint = error as? StoreError else { return false }
                return true
            }
        }
    }

    @Test("A statement that does not compile names itself, not its values")
    func prepareError() async throws {
        let folder = try TemporaryDirectory()
        let db = try await SQLiteDatabase.open(path: folder.file("a.sqlite"))
        await #expect {
            try await db.execute("SELECT * FROM nowhere WHERE x = ?", ["CANARY"])
        } throws: { error in
            guard case .prepare(_, let statement, let message) = error as? StoreError else { return false }
            return statement == "SELECT * FROM nowhere" && message.contains("nowhere") && !"\(error)".contains("CANARY")
        }
    }

    @Test("A full database maps to .full")
    func diskFull() async throws {
        let folder = try TemporaryDirectory()
        let db = try await SQLiteDatabase.open(path: folder.file("a.sqlite"), migrations: Self.migrations)
        try await db.executeScript("PRAGMA max_page_count = 20;")
        let big = [UInt8](repeating: 7, count: 4096)
        await #expect(throws: StoreError.full) {
            for _ in 0..<100 { try await db.execute("INSERT INTO items(name) VALUES (?)", [.blob(big)]) }
        }
    }

    @Test("A file that is not a database is reported corrupt")
    func notADatabase() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.file("junk.sqlite")
        try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: path))
        await #expect(throws: StoreError.corrupt) { try await SQLiteDatabase.open(path: path) }
    }

    @Test("A statement lent to a body survives nested use of the same SQL and cache eviction")
    func nestedStatementUse() async throws {
        let folder = try TemporaryDirectory()
        let db = try await SQLiteDatabase.open(
            path: folder.file("a.sqlite"), migrations: Self.migrations,
            configuration: .init(statementCacheLimit: 2))
        let names = try await db.transaction { db throws(StoreError) -> [String] in
            try db.execute("INSERT INTO items(name) VALUES ('second')")
            return try db.withStatement("SELECT name FROM items ORDER BY id") { outer throws(StoreError) in
                var names: [String] = []
                while try outer.step() {
                    names.append(outer.row.string(0))
                    // Same SQL, then enough other statements to overflow the cache.
                    _ = try db.queryAll("SELECT name FROM items ORDER BY id") { $0.string(0) }
                    for index in 0..<4 { _ = try db.queryOne("SELECT \(index)") { $0.int(0) } }
                }
                return names
            }
        }
        #expect(names == ["seed", "second"])
    }

    @Test("Store code runs on the store thread, never the caller's")
    func executorThread() async throws {
        let folder = try TemporaryDirectory()
        let db = try await SQLiteDatabase.open(path: folder.file("a.sqlite"))
        #expect(!db.executor.isCurrentThread)
        let inside = try await db.transaction { db throws(StoreError) in db.executor.isCurrentThread }
        #expect(inside)
        let callerThread = pthread_self()
        let storeThread = try await db.transaction { _ throws(StoreError) in pthread_self() }
        #expect(callerThread != storeThread)
    }
}
