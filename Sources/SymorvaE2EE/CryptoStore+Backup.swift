import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaRuntime
import SymorvaStore

// The server-side key backup's tables: the version in use with its private key (sealed), and
// the durable outbox of room keys to upload (`docs/e2ee.md`, "Key backup").
extension CryptoStore {
    /// Migration 10.
    static let keyBackupTables = """
        -- The backup version this device uploads to (one at most), its public key, its private
        -- key sealed with the account's secrets-at-rest key, and whether it is still in use.
        CREATE TABLE e2ee_key_backup (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            version TEXT NOT NULL,
            public_key TEXT NOT NULL,
            sealed_private_key BLOB NOT NULL,        -- SecretBox(32-byte Curve25519 key), never clear
            stopped TEXT                             -- NULL in use; 'deleted' or 'replaced' on the server
        ) STRICT;
        -- Inbound Megolm sessions stored and not yet in the backup, entered in the transaction
        -- that stores them; seq changes when a better key replaces one waiting, so that an
        -- upload of the older one does not remove it.
        CREATE TABLE e2ee_backup_outbox (
            room_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            queued_ms INTEGER NOT NULL,              -- wall clock when it entered (the backup lag)
            PRIMARY KEY (room_id, session_id)
        ) STRICT, WITHOUT ROWID;
        -- Sessions restored from the backup: not verified, never uploaded again.
        ALTER TABLE e2ee_inbound_group_sessions ADD COLUMN from_backup INTEGER NOT NULL DEFAULT 0;
        -- The backup version an open key request's session was looked up in: a request is
        -- looked up once per version before (or while) the other devices are asked.
        ALTER TABLE e2ee_outgoing_key_requests ADD COLUMN backup_version TEXT;
        """

    /// The backup version in use (or stopped) as stored.
    package struct StoredBackup: Sendable, Equatable {
        package var version: String
        package var publicKey: String
        package var stopped: KeyBackupStopReason?
    }

    /// A room key waiting in the outbox, with its session.
    package struct BackupOutboxEntry: Sendable {
        package var session: InboundSessionRow
        package var seq: Int64
        /// When it entered the outbox (wall clock, milliseconds).
        package var queuedMilliseconds: Int64
    }

    /// The wall clock in milliseconds, in SQL (`storeInbound` has no clock of its own).
    static let sqlNowMilliseconds = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"

    private var backupKeyAssociatedData: [UInt8] {
        SecretBox.associatedData(account: userID.rawValue, field: "e2ee.backup_key")
    }

    /// Puts the session in the outbox (or moves it to the end when it waits already) when a
    /// backup is in use; inside the transaction that stored it.
    static func enqueueForBackup(roomID: String, sessionID: String, in db: isolated SQLiteDatabase)
        throws(StoreError)
    {
        try db.execute(
            """
            INSERT INTO e2ee_backup_outbox(room_id, session_id, seq, queued_ms)
            SELECT ?1, ?2, COALESCE((SELECT MAX(seq) FROM e2ee_backup_outbox), 0) + 1, \(sqlNowMilliseconds)
            WHERE EXISTS (SELECT 1 FROM e2ee_key_backup WHERE stopped IS NULL)
            ON CONFLICT(room_id, session_id) DO UPDATE SET seq = excluded.seq, queued_ms = excluded.queued_ms
            """, [.text(roomID), .text(sessionID)])
    }

