import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaRuntime
import SymorvaStore

// What the store keeps so that Olm sessions stay few and usable: pruning, re-sharing with a
// device that started a new session, wedged devices, and room keys held for devices not known yet
// (`docs/e2ee.md`, "The crypto core").
extension CryptoStore {
    /// How many Olm sessions are kept with one device: the most recently used ones. A device
    /// that keeps starting new sessions (or a peer replaying pre-key messages with new one-time
    /// keys) cannot grow the store, nor the sessions every message from it is tried with.
    package static let olmSessionsPerDevice = 8

    /// Keeps `sessionID` (just stored) and the most recently used others with `senderKey`, up to
    /// ``olmSessionsPerDevice`` in all; drops the rest (inside the transaction that stored it).
    static func pruneOlmSessions(senderKey: String, keeping sessionID: String, in db: isolated SQLiteDatabase)
        throws(StoreError)
    {
        try db.execute(
            """
            DELETE FROM e2ee_olm_sessions WHERE sender_key = ?1 AND session_id != ?2 AND session_id NOT IN (
                SELECT session_id FROM e2ee_olm_sessions WHERE sender_key = ?1 AND session_id != ?2
                ORDER BY last_used_ms DESC, session_id LIMIT ?3)
            """, [.text(senderKey), .text(sessionID), .integer(Int64(olmSessionsPerDevice - 1))])
    }

    /// Removes the device with `curveKey` from the devices every outbound session was shared
    /// with: the next message of each room shares its key with the device again.
    static func forgetSharing(withCurveKey curveKey: String, in db: isolated SQLiteDatabase) throws(StoreError) {
        let rows = try db.queryAll(
            "SELECT room_id, shared_with FROM e2ee_outbound_group_sessions WHERE instr(shared_with, ?) > 0",
            [.text(curveKey)]
        ) { ($0.string(0), $0.string(1)) }
        for (roomID, sharedWith) in rows {
            let kept = sharedWith.split(separator: "\n").filter { !$0.hasSuffix(" " + curveKey) }
            try db.execute(
                "UPDATE e2ee_outbound_group_sessions SET shared_with = ? WHERE room_id = ?",
                [.text(kept.joined(separator: "\n")), .text(roomID)])
        }
    }

    /// How long after a new session was started with a wedged device another may be.
    package static let unwedgeIntervalMilliseconds: Int64 = 3_600_000

    /// Records that `sender`'s Olm session is wedged (inside the transaction that removes the
    /// event); `true` when a new session is now due (none was started within the hour).
    static func recordWedged(
        _ sender: (user: UserID, curveKey: String), nowMilliseconds: Int64, in db: isolated SQLiteDatabase
    ) throws(StoreError) -> Bool {
        try db.execute(
            """
            INSERT INTO e2ee_wedged_devices(curve25519, user_id, pending, unwedged_ms) VALUES (?1, ?2, 1, 0)
            ON CONFLICT(curve25519) DO UPDATE SET pending = 1, user_id = ?2
            WHERE pending = 0 AND unwedged_ms <= ?3
            """,
            [
                .text(sender.curveKey), .text(sender.user.rawValue),
                .integer(nowMilliseconds - unwedgeIntervalMilliseconds),
            ])
        return db.changes > 0
    }

    /// The devices due for a new Olm session: (user, Curve25519 key).
    package func wedgedDevices() async throws(CryptoStoreError) -> [(user: UserID, curveKey: String)] {
        do {
            let rows = try await database.run { db throws(StoreError) in
                try db.queryAll(
                    "SELECT user_id, curve25519 FROM e2ee_wedged_devices WHERE pending = 1 ORDER BY user_id"
                ) { ($0.string(0), $0.string(1)) }
            }
            return rows.compactMap { row in UserID(row.0).map { ($0, row.1) } }
        } catch {
            throw .store(error)
        }
    }

