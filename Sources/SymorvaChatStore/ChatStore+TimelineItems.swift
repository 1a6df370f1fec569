import SymorvaMachines
import SymorvaStore

// The chat product layer's reads and writes on the chat store, beyond what `/sync` ingest and
// the store's own queries do: the items of a timeline window, back-pagination pages written
// into gaps, and small lookups for room operations. Additive: these functions use the
// store's schema (`ChatSchema`) as it is.

/// The stored items of a window, with what is needed to show them.
package struct WindowSnapshot: Sendable {
    package var items: [StoredTimelineItem] = []
    package var profiles: [String: SenderProfile] = [:]
    /// Event ID → users whose `m.read` receipt points at it.
    package var readers: [String: [String]] = [:]
    /// Those of the asked-for reaction events that the store holds (redacted or not).
    package var storedReactionEventIDs: Set<String> = []
}

/// What a `/messages` page did to the stored timeline.
package struct BackfillResult: Sendable {
    /// The page's new items (not relations), oldest first.
    package var eventIDs: [EventID]
    /// What now precedes them.
    package var boundary: PageBoundary
    /// The page's thread replies the store did not hold in any form, oldest first, with their
    /// roots: their threads show them.
    package var threadReplies: [(root: EventID, reply: EventID)] = []
}

extension ChatStore {
    /// The stored items with these IDs (relations applied), their senders' profiles, who has
    /// read up to each, and which of `reactionEventIDs` (our pending reactions) are stored.
    ///
    /// A thread's root carries the thread's summary (``StoredTimelineItem/thread``), with the
    /// unread counts of `ownUserID` when given.
    package func windowSnapshot(
        roomID: RoomID, eventIDs: [EventID], reactionEventIDs: [EventID] = [], ownUserID: String? = nil
    ) async throws(ChatStoreError) -> WindowSnapshot {
        guard !eventIDs.isEmpty else { return WindowSnapshot() }
        return try await read { db throws(StoreError) in
            var snapshot = WindowSnapshot()
            let sql = """
                SELECT event_id, chunk_id, position, type, sender, origin_server_ts, state_key, txn_id, content,
                    redacted_by, rel_type, relates_to_event_id, in_reply_to
                FROM events WHERE event_id = ? AND room_nid = ?
                """
            guard let nid = try Self.roomNID(roomID, db: db) else { return snapshot }
            var byID: [String: StoredTimelineItem] = [:]
            for eventID in eventIDs {
                try db.query(sql, [.text(eventID.rawValue), .integer(nid)]) { row in
                    let relationType = row.optionalString(10)
                    byID[row.string(0)] = StoredTimelineItem(
                        eventID: row.string(0),
                        position: TimelinePosition(chunkID: row.int64(1), position: row.int64(2)),
                        type: row.string(3), sender: row.string(4), originServerTS: row.int64(5),
                        stateKey: row.optionalString(6), transactionID: row.optionalString(7), content: row.blob(8),
                        replacedBy: nil, redactedBy: row.optionalString(9), reactions: [],
                        inReplyTo: row.optionalString(12),
                        threadRootID: relationType == "m.thread" ? row.optionalString(11) : nil)
                }
            }
            var threadCounts: [String: DeviceCounts.Counts]?
            for eventID in eventIDs {
                guard var item = byID[eventID.rawValue] else { continue }
                try Self.applyDecryption(to: &item, db: db)
                try Self.applyRelations(to: &item, db: db)
                if item.threadRootID == nil, var thread = try Self.thread(room: nid, root: item.eventID, db: db) {
                    if let ownUserID {
                        if threadCounts == nil {
                            threadCounts = try Self.threadCounts(room: nid, ownUserID: ownUserID, db: db)
                        }
                        thread.unread = threadCounts?[item.eventID] ?? thread.unread
                    }
                    item.thread = thread
                }
                snapshot.items.append(item)
            }
            for eventID in reactionEventIDs {
                let isStored = try db.queryOne("SELECT 1 FROM events WHERE event_id = ?", [.text(eventID.rawValue)]) {
                    _ in true
                }
                if isStored != nil { snapshot.storedReactionEventIDs.insert(eventID.rawValue) }
            }
            for sender in Set(snapshot.items.map(\.sender)) {
                let profile = try db.queryOne(
                    "SELECT content FROM room_state WHERE room_nid = ? AND type = 'm.room.member' AND state_key = ?",
                    [.integer(nid), .text(sender)]
                ) { row in
                    row.withBlob(0) {
                        SenderProfile(
                            displayName: RawJSON.string("displayname", in: $0),
                            avatarURL: RawJSON.string("avatar_url", in: $0))
                    }
                }
                if let profile { snapshot.profiles[sender] = profile }
            }
            // A member's unthreaded and `main` receipts both read the main timeline: only the
            // newer of the two shows. Thread receipts show on their thread's replies.
            try db.query(
                """
                SELECT user_id, event_id FROM receipts r WHERE room_nid = ?1 AND receipt_type = 'm.read'
                    AND NOT (thread_id IN ('', 'main') AND EXISTS (
                        SELECT 1 FROM receipts o WHERE o.room_nid = ?1 AND o.user_id = r.user_id
                            AND o.receipt_type = 'm.read' AND o.thread_id IN ('', 'main')
                            AND o.thread_id != r.thread_id AND o.ts > r.ts))
                ORDER BY ts
                """,
                [.integer(nid)]
            ) { row in snapshot.readers[row.string(1), default: []].append(row.string(0)) }
            return snapshot
        }
    }

