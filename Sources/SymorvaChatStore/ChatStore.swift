import SymorvaRuntime
import SymorvaStore

/// Why a chat store operation failed.
public enum ChatStoreError: Error, Sendable, Hashable, CustomStringConvertible, LogSafe {
    /// The database failed; nothing of the operation was written.
    case store(StoreError)
    /// The `/sync` response could not be read; nothing of it was written and the sync position
    /// did not move.
    case malformedResponse(SyncDecodingError)

    /// The case and its codes; never any message content.
    public var description: String {
        switch self {
        case .store(let error): "store(\(error))"
        case .malformedResponse(let error): "malformedResponse(\(error))"
        }
    }

    /// Same as ``description``.
    public var logDescription: String { description }
}

/// One account's chat data: rooms, state, timelines, receipts, the send queue and the sync
/// position, in one SQLite database (``ChatSchema``).
///
/// Every method runs on the database's own thread; none blocks the caller. Writes from `/sync`
/// go through ``SyncIngestor``, which commits each response in one transaction with its
/// `next_batch`.
package struct ChatStore: Sendable {
    /// The database, for ingest and for tests.
    package let database: SQLiteDatabase

    /// Wraps a database that already has the chat schema.
    package init(database: SQLiteDatabase) {
        self.database = database
    }

    /// Opens (creating or migrating) the chat database at `path`.
    ///
    /// - Throws: `.store` when the file cannot be opened or migrated.
    package static func open(
        path: String, executor: StoreExecutor = StoreExecutor(), logger: Logger = Logger(category: "chat-store")
    ) async throws(ChatStoreError) -> ChatStore {
        do {
            let database = try await SQLiteDatabase.open(
                path: path, migrations: ChatSchema.migrations,
                configuration: SQLiteDatabase.Configuration(pageSize: pageSize), executor: executor, logger: logger)
            try await database.executeScript(connectionSettings)
            return ChatStore(database: database)
        } catch {
            throw .store(error)
        }
    }

    /// The page size of a new chat database: 8 KB instead of SQLite's 4 KB. Events are stored
    /// with their raw content (hundreds of bytes each), so larger pages mean half as many page
    /// splits and WAL frames for the same rows: an initial sync of 1,000 rooms ingests about
    /// 10% faster and checkpoints about 25% faster (`docs/benchmarks.md`). Existing files keep
    /// the page size they were created with.
    static let pageSize = 8192

    /// Per-connection settings.
    ///
    /// - A 16 MB page cache: an initial sync writes tens of megabytes in one transaction, and
    ///   with SQLite's default 2 MB the index pages are spilled to the WAL and read back again.
    /// - No automatic checkpoint: SQLite would otherwise copy the whole WAL into the database
    ///   inside the `COMMIT` of a large sync, on the path between the response and the updated
    ///   conversation list. ``checkpoint()`` does it instead, when the caller is idle, and every
    ///   ingest starts with one, so the WAL stays bounded even if the caller never calls it.
    static let connectionSettings = "PRAGMA cache_size = -16384; PRAGMA wal_autocheckpoint = 0;"

    /// Copies the write-ahead log into the database file (a passive checkpoint: it never
    /// waits for readers). Call it when idle after a sync; ingest also runs one first.
    package func checkpoint() async throws(ChatStoreError) {
        try await read { db throws(StoreError) in try Self.checkpoint(db: db) }
    }

    static func checkpoint(db: isolated SQLiteDatabase) throws(StoreError) {
        _ = try db.queryOne("PRAGMA wal_checkpoint(PASSIVE)") { $0.int(0) }
    }

    /// Runs `body` on the database's thread, mapping its failure.
    func read<T: Sendable>(
        _ body: @Sendable (isolated SQLiteDatabase) throws(StoreError) -> T
    ) async throws(ChatStoreError) -> T {
        do {
            return try await database.run(body)
        } catch {
            throw .store(error)
        }
    }

    /// Runs `body` in one transaction on the database's thread, mapping its failure.
    func write<T: Sendable>(
        _ body: @Sendable (isolated SQLiteDatabase) throws(StoreError) -> T
    ) async throws(ChatStoreError) -> T {
        do {
            return try await database.transaction(body)
        } catch {
            throw .store(error)
        }
    }

    // MARK: Sync position

    /// The `since` token of the next `/sync`, or `nil` before the first one (an initial sync).
    package func sinceToken() async throws(ChatStoreError) -> String? {
        try await read { db throws(StoreError) in
            try db.queryOne("SELECT since_token FROM sync_state WHERE id = 1") { $0.string(0) }
        }
    }

    /// How many events were skipped as malformed so far (kept in `malformed_events`).
    package func malformedEventCount() async throws(ChatStoreError) -> Int {
        try await read { db throws(StoreError) in
            try db.queryOne("SELECT COUNT(*) FROM malformed_events") { $0.int(0) } ?? 0
        }
    }

    // MARK: Encryption inputs

    /// To-device events not yet consumed, oldest first: their store ID and raw JSON.
    package func pendingToDeviceEvents(limit: Int = 100) async throws(ChatStoreError) -> [(id: Int64, raw: [UInt8])] {
        let rows = try await read { db throws(StoreError) in
            try db.queryAll("SELECT id, raw FROM to_device_events ORDER BY id LIMIT ?", [.int(limit)]) {
                StoredToDevice(id: $0.int64(0), raw: $0.blob(1))
            }
        }
        return rows.map { ($0.id, $0.raw) }
    }

    /// Deletes the to-device events up to `id`, once the crypto machine has consumed them.
    package func removeToDeviceEvents(through id: Int64) async throws(ChatStoreError) {
        try await write { db throws(StoreError) in
            try db.execute("DELETE FROM to_device_events WHERE id <= ?", [.integer(id)])
        }
    }

    /// The server's count of this device's unused one-time keys, by algorithm.
    package func oneTimeKeyCounts() async throws(ChatStoreError) -> [String: Int64] {
        let pairs = try await read { db throws(StoreError) in
            try db.queryAll("SELECT algorithm, count FROM one_time_key_counts") {
                KeyCount(name: $0.string(0), count: $0.int64(1))
            }
        }
        return Dictionary(pairs.map { ($0.name, $0.count) }, uniquingKeysWith: { $1 })
    }
}

private struct StoredToDevice: Sendable {
    var id: Int64
    var raw: [UInt8]
}

private struct KeyCount: Sendable {
    var name: String
    var count: Int64
}
