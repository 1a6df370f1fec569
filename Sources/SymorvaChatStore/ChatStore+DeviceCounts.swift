import SymorvaMachines
import SymorvaStore

/// A stored event whose push rules the device has not evaluated yet: a plaintext event, or an
/// encrypted one with its decrypted type and content (never stored in the clear: the caller
/// fills ``type`` and ``content`` from what it opened).
package struct PushCandidate: Sendable {
    /// Its row in `events`.
    package var eventNID: Int64
    /// Its room's row.
    package var roomNID: Int64
    /// `type` (the decrypted type for an encrypted event).
    package var type: String
    /// `sender`.
    package var sender: String
    /// `state_key`, for a state event.
    package var stateKey: String?
    /// The content, raw JSON (the decrypted content for an encrypted event).
    package var content: [UInt8]

    /// A candidate.
    package init(eventNID: Int64, roomNID: Int64, type: String, sender: String, stateKey: String?, content: [UInt8]) {
        self.eventNID = eventNID
        self.roomNID = roomNID
        self.type = type
        self.sender = sender
        self.stateKey = stateKey
        self.content = content
    }
}

/// What the push rules need to know of a room besides the event: the account's display name
/// there, how many members it has, its power levels and creators.
package struct PushRoomFacts: Sendable {
    /// `content.displayname` of the account's membership, if set.
    package var displayName: String?
    /// `m.joined_member_count`.
    package var joinedMemberCount: Int
    /// `m.room.power_levels` content, raw JSON, if the room has one.
    package var powerLevels: [UInt8]?
    /// The sender and content of `m.room.create`, if stored.
    package var create: (sender: String, content: [UInt8])?
}

/// A room's unread counts as the device computed them: in total and per thread (`main` is the
/// main timeline).
package struct DeviceCounts: Sendable, Hashable {
    /// Unread events that notify.
    package var notifications: Int
    /// Those that also highlight (mentions, keywords).
    package var highlights: Int
    /// The same per thread: `main` or the thread's root event ID.
    package var threads: [String: Counts]

    /// A pair of counts.
    package struct Counts: Sendable, Hashable {
        /// Unread events that notify.
        package var notifications: Int
        /// Those that also highlight.
        package var highlights: Int

        /// A pair.
        package init(notifications: Int, highlights: Int) {
            self.notifications = notifications
            self.highlights = highlights
        }
    }

    /// Counts.
    package init(notifications: Int, highlights: Int, threads: [String: Counts]) {
        self.notifications = notifications
        self.highlights = highlights
        self.threads = threads
    }
}

extension ChatStore {
    /// Plaintext events stored after the last evaluated one (`push_evaluation`), oldest first,
    /// in encrypted rooms, rooms whose counts are the device's (sliding sync) or every room with
    /// `everyRoom`, not sent by `ownUserID`; and the
    /// newest `event_nid` the read covered (evaluated or passed over), to hand back to
    /// ``recordPushActions(_:evaluatedThrough:ownUserID:)``. Encrypted events are evaluated
    /// when they are decrypted.
    package func pushCandidates(ownUserID: String, everyRoom: Bool, limit: Int) async throws(ChatStoreError) -> (
        events: [PushCandidate], through: Int64?
    ) {
        try await read { db throws(StoreError) in
            let start =
                try db.queryOne("SELECT evaluated_through FROM push_evaluation WHERE id = 1") { $0.int64(0) } ?? 0
            let newest = try db.queryOne(
                "SELECT event_nid FROM events WHERE event_nid > ? ORDER BY event_nid LIMIT 1 OFFSET ?",
                [.integer(start), .int(max(0, limit - 1))]
            ) { $0.int64(0) }
            var end = newest
            if end == nil {
                end = try db.queryOne("SELECT MAX(event_nid) FROM events") { $0.isNull(0) ? nil : $0.int64(0) } ?? nil
            }
            guard let end, end > start else { return ([], nil) }
            let events = try db.queryAll(
                """
                SELECT e.event_nid, e.room_nid, e.type, e.sender, e.state_key, e.content
                FROM events e JOIN rooms r ON r.room_nid = e.room_nid
                WHERE e.event_nid > ?1 AND e.event_nid <= ?2 AND e.type != 'm.room.encrypted'
                    AND e.sender != ?3 AND e.redacted_by IS NULL
                    AND (r.is_encrypted = 1 OR r.counts_on_device = 1 OR ?4)
                    AND r.membership = 0
                ORDER BY e.event_nid
                """, [.integer(start), .integer(end), .text(ownUserID), .bool(everyRoom)]
            ) {
                PushCandidate(
                    eventNID: $0.int64(0), roomNID: $0.int64(1), type: $0.string(2), sender: $0.string(3),
                    stateKey: $0.optionalString(4), content: $0.blob(5))
            }
            return (events, end)
        }
    }