    /// Writes a `/messages?dir=b` page into the gap whose token is `token`: the events the store
    /// does not have yet fill the gap's chunk, oldest first. If the page reaches stored events
    /// the gap is closed; if the server has older events, a new gap with the page's `end`
    /// precedes the page; without `end` the page reaches the room's start. One transaction.
    ///
    /// Returns `nil` when no gap with `token` exists (already filled).
    package func backfill(
        roomID: RoomID, token: PaginationToken, page: MessagesPage
    ) async throws(ChatStoreError) -> BackfillResult? {
        try await write { db throws(StoreError) in
            let (document, end) = (page.document, page.end)
            guard let nid = try Self.roomNID(roomID, db: db),
                let gap = try db.queryOne(
                    "SELECT g.chunk_id, c.prev_chunk_id FROM timeline_gaps g JOIN timeline_chunks c ON c.chunk_id = g.chunk_id WHERE c.room_nid = ? AND g.prev_batch = ?",
                    [.integer(nid), .text(token.rawValue)], { (chunk: $0.int64(0), previous: $0.optionalInt64(1)) })
            else { return nil }
            var fresh: [SyncEvent] = []
            var reachedStored = false
            // Events fetched outside the timeline (threads, chat schema 15) are not the stored
            // timeline this page joins: they move into the gap's chunk, in the page's order.
            var detached: Set<String> = []
            for event in page.chunk {
                guard let eventID = event.eventID, event.sender != nil else { continue }
                let stored = try db.queryOne(
                    "SELECT chunk_id IN (SELECT chunk_id FROM detached_chunks) FROM events WHERE event_id = ?",
                    [.text(eventID)]
                ) { $0.int(0) != 0 }
                if stored == false {
                    reachedStored = true
                    break
                }
                if stored == true { detached.insert(eventID) }
                fresh.append(event)
            }
            fresh.reverse()
            try Self.insert(fresh, room: nid, chunk: gap.chunk, document: document, db: db)
            // A root's bundled thread aggregation gives its thread's count and latest reply,
            // whose replies the store may not hold (chat schema 15).
            for event in fresh {
                guard let eventID = event.eventID,
                    let bundled = BundledThread.parse(event: Array(document[event.range]), rootEventID: eventID)
                else { continue }
                try Self.recordBundled(bundled.thread, room: nid, db: db)
            }
            for (position, event) in fresh.enumerated() {
                guard let eventID = event.eventID, detached.contains(eventID) else { continue }
                try db.execute(
                    "UPDATE events SET chunk_id = ?, position = ? WHERE event_id = ?",
                    [.integer(gap.chunk), .int(position), .text(eventID)])
            }
            try Self.insertMissingMembers(page.state, room: nid, document: document, db: db)
            try db.execute("DELETE FROM timeline_gaps WHERE chunk_id = ?", [.integer(gap.chunk)])
            let boundary: PageBoundary
            if reachedStored {
                boundary = .stored(StoreCursor(chunkID: gap.chunk, index: 0))
            } else if let end {
                if fresh.isEmpty {
                    try db.execute(
                        "INSERT INTO timeline_gaps(chunk_id, prev_batch) VALUES (?, ?)",
                        [.integer(gap.chunk), .text(end)])
                } else {
                    try Self.insertGap(end, room: nid, before: gap.chunk, previous: gap.previous, db: db)
                }
                boundary = .gap(PaginationToken(end))
            } else {
                boundary = .roomStart
            }
            // Thread replies are their thread's items, not the main timeline's (they take no
            // room in its window).
            let items = fresh.filter { !$0.isRelation && !$0.isThreadReply }
            let replies = fresh.compactMap { event -> (root: EventID, reply: EventID)? in
                guard event.isThreadReply, let id = event.eventID, !detached.contains(id),
                    let root = event.relation?.eventID
                else { return nil }
                return (EventID(root), EventID(id))
            }
            return BackfillResult(
                eventIDs: items.compactMap { $0.eventID.map(EventID.init(rawValue:)) }, boundary: boundary,
                threadReplies: replies)
        }
    }

