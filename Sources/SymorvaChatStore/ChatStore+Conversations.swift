import SymorvaMachines
import SymorvaStore

/// A member shown in place of a room name (`m.heroes`), with the display name from their
/// membership event when known.
package struct RoomHero: Sendable, Hashable {
    /// The member's user ID.
    package var userID: String
    /// Their display name in the room, if they set one.
    package var displayName: String?

    /// Creates a hero.
    package init(userID: String, displayName: String?) {
        self.userID = userID
        self.displayName = displayName
    }
}

/// One row of the conversation list: what the list needs to draw a room, without reading its
/// timeline. The display name is computed from ``name``, ``canonicalAlias``, ``heroes`` and the
/// member counts by the room-name rules of the chat feature.
package struct ConversationSummary: Sendable, Hashable, CustomStringConvertible {
    /// The room.
    package var roomID: String
    /// Joined, invited, left or knocked.
    package var membership: RoomMembership
    /// `m.room.name`, if set and not empty.
    package var name: String?
    /// `m.room.canonical_alias`, if set.
    package var canonicalAlias: String?
    /// The server's `m.heroes`, with display names.
    package var heroes: [RoomHero]
    /// `m.room.avatar` (an `mxc://` URI).
    package var avatarURL: String?
    /// `m.room.topic`.
    package var topic: String?
    /// Whether `m.room.encryption` is set.
    package var isEncrypted: Bool
    /// `m.joined_member_count`.
    package var joinedMemberCount: Int
    /// `m.invited_member_count`.
    package var invitedMemberCount: Int
    /// Unread notifications: the server's in an unencrypted room, the device's in an encrypted
    /// one (the server cannot read its messages; ``ChatStore/recordPushActions(_:evaluatedThrough:ownUserID:)``).
    package var notificationCount: Int
    /// Unread highlights (mentions), counted as ``notificationCount`` is.
    package var highlightCount: Int
    /// When the room last had a message (milliseconds since 1970; 0 if never): the list order.
    package var latestActivityTS: Int64
    /// Tagged `m.favourite`.
    package var isFavourite: Bool
    /// Tagged `m.lowpriority`.
    package var isLowPriority: Bool
    /// Tagged ``ChatStore/pinnedTag``.
    package var isPinned: Bool
    /// Silenced by a push rule.
    package var isMuted: Bool
    /// A direct chat: listed in the account's `m.direct`, or an invite whose membership event
    /// says `is_direct`.
    package var isDirect: Bool = false
    /// The last message, if any is stored.
    package var preview: MessagePreview?
    /// When the last message is an `m.room.encrypted` event this device decrypted: its plaintext
    /// type and content, **sealed** as the crypto module stored them (chat opens them for the
    /// preview; the store never holds them in the clear).
    package var decryptedPreview: SealedEvent? = nil

    /// The room ID only: names and previews are user content.
    package var description: String { "ConversationSummary(\(roomID))" }
}

/// The plaintext type and sealed content of a decrypted event, as the store keeps them.
package struct SealedEvent: Sendable, Hashable, CustomStringConvertible {
    /// The plaintext event's type.
    package var type: String
    /// Its content, sealed.
    package var content: [UInt8]
    /// Set when the content is this device's own message as its send queue sealed it (under
    /// this transaction ID), before the decryption pass read the event.
    package var sealedForTransaction: String?

    /// Creates one.
    package init(type: String, content: [UInt8], sealedForTransaction: String? = nil) {
        self.type = type
        self.content = content
        self.sealedForTransaction = sealedForTransaction
    }

    /// The type only.
    package var description: String { "SealedEvent(\(type))" }
}

extension ChatStore {
    /// The room tag that pins a conversation to the top of the list (a user-namespace tag:
    /// Matrix has no standard one).
    package static let pinnedTag = "u.pinned"
    /// How many characters of a message body a preview keeps.
    package static let previewLength = 160

    /// The conversation list: every room, most recent activity first.
    package func loadConversationList(limit: Int = .max) async throws(ChatStoreError) -> [ConversationSummary] {
        try await read { db throws(StoreError) in try Self.conversationList(limit: limit, db: db) }
    }