    /// The backup version stored, if any.
    package func storedBackup() async throws(CryptoStoreError) -> StoredBackup? {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryOne("SELECT version, public_key, stopped FROM e2ee_key_backup WHERE id = 1") {
                    StoredBackup(
                        version: $0.string(0), publicKey: $0.string(1),
                        stopped: $0.isNull(2) ? nil : KeyBackupStopReason(rawValue: $0.string(2)))
                }
            }
        } catch {
            throw .store(error)
        }
    }

    /// The backup's private key (opened), if a backup is stored.
    package func backupPrivateKey() async throws(CryptoStoreError) -> Secret<[UInt8]>? {
        let sealed: [UInt8]?
        do {
            sealed = try await database.run { db throws(StoreError) in
                try db.queryOne("SELECT sealed_private_key FROM e2ee_key_backup WHERE id = 1") { $0.blob(0) }
            }
        } catch {
            throw .store(error)
        }
        guard let sealed else { return nil }
        do { return try secrets.open(sealed, associatedData: backupKeyAssociatedData) } catch { throw .secrets(error) }
    }

    /// Uses `version` from now on: stores it with its private key (sealed), durably, and puts
    /// every session this device holds (those restored from a backup excepted) in the outbox.
    package func useBackup(version: String, publicKey: String, privateKey: Secret<[UInt8]>)
        async throws(CryptoStoreError)
    {
        let sealed: [UInt8]
        do { sealed = try secrets.seal(privateKey, associatedData: backupKeyAssociatedData) } catch {
            throw .secrets(error)
        }
        do {
            try await database.transaction(durability: .full) { db throws(StoreError) in
                let previous = try db.queryOne("SELECT version FROM e2ee_key_backup WHERE id = 1") { $0.string(0) }
                try db.execute(
                    """
                    INSERT OR REPLACE INTO e2ee_key_backup(id, version, public_key, sealed_private_key, stopped)
                    VALUES (1, ?, ?, ?, NULL)
                    """, [.text(version), .text(publicKey), .blob(sealed)])
                if previous != version {
                    // Another version: what the old one holds is not in this one.
                    try db.execute("DELETE FROM e2ee_backup_outbox")
                    try db.execute("UPDATE e2ee_inbound_group_sessions SET from_backup = 0")
                }
                try db.execute(
                    """
                    INSERT OR IGNORE INTO e2ee_backup_outbox(room_id, session_id, seq, queued_ms)
                    SELECT room_id, session_id, 0, \(Self.sqlNowMilliseconds)
                    FROM e2ee_inbound_group_sessions WHERE from_backup = 0
                    """)
            }
        } catch {
            throw .store(error)
        }
    }

    /// Stops uploading: the version was deleted or replaced on the server. The outbox stays
    /// (a backup enabled later starts from every session again).
    package func stopBackup(_ reason: KeyBackupStopReason) async throws(CryptoStoreError) {
        do {
            try await database.transaction(durability: .full) { db throws(StoreError) in
                try db.execute("UPDATE e2ee_key_backup SET stopped = ? WHERE id = 1", [.text(reason.rawValue)])
            }
        } catch {
            throw .store(error)
        }
    }

    /// Forgets the backup (the user turned it off, or deleted the version).
    package func forgetBackup() async throws(CryptoStoreError) {
        do {
            try await database.transaction(durability: .full) { db throws(StoreError) in
                try db.execute("DELETE FROM e2ee_key_backup")
                try db.execute("DELETE FROM e2ee_backup_outbox")
            }
        } catch {
            throw .store(error)
        }
    }

    /// The oldest `limit` room keys waiting in the outbox, with their sessions.
    package func backupOutbox(limit: Int) async throws(CryptoStoreError) -> [BackupOutboxEntry] {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryAll(
                    """
                    SELECT o.room_id, o.session_id, o.seq, s.sender_key, s.signing_key, s.forwarded, s.pickle,
                        s.sender_user, s.first_known_index, o.queued_ms
                    FROM e2ee_backup_outbox o JOIN e2ee_inbound_group_sessions s
                        ON s.room_id = o.room_id AND s.session_id = o.session_id
                    ORDER BY o.seq, o.room_id, o.session_id LIMIT ?
                    """, [.integer(Int64(limit))]
                ) {
                    BackupOutboxEntry(
                        session: InboundSessionRow(
                            roomID: $0.string(0), sessionID: $0.string(1), senderKey: $0.string(3),
                            signingKey: $0.string(4), forwarded: $0.int(5) != 0, pickle: $0.blob(6),
                            senderUser: $0.isNull(7) ? nil : UserID($0.string(7)), firstKnownIndex: $0.int(8)),
                        seq: $0.int64(2), queuedMilliseconds: $0.int64(9))
                }
            }
        } catch {
            throw .store(error)
        }
    }

    /// Removes the uploaded entries from the outbox, each only if it was not entered again
    /// meanwhile (a better key arrived); returns how many keys still wait.
    package func backupUploaded(_ entries: [(roomID: String, sessionID: String, seq: Int64)])
        async throws(CryptoStoreError) -> Int
    {
        do {
            return try await database.transaction { db throws(StoreError) -> Int in
                for entry in entries {
                    try db.execute(
                        "DELETE FROM e2ee_backup_outbox WHERE room_id = ? AND session_id = ? AND seq = ?",
                        [.text(entry.roomID), .text(entry.sessionID), .integer(entry.seq)])
                }
                return try Self.backupWaiting(in: db)
            }
        } catch {
            throw .store(error)
        }
    }

    /// How many room keys wait to be uploaded (0 when no backup is in use).
    package func backupWaitingCount() async throws(CryptoStoreError) -> Int {
        do {
            return try await database.run { db throws(StoreError) in try Self.backupWaiting(in: db) }
        } catch {
            throw .store(error)
        }
    }

    static func backupWaiting(in db: isolated SQLiteDatabase) throws(StoreError) -> Int {
        try db.queryOne(
            """
            SELECT CASE WHEN EXISTS (SELECT 1 FROM e2ee_key_backup WHERE stopped IS NULL)
                THEN (SELECT COUNT(*) FROM e2ee_backup_outbox) ELSE 0 END
            """
        ) { $0.int(0) } ?? 0
    }

    /// Stores sessions restored from the backup (each unless the same session is stored as
    /// well or better), in one transaction; returns the (room, session) pairs stored.
    package func importFromBackup(_ rows: [InboundSessionRow]) async throws(CryptoStoreError)
        -> [(roomID: String, sessionID: String)]
    {
        do {
            return try await database.transaction { db throws(StoreError) -> [(roomID: String, sessionID: String)] in
                var stored: [(roomID: String, sessionID: String)] = []
                for row in rows where try Self.storeInbound(row, in: db) {
                    stored.append((row.roomID, row.sessionID))
                    // A request for it not sent yet is dropped; one sent is cancelled.
                    let session: [SQLiteValue] = [.text(row.roomID), .text(row.sessionID)]
                    try db.execute(
                        "DELETE FROM e2ee_outgoing_key_requests WHERE room_id = ? AND session_id = ? AND state = 0",
                        session)
                    try db.execute(
                        "UPDATE e2ee_outgoing_key_requests SET state = 2 WHERE room_id = ? AND session_id = ? AND state = 1",
                        session)
                }
                return stored
            }
        } catch {
            throw .store(error)
        }
    }

    /// The open key requests (to send or sent, not answered) not yet looked up in backup
    /// `version`: (room, session).
    package func keyRequestsToLookUp(inBackup version: String) async throws(CryptoStoreError)
        -> [(roomID: String, sessionID: String)]
    {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryAll(
                    """
                    SELECT room_id, session_id FROM e2ee_outgoing_key_requests
                    WHERE state IN (0, 1) AND COALESCE(backup_version, '') != ? ORDER BY rowid
                    """, [.text(version)]
                ) { ($0.string(0), $0.string(1)) }
            }
        } catch {
            throw .store(error)
        }
    }

    /// Records that the request for `sessionID` of `roomID` was looked up in backup `version`.
    package func keyRequestLookedUp(roomID: String, sessionID: String, inBackup version: String)
        async throws(CryptoStoreError)
    {
        do {
            try await database.transaction { db throws(StoreError) in
                try db.execute(
                    "UPDATE e2ee_outgoing_key_requests SET backup_version = ? WHERE room_id = ? AND session_id = ?",
                    [.text(version), .text(roomID), .text(sessionID)])
            }
        } catch {
            throw .store(error)
        }
    }
}