    private static func insert(
        _ events: [SyncEvent], room nid: Int64, chunk: Int64, document: [UInt8], db: isolated SQLiteDatabase
    ) throws(StoreError) {
        let sql =
            "INSERT INTO events(room_nid, chunk_id, position, event_id, type, sender, origin_server_ts, state_key, txn_id, content, relates_to_event_id, rel_type, relation_key, in_reply_to) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(event_id) DO NOTHING"
        var redactions: [(redaction: String, target: String)] = []
        var position: Int64 = 0
        for event in events {
            guard let eventID = event.eventID, let sender = event.sender else { continue }
            var relatesTo = event.relation?.eventID
            var relationType = event.relation?.type
            if event.type == "m.room.redaction", let target = event.redacts {
                relatesTo = target
                relationType = "m.room.redaction"
                redactions.append((eventID, target))
            }
            try db.execute(
                sql,
                [
                    .integer(nid), .integer(chunk), .integer(position), .text(eventID), .text(event.type),
                    .text(sender), .integer(event.originServerTS), .text(event.stateKey), .text(event.transactionID),
                    .blob(Array(document[event.content])), .text(relatesTo), .text(relationType),
                    .text(event.relation?.key), .text(event.relation?.inReplyTo),
                ])
            position += 1
        }
        for (redaction, target) in redactions {
            let stored = try db.queryOne(
                "SELECT event_nid, type, content FROM events WHERE event_id = ? AND room_nid = ? AND redacted_by IS NULL",
                [.text(target), .integer(nid)]
            ) { row in
                (
                    nid: row.int64(0),
                    content: row.withBlob(2) { RawJSON.redactedContent(type: row.string(1), content: $0) }
                )
            }
            guard let stored else { continue }
            try db.execute(
                "UPDATE events SET redacted_by = ?, content = ? WHERE event_nid = ?",
                [.text(redaction), .blob(stored.content), .integer(stored.nid)])
        }
    }