    /// A window of the conversation list as the app shows it (rows `range`) and how many rows
    /// the list has: the rooms joined or invited to, pinned ones first, each part most recent
    /// first. What a screen showing 20 rows of 10,000 rooms reads: the pinned rooms (few), one
    /// index scan of at most `range.upperBound` rows and one counting scan, never the whole list.
    package func loadConversationWindow(_ range: Range<Int>) async throws(ChatStoreError) -> (
        rows: [ConversationSummary], total: Int
    ) {
        try await read { db throws(StoreError) in
            let shown = "r.membership IN (\(RoomMembership.joined.rawValue), \(RoomMembership.invited.rawValue))"
            // One scan for both counts.
            let (total, pinned) =
                try db.queryOne("SELECT COUNT(*), TOTAL(r.is_pinned = 1) FROM rooms r WHERE \(shown)") {
                    ($0.int(0), Int($0.double(1)))
                } ?? (0, 0)
            let lower = max(0, range.lowerBound)
            let upper = max(lower, range.upperBound)
            var rows: [ConversationSummary] = []
            if lower < pinned {
                rows = try Self.conversationList(
                    limit: min(upper, pinned) - lower, offset: lower, filter: "r.is_pinned = 1 AND \(shown)", db: db)
            }
            if upper > pinned {
                rows += try Self.conversationList(
                    limit: upper - max(lower, pinned), offset: max(0, lower - pinned),
                    filter: "r.is_pinned = 0 AND \(shown)", db: db)
            }
            return (rows, total)
        }
    }

    /// The conversation list, read on the database's thread (for callers already there).
    package static func conversationList(
        limit: Int, offset: Int = 0, filter: String? = nil, db: isolated SQLiteDatabase
    ) throws(StoreError) -> [ConversationSummary] {
        let sql = """
            SELECT r.room_id, r.membership, r.name, r.canonical_alias, r.heroes, r.avatar_url, r.topic,
                r.is_encrypted, r.joined_member_count, r.invited_member_count,
                CASE WHEN r.is_encrypted OR r.counts_on_device THEN r.device_notification_count
                    ELSE r.notification_count END,
                CASE WHEN r.is_encrypted OR r.counts_on_device THEN r.device_highlight_count ELSE r.highlight_count END,
                r.latest_activity_ts, r.is_favourite, r.is_low_priority, r.is_pinned,
                r.is_muted, r.preview_event_id, r.preview_sender, r.preview_type, r.preview_ts, r.preview_body,
                r.preview_msgtype, r.preview_redacted, d.type, d.content, d.transaction_id,
                r.membership = \(RoomMembership.invited.rawValue) AND EXISTS (
                    SELECT 1 FROM room_state s WHERE s.room_nid = r.room_nid AND s.type = 'm.room.member'
                        AND s.event_id IS NULL
                        AND json_extract(CAST(s.content AS TEXT), '$.membership') = 'invite'
                        AND json_extract(CAST(s.content AS TEXT), '$.is_direct') = 1)
            FROM rooms r
            LEFT JOIN decrypted_events d ON r.preview_type = 'm.room.encrypted' AND d.event_id = r.preview_event_id
            \(filter.map { "WHERE \($0)" } ?? "")
            ORDER BY r.latest_activity_ts DESC LIMIT ? OFFSET ?
            """
        let direct = try directRoomIDs(db: db)
        var rooms: [ConversationSummary] = []
        try db.query(sql, [.integer(Int64(clamping: limit)), .integer(Int64(clamping: offset))]) { row in
            rooms.append(
                ConversationSummary(
                    roomID: row.string(0), membership: RoomMembership(rawValue: row.int(1)) ?? .joined,
                    name: row.optionalString(2), canonicalAlias: row.optionalString(3),
                    heroes: parseHeroes(row.optionalString(4)), avatarURL: row.optionalString(5),
                    topic: row.optionalString(6), isEncrypted: row.int(7) != 0, joinedMemberCount: row.int(8),
                    invitedMemberCount: row.int(9), notificationCount: row.int(10), highlightCount: row.int(11),
                    latestActivityTS: row.int64(12), isFavourite: row.int(13) != 0, isLowPriority: row.int(14) != 0,
                    isPinned: row.int(15) != 0, isMuted: row.int(16) != 0,
                    preview: row.isNull(17) ? nil : preview(row),
                    decryptedPreview: row.isNull(24) || row.int(23) != 0
                        ? nil
                        : SealedEvent(
                            type: row.string(24), content: row.blob(25), sealedForTransaction: row.optionalString(26))))
            if direct.contains(rooms[rooms.count - 1].roomID) || row.int(27) != 0 {
                rooms[rooms.count - 1].isDirect = true
            }
        }
        return rooms
    }