    /// The room rows and senders of the given events (an encrypted event's candidate before its
    /// decrypted type and content are filled in); events sent by `ownUserID` are left out.
    package func pushCandidates(eventNIDs: [Int64], ownUserID: String) async throws(ChatStoreError) -> [Int64: (
        roomNID: Int64, sender: String, stateKey: String?, relation: [UInt8]?
    )] {
        guard !eventNIDs.isEmpty else { return [:] }
        return try await read { db throws(StoreError) in
            var found: [Int64: (roomNID: Int64, sender: String, stateKey: String?, relation: [UInt8]?)] = [:]
            for nid in eventNIDs {
                try db.query(
                    """
                    SELECT e.room_nid, e.sender, e.state_key, e.content FROM events e
                    JOIN rooms r ON r.room_nid = e.room_nid
                    WHERE e.event_nid = ? AND e.sender != ? AND r.membership = 0
                    """,
                    [.integer(nid), .text(ownUserID)]
                ) { row in
                    let relation = row.withBlob(3) { content in
                        RawJSON.value("m.relates_to", in: content).map { Array(content[$0]) }
                    }
                    found[nid] = (row.int64(0), row.string(1), row.optionalString(2), relation)
                }
            }
            return found
        }
    }

    /// Which of `gaps` (a room and the gap a batch opened in it) hide events the device must
    /// count: a limited timeline left events out after the ones the room's live timeline
    /// already held (the gap follows a chunk of stored events), in a joined room whose counts
    /// are the device's (encrypted, or written by sliding sync; any room with `everyRoom`). A
    /// room's first timeline opens a gap before everything: what precedes it is not counted.
    /// The rooms come most recently active first (`latest_activity_ts`, the conversation list's
    /// order; rooms as recent keep the order of `gaps`), read in one transaction.
    package func gapsHidingCountedEvents(_ gaps: [(roomID: RoomID, token: PaginationToken)], everyRoom: Bool)
        async throws(ChatStoreError) -> [RoomID]
    {
        guard !gaps.isEmpty else { return [] }
        return try await read { db throws(StoreError) in
            var hiding: [(position: Int, activity: Int64, roomID: RoomID)] = []
            for (position, gap) in gaps.enumerated() {
                let activity = try db.queryOne(
                    """
                    SELECT r.latest_activity_ts FROM timeline_gaps g
                    JOIN timeline_chunks c ON c.chunk_id = g.chunk_id
                    JOIN rooms r ON r.room_nid = c.room_nid
                    WHERE r.room_id = ?1 AND g.prev_batch = ?2 AND r.membership = 0
                        AND (r.is_encrypted = 1 OR r.counts_on_device = 1 OR ?3)
                        AND EXISTS (SELECT 1 FROM events e WHERE e.chunk_id = c.prev_chunk_id)
                    """, [.text(gap.roomID.rawValue), .text(gap.token.rawValue), .bool(everyRoom)]
                ) { $0.int64(0) }
                if let activity { hiding.append((position, activity, gap.roomID)) }
            }
            return hiding.sorted { ($1.activity, $0.position) < ($0.activity, $1.position) }.map(\.roomID)
        }
    }

    /// What the push rules need of each room in `roomNIDs`.
    package func pushRoomFacts(_ roomNIDs: Set<Int64>, ownUserID: String) async throws(ChatStoreError) -> [Int64:
        PushRoomFacts]
    {
        guard !roomNIDs.isEmpty else { return [:] }
        return try await read { db throws(StoreError) in
            var facts: [Int64: PushRoomFacts] = [:]
            for nid in roomNIDs {
                let count = try db.queryOne("SELECT joined_member_count FROM rooms WHERE room_nid = ?", [.integer(nid)])
                {
                    $0.int(0)
                }
                let member = try Self.stateRow(nid, "m.room.member", ownUserID, db: db)
                let name = member.flatMap { RawJSON.string("displayname", in: $0.1) }
                let create = try Self.stateRow(nid, "m.room.create", "", db: db)
                let levels = try Self.stateRow(nid, "m.room.power_levels", "", db: db)
                facts[nid] = PushRoomFacts(
                    displayName: name, joinedMemberCount: count ?? 0, powerLevels: levels?.1,
                    create: create.flatMap { create in create.0.map { ($0, create.1) } })
            }
            return facts
        }
    }

