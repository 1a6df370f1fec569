import SymorvaMachines
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
    /// The database. Only the chat store runs chat SQL: other modules ask it through its
    /// methods, tests through ``databaseForTesting``.
    private let database: SQLiteDatabase

    /// The database, for tests that count rows or plant failures. Product code adds a
    /// ``ChatStore`` method instead.
    package var databaseForTesting: SQLiteDatabase { database }

    /// Wraps a database that already has the chat schema.
    package init(database: SQLiteDatabase) {
        self.database = database
    }

    /// Opens (creating or migrating) a database at `path` with the chat schema only, and the
    /// account settings (``SymorvaStore/SQLiteDatabase/Configuration/account``: 8 KB pages,
    /// 16 MB cache, no automatic checkpoint). For tests and tools: an account's chat store
    /// wraps the account's database, opened by `AccountDatabase.openFile`.
    ///
    /// - Throws: `.store` when the file cannot be opened or migrated.
    package static func open(
        path: String, executor: StoreExecutor = StoreExecutor(), logger: Logger = Logger(category: "chat-store")
    ) async throws(ChatStoreError) -> ChatStore {
        do {
            let database = try await SQLiteDatabase.open(
                path: path, migrations: ChatSchema.migrations, configuration: .account, executor: executor,
                logger: logger)
            return ChatStore(database: database)
        } catch {
            throw .store(error)
        }
    }

    /// Copies the write-ahead log into the database file (a passive checkpoint: it never
    /// waits for readers). The account database checkpoints only when asked
    /// (``SymorvaStore/SQLiteDatabase/Configuration/account``): the sync loop calls this after
    /// each committed response, once the conversation list is published, and every ingest
    /// starts with one, so the WAL stays bounded while the copy of a large WAL is off the path
    /// from response to conversation list.
    package func checkpoint() async throws(ChatStoreError) {
        try await read { db throws(StoreError) in try db.checkpoint() }
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
        durability: SQLiteDatabase.Durability = .normal,
        _ body: @Sendable (isolated SQLiteDatabase) throws(StoreError) -> T
    ) async throws(ChatStoreError) -> T {
        do {
            return try await database.transaction(durability: durability, body)
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

    /// The committed position of the sliding sync connection and the to-device extension's
    /// `since` (``SyncIngestor/ingest(sliding:)``); `nil`s before the first sliding sync.
    package func slidingSyncPosition() async throws(ChatStoreError) -> (pos: String?, toDeviceSince: String?) {
        try await read { db throws(StoreError) in
            try db.queryOne("SELECT pos, to_device_since FROM sliding_sync_state WHERE id = 1") {
                (pos: $0.optionalString(0), toDeviceSince: $0.optionalString(1))
            } ?? (pos: nil, toDeviceSince: nil)
        }
    }

    /// How many events were skipped as malformed so far (kept in `malformed_events`).
    package func malformedEventCount() async throws(ChatStoreError) -> Int {
        try await read { db throws(StoreError) in
            try db.queryOne("SELECT COUNT(*) FROM malformed_events") { $0.int(0) } ?? 0
        }
    }

    // MARK: Rooms and local data

    /// Whether the store knows the room (joined, invited, knocked or left, once synced).
    package func hasRoom(_ roomID: RoomID) async throws(ChatStoreError) -> Bool {
        try await read { db throws(StoreError) in
            try db.queryOne("SELECT 1 FROM rooms WHERE room_id = ?", [.text(roomID.rawValue)]) { _ in true } ?? false
        }
    }

    /// Raw content this device keeps for itself under `type` (the sync filter, for example), or
    /// `nil`. Kept in `account_data` under room number -1, a row `/sync` never writes (global
    /// account data is room 0), so no sync can replace it.
    package func localData(type: String) async throws(ChatStoreError) -> [UInt8]? {
        try await read { db throws(StoreError) in
            try db.queryOne("SELECT content FROM account_data WHERE room_nid = -1 AND type = ?", [.text(type)]) {
                $0.blob(0)
            }
        }
    }

    /// Stores `content` as this device's local data under `type` (see ``localData(type:)``).
    package func setLocalData(type: String, content: [UInt8]) async throws(ChatStoreError) {
        try await write { db throws(StoreError) in
            try db.execute(
                "INSERT INTO account_data(room_nid, type, content) VALUES (-1, ?, ?) ON CONFLICT DO UPDATE SET content = excluded.content",
                [.text(type), .blob(content)])
        }
    }

    // MARK: Encryption inputs

    /// The joined and invited members of the account's encrypted rooms: the users whose
    /// devices the crypto module tracks (chat's room state is the one source of truth for it).
    package func membersOfEncryptedRooms() async throws(ChatStoreError) -> [UserID] {
        let raw = try await read { db throws(StoreError) in
            try db.queryAll(
                """
                SELECT DISTINCT m.state_key FROM room_state m JOIN rooms r ON r.room_nid = m.room_nid
                WHERE r.is_encrypted = 1 AND r.membership = 0 AND m.type = 'm.room.member'
                  AND json_extract(CAST(m.content AS TEXT), '$.membership') IN ('join', 'invite')
                """
            ) { $0.string(0) }
        }
        return raw.compactMap(UserID.init)
    }
}