    /// The rooms the account's `m.direct` (global account data: user ID → room IDs) lists.
    static func directRoomIDs(db: isolated SQLiteDatabase) throws(StoreError) -> Set<String> {
        var rooms: Set<String> = []
        try db.query(
            """
            SELECT DISTINCT r.value FROM account_data a, json_each(CAST(a.content AS TEXT)) u, json_each(u.value) r
            WHERE a.room_nid = 0 AND a.type = 'm.direct' AND json_valid(CAST(a.content AS TEXT))
                AND u.type = 'array' AND r.type = 'text'
            """
        ) { rooms.insert($0.string(0)) }
        return rooms
    }

    private static func preview(_ row: SQLiteRow) -> MessagePreview {
        MessagePreview(
            eventID: row.string(17), sender: row.string(18), type: row.string(19), originServerTS: row.int64(20),
            body: row.optionalString(21), messageType: row.optionalString(22), isRedacted: row.int(23) != 0)
    }

    /// Reads the `heroes` column: one hero per line, user ID and display name split by a tab.
    static func parseHeroes(_ text: String?) -> [RoomHero] {
        guard let text, !text.isEmpty else { return [] }
        return text.split(separator: "\n").map { line in
            let parts = line.split(separator: "\t", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts.count > 1 && !parts[1].isEmpty ? String(parts[1]) : nil
            return RoomHero(userID: String(parts[0]), displayName: name)
        }
    }
}

extension ChatStore {
    /// What the store knows of a room's encryption: whether `m.room.encryption` was ever set
    /// (full or stripped state: a room never goes back to plaintext), and whether its full state
    /// has synced (its `m.room.create` event is stored), so that "not encrypted" is known rather
    /// than not yet seen. `nil` when the room is not stored.
    package func encryptionKnowledge(roomID: RoomID) async throws(ChatStoreError)
        -> (isEncrypted: Bool, hasFullState: Bool)?
    {
        try await read { db throws(StoreError) in
            try db.queryOne(
                """
                SELECT r.is_encrypted OR EXISTS (SELECT 1 FROM room_state s WHERE s.room_nid = r.room_nid
                        AND s.type = 'm.room.encryption' AND s.state_key = ''),
                    EXISTS (SELECT 1 FROM room_state s WHERE s.room_nid = r.room_nid AND s.type = 'm.room.create'
                        AND s.state_key = '' AND s.event_id IS NOT NULL)
                FROM rooms r WHERE r.room_id = ?
                """, [.text(roomID.rawValue)]
            ) { row in (row.int(0) != 0, row.int(1) != 0) }
        }
    }
}

extension ChatStore {
    /// Whether the room's stored state has an `m.room.member` event for every one of `users`
    /// (an invite, a join, or any other membership).
    package func hasMembershipEvents(roomID: RoomID, users: [String]) async throws(ChatStoreError) -> Bool {
        try await read { db throws(StoreError) in
            guard let nid = try Self.roomNID(roomID, db: db) else { return false }
            for user in users {
                let found =
                    try db.queryOne(
                        "SELECT 1 FROM room_state WHERE room_nid = ? AND type = 'm.room.member' AND state_key = ?",
                        [.integer(nid), .text(user)]
                    ) { _ in true } ?? false
                if !found { return false }
            }
            return true
        }
    }
}

extension ChatStore {
    /// Who invited `userID` to `roomID` to a direct chat: the sender of the stored invite
    /// (stripped state) when its content says `is_direct`; `nil` otherwise.
    package func directInviter(roomID: RoomID, userID: UserID) async throws(ChatStoreError) -> UserID? {
        try await read { db throws(StoreError) in
            try db.queryOne(
                """
                SELECT s.sender FROM room_state s JOIN rooms r ON r.room_nid = s.room_nid
                WHERE r.room_id = ? AND s.type = 'm.room.member' AND s.state_key = ?
                    AND json_extract(CAST(s.content AS TEXT), '$.membership') = 'invite'
                    AND json_extract(CAST(s.content AS TEXT), '$.is_direct') = 1
                """, [.text(roomID.rawValue), .text(userID.rawValue)]
            ) { $0.optionalString(0).flatMap { UserID($0) } } ?? nil
        }
    }
}

extension ChatStore {
    /// Stores the member events of `GET /rooms/{roomId}/members` (decoded like a `/messages`
    /// page: ``SyncResponseDecoder/decodeMessages(_:)``, its `chunk`) as the room's state: a
    /// member the store lacks is added (lazy loading and sliding sync's list leave most
    /// members out), a stored one is replaced only by a newer event (a sync that committed
    /// meanwhile wins). Events that are not `m.room.member` with a state key are ignored.
    ///
    /// With `generation` (what ``memberList(_:)`` said before the request left), the room's
    /// member list is marked complete in the same transaction, unless an ingest that may have
    /// skipped membership changes committed since (its generation moved on): the next key share
    /// then asks again.
    ///
    /// Returns the number of rows added or replaced; `nil` when the room is not stored.
    @discardableResult
    package func storeMembers(roomID: RoomID, page: MessagesPage, generation: Int64? = nil)
        async throws(ChatStoreError) -> Int?
    {
        try await write { db throws(StoreError) in
            guard let nid = try Self.roomNID(roomID, db: db) else { return nil }
            if let generation {
                try db.execute(
                    """
                    INSERT INTO member_lists(room_nid, complete, generation) VALUES (?1, 1, ?2)
                    ON CONFLICT(room_nid) DO UPDATE SET complete = 1 WHERE member_lists.generation = ?2
                    """, [.integer(nid), .integer(generation)])
            }
            var changed = 0
            for event in page.chunk where event.type == "m.room.member" {
                guard let stateKey = event.stateKey, let eventID = event.eventID else { continue }
                try db.execute(
                    """
                    INSERT INTO room_state(room_nid, type, state_key, event_id, sender, origin_server_ts, content)
                    VALUES (?, 'm.room.member', ?, ?, ?, ?, ?)
                    ON CONFLICT DO UPDATE SET event_id = excluded.event_id, sender = excluded.sender,
                        origin_server_ts = excluded.origin_server_ts, content = excluded.content
                    WHERE excluded.origin_server_ts > room_state.origin_server_ts
                        AND excluded.event_id IS NOT room_state.event_id
                    """,
                    [
                        .integer(nid), .text(stateKey), .text(eventID), .text(event.sender),
                        .integer(event.originServerTS), .blob(Array(page.document[event.content])),
                    ])
                changed += db.changes
            }
            return changed
        }
    }
}

/// Whether a room's whole member list is stored (`GET /members` read since the room's last gap),
/// and the generation a new read must present to mark it so.
package struct MemberListState: Sendable, Hashable {
    /// `GET /members` was stored and no gap that may hide membership changes came since.
    package var isComplete: Bool
    /// Bumped by every such gap (``ChatStore/storeMembers(roomID:page:generation:)``).
    package var generation: Int64

    package init(isComplete: Bool, generation: Int64) {
        self.isComplete = isComplete
        self.generation = generation
    }
}

extension ChatStore {
    /// Whether `roomID`'s whole member list is stored (schema 17, `member_lists`): a room never
    /// read with `/members`, or not stored, is incomplete at generation 0.
    package func memberList(_ roomID: RoomID) async throws(ChatStoreError) -> MemberListState {
        try await read { db throws(StoreError) in
            try db.queryOne(
                """
                SELECT m.complete, m.generation FROM member_lists m JOIN rooms r ON r.room_nid = m.room_nid
                WHERE r.room_id = ?
                """, [.text(roomID.rawValue)]
            ) { MemberListState(isComplete: $0.int(0) != 0, generation: $0.int64(1)) }
                ?? MemberListState(isComplete: false, generation: 0)
        }
    }
}

extension ChatStore {
    /// The joined encrypted rooms whose whole member list the crypto module waits for (schema
    /// 18, `member_lists.tracking_pending`): this account joined them, or they turned encrypted
    /// while it was joined, and their members were not handed over since. Each comes with its
    /// ticket, which ``memberTrackingHandedOver(_:ticket:)`` presents.
    package func roomsAwaitingMemberTracking() async throws(ChatStoreError) -> [(RoomID, Int64)] {
        try await read { db throws(StoreError) in
            try db.queryAll(
                """
                SELECT r.room_id, m.tracking_pending FROM member_lists m JOIN rooms r ON r.room_nid = m.room_nid
                WHERE m.tracking_pending > 0 AND r.membership = 0 AND r.is_encrypted = 1
                """
            ) { (RoomID($0.string(0)), $0.int64(1)) }
        }
    }