    /// Whether devices wait for a new Olm session.
    package func hasWedgedDevices() async throws(CryptoStoreError) -> Bool {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryOne("SELECT EXISTS (SELECT 1 FROM e2ee_wedged_devices WHERE pending = 1)") {
                    $0.int(0) != 0
                } ?? false
            }
        } catch {
            throw .store(error)
        }
    }

    /// Records that new sessions were started with (or cannot be started with) these devices.
    package func markUnwedged(_ curveKeys: [String], nowMilliseconds: Int64) async throws(CryptoStoreError) {
        guard !curveKeys.isEmpty else { return }
        do {
            try await database.transaction { db throws(StoreError) in
                for key in curveKeys {
                    try db.execute(
                        "UPDATE e2ee_wedged_devices SET pending = 0, unwedged_ms = ? WHERE curve25519 = ?",
                        [.integer(nowMilliseconds), .text(key)])
                }
            }
        } catch {
            throw .store(error)
        }
    }

    /// How many held room keys are kept, and for how long: a device that stays unknown (or a
    /// sender flooding keys from made-up devices) cannot grow the store.
    package static let heldRoomKeyLimit = 512
    /// How long a held room key waits for its device to become known.
    package static let heldRoomKeyLifetimeMilliseconds: Int64 = 86_400_000

    /// Holds a room key from a device not known yet and marks its sender outdated (inside the
    /// transaction that removes the to-device event).
    static func hold(_ held: InboundSessionRow, sender: UserID, nowMilliseconds: Int64, in db: isolated SQLiteDatabase)
        throws(StoreError)
    {
        try db.execute(
            """
            INSERT OR REPLACE INTO e2ee_held_room_keys(
                room_id, session_id, sender_user, sender_key, signing_key, first_known_index, pickle, received_at_ms)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(held.roomID), .text(held.sessionID), .text(sender.rawValue), .text(held.senderKey),
                .text(held.signingKey), .integer(Int64(held.firstKnownIndex)), .blob(held.pickle),
                .integer(nowMilliseconds),
            ])
        try db.execute(
            "DELETE FROM e2ee_held_room_keys WHERE received_at_ms < ?",
            [.integer(nowMilliseconds - heldRoomKeyLifetimeMilliseconds)])
        try db.execute(
            """
            DELETE FROM e2ee_held_room_keys WHERE (room_id, session_id, sender_key) NOT IN (
                SELECT room_id, session_id, sender_key FROM e2ee_held_room_keys
                ORDER BY received_at_ms DESC LIMIT ?)
            """, [.integer(Int64(heldRoomKeyLimit))])
        try db.execute(
            """
            INSERT INTO e2ee_tracked_users(user_id, outdated) VALUES (?, 1)
            ON CONFLICT(user_id) DO UPDATE SET outdated = 1
            """, [.text(sender.rawValue)])
    }

    /// The held room keys of `users` (just queried): a key whose device is now known as the
    /// sender's, with the keys it claimed and unchanged, is stored as an inbound session; the
    /// others are dropped (the device is not theirs). Returns the sessions stored.
    package func releaseHeldRoomKeys(of users: [UserID]) async throws(CryptoStoreError)
        -> [(roomID: String, sessionID: String)]
    {
        guard !users.isEmpty else { return [] }
        do {
            return try await database.transaction { db throws(StoreError) -> [(roomID: String, sessionID: String)] in
                var released: [(roomID: String, sessionID: String)] = []
                for user in users {
                    let held = try db.queryAll(
                        """
                        SELECT h.room_id, h.session_id, h.sender_key, h.signing_key, h.first_known_index, h.pickle,
                            EXISTS (SELECT 1 FROM e2ee_devices d WHERE d.user_id = h.sender_user
                                AND d.curve25519 = h.sender_key AND d.ed25519 = h.signing_key AND d.key_changed = 0)
                        FROM e2ee_held_room_keys h WHERE h.sender_user = ?
                        """, [.text(user.rawValue)]
                    ) { row in
                        (
                            InboundSessionRow(
                                roomID: row.string(0), sessionID: row.string(1), senderKey: row.string(2),
                                signingKey: row.string(3), forwarded: false, pickle: row.blob(5), senderUser: user,
                                firstKnownIndex: row.int(4)), row.int(6) != 0
                        )
                    }
                    for (row, known) in held where known {
                        if try Self.storeInbound(row, in: db) { released.append((row.roomID, row.sessionID)) }
                    }
                    try db.execute("DELETE FROM e2ee_held_room_keys WHERE sender_user = ?", [.text(user.rawValue)])
                }
                return released
            }
        } catch {
            throw .store(error)
        }
    }
}
