import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore

/// The end-to-end encryption tables of one account's database (feature `e2ee`, versioned with
/// ``SymorvaStore/SQLiteDatabase/migrate(feature:_:)``): the pickled Olm account, the tracked
/// users and their verified devices, Olm sessions and inbound Megolm sessions.
///
/// Pickles are encrypted by the driver with the account's pickle key: 32 random bytes kept in
/// `e2ee_account` only **sealed** with the account's secrets-at-rest key (``/SymorvaCrypto/SecretBox``,
/// the key from the ``/SymorvaCrypto/KeyProvider``), never in the clear. Rows that must exist before
/// a request leaves (the account with the keys a `keys/upload` carries) are written with
/// `synchronous=FULL`.
package struct CryptoStore: Sendable {
    /// The feature name under which the schema version is kept.
    package static let feature = "e2ee"

    /// The migrations, in order.
    package static let migrations: [Migration] = [
        Migration(
            version: 1, name: "e2ee_account_devices_sessions",
            sql: """
                CREATE TABLE e2ee_account (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    device_id TEXT NOT NULL,
                    sealed_pickle_key BLOB NOT NULL,         -- SecretBox(account key), never clear
                    pickle BLOB NOT NULL,                    -- the Olm account, encrypted with the pickle key
                    published INTEGER NOT NULL DEFAULT 0     -- the server accepted the device keys
                ) STRICT;
                CREATE TABLE e2ee_tracked_users (
                    user_id TEXT PRIMARY KEY,
                    outdated INTEGER NOT NULL                -- 1: the device list must be queried
                ) STRICT, WITHOUT ROWID;
                CREATE TABLE e2ee_devices (
                    user_id TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    curve25519 TEXT NOT NULL,
                    ed25519 TEXT NOT NULL,
                    display_name TEXT,
                    key_changed INTEGER NOT NULL DEFAULT 0,  -- the server showed other keys: refused, flagged
                    PRIMARY KEY (user_id, device_id)
                ) STRICT, WITHOUT ROWID;
                CREATE TABLE e2ee_olm_sessions (
                    sender_key TEXT NOT NULL,                -- the other device's Curve25519 key
                    session_id TEXT NOT NULL,
                    pickle BLOB NOT NULL,
                    last_used_ms INTEGER NOT NULL,
                    PRIMARY KEY (sender_key, session_id)
                ) STRICT, WITHOUT ROWID;
                CREATE TABLE e2ee_inbound_group_sessions (
                    room_id TEXT NOT NULL,
                    session_id TEXT NOT NULL,
                    sender_key TEXT NOT NULL,                -- Curve25519 key of the device that shared it
                    signing_key TEXT NOT NULL,               -- its claimed Ed25519 key
                    forwarded INTEGER NOT NULL,
                    pickle BLOB NOT NULL,
                    PRIMARY KEY (room_id, session_id)
                ) STRICT, WITHOUT ROWID;
                """),
        Migration(
            version: 2, name: "e2ee_outbound_group_sessions",
            sql: """
                CREATE TABLE e2ee_outbound_group_sessions (
                    room_id TEXT PRIMARY KEY,
                    session_id TEXT NOT NULL,
                    pickle BLOB NOT NULL,
                    created_ms INTEGER NOT NULL,             -- wall clock
                    message_count INTEGER NOT NULL,          -- messages encrypted with it
                    shared_with TEXT NOT NULL                -- one "user_id device_id curve25519" per line
                ) STRICT;
                """),
        Migration(
            version: 3, name: "e2ee_megolm_indexes",
            sql: """
                CREATE TABLE e2ee_megolm_indexes (
                    session_id TEXT NOT NULL,
                    message_index INTEGER NOT NULL,
                    event_id TEXT NOT NULL,                  -- the one event this index decrypted
                    PRIMARY KEY (session_id, message_index)
                ) STRICT, WITHOUT ROWID;
                """),
        Migration(
            version: 4, name: "e2ee_room_key_requests",
            sql: """
                CREATE TABLE e2ee_outgoing_key_requests (
                    request_id TEXT PRIMARY KEY,
                    room_id TEXT NOT NULL,
                    session_id TEXT NOT NULL,
                    sender_key TEXT NOT NULL,                -- Curve25519 key of the session's sender
                    state INTEGER NOT NULL,                  -- 0 to send, 1 sent, 2 key arrived: cancel
                    UNIQUE (room_id, session_id)
                ) STRICT;
                CREATE TABLE e2ee_incoming_key_requests (
                    device_id TEXT NOT NULL,                 -- another device of this account
                    request_id TEXT NOT NULL,
                    room_id TEXT NOT NULL,
                    session_id TEXT NOT NULL,
                    PRIMARY KEY (device_id, request_id)
                ) STRICT, WITHOUT ROWID;
                """),
        Migration(
            version: 5, name: "e2ee_incoming_key_request_age",
            sql: """
                -- When a request arrived (wall clock): requests wait a bounded time, the newest kept.
                ALTER TABLE e2ee_incoming_key_requests ADD COLUMN received_at_ms INTEGER NOT NULL DEFAULT 0;
                """),
        Migration(
            version: 6, name: "e2ee_session_owners_and_fallback_age",
            sql: """
                -- Who shared an inbound session (the Olm-authenticated sender of its m.room_key; NULL
                -- when forwarded), and the first index it decrypts: a better key replaces a worse one.
                ALTER TABLE e2ee_inbound_group_sessions ADD COLUMN sender_user TEXT;
                ALTER TABLE e2ee_inbound_group_sessions ADD COLUMN first_known_index INTEGER NOT NULL DEFAULT 0;
                -- When a new fallback key was published (wall clock): the previous one is forgotten later.
                ALTER TABLE e2ee_account ADD COLUMN fallback_rotated_ms INTEGER;
                -- Who sent the event a key request is for: requests are bounded per room and sender.
                ALTER TABLE e2ee_outgoing_key_requests ADD COLUMN sender_user TEXT NOT NULL DEFAULT '';
                """),
        Migration(
            version: 7, name: "e2ee_held_room_keys",
            sql: """
                -- Room keys that arrived over Olm from a device not known yet: used only once a
                -- keys/query shows the device (its Curve25519 and Ed25519 keys) as the sender's.
                CREATE TABLE e2ee_held_room_keys (
                    room_id TEXT NOT NULL,
                    session_id TEXT NOT NULL,
                    sender_user TEXT NOT NULL,
                    sender_key TEXT NOT NULL,
                    signing_key TEXT NOT NULL,
                    first_known_index INTEGER NOT NULL,
                    pickle BLOB NOT NULL,
                    received_at_ms INTEGER NOT NULL,
                    PRIMARY KEY (room_id, session_id, sender_key)
                ) STRICT, WITHOUT ROWID;
                """),
        Migration(
            version: 8, name: "e2ee_wedged_devices",
            sql: """
                -- Devices whose Olm messages no session of ours could read: a new session is started
                -- with each (pending), at most once an hour (unwedged_ms).
                CREATE TABLE e2ee_wedged_devices (
                    curve25519 TEXT PRIMARY KEY,
                    user_id TEXT NOT NULL,
                    pending INTEGER NOT NULL,
                    unwedged_ms INTEGER NOT NULL
                ) STRICT, WITHOUT ROWID;
                """),
        // The inbox chat's ingest hands each sync's to-device events, device lists and key counts
        // to, in the sync's transaction (`SyncDeviceInbox`); chat's schema 8 moved what it had
        // stored for us here (creating these tables if it migrated first).
        Migration(version: 9, name: "e2ee_inbox", sql: SyncDeviceInbox.tables),
        // Cross-signing (issue 24): this account's private keys, each tracked user's pinned
        // identity, each device's trust level. Self-contained: it reads and changes no other
        // migration's rows but the new column of `e2ee_devices`.
        Migration(
            version: 10, name: "e2ee_cross_signing",
            sql: """
                -- The account's cross-signing private keys this device holds: their 32-byte seeds,
                -- each sealed with the secrets-at-rest key (never clear), and the master public key.
                CREATE TABLE e2ee_cross_signing_keys (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    master_key TEXT NOT NULL,
                    sealed_master BLOB NOT NULL,
                    sealed_self_signing BLOB NOT NULL,
                    sealed_user_signing BLOB NOT NULL
                ) STRICT;
                -- Each user's master key pinned on first sight (trust on first use); a keys/query
                -- that lists another one records it as changed_master_key until it is acknowledged.
                CREATE TABLE e2ee_identities (
                    user_id TEXT PRIMARY KEY,
                    pinned_master_key TEXT NOT NULL,
                    changed_master_key TEXT,               -- not NULL: changed, not acknowledged
                    verified INTEGER NOT NULL DEFAULT 0    -- our user-signing key signed the current key
                ) STRICT, WITHOUT ROWID;
                -- 0 unverified, 1 cross-signed by its owner, 2 verified (DeviceTrustLevel).
                ALTER TABLE e2ee_devices ADD COLUMN trust INTEGER NOT NULL DEFAULT 0;
                """),
        Migration(version: 11, name: "e2ee_key_backup", sql: CryptoStore.keyBackupTables),
        // Secret sharing's requests (the SecretRequest machine): kept so that a restart resumes
        // or cancels them. New tables only.
        Migration(version: 12, name: "e2ee_secret_requests", sql: CryptoStore.secretRequestTables),
        // The other devices' secret requests not answered yet (the SecretAnswer machine): kept
        // so that one that arrived before a restart is answered after it. A new table only.
        Migration(
            version: 13, name: "e2ee_incoming_secret_requests", sql: CryptoStore.incomingSecretRequestTables),
    ]

    /// Writes a sync's share for end-to-end encryption into the inbox, inside the sync's
    /// transaction (chat's ingest calls it through `SyncInboxWriter`): to-device events in
    /// arrival order, the latest device-list change per user, the key counts.
    package static func writeInbox(_ inbox: SyncDeviceInbox, in db: isolated SQLiteDatabase) throws(StoreError) {
        for event in inbox.toDevice {
            try db.execute(
                "INSERT INTO e2ee_inbox_to_device(type, sender, raw) VALUES (?, ?, ?)",
                [.text(event.type), .text(event.sender), .blob(event.raw)])
        }
        for (users, change) in [(inbox.deviceListsChanged, 1), (inbox.deviceListsLeft, 2)] {
            for user in users {
                try db.execute(
                    "INSERT INTO e2ee_inbox_device_lists(user_id, change) VALUES (?, ?) ON CONFLICT DO UPDATE SET change = excluded.change",
                    [.text(user), .int(change)])
            }
        }
        for (algorithm, count) in inbox.oneTimeKeyCounts {
            try db.execute(
                "INSERT INTO e2ee_inbox_key_counts(algorithm, count) VALUES (?, ?) ON CONFLICT DO UPDATE SET count = excluded.count",
                [.text(algorithm), .integer(count)])
        }
    }

    /// A device of a tracked user, as verified from its self-signed keys.
    package struct Device: Sendable, Hashable {
        package var userID: UserID
        package var deviceID: String
        package var curve25519: String
        package var ed25519: String
        package var displayName: String?
        /// The server once showed other keys for this device: its new keys are refused.
        package var keyChanged: Bool
        /// Its trust level as the last `keys/query` showed the signature chain.
        package var trust: DeviceTrustLevel = .unverified
    }

    /// The stored account: its pickle, its (opened) pickle key, whether its device keys are published.
    package struct StoredAccount: Sendable {
        package var pickle: [UInt8]
        package var pickleKey: Secret<[UInt8]>
        package var published: Bool
        /// When a fallback key replacing another was published, until the old one is forgotten.
        package var fallbackRotatedMilliseconds: Int64?
    }

    let database: SQLiteDatabase
    let secrets: SecretBox
    let userID: UserID

    /// The store on `database`, whose `e2ee` tables the account's migrations (the crypto
    /// module's factory) brought to the current version; `key` is the account's
    /// secrets-at-rest key.
    ///
    /// - Throws: `.notMigrated` when the tables are at another version (the store never migrates
    ///   on its own: the account database's one list of features does).
    package static func open(on database: SQLiteDatabase, userID: UserID, key: Secret<[UInt8]>)
        async throws(CryptoStoreError) -> CryptoStore
    {
        let version: Int
        do {
            version = try await database.schemaVersion(feature: feature)
        } catch {
            throw .store(error)
        }
        guard version == migrations.count else { throw .notMigrated(found: version, expected: migrations.count) }
        do {
            return CryptoStore(database: database, secrets: try SecretBox(key: key), userID: userID)
        } catch {
            throw .secrets(error)
        }
    }

    /// The store on a database of its own (tests and benchmarks): its tables migrated first.
    package static func migrating(on database: SQLiteDatabase, userID: UserID, key: Secret<[UInt8]>)
        async throws(CryptoStoreError) -> CryptoStore
    {
        do {
            try await database.migrate(feature: feature, migrations)
        } catch {
            throw .store(error)
        }
        return try await open(on: database, userID: userID, key: key)
    }

    private var associatedData: [UInt8] {
        SecretBox.associatedData(account: userID.rawValue, field: "e2ee.pickle_key")
    }

    // MARK: Account

    /// The stored account, or `nil` when there is none yet.
    package func loadAccount() async throws(CryptoStoreError) -> StoredAccount? {
        let row: (sealed: [UInt8], pickle: [UInt8], published: Bool, rotated: Int64?)?
        do {
            row = try await database.run { db throws(StoreError) in
                try db.queryOne(
                    "SELECT sealed_pickle_key, pickle, published, fallback_rotated_ms FROM e2ee_account WHERE id = 1"
                ) {
                    ($0.blob(0), $0.blob(1), $0.int(2) != 0, $0.isNull(3) ? nil : $0.int64(3))
                }
            }
        } catch {
            throw .store(error)
        }
        guard let row else { return nil }
        do {
            let pickleKey = try secrets.open(row.sealed, associatedData: associatedData)
            return StoredAccount(
                pickle: row.pickle, pickleKey: pickleKey, published: row.published,
                fallbackRotatedMilliseconds: row.rotated)
        } catch {
            throw .secrets(error)
        }
    }

    /// Stores a new account: its pickle and its pickle key (sealed), durably.
    package func createAccount(pickle: [UInt8], pickleKey: Secret<[UInt8]>, deviceID: String)
        async throws(CryptoStoreError)
    {
        let sealed: [UInt8]
        do { sealed = try secrets.seal(pickleKey, associatedData: associatedData) } catch { throw .secrets(error) }
        do {
            try await database.transaction(durability: .full) { db throws(StoreError) in
                try db.execute(
                    "INSERT INTO e2ee_account(id, device_id, sealed_pickle_key, pickle, published) VALUES (1, ?, ?, ?, 0)",
                    [.text(deviceID), .blob(sealed), .blob(pickle)])
            }
        } catch {
            throw .store(error)
        }
    }

    /// Stores the account's current pickle (and whether its device keys are published, and when
    /// a fallback key that replaced another was published), durably: called before a
    /// `keys/upload` leaves with keys it generated, after it is answered, and when the old
    /// fallback key is forgotten.
    package func saveAccount(pickle: [UInt8], published: Bool, fallbackRotatedMilliseconds: Int64?)
        async throws(CryptoStoreError)
    {
        do {
            try await database.transaction(durability: .full) { db throws(StoreError) in
                try db.execute(
                    "UPDATE e2ee_account SET pickle = ?, published = ?, fallback_rotated_ms = ? WHERE id = 1",
                    [
                        .blob(pickle), .integer(published ? 1 : 0),
                        fallbackRotatedMilliseconds.map { .integer($0) } ?? .null,
                    ])
            }
        } catch {
            throw .store(error)
        }
    }

    // MARK: Tracking

    /// Starts tracking `users` (outdated, so they are queried); returns those that were new.
    package func track(_ users: [UserID]) async throws(CryptoStoreError) -> [UserID] {
        let raw = users.map(\.rawValue)
        do {
            let added = try await database.transaction { db throws(StoreError) -> [String] in
                var added: [String] = []
                for user in raw {
                    try db.execute(
                        "INSERT OR IGNORE INTO e2ee_tracked_users(user_id, outdated) VALUES (?, 1)", [.text(user)])
                    if db.changes > 0 { added.append(user) }
                }
                return added
            }
            return added.compactMap(UserID.init)
        } catch {
            throw .store(error)
        }
    }

    /// Whether `user` is tracked and outdated: one indexed row, for the per-event check of a
    /// decryption (``outdatedUsers()`` reads and parses every tracked user).
    package func isOutdated(_ user: UserID) async throws(CryptoStoreError) -> Bool {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryOne(
                    "SELECT outdated FROM e2ee_tracked_users WHERE user_id = ?", [.text(user.rawValue)]
                ) { $0.int(0) != 0 } ?? false
            }
        } catch {
            throw .store(error)
        }
    }

    /// Marks a tracked `user`'s device list outdated: the next query asks for it.
    package func markOutdated(_ user: UserID) async throws(CryptoStoreError) {
        do {
            try await database.transaction { db throws(StoreError) in
                try db.execute(
                    "UPDATE e2ee_tracked_users SET outdated = 1 WHERE user_id = ?", [.text(user.rawValue)])
            }
        } catch {
            throw .store(error)
        }
    }

    /// Tracked users whose device lists are outdated.
    package func outdatedUsers() async throws(CryptoStoreError) -> [UserID] {
        do {
            let raw = try await database.run { db throws(StoreError) in
                try db.queryAll("SELECT user_id FROM e2ee_tracked_users WHERE outdated = 1 ORDER BY user_id") {
                    $0.string(0)
                }
            }
            return raw.compactMap(UserID.init)
        } catch {
            throw .store(error)
        }
    }

    /// Replaces the devices of the users a `keys/query` answered for and clears their outdated
    /// marks, in one transaction. A device whose stored keys differ from the new ones keeps its
    /// old keys and is flagged (``Device/keyChanged``).
    ///
    /// Each answered user's checked cross-signing identity in `identities` is compared with the
    /// pinned one in the same transaction (``pinIdentity(_:in:)``): pinned on first sight, a
    /// different master key recorded as a change until it is acknowledged. A user the answer
    /// lists without an identity while one is pinned: the identity disappeared, recorded as a
    /// change too (``identityMissing(of:in:)``).
    ///
    /// - Returns: how many devices were refused for changed keys.
    package func storeQueried(
        _ devices: [UserID: [Device]], users: [UserID], identities: [UserID: UserIdentity] = [:]
    ) async throws(CryptoStoreError) -> Int {
        let raw = users.map(\.rawValue)
        let rows = devices.values.flatMap { $0 }
        do {
            return try await database.transaction { db throws(StoreError) -> Int in
                var refused = 0
                for user in raw {
                    let known = try db.queryAll(
                        "SELECT device_id, curve25519, ed25519 FROM e2ee_devices WHERE user_id = ?", [.text(user)]
                    ) { ($0.string(0), $0.string(1), $0.string(2)) }
                    let knownByID = Dictionary(uniqueKeysWithValues: known.map { ($0.0, ($0.1, $0.2)) })
                    let current = Set(rows.filter { $0.userID.rawValue == user }.map(\.deviceID))
                    // Devices gone from the server are forgotten.
                    for (deviceID, _) in knownByID where !current.contains(deviceID) {
                        try db.execute(
                            "DELETE FROM e2ee_devices WHERE user_id = ? AND device_id = ?",
                            [.text(user), .text(deviceID)])
                    }
                    for device in rows where device.userID.rawValue == user {
                        if let old = knownByID[device.deviceID], old != (device.curve25519, device.ed25519) {
                            refused += 1
                            // Refused keys: the device trusts nothing the new keys were signed with.
                            try db.execute(
                                "UPDATE e2ee_devices SET key_changed = 1, trust = 0 WHERE user_id = ? AND device_id = ?",
                                [.text(user), .text(device.deviceID)])
                            continue
                        }
                        try db.execute(
                            """
                            INSERT INTO e2ee_devices(user_id, device_id, curve25519, ed25519, display_name, trust)
                            VALUES (?, ?, ?, ?, ?, ?)
                            ON CONFLICT(user_id, device_id) DO UPDATE SET display_name = excluded.display_name,
                                trust = CASE WHEN e2ee_devices.key_changed = 1 THEN 0 ELSE excluded.trust END
                            """,
                            [
                                .text(user), .text(device.deviceID), .text(device.curve25519), .text(device.ed25519),
                                device.displayName.map { .text($0) } ?? .null,
                                .integer(Int64(device.trust.storedValue)),
                            ])
                    }
                    if let userID = UserID(user) {
                        if let identity = identities[userID] {
                            try Self.pinIdentity(identity, in: db)
                        } else {
                            try Self.identityMissing(of: userID, in: db)
                        }
                    }
                    try db.execute("UPDATE e2ee_tracked_users SET outdated = 0 WHERE user_id = ?", [.text(user)])
                }
                return refused
            }
        } catch {
            throw .store(error)
        }
    }

    /// The stored devices of `user`.
    package func devices(of user: UserID) async throws(CryptoStoreError) -> [Device] {
        let raw = user.rawValue
        do {
            let rows = try await database.run { db throws(StoreError) in
                try db.queryAll(
                    """
                    SELECT device_id, curve25519, ed25519, display_name, key_changed, trust
                    FROM e2ee_devices WHERE user_id = ? ORDER BY device_id
                    """,
                    [.text(raw)]
                ) { row in
                    Device(
                        userID: user, deviceID: row.string(0), curve25519: row.string(1), ed25519: row.string(2),
                        displayName: row.isNull(3) ? nil : row.string(3), keyChanged: row.int(4) != 0,
                        trust: DeviceTrustLevel(storedValue: row.int(5)))
                }
            }
            return rows
        } catch {
            throw .store(error)
        }
    }

    // MARK: To-device messages

    /// A to-device event as the sync ingest handed it over (the inbox, `e2ee_inbox_to_device`).
    package struct ToDeviceRow: Sendable {
        package var id: Int64
        package var type: String
        package var sender: String
        package var raw: [UInt8]
    }

    /// What processing one to-device event changes, written in one transaction with the
    /// event's removal.
    package struct ToDeviceOutcome: Sendable {
        package var rowID: Int64
        /// An Olm session created or advanced: (sender key, session ID, pickle).
        package var olmSession: (senderKey: String, sessionID: String, pickle: [UInt8])?
        /// The account's new pickle (a one-time key was spent).
        package var accountPickle: [UInt8]?
        /// An inbound Megolm session to keep.
        package var inboundSession: InboundSessionRow?
        /// A room key from a device not known yet, held until its device is (its sender is
        /// marked outdated, so that it is queried).
        package var heldRoomKey: InboundSessionRow?
        /// Another own device's room key request to answer.
        package var incomingRequest: IncomingKeyRequest?
        /// The sender whose Olm message no session of ours could read: (user, Curve25519 key).
        package var wedgedSender: (user: UserID, curveKey: String)?
        /// Another own device's cancellation of its request: (device, request ID).
        package var cancelledRequest: (deviceID: String, requestID: String)?
        /// Another own device's secret request to answer (the SecretAnswer machine).
        package var secretRequest: IncomingSecretRequest?
        /// Another own device's cancellation of its secret request: (device, request ID).
        package var cancelledSecretRequest: (deviceID: String, requestID: String)?
    }

    /// An inbound Megolm session row.
    package struct InboundSessionRow: Sendable {
        package var roomID: String
        package var sessionID: String
        package var senderKey: String
        package var signingKey: String
        package var forwarded: Bool
        package var pickle: [UInt8]
        /// The user whose device shared it over Olm (`nil` for a forwarded key): only that
        /// user's events are decrypted with it.
        package var senderUser: UserID?
        /// The first message index it decrypts.
        package var firstKnownIndex: Int
        /// Restored from the server-side key backup (stored as forwarded, not verified; never
        /// uploaded again).
        package var fromBackup: Bool

        /// A row as given (`package` for the benchmarks, which store room keys directly).
        package init(
            roomID: String, sessionID: String, senderKey: String, signingKey: String, forwarded: Bool, pickle: [UInt8],
            senderUser: UserID? = nil, firstKnownIndex: Int = 0, fromBackup: Bool = false
        ) {
            self.fromBackup = fromBackup
            self.roomID = roomID
            self.sessionID = sessionID
            self.senderKey = senderKey
            self.signingKey = signingKey
            self.forwarded = forwarded
            self.pickle = pickle
            self.senderUser = senderUser
            self.firstKnownIndex = firstKnownIndex
        }
    }

    /// Stores an inbound session unless the same session is stored as well or better: a session
    /// already stored is replaced only by the same session from the same device (sender key) that
    /// decrypts from an earlier index, or from the same index as a key received from its sender
    /// where the stored one was forwarded. Returns whether it was stored.
    ///
    /// A session stored (not one restored from the backup) enters the backup outbox in the same
    /// transaction when a backup is in use (``enqueueForBackup(roomID:sessionID:in:)``): a kill
    /// right after loses nothing.
    @discardableResult
    static func storeInbound(_ inbound: InboundSessionRow, in db: isolated SQLiteDatabase) throws(StoreError) -> Bool {
        try db.execute(
            """
            INSERT INTO e2ee_inbound_group_sessions(
                room_id, session_id, sender_key, signing_key, forwarded, pickle, sender_user, first_known_index,
                from_backup)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(room_id, session_id) DO UPDATE SET
                signing_key = excluded.signing_key, forwarded = excluded.forwarded, pickle = excluded.pickle,
                sender_user = COALESCE(excluded.sender_user, e2ee_inbound_group_sessions.sender_user),
                first_known_index = excluded.first_known_index, from_backup = excluded.from_backup
            WHERE excluded.sender_key = e2ee_inbound_group_sessions.sender_key AND (
                excluded.first_known_index < e2ee_inbound_group_sessions.first_known_index
                OR (excluded.first_known_index = e2ee_inbound_group_sessions.first_known_index
                    AND e2ee_inbound_group_sessions.forwarded = 1 AND excluded.forwarded = 0))
            """,
            [
                .text(inbound.roomID), .text(inbound.sessionID), .text(inbound.senderKey), .text(inbound.signingKey),
                .integer(inbound.forwarded ? 1 : 0), .blob(inbound.pickle),
                inbound.senderUser.map { .text($0.rawValue) } ?? .null, .integer(Int64(inbound.firstKnownIndex)),
                .integer(inbound.fromBackup ? 1 : 0),
            ])
        guard db.changes > 0 else { return false }
        if !inbound.fromBackup { try enqueueForBackup(roomID: inbound.roomID, sessionID: inbound.sessionID, in: db) }
        return true
    }

    /// The oldest stored to-device events.
    package func toDeviceBatch(limit: Int) async throws(CryptoStoreError) -> [ToDeviceRow] {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryAll(
                    "SELECT id, type, sender, raw FROM e2ee_inbox_to_device ORDER BY id LIMIT ?",
                    [.integer(Int64(limit))]
                ) {
                    ToDeviceRow(id: $0.int64(0), type: $0.string(1), sender: $0.string(2), raw: $0.blob(3))
                }
            }
        } catch {
            throw .store(error)
        }
    }

    /// The pickled Olm sessions with the device whose Curve25519 key is `senderKey`, most
    /// recently used first.
    package func olmSessions(senderKey: String) async throws(CryptoStoreError) -> [(sessionID: String, pickle: [UInt8])]
    {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryAll(
                    "SELECT session_id, pickle FROM e2ee_olm_sessions WHERE sender_key = ? ORDER BY last_used_ms DESC",
                    [.text(senderKey)]
                ) { ($0.string(0), $0.blob(1)) }
            }
        } catch {
            throw .store(error)
        }
    }

    /// Applies the outcome of one to-device event and removes the event, in one transaction.
    /// An inbound session already known under the same room and ID is kept (the first key
    /// received wins; a later one cannot replace it). A request this device sent for the
    /// session is marked for cancellation (one never sent is dropped).
    ///
    /// - Returns: whether a key this device had requested arrived, and whether a wedged device
    ///   is now due for a new session.
    @discardableResult
    package func apply(_ outcome: ToDeviceOutcome, nowMilliseconds: Int64) async throws(CryptoStoreError)
        -> (requestedKeyArrived: Bool, wedged: Bool)
    {
        do {
            return try await database.transaction {
                db throws(StoreError) -> (requestedKeyArrived: Bool, wedged: Bool) in
                var requestedKeyArrived = false
                var wedged = false
                if let sender = outcome.wedgedSender {
                    wedged = try Self.recordWedged(sender, nowMilliseconds: nowMilliseconds, in: db)
                }
                if let session = outcome.olmSession {
                    try db.execute(
                        """
                        INSERT INTO e2ee_olm_sessions(sender_key, session_id, pickle, last_used_ms) VALUES (?, ?, ?, ?)
                        ON CONFLICT(sender_key, session_id) DO UPDATE SET pickle = excluded.pickle, last_used_ms = excluded.last_used_ms
                        """,
                        [
                            .text(session.senderKey), .text(session.sessionID), .blob(session.pickle),
                            .integer(nowMilliseconds),
                        ])
                    try Self.pruneOlmSessions(senderKey: session.senderKey, keeping: session.sessionID, in: db)
                }
                if let pickle = outcome.accountPickle {
                    try db.execute("UPDATE e2ee_account SET pickle = ? WHERE id = 1", [.blob(pickle)])
                    // The device started a new session with us (after it lost the one it had,
                    // say, and unwedged it): what we shared over the old one may never have
                    // reached it, so the rooms' current keys go to it again with the next message.
                    if let session = outcome.olmSession {
                        try Self.forgetSharing(withCurveKey: session.senderKey, in: db)
                    }
                }
                if let inbound = outcome.inboundSession {
                    try Self.storeInbound(inbound, in: db)
                    let session: [SQLiteValue] = [.text(inbound.roomID), .text(inbound.sessionID)]
                    try db.execute(
                        "DELETE FROM e2ee_outgoing_key_requests WHERE room_id = ? AND session_id = ? AND state = 0",
                        session)
                    try db.execute(
                        "UPDATE e2ee_outgoing_key_requests SET state = 2 WHERE room_id = ? AND session_id = ? AND state = 1",
                        session)
                    requestedKeyArrived = db.changes > 0
                }
                if let held = outcome.heldRoomKey, let sender = held.senderUser {
                    try Self.hold(held, sender: sender, nowMilliseconds: nowMilliseconds, in: db)
                }
                if let request = outcome.incomingRequest {
                    try db.execute(
                        """
                        INSERT OR REPLACE INTO e2ee_incoming_key_requests(
                            device_id, request_id, room_id, session_id, received_at_ms)
                        VALUES (?, ?, ?, ?, ?)
                        """,
                        [
                            .text(request.deviceID), .text(request.requestID), .text(request.roomID),
                            .text(request.sessionID), .integer(nowMilliseconds),
                        ])
                    // Only the newest requests are kept: a device that floods them cannot grow the store.
                    try db.execute(
                        """
                        DELETE FROM e2ee_incoming_key_requests WHERE (device_id, request_id) NOT IN (
                            SELECT device_id, request_id FROM e2ee_incoming_key_requests
                            ORDER BY received_at_ms DESC LIMIT ?)
                        """,
                        [.integer(Int64(Self.incomingKeyRequestLimit))])
                }
                if let cancelled = outcome.cancelledRequest {
                    try db.execute(
                        "DELETE FROM e2ee_incoming_key_requests WHERE device_id = ? AND request_id = ?",
                        [.text(cancelled.deviceID), .text(cancelled.requestID)])
                }
                if let request = outcome.secretRequest {
                    try Self.keepIncomingSecretRequest(request, nowMilliseconds: nowMilliseconds, in: db)
                }
                if let cancelled = outcome.cancelledSecretRequest {
                    try Self.forgetIncomingSecretRequest(
                        deviceID: cancelled.deviceID, requestID: cancelled.requestID, in: db)
                }
                try db.execute("DELETE FROM e2ee_inbox_to_device WHERE id = ?", [.integer(outcome.rowID)])
                return (requestedKeyArrived, wedged)
            }
        } catch {
            throw .store(error)
        }
    }

    /// The stored inbound Megolm session `sessionID` of `roomID`: its row, if any.
    package func inboundSession(roomID: String, sessionID: String) async throws(CryptoStoreError) -> InboundSessionRow?
    {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryOne(
                    """
                    SELECT sender_key, signing_key, forwarded, pickle, sender_user, first_known_index, from_backup
                    FROM e2ee_inbound_group_sessions WHERE room_id = ? AND session_id = ?
                    """,
                    [.text(roomID), .text(sessionID)]
                ) {
                    InboundSessionRow(
                        roomID: roomID, sessionID: sessionID, senderKey: $0.string(0), signingKey: $0.string(1),
                        forwarded: $0.int(2) != 0, pickle: $0.blob(3),
                        senderUser: $0.isNull(4) ? nil : UserID($0.string(4)), firstKnownIndex: $0.int(5),
                        fromBackup: $0.int(6) != 0)
                }
            }
        } catch {
            throw .store(error)
        }
    }

    /// Applies the inbox's device-list changes to the tracked users and removes them, in one
    /// transaction: a changed tracked user becomes outdated, a user who left every shared
    /// encrypted room is no longer tracked (their devices are forgotten).
    ///
    /// - Returns: the tracked users now outdated because they changed.
    package func applyDeviceListChanges() async throws(CryptoStoreError) -> [UserID] {
        do {
            let changed = try await database.transaction { db throws(StoreError) -> [String] in
                let rows = try db.queryAll("SELECT user_id, change FROM e2ee_inbox_device_lists") {
                    ($0.string(0), $0.int(1))
                }
                var changed: [String] = []
                for (user, change) in rows {
                    if change == 2 {
                        try db.execute("DELETE FROM e2ee_tracked_users WHERE user_id = ?", [.text(user)])
                        try db.execute("DELETE FROM e2ee_devices WHERE user_id = ?", [.text(user)])
                    } else {
                        try db.execute("UPDATE e2ee_tracked_users SET outdated = 1 WHERE user_id = ?", [.text(user)])
                        if db.changes > 0 { changed.append(user) }
                    }
                }
                try db.execute("DELETE FROM e2ee_inbox_device_lists")
                return changed
            }
            return changed.compactMap(UserID.init)
        } catch {
            throw .store(error)
        }
    }

    // MARK: Sending

    /// The room's current outbound Megolm session.
    package struct OutboundSessionRow: Sendable {
        package var sessionID: String
        package var pickle: [UInt8]
        package var createdMilliseconds: Int64
        package var messageCount: Int
        /// The devices it was shared with, as "user device curve25519" lines.
        package var sharedWith: Set<String>
    }

    /// The room's outbound session, if any.
    package func outboundSession(roomID: String) async throws(CryptoStoreError) -> OutboundSessionRow? {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryOne(
                    "SELECT session_id, pickle, created_ms, message_count, shared_with FROM e2ee_outbound_group_sessions WHERE room_id = ?",
                    [.text(roomID)]
                ) {
                    OutboundSessionRow(
                        sessionID: $0.string(0), pickle: $0.blob(1), createdMilliseconds: $0.int64(2),
                        messageCount: $0.int(3),
                        sharedWith: Set($0.string(4).split(separator: "\n").map(String.init)))
                }
            }
        } catch {
            throw .store(error)
        }
    }

    /// Stores the room's outbound session (replacing a rotated one), durably: a message is
    /// encrypted with it only after it is stored, so a restart never reuses a message index.
    package func saveOutboundSession(_ row: OutboundSessionRow, roomID: String) async throws(CryptoStoreError) {
        do {
            try await database.transaction(durability: .full) { db throws(StoreError) in
                try db.execute(
                    """
                    INSERT INTO e2ee_outbound_group_sessions(room_id, session_id, pickle, created_ms, message_count, shared_with)
                    VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT(room_id) DO UPDATE SET session_id = excluded.session_id, pickle = excluded.pickle,
                        created_ms = excluded.created_ms, message_count = excluded.message_count, shared_with = excluded.shared_with
                    """,
                    [
                        .text(roomID), .text(row.sessionID), .blob(row.pickle), .integer(row.createdMilliseconds),
                        .integer(Int64(row.messageCount)), .text(row.sharedWith.sorted().joined(separator: "\n")),
                    ])
            }
        } catch {
            throw .store(error)
        }
    }

    /// Stores Olm sessions created for sending (one per device), in one transaction.
    package func saveOlmSessions(
        _ sessions: [(senderKey: String, sessionID: String, pickle: [UInt8])], nowMilliseconds: Int64
    )
        async throws(CryptoStoreError)
    {
        guard !sessions.isEmpty else { return }
        do {
            try await database.transaction { db throws(StoreError) in
                for session in sessions {
                    try db.execute(
                        """
                        INSERT INTO e2ee_olm_sessions(sender_key, session_id, pickle, last_used_ms) VALUES (?, ?, ?, ?)
                        ON CONFLICT(sender_key, session_id) DO UPDATE SET pickle = excluded.pickle, last_used_ms = excluded.last_used_ms
                        """,
                        [
                            .text(session.senderKey), .text(session.sessionID), .blob(session.pickle),
                            .integer(nowMilliseconds),
                        ])
                    try Self.pruneOlmSessions(senderKey: session.senderKey, keeping: session.sessionID, in: db)
                }
            }
        } catch {
            throw .store(error)
        }
    }

    /// Keeps an inbound session unless the same session is stored as well or better
    /// (``storeInbound(_:in:)``).
    package func saveInboundSession(_ inbound: InboundSessionRow) async throws(CryptoStoreError) {
        do {
            try await database.transaction { db throws(StoreError) in
                _ = try Self.storeInbound(inbound, in: db)
            }
        } catch {
            throw .store(error)
        }
    }

    /// The user with a known device whose Curve25519 key is `curveKey`, if any.
    package func owner(ofCurveKey curveKey: String) async throws(CryptoStoreError) -> UserID? {
        do {
            let raw = try await database.run { db throws(StoreError) in
                try db.queryOne("SELECT user_id FROM e2ee_devices WHERE curve25519 = ? LIMIT 1", [.text(curveKey)]) {
                    $0.string(0)
                }
            }
            return raw.flatMap(UserID.init)
        } catch {
            throw .store(error)
        }
    }

    /// Records each event's Megolm message index, in order, in one transaction: `true` for an
    /// index seen first (or again) with the same event, `false` for one already recorded with
    /// another event (a replay). A batch of decryptions pays one commit, not one per event.
    package func recordMessageIndexes(_ entries: [(sessionID: String, index: Int, eventID: String)])
        async throws(CryptoStoreError) -> [Bool]
    {
        guard !entries.isEmpty else { return [] }
        do {
            return try await database.transaction { db throws(StoreError) -> [Bool] in
                var accepted: [Bool] = []
                accepted.reserveCapacity(entries.count)
                for entry in entries {
                    try db.execute(
                        "INSERT OR IGNORE INTO e2ee_megolm_indexes(session_id, message_index, event_id) VALUES (?, ?, ?)",
                        [.text(entry.sessionID), .integer(Int64(entry.index)), .text(entry.eventID)])
                    // Inserted: it is new. Ignored: the stored event decides.
                    if db.changes > 0 {
                        accepted.append(true)
                        continue
                    }
                    let stored = try db.queryOne(
                        "SELECT event_id FROM e2ee_megolm_indexes WHERE session_id = ? AND message_index = ?",
                        [.text(entry.sessionID), .integer(Int64(entry.index))]
                    ) { $0.string(0) }
                    accepted.append(stored == entry.eventID)
                }
                return accepted
            }
        } catch {
            throw .store(error)
        }
    }

    // MARK: Sync data

    /// The server's last `signed_curve25519` count, committed with a sync token (the inbox).
    package func serverOneTimeKeyCount() async throws(CryptoStoreError) -> Int? {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryOne("SELECT count FROM e2ee_inbox_key_counts WHERE algorithm = 'signed_curve25519'") {
                    Int($0.int(0))
                }
            }
        } catch {
            throw .store(error)
        }
    }

    /// Whether to-device events wait in the inbox.
    package func hasPendingToDevice() async throws(CryptoStoreError) -> Bool {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryOne("SELECT EXISTS (SELECT 1 FROM e2ee_inbox_to_device)") { $0.int(0) != 0 } ?? false
            }
        } catch {
            throw .store(error)
        }
    }
}

/// Why the crypto store failed.
package enum CryptoStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The database failed.
    case store(StoreError)
    /// The `e2ee` tables are not at the version this SDK's migrations make (the account's
    /// migrations did not run for the crypto feature).
    case notMigrated(found: Int, expected: Int)
    /// The pickle key could not be sealed or opened.
    case secrets(SecretsError)
    /// The driver could not pickle or unpickle.
    case driver(CryptoDriverError)
    /// The room's outbound session was replaced (rotated by a concurrent send) after it was
    /// prepared and shared: prepare again.
    case outboundSessionReplaced

    package var description: String {
        switch self {
        case .store(let error): "store: \(error)"
        case .notMigrated(let found, let expected): "e2ee tables at version \(found), expected \(expected)"
        case .secrets(let error): "secrets: \(error)"
        case .driver(let error): "driver: \(error)"
        case .outboundSessionReplaced: "outbound session replaced"
        }
    }
}