    /// Member events sent with a page (lazy loading) fill in profiles the store lacks; they never
    /// replace current state.
    private static func insertMissingMembers(
        _ state: [SyncEvent], room nid: Int64, document: [UInt8], db: isolated SQLiteDatabase
    ) throws(StoreError) {
        for event in state where event.type == "m.room.member" {
            guard let stateKey = event.stateKey else { continue }
            try db.execute(
                "INSERT INTO room_state(room_nid, type, state_key, event_id, sender, origin_server_ts, content) VALUES (?, 'm.room.member', ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [
                    .integer(nid), .text(stateKey), .text(event.eventID), .text(event.sender),
                    .integer(event.originServerTS), .blob(Array(document[event.content])),
                ])
        }
    }

    /// Inserts a gap chunk with `token` between `previous` and `chunk`.
    private static func insertGap(
        _ token: String, room nid: Int64, before chunk: Int64, previous: Int64?, db: isolated SQLiteDatabase
    ) throws(StoreError) {
        try db.execute(
            "INSERT INTO timeline_chunks(room_nid, prev_chunk_id, next_chunk_id) VALUES (?, ?, ?)",
            [.integer(nid), .integer(previous), .integer(chunk)])
        let gap = db.lastInsertRowID
        try db.execute("INSERT INTO timeline_gaps(chunk_id, prev_batch) VALUES (?, ?)", [.integer(gap), .text(token)])
        try db.execute(
            "UPDATE timeline_chunks SET prev_chunk_id = ? WHERE chunk_id = ?", [.integer(gap), .integer(chunk)])
        if let previous {
            try db.execute(
                "UPDATE timeline_chunks SET next_chunk_id = ? WHERE chunk_id = ?", [.integer(gap), .integer(previous)])
        }
    }

    static func roomNID(_ roomID: RoomID, db: isolated SQLiteDatabase) throws(StoreError) -> Int64? {
        try db.queryOne("SELECT room_nid FROM rooms WHERE room_id = ?", [.text(roomID.rawValue)]) { $0.int64(0) }
    }

    // MARK: Lookups for operations

    /// The event ID of `sender`'s live reaction with `key` to `target`, if stored.
    package func reactionEventID(roomID: RoomID, target: EventID, key: String, sender: String)
        async throws(ChatStoreError)
        -> EventID?
    {
        try await read { db throws(StoreError) in
            try db.queryOne(
                "SELECT event_id FROM events WHERE relates_to_event_id = ? AND rel_type = 'm.annotation' AND relation_key = ? AND sender = ? AND redacted_by IS NULL AND room_nid = (SELECT room_nid FROM rooms WHERE room_id = ?) ORDER BY event_nid DESC LIMIT 1",
                [.text(target.rawValue), .text(key), .text(sender), .text(roomID.rawValue)]
            ) { EventID($0.string(0)) }
        }
    }

    /// The current content of a state event of the room, raw JSON.
    package func stateContent(roomID: RoomID, type: String, stateKey: String = "") async throws(ChatStoreError)
        -> [UInt8]?
    {
        try await read { db throws(StoreError) in
            guard let nid = try Self.roomNID(roomID, db: db) else { return nil }
            return try db.queryOne(
                "SELECT content FROM room_state WHERE room_nid = ? AND type = ? AND state_key = ?",
                [.integer(nid), .text(type), .text(stateKey)]
            ) { $0.blob(0) }
        }
    }

    /// The sender of a stored event.
    package func sender(of eventID: EventID) async throws(ChatStoreError) -> String? {
        try await read { db throws(StoreError) in
            try db.queryOne("SELECT sender FROM events WHERE event_id = ?", [.text(eventID.rawValue)]) { $0.string(0) }
        }
    }

    /// Mirrors a confirmed personal flag into the room's row until sync brings the same.
    package func setFlag(_ flag: ConversationFlag, _ value: Bool, roomID: RoomID) async throws(ChatStoreError) {
        let column = flag.column
        try await write { db throws(StoreError) in
            try db.execute(
                "UPDATE rooms SET \(column) = ? WHERE room_id = ?", [.bool(value), .text(roomID.rawValue)])
        }
    }
}