    private static func stateRow(_ nid: Int64, _ type: String, _ key: String, db: isolated SQLiteDatabase)
        throws(StoreError) -> (String?, [UInt8])?
    {
        try db.queryOne(
            "SELECT sender, content FROM room_state WHERE room_nid = ? AND type = ? AND state_key = ?",
            [.integer(nid), .text(type), .text(key)]
        ) { ($0.optionalString(0), $0.blob(1)) }
    }

    /// The account's `m.push_rules` account data, raw JSON, if synced.
    package func pushRulesContent() async throws(ChatStoreError) -> [UInt8]? {
        try await read { db throws(StoreError) in
            try db.queryOne("SELECT content FROM account_data WHERE room_nid = 0 AND type = 'm.push_rules'") {
                $0.blob(0)
            }
        }
    }

    /// Records the events that notify (`highlight` for those that also highlight), moves the
    /// evaluation mark to `through` (when given), and recomputes the device counts of every room
    /// with unread rows, in one transaction.
    package func recordPushActions(
        _ actions: [(eventNID: Int64, highlight: Bool)], evaluatedThrough through: Int64?, ownUserID: String
    ) async throws(ChatStoreError) {
        try await write { db throws(StoreError) in
            for action in actions {
                try db.execute(
                    """
                    INSERT OR REPLACE INTO push_actions(event_nid, room_nid, thread_id, ts, highlight)
                    SELECT event_nid, room_nid,
                        CASE WHEN rel_type = 'm.thread' AND relates_to_event_id IS NOT NULL
                            THEN relates_to_event_id ELSE 'main' END,
                        origin_server_ts, ?
                    FROM events WHERE event_nid = ?
                    """, [.bool(action.highlight), .integer(action.eventNID)])
            }
            if let through {
                try db.execute(
                    "UPDATE push_evaluation SET evaluated_through = MAX(evaluated_through, ?) WHERE id = 1",
                    [.integer(through)])
            }
            try Self.recomputeDeviceCounts(ownUserID: ownUserID, db: db)
        }
    }

    /// Recomputes the device counts of every room that has unread rows or had counts (read
    /// receipts moved), dropping the rows a receipt has read for good.
    package func recomputeDeviceCounts(ownUserID: String) async throws(ChatStoreError) {
        try await write { db throws(StoreError) in try Self.recomputeDeviceCounts(ownUserID: ownUserID, db: db) }
    }

    static func recomputeDeviceCounts(ownUserID: String, db: isolated SQLiteDatabase) throws(StoreError) {
        let rooms = try db.queryAll(
            """
            SELECT DISTINCT room_nid FROM push_actions
            UNION SELECT room_nid FROM rooms WHERE device_notification_count > 0 OR device_highlight_count > 0
            """
        ) { $0.int64(0) }
        for room in rooms {
            let counts = try threadCounts(room: room, ownUserID: ownUserID, db: db)
            let total = counts.values.reduce((0, 0)) { ($0.0 + $1.notifications, $0.1 + $1.highlights) }
            try db.execute(
                "UPDATE rooms SET device_notification_count = ?, device_highlight_count = ? WHERE room_nid = ?",
                [.int(total.0), .int(total.1), .integer(room)])
            // Rows before the unthreaded receipt are read in every thread, and rows before their
            // own thread's receipt (`main` included) in theirs: they never count again
            // (receipts only move forward).
            try db.execute(
                """
                DELETE FROM push_actions WHERE room_nid = ?1 AND EXISTS (
                    \(receiptBoundary) AND (b.thread_id = '' OR b.thread_id = push_actions.thread_id)
                        AND (push_actions.ts < b.rts OR (push_actions.ts = b.rts AND push_actions.event_nid <= b.rnid)))
                """, [.integer(room), .text(ownUserID)])
        }
    }

    /// The account's read receipts in room `?1` (user `?2`) as `b(thread_id, rts, rnid)`: the
    /// receipt's event's timestamp and row, or the receipt's own timestamp when the event is
    /// not stored. `m.read` and `m.read.private` both count, as on the server.
    private static let receiptBoundary = """
        SELECT 1 FROM (
            SELECT rc.thread_id AS thread_id, COALESCE(e.origin_server_ts, rc.ts) AS rts,
                COALESCE(e.event_nid, 0) AS rnid
            FROM receipts rc LEFT JOIN events e ON e.event_id = rc.event_id
            WHERE rc.room_nid = ?1 AND rc.user_id = ?2 AND rc.receipt_type IN ('m.read', 'm.read.private')
        ) b WHERE 1
        """