    /// Raises `roomID`'s member-tracking flag unless it is raised already: this device joined the
    /// room (a join the ingest cannot tell from a room sliding sync's window reached late, such
    /// as one joined by alias without an invite). Nothing when the room is not stored; a room
    /// that is not encrypted waits until it is.
    package func requestMemberTracking(_ roomID: RoomID) async throws(ChatStoreError) {
        try await write { db throws(StoreError) in
            try db.execute(
                """
                INSERT INTO member_lists(room_nid, complete, generation, tracking_pending)
                SELECT room_nid, 0, 0, 1 FROM rooms WHERE room_id = ?
                ON CONFLICT(room_nid) DO UPDATE SET tracking_pending = 1 WHERE member_lists.tracking_pending = 0
                """, [.text(roomID.rawValue)])
        }
    }

    /// `roomID`'s members (read with `ticket` from ``roomsAwaitingMemberTracking()``) are
    /// tracked by the crypto module: the room no longer waits, unless another join or
    /// encryption change raised its flag since (it is then handed over again).
    package func memberTrackingHandedOver(_ roomID: RoomID, ticket: Int64) async throws(ChatStoreError) {
        try await write { db throws(StoreError) in
            try db.execute(
                """
                UPDATE member_lists SET tracking_pending = 0
                WHERE room_nid = (SELECT room_nid FROM rooms WHERE room_id = ?) AND tracking_pending = ?
                """, [.text(roomID.rawValue), .integer(ticket)])
        }
    }
}

extension ChatStore {
    /// What the crypto module needs to share `roomID`'s key, from the room's stored state: its
    /// joined and invited members, `m.room.history_visibility` and the rotation settings of
    /// `m.room.encryption`. `nil` when the room is not stored.
    package func encryptedRoom(_ roomID: RoomID) async throws(ChatStoreError) -> EncryptedRoom? {
        try await read { db throws(StoreError) in
            guard let nid = try Self.roomNID(roomID, db: db) else { return nil }
            var joined: [UserID] = []
            var invited: [UserID] = []
            try db.query(
                """
                SELECT state_key, json_extract(CAST(content AS TEXT), '$.membership') FROM room_state
                WHERE room_nid = ? AND type = 'm.room.member' ORDER BY state_key
                """, [.integer(nid)]
            ) { row in
                guard let user = UserID(row.string(0)) else { return }
                switch row.optionalString(1) {
                case "join": joined.append(user)
                case "invite": invited.append(user)
                default: break
                }
            }
            let visibility = try db.queryOne(
                """
                SELECT json_extract(CAST(content AS TEXT), '$.history_visibility') FROM room_state
                WHERE room_nid = ? AND type = 'm.room.history_visibility' AND state_key = ''
                """, [.integer(nid)]
            ) { $0.optionalString(0) }
            let rotation = try db.queryOne(
                """
                SELECT json_extract(CAST(content AS TEXT), '$.rotation_period_ms'),
                    json_extract(CAST(content AS TEXT), '$.rotation_period_msgs')
                FROM room_state WHERE room_nid = ? AND type = 'm.room.encryption' AND state_key = ''
                """, [.integer(nid)]
            ) { row in (row.optionalInt64(0), row.optionalInt64(1)) }
            return EncryptedRoom(
                roomID: roomID, joined: joined, invited: invited, historyVisibility: (visibility ?? nil) ?? "shared",
                rotationPeriodMilliseconds: rotation?.0, rotationPeriodMessages: (rotation?.1).map { Int($0) })
        }
    }
}
