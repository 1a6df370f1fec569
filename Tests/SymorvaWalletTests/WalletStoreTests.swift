import Foundation
import SymorvaRuntime
import SymorvaStore
import SymorvaWallet
import Testing

@Suite("Wallet store")
struct WalletStoreTests {
    private static func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("wallet-\(UUID().uuidString).sqlite").path
    }

    @Test("The wallet's table is versioned per feature, beside the account's own migrations")
    func featureVersioning() async throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let accountMigrations = [Migration(version: 1, name: "rooms", sql: "CREATE TABLE rooms(id TEXT PRIMARY KEY);")]
        let database = try await SQLiteDatabase.open(path: path, migrations: accountMigrations)
        _ = try await WalletStore.open(on: database)
        #expect(try await database.schemaVersion() == 1)
        #expect(try await database.schemaVersion(feature: WalletStore.feature) == WalletStore.migrations.count)
        // Opening again (next launch) changes nothing.
        _ = try await WalletStore.open(on: database)
        #expect(try await database.schemaVersion(feature: WalletStore.feature) == WalletStore.migrations.count)
    }

    @Test("A pending command survives reopening the file, with its figures, until removed")
    func survivesReopen() async throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let store = try await WalletStore.open(on: try await SQLiteDatabase.open(path: path))
            try await store.insert(WalletFixtures.pending, createdAtMilliseconds: 1_700_000_000_000)
            try await store.markUnknown(WalletFixtures.commandID)
        }
        let store = try await WalletStore.open(on: try await SQLiteDatabase.open(path: path))
        let stored = try await store.storedCommands()
        #expect(stored.map(\.pending) == [WalletFixtures.pending])
        #expect(stored.first?.state == .unknown)
        #expect(stored.first?.createdAtMilliseconds == 1_700_000_000_000)
        try await store.remove(WalletFixtures.commandID)
        try await store.remove(WalletFixtures.commandID)
        #expect(try await store.pendingCommands().isEmpty)
    }

    @Test("A pending command is committed with synchronous=FULL: on stable storage before the confirm leaves")
    func durableInsert() async throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let database = try await SQLiteDatabase.open(path: path)
        let store = try await WalletStore.open(on: database)
        let commits = Lock<[[Int]]>([])
        await database.setCommitProbe { db, synchronous in
            let rows = (try? db.queryOne("SELECT COUNT(*) FROM wallet_pending_commands") { $0.int(0) }) ?? nil
            commits.withLock { $0.append([synchronous, rows ?? -1]) }
        }
        try await store.insert(WalletFixtures.pending)
        #expect(commits.withLock { $0 } == [[2, 1]], "the command row was not committed with synchronous=FULL")
        #expect(try await database.queryOne("PRAGMA synchronous") { $0.int(0) } == 1)
    }

    @Test("A command is stamped with the injected wall clock")
    func stampedByWallClock() async throws {
        struct FrozenWallClock: WallClock { let now = Timestamp(millisecondsSince1970: 1_234_567_890_123) }
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try await WalletStore.open(
            on: try await SQLiteDatabase.open(path: path), wallClock: FrozenWallClock())
        try await store.insert(WalletFixtures.pending)
        #expect(try await store.storedCommands().first?.createdAtMilliseconds == 1_234_567_890_123)
    }

    @Test("A file whose wallet tables were written by a newer SDK is refused")
    func newerFeatureSchema() async throws {
        let database = try await SQLiteDatabase.open(path: ":memory:")
        let future = WalletStore.migrations + [Migration(version: 2, name: "future", sql: "SELECT 1;")]
        try await database.migrate(feature: WalletStore.feature, future)
        await #expect(throws: StoreError.newerSchema(found: 2, supported: 1)) {
            _ = try await WalletStore.open(on: database)
        }
    }
}