    /// Unread rows per thread: a row is read by an unthreaded receipt or one of its thread at or
    /// after it.
    static func threadCounts(room: Int64, ownUserID: String, db: isolated SQLiteDatabase) throws(StoreError)
        -> [String: DeviceCounts.Counts]
    {
        var counts: [String: DeviceCounts.Counts] = [:]
        // The account's receipts are read once (a materialized CTE), not once per row: 4× less
        // work for a room with thousands of unread rows (`symorva-bench threads`).
        try db.query(
            """
            WITH b AS MATERIALIZED (
                SELECT rc.thread_id AS thread_id, COALESCE(e.origin_server_ts, rc.ts) AS rts,
                    COALESCE(e.event_nid, 0) AS rnid
                FROM receipts rc LEFT JOIN events e ON e.event_id = rc.event_id
                WHERE rc.room_nid = ?1 AND rc.user_id = ?2 AND rc.receipt_type IN ('m.read', 'm.read.private'))
            SELECT p.thread_id, COUNT(*), SUM(p.highlight) FROM push_actions p
            WHERE p.room_nid = ?1 AND NOT EXISTS (
                SELECT 1 FROM b WHERE (b.thread_id = '' OR b.thread_id = p.thread_id)
                    AND (p.ts < b.rts OR (p.ts = b.rts AND p.event_nid <= b.rnid)))
            GROUP BY p.thread_id
            """, [.integer(room), .text(ownUserID)]
        ) { row in
            counts[row.string(0)] = DeviceCounts.Counts(notifications: row.int(1), highlights: row.int(2))
        }
        return counts
    }

    /// The unread events that notify in a room, oldest first, with whether each highlights
    /// (diagnosis: tests name the events on which the device and the server disagree).
    package func notifyingEvents(roomID: RoomID) async throws(ChatStoreError) -> [(eventID: String, highlight: Bool)] {
        try await read { db throws(StoreError) in
            try db.queryAll(
                """
                SELECT e.event_id, p.highlight FROM push_actions p JOIN events e ON e.event_nid = p.event_nid
                WHERE p.room_nid = (SELECT room_nid FROM rooms WHERE room_id = ?) ORDER BY p.ts, p.event_nid
                """, [.text(roomID.rawValue)]
            ) { ($0.string(0), $0.int(1) != 0) }
        }
    }

    /// The device's counts for a room (computed in every room the evaluation covered, shown for
    /// encrypted rooms), in total and per thread.
    package func deviceCounts(roomID: RoomID, ownUserID: String) async throws(ChatStoreError) -> DeviceCounts {
        try await read { db throws(StoreError) in
            guard let nid = try Self.roomNID(roomID, db: db) else {
                return DeviceCounts(notifications: 0, highlights: 0, threads: [:])
            }
            let threads = try Self.threadCounts(room: nid, ownUserID: ownUserID, db: db)
            return DeviceCounts(
                notifications: threads.values.reduce(0) { $0 + $1.notifications },
                highlights: threads.values.reduce(0) { $0 + $1.highlights }, threads: threads)
        }
    }
}

extension ChatStore {
    /// The members typing in a room, as the last `m.typing` said.
    package func typingUsers(roomID: RoomID) async throws(ChatStoreError) -> [String] {
        try await read { db throws(StoreError) in
            let text = try db.queryOne("SELECT typing_users FROM rooms WHERE room_id = ?", [.text(roomID.rawValue)]) {
                $0.optionalString(0)
            }
            return (text ?? nil)?.split(separator: "\n").map(String.init) ?? []
        }
    }

    /// The room's `m.fully_read` marker (room account data), if synced.
    package func fullyRead(roomID: RoomID) async throws(ChatStoreError) -> String? {
        try await read { db throws(StoreError) in
            let content = try db.queryOne(
                """
                SELECT content FROM account_data
                WHERE type = 'm.fully_read' AND room_nid = (SELECT room_nid FROM rooms WHERE room_id = ?)
                """, [.text(roomID.rawValue)]
            ) { $0.blob(0) }
            return content.flatMap { RawJSON.string("event_id", in: $0) }
        }
    }
}

extension ChatStore {
    /// The account's global account data of `type`, raw JSON, if synced.
    package func globalAccountData(_ type: String) async throws(ChatStoreError) -> [UInt8]? {
        try await read { db throws(StoreError) in
            try db.queryOne("SELECT content FROM account_data WHERE room_nid = 0 AND type = ?", [.text(type)]) {
                $0.blob(0)
            }
        }
    }
}
