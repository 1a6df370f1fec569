import SymorvaMatrix
import SymorvaStore

/// Writes one room of a `/sync` response: its row, state, timeline (chunks, gaps, relations,
/// redactions), receipts and account data, then its recomputed summary. Runs inside the
/// ingest transaction, on the store's thread.
struct RoomWriter {
    let room: SyncRoomUpdate
    /// The response document; every event range points into it.
    let bytes: UnsafeRawBufferPointer
    /// Whether `send_queue` has rows: when it is empty (it cannot fill during the ingest
    /// transaction), remote echoes have no queue entry to delete.
    let hasQueuedMessages: Bool
    /// Whether the room's unread counts are the device's from now on (sliding sync), or the
    /// server's (v2).
    let countsOnDevice: Bool
    /// The rooms the response's push rules silence, when it carried push rules: the room's
    /// muted flag follows them (``SyncWriter/begin(_:document:db:)`` set the other rooms').
    let mutedRooms: Set<String>?
    /// Whether a room first seen joined in this response was joined now: a `/sync` v2 response
    /// after the first. Not the first response, nor sliding sync's, whose window brings rooms
    /// joined long ago as it grows.
    let newRoomsAreJoins: Bool

    private(set) var timelineEvents = 0
    private(set) var stateEvents = 0
    private(set) var redactionsApplied = 0
    /// Redactions, edits, reactions and receipts whose target is an event of another room:
    /// stored as this room's events (nothing is lost) but never applied to the other room.
    private(set) var crossRoomRelationsIgnored = 0
    private(set) var gapCreated = false
    /// How many leading timeline events a limited timeline repeated from the stored live
    /// timeline when it continued it (``continuation(of:db:)``); `nil` otherwise.
    private(set) var repeatedEvents: Int?

    private var summary = SummaryChange()

    init(
        room: SyncRoomUpdate, bytes: UnsafeRawBufferPointer, hasQueuedMessages: Bool, countsOnDevice: Bool = false,
        mutedRooms: Set<String>? = nil, newRoomsAreJoins: Bool = false
    ) {
        self.newRoomsAreJoins = newRoomsAreJoins
        self.countsOnDevice = countsOnDevice
        self.mutedRooms = mutedRooms
        self.room = room
        self.bytes = bytes
        self.hasQueuedMessages = hasQueuedMessages
    }

    func slice(_ range: Range<Int>) -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: bytes[range]) }

    mutating func write(db: isolated SQLiteDatabase) throws(StoreError) {
        var row = try loadOrInsertRow(db: db)
        if row.wasStripped && (room.membership == .joined || room.membership == .left) {
            // Full state replaces the stripped state an invite or knock carried.
            try db.execute("DELETE FROM room_state WHERE room_nid = ? AND event_id IS NULL", [.integer(row.nid)])
        }
        let stateSQL =
            "INSERT INTO room_state(room_nid, type, state_key, event_id, sender, origin_server_ts, content) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET event_id = excluded.event_id, sender = excluded.sender, origin_server_ts = excluded.origin_server_ts, content = excluded.content"
        try db.withStatement(stateSQL) { statement throws(StoreError) in
            for event in room.state { try upsertState(event, room: row.nid, statement: statement) }
        }
        if room.membership == .invited || room.membership == .knocked {
            summary.latestActivity = room.state.lazy.map(\.originServerTS).max() ?? 0
        }
        let continuesAt = try continuation(of: row, db: db)
        if !row.isNew, mayHideMembershipChanges(row, continuesAt: continuesAt) {
            try db.execute(
                """
                INSERT INTO member_lists(room_nid, complete, generation) VALUES (?, 0, 1)
                ON CONFLICT(room_nid) DO UPDATE SET complete = 0, generation = generation + 1
                """, [.integer(row.nid)])
        }
        if !room.timeline.isEmpty { try writeTimeline(&row, continuesAt: continuesAt, db: db) }
        if !room.ephemeral.isEmpty { try writeReceipts(room: row.nid, db: db) }
        if !room.accountData.isEmpty { try writeAccountData(room: row.nid, db: db) }
        try updateHeroes(row, db: db)
        try writeSummary(row, db: db)
        if room.notificationCount != nil { try writeThreadCounts(room: row.nid, db: db) }
        if wantsMemberTracking(row) {
            try db.execute(
                """
                INSERT INTO member_lists(room_nid, complete, generation, tracking_pending) VALUES (?, 0, 0, 1)
                ON CONFLICT(room_nid) DO UPDATE SET tracking_pending = tracking_pending + 1
                """, [.integer(row.nid)])
        }
    }

    /// Whether this update makes the room one whose whole member list the crypto module must
    /// track (``ChatStore/roomsAwaitingMemberTracking()``): the room is joined and encrypted
    /// after it, and this update brought the join (the room was invited, knocked or left
    /// before; or first seen joined, when ``newRoomsAreJoins`` or when its timeline holds the
    /// join, ``SyncRoomUpdate/timelineHasOwnJoin``) or the encryption (joined before, not
    /// encrypted).
    private func wantsMemberTracking(_ row: RoomRow) -> Bool {
        guard room.membership == .joined, row.wasEncrypted || summary.isEncrypted else { return false }
        switch row.previousMembership {
        case nil: return newRoomsAreJoins || room.timelineHasOwnJoin
        case .joined: return !row.wasEncrypted
        case .invited, .knocked, .left: return true
        }
    }

    /// The server's counts per thread replace the stored ones whenever the room's counts come
    /// (a thread without unread events is left out of `unread_thread_notifications`).
    private func writeThreadCounts(room nid: Int64, db: isolated SQLiteDatabase) throws(StoreError) {
        let stored = try db.queryOne(
            "SELECT 1 FROM server_thread_counts WHERE room_nid = ? LIMIT 1", [.integer(nid)], { _ in true })
        if stored == true {
            try db.execute("DELETE FROM server_thread_counts WHERE room_nid = ?", [.integer(nid)])
        }
        for (root, counts) in room.threadCounts {
            try db.execute(
                """
                INSERT INTO server_thread_counts(room_nid, thread_id, notification_count, highlight_count)
                VALUES (?, ?, ?, ?)
                """, [.integer(nid), .text(root), .int(counts.notifications), .int(counts.highlights)])
        }
    }

    // MARK: Room row

    struct RoomRow {
        var nid: Int64
        /// Inserted by this update: nothing of the room was stored before.
        var isNew = false
        var liveChunk: Int64?
        var heroes: String?
        var wasStripped: Bool
        var previewEventID: String?
        var previewSender: String?
        /// The membership stored before this update; `nil` for a new row.
        var previousMembership: RoomMembership?
        /// Whether the room was stored as encrypted before this update.
        var wasEncrypted = false
    }

    private func loadOrInsertRow(db: isolated SQLiteDatabase) throws(StoreError) -> RoomRow {
        let existing = try db.withStatement(
            "SELECT room_nid, live_chunk_id, heroes, membership, preview_event_id, preview_sender, is_encrypted FROM rooms WHERE room_id = ?"
        ) { statement throws(StoreError) -> RoomRow? in
            try statement.bind(room.roomID, at: 1)
            guard try statement.step() else { return nil }
            let row = statement.row
            let membership = RoomMembership(rawValue: row.int(3)) ?? .joined
            return RoomRow(
                nid: row.int64(0), liveChunk: row.optionalInt64(1), heroes: row.optionalString(2),
                wasStripped: membership == .invited || membership == .knocked, previewEventID: row.optionalString(4),
                previewSender: row.optionalString(5), previousMembership: membership, wasEncrypted: row.int(6) != 0)
        }
        if let existing { return existing }
        try db.withStatement("INSERT INTO rooms(room_id, membership) VALUES (?, ?)") { statement throws(StoreError) in
            try statement.bind(room.roomID, at: 1)
            try statement.bind(room.membership.rawValue, at: 2)
            try statement.step()
        }
        return RoomRow(
            nid: db.lastInsertRowID, isNew: true, liveChunk: nil, heroes: nil, wasStripped: false,
            previewEventID: nil, previewSender: nil)
    }

    /// Whether this update may leave out membership changes the stored member list has not
    /// seen (``ChatStore/memberList(_:)`` is then incomplete again): our own membership is no
    /// longer `join`, or the timeline is limited and does not reach back to the newest stored
    /// event of the live timeline — events were then skipped between the two. A limited
    /// timeline that contains it skipped nothing: sliding sync sends a room like that on every
    /// new connection, and when a room subscription asks for a longer timeline than the list's.
    private func mayHideMembershipChanges(_ row: RoomRow, continuesAt: Int?) -> Bool {
        if room.membership != .joined { return true }
        return room.isLimited && continuesAt == nil
    }

    /// Where a limited timeline meets the stored live timeline: the index of the live chunk's
    /// newest event when the timeline contains it (nothing was skipped between the two), `nil`
    /// when it does not reach back that far, or is not limited. The events after that index
    /// continue the live chunk; those up to it are stored already, or lie behind an older gap
    /// of the live timeline, which pagination fills.
    private func continuation(of row: RoomRow, db: isolated SQLiteDatabase) throws(StoreError) -> Int? {
        guard room.isLimited, let live = row.liveChunk,
            let newest = try db.queryOne(
                "SELECT event_id FROM events WHERE chunk_id = ? ORDER BY position DESC LIMIT 1", [.integer(live)],
                { $0.string(0) })
        else { return nil }
        return room.timeline.lastIndex { $0.eventID == newest }
    }

    // MARK: State

    private mutating func upsertState(_ event: SyncEvent, room nid: Int64, statement: SQLiteStatement)
        throws(StoreError)
    {
        guard let stateKey = event.stateKey else { return }
        try statement.bind(nid, at: 1)
        try statement.bind(event.type, at: 2)
        try statement.bind(stateKey, at: 3)
        try statement.bind(event.eventID, at: 4)
        try statement.bind(event.sender, at: 5)
        try statement.bind(event.originServerTS, at: 6)
        // The document outlives the transaction, and with it every statement's use of this binding.
        try statement.bind(unsafeBorrowing: slice(event.content), at: 7)
        try statement.step()
        statement.reset()
        stateEvents += 1
        summary.absorbState(event, content: slice(event.content))
    }

    // MARK: Timeline

    /// `OR IGNORE`, not `ON CONFLICT(event_id) DO NOTHING`: with the triggers on `events` every
    /// insert is a statement that may write several rows, and one that may also abort (the
    /// other constraints' default) needs a statement journal inside the ingest transaction —
    /// about ten 8 KB pages copied and written to a temporary file per event, most of an
    /// initial sync's system time (`docs/benchmarks.md`, "Statement journals"). With `OR IGNORE`
    /// no constraint aborts; an ignored row whose `event_id` is not stored was refused by
    /// another constraint, and ``verifyIgnored(_:db:)`` turns it into the error the insert
    /// would have raised.
    ///
    /// Up to ``insertBatch`` rows go in one statement (`VALUES (…), (…)`, in batch order, so
    /// rows and triggers run exactly as one insert per event would): one statement execution
    /// per batch instead of per event, its cursors opened and its triggers' frames allocated
    /// once (`docs/benchmarks.md`, "The rest of the ingest").
    private static let insertEventPrefix =
        "INSERT OR IGNORE INTO events(room_nid, chunk_id, position, event_id, type, sender, origin_server_ts, state_key, txn_id, content, relates_to_event_id, rel_type, relation_key, in_reply_to) VALUES "
    private static let insertEventColumns: Int32 = 14
    /// The largest number of rows in one insert; batches are powers of two up to it (a handful
    /// of cached statements).
    static let insertBatch = 32
    /// `insertEventSQL[k]` inserts `2^k` rows.
    private static let insertEventSQL: [String] = (0...5).map { power in
        insertEventPrefix
            + Array(repeating: "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", count: 1 << power).joined(separator: ", ")
    }

    /// Appends the timeline to the live chunk, or — when it is limited and does not reach back
    /// to the live chunk's newest event (`continuesAt` is `nil`) — to a new live chunk after a
    /// gap carrying `prev_batch`. A limited timeline that contains that event (sliding sync sends
    /// a room like that on every new connection) continues the live chunk with the events after
    /// it, and opens no gap.
    private mutating func writeTimeline(_ row: inout RoomRow, continuesAt: Int?, db: isolated SQLiteDatabase)
        throws(StoreError)
    {
        let chunk: Int64
        var position: Int64
        if let live = row.liveChunk, !room.isLimited || continuesAt != nil {
            chunk = live
            position =
                try db.queryOne(
                    "SELECT position FROM events WHERE chunk_id = ? ORDER BY position DESC LIMIT 1", [.integer(live)]
                ) { $0.int64(0) + 1 } ?? 0
        } else {
            var previous = row.liveChunk
            if room.isLimited, let token = room.previousBatch {
                let gap = try appendChunk(room: row.nid, after: previous, db: db)
                try db.execute(
                    "INSERT INTO timeline_gaps(chunk_id, prev_batch) VALUES (?, ?)", [.integer(gap), .text(token)])
                previous = gap
                gapCreated = true
            }
            chunk = try appendChunk(room: row.nid, after: previous, db: db)
            position = 0
        }
        row.liveChunk = chunk
        summary.liveChunk = chunk
        // The events with an ID and a sender, in order; those a bundled aggregation came with.
        var candidates: [Int] = []
        candidates.reserveCapacity(room.timeline.count)
        var bundled: [SyncEvent] = []
        repeatedEvents = continuesAt.map { $0 + 1 }
        let first = repeatedEvents ?? 0
        for (index, event) in room.timeline.enumerated()
        where index >= first && event.eventID != nil && event.sender != nil {
            candidates.append(index)
            if event.hasBundledRelations { bundled.append(event) }
        }
        // Insert them batch by batch; `inserted` gets those stored, in order, at dense positions.
        var inserted: [Int] = []
        inserted.reserveCapacity(candidates.count)
        var start = 0
        while start < candidates.count {
            let power = min(Int.bitWidth - 1 - (candidates.count - start).leadingZeroBitCount, 5)
            let batch = candidates[start..<(start + (1 << power))]
            try db.withStatement(Self.insertEventSQL[power]) { insert throws(StoreError) in
                for (offset, index) in batch.enumerated() {
                    try bindEvent(
                        room.timeline[index], room: row.nid, chunk: chunk, position: position + Int64(offset),
                        to: insert, at: Int32(offset) * Self.insertEventColumns)
                }
                try insert.step()
            }
            if db.changes == batch.count {
                inserted.append(contentsOf: batch)
                position += Int64(batch.count)
            } else {
                position = try keepInserted(batch, chunk: chunk, from: position, into: &inserted, db: db)
            }
            start += batch.count
        }
        var redactions: [(redaction: String, target: String)] = []
        var relationTargets: [String] = []
        let stateSQL =
            "INSERT INTO room_state(room_nid, type, state_key, event_id, sender, origin_server_ts, content) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET event_id = excluded.event_id, sender = excluded.sender, origin_server_ts = excluded.origin_server_ts, content = excluded.content"
        for index in inserted {
            let event = room.timeline[index]
            guard let eventID = event.eventID else { continue }
            timelineEvents += 1
            summary.absorbTimeline(event, content: slice(event.content))
            if event.stateKey != nil {
                try db.withStatement(stateSQL) { statement throws(StoreError) in
                    try upsertState(event, room: row.nid, statement: statement)
                }
            }
            if hasQueuedMessages, let transactionID = event.transactionID {
                // The remote echo of our own message: the queue entry is done, atomically
                // with the event's arrival. What an encrypted one says is known already: it
                // shows at once (as the queue sealed it), never as undecryptable until the
                // decryption pass has read it.
                if event.type == "m.room.encrypted" {
                    try db.execute(
                        """
                        INSERT OR IGNORE INTO decrypted_events(
                            event_id, type, content, sender_key, sender_device, device_known, transaction_id)
                        SELECT ?, event_type, content, '', NULL, 1, txn_id FROM send_queue
                        WHERE txn_id = ? AND content_sealed = 1
                        """, [.text(eventID), .text(transactionID)])
                }
                try db.execute("DELETE FROM send_queue WHERE txn_id = ?", [.text(transactionID)])
            }
            let (relatesTo, relationType) = Self.relation(of: event)
            if let target = relatesTo, relationType == "m.room.redaction" {
                redactions.append((eventID, target))
            } else if let target = relatesTo, relationType == "m.replace" || relationType == "m.annotation" {
                relationTargets.append(target)
            }
        }
        for (redaction, target) in redactions {
            if try applyRedaction(of: target, by: redaction, room: row.nid, db: db) {
                redactionsApplied += 1
            } else if try Self.isEvent(target, ofAnotherRoomThan: row.nid, db: db) {
                crossRoomRelationsIgnored += 1
            }
        }
        // Edits and reactions are applied when the timeline is read, to targets of their own
        // room only; one naming another room's event is counted here.
        for target in relationTargets where try Self.isEvent(target, ofAnotherRoomThan: row.nid, db: db) {
            crossRoomRelationsIgnored += 1
        }
        // A root's bundled `m.thread` aggregation (sent with a limited timeline) gives its
        // thread's count, latest reply and participation, replies the store may never have
        // seen included. Read after the batch's replies, which the trigger has counted: the
        // server's figure replaces theirs unless the store holds a newer reply (chat schema 15).
        for event in bundled {
            guard let eventID = event.eventID,
                let thread = BundledThread.parse(event: Array(slice(event.range)), rootEventID: eventID)
            else { continue }
            try ChatStore.recordBundled(thread.thread, room: row.nid, db: db)
        }
    }

    /// The event a timeline event relates to and how: a redaction's target, or
    /// `m.relates_to`.
    private static func relation(of event: SyncEvent) -> (eventID: String?, type: String?) {
        if event.type == "m.room.redaction", let target = event.redacts { return (target, "m.room.redaction") }
        return (event.relation?.eventID, event.relation?.type)
    }

    /// Binds one event's row to the 14 parameters after `base`.
    private func bindEvent(
        _ event: SyncEvent, room nid: Int64, chunk: Int64, position: Int64, to insert: SQLiteStatement, at base: Int32
    ) throws(StoreError) {
        let (relatesTo, relationType) = Self.relation(of: event)
        try insert.bind(nid, at: base + 1)
        try insert.bind(chunk, at: base + 2)
        try insert.bind(position, at: base + 3)
        try insert.bind(event.eventID, at: base + 4)
        try insert.bind(event.type, at: base + 5)
        try insert.bind(event.sender, at: base + 6)
        try insert.bind(event.originServerTS, at: base + 7)
        try insert.bind(event.stateKey, at: base + 8)
        try insert.bind(event.transactionID, at: base + 9)
        // The document outlives the transaction, and with it every statement's use of this binding.
        try insert.bind(unsafeBorrowing: slice(event.content), at: base + 10)
        try insert.bind(relatesTo, at: base + 11)
        try insert.bind(relationType, at: base + 12)
        try insert.bind(event.relation?.key, at: base + 13)
        try insert.bind(event.relation?.inReplyTo, at: base + 14)
    }

    /// After a batch insert that stored fewer rows than it had (a duplicate of a stored event,
    /// or one repeated within the response): checks each ignored row as
    /// ``verifyIgnored(_:db:)`` does, and moves the stored rows down over the positions the
    /// ignored ones left, so that positions stay as one insert per event gives them. Appends
    /// the stored rows to `inserted` and returns the next free position.
    private func keepInserted(
        _ batch: ArraySlice<Int>, chunk: Int64, from first: Int64, into inserted: inout [Int],
        db: isolated SQLiteDatabase
    ) throws(StoreError) -> Int64 {
        var stored: Set<Int64> = []
        try db.query(
            "SELECT position FROM events WHERE chunk_id = ? AND position >= ? AND position < ?",
            [.integer(chunk), .integer(first), .integer(first + Int64(batch.count))]
        ) { row in stored.insert(row.int64(0)) }
        var next = first
        for (offset, index) in batch.enumerated() {
            let assigned = first + Int64(offset)
            guard stored.contains(assigned) else {
                try Self.verifyIgnored(room.timeline[index].eventID ?? "", db: db)  // a duplicate, or a refusal
                continue
            }
            if assigned != next {
                // Positions below `assigned` from `next` on are free: holes, or rows moved down already.
                try db.execute(
                    "UPDATE OR IGNORE events SET position = ? WHERE chunk_id = ? AND position = ?",
                    [.integer(next), .integer(chunk), .integer(assigned)])
                guard db.changes == 1 else { throw .constraintViolated("events: a position move was refused") }
            }
            inserted.append(index)
            next += 1
        }
        return next
    }

    /// Checks that an event insert ignored by `OR IGNORE` was a duplicate (its `event_id` is
    /// stored); any other refusal (a `NOT NULL` column, a taken chunk position) fails the
    /// ingest as the constraint would have without `OR IGNORE`.
    static func verifyIgnored(_ eventID: String, db: isolated SQLiteDatabase) throws(StoreError) {
        let stored = try db.queryOne("SELECT 1 FROM events WHERE event_id = ?", [.text(eventID)]) { _ in true }
        guard stored == true else { throw .constraintViolated("events: a row was refused by a constraint") }
    }

    /// Whether `eventID` is stored as an event of a room other than `nid`. Event IDs are
    /// unique across rooms, so a relation naming one is a misbehaving server's, not ours to
    /// apply.
    static func isEvent(_ eventID: String, ofAnotherRoomThan nid: Int64, db: isolated SQLiteDatabase)
        throws(StoreError) -> Bool
    {
        try db.queryOne("SELECT room_nid FROM events WHERE event_id = ?", [.text(eventID)]) { $0.int64(0) != nid }
            ?? false
    }

    /// Appends an empty chunk after `previous` (the room's newest chunk) and returns its ID.
    private func appendChunk(room nid: Int64, after previous: Int64?, db: isolated SQLiteDatabase) throws(StoreError)
        -> Int64
    {
        try db.execute(
            "INSERT INTO timeline_chunks(room_nid, prev_chunk_id) VALUES (?, ?)", [.integer(nid), .integer(previous)])
        let chunk = db.lastInsertRowID
        if let previous {
            try db.execute(
                "UPDATE timeline_chunks SET next_chunk_id = ? WHERE chunk_id = ?",
                [.integer(chunk), .integer(previous)])
        }
        return chunk
    }

    /// Marks `target` redacted and strips its content (and its state row's) per the redaction
    /// rules. Returns `false` when the target is not stored yet (the redaction stays indexed by
    /// its target and is applied when the timeline is read) or is an event of another room
    /// (never applied).
    private func applyRedaction(
        of target: String, by redaction: String, room nid: Int64, db: isolated SQLiteDatabase
    ) throws(StoreError) -> Bool {
        let stored = try db.queryOne(
            "SELECT event_nid, type, content, state_key FROM events WHERE event_id = ? AND room_nid = ? AND redacted_by IS NULL",
            [.text(target), .integer(nid)]
        ) { row in
            (
                nid: row.int64(0), type: row.string(1),
                content: row.withBlob(2) { RawJSON.redactedContent(type: row.string(1), content: $0) },
                isState: !row.isNull(3)
            )
        }
        guard let stored else { return false }
        // `OR IGNORE` for the same reason as the insert (the trigger on `redacted_by` makes this
        // a statement that needs a journal when it may abort); the row exists, so anything but
        // one change is a refused update.
        try db.execute(
            "UPDATE OR IGNORE events SET redacted_by = ?, content = ? WHERE event_nid = ?",
            [.text(redaction), .blob(stored.content), .integer(stored.nid)])
        guard db.changes == 1 else { throw .constraintViolated("events: a redaction was refused by a constraint") }
        try db.execute(
            "UPDATE rooms SET preview_redacted = 1, preview_body = NULL WHERE room_nid = ? AND preview_event_id = ?",
            [.integer(nid), .text(target)])
        if stored.isState {
            try db.execute(
                "UPDATE room_state SET content = ? WHERE room_nid = ? AND event_id = ?",
                [.blob(stored.content), .integer(nid), .text(target)])
        }
        return true
    }

    // MARK: Receipts and account data

    private mutating func writeReceipts(room nid: Int64, db: isolated SQLiteDatabase) throws(StoreError) {
        // `m.typing` replaces the room's list of typing members (the newest one of the batch).
        if let typing = room.ephemeral.last(where: { $0.type == "m.typing" }) {
            var users: [String] = []
            if case .object(let content)? = try? JSONValue(parsing: slice(typing.content)),
                case .array(let list)? = content["user_ids"]
            {
                for case .string(let user) in list { users.append(user) }
            }
            try db.execute(
                "UPDATE rooms SET typing_users = ? WHERE room_nid = ?",
                [.text(users.joined(separator: "\n")), .integer(nid)])
        }
        for event in room.ephemeral where event.type == "m.receipt" {
            let content = slice(event.content)
            var receipts: [(type: String, thread: String, user: String, event: String, ts: Int64)] = []
            RawJSON.forEachMember(in: content) { eventID, byType in
                let types = UnsafeRawBufferPointer(rebasing: content[byType])
                RawJSON.forEachMember(in: types) { receiptType, byUser in
                    let users = UnsafeRawBufferPointer(rebasing: types[byUser])
                    RawJSON.forEachMember(in: users) { userID, info in
                        let details = UnsafeRawBufferPointer(rebasing: users[info])
                        let thread = RawJSON.string("thread_id", in: details) ?? ""
                        let ts = RawJSON.integer("ts", in: details) ?? 0
                        receipts.append((receiptType, thread, userID, eventID, ts))
                    }
                }
            }
            for receipt in receipts {
                if try Self.isEvent(receipt.event, ofAnotherRoomThan: nid, db: db) {
                    crossRoomRelationsIgnored += 1
                    continue
                }
                try db.execute(
                    "INSERT INTO receipts(room_nid, receipt_type, thread_id, user_id, event_id, ts) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET event_id = excluded.event_id, ts = excluded.ts",
                    [
                        .integer(nid), .text(receipt.type), .text(receipt.thread), .text(receipt.user),
                        .text(receipt.event), .integer(receipt.ts),
                    ])
            }
        }
    }

    private mutating func writeAccountData(room nid: Int64, db: isolated SQLiteDatabase) throws(StoreError) {
        for event in room.accountData {
            let content = slice(event.content)
            try db.withStatement(
                "INSERT INTO account_data(room_nid, type, content) VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET content = excluded.content"
            ) { statement throws(StoreError) in
                try statement.bind(nid, at: 1)
                try statement.bind(event.type, at: 2)
                try statement.bind(bytes: content, at: 3)
                try statement.step()
            }
            if event.type == "m.tag" {
                var tags: Set<String> = []
                if let range = RawJSON.value("tags", in: content) {
                    RawJSON.forEachMember(in: UnsafeRawBufferPointer(rebasing: content[range])) { tag, _ in
                        tags.insert(tag)
                    }
                }
                summary.tags = tags
            }
        }
    }

    // MARK: Summary

    /// Resolves the heroes' display names when the heroes or the room's members changed.
    private mutating func updateHeroes(_ row: RoomRow, db: isolated SQLiteDatabase) throws(StoreError) {
        let heroes: [String]
        if let given = room.heroes {
            heroes = given
        } else if summary.membersChanged, let stored = row.heroes, !stored.isEmpty {
            heroes = stored.split(separator: "\n").map { String($0.prefix { $0 != "\t" }) }
        } else {
            return
        }
        var lines: [String] = []
        for userID in heroes {
            let name =
                try db.queryOne(
                    "SELECT content FROM room_state WHERE room_nid = ? AND type = 'm.room.member' AND state_key = ?",
                    [.integer(row.nid), .text(userID)]
                ) { row in row.withBlob(0) { RawJSON.string("displayname", in: $0) } } ?? room.heroNames[userID]
            lines.append(userID + "\t" + (name ?? ""))
        }
        summary.heroes = lines.joined(separator: "\n")
    }

    private func writeSummary(_ row: RoomRow, db: isolated SQLiteDatabase) throws(StoreError) {
        let sql = """
            UPDATE rooms SET membership = ?2,
                name = IIF(?3, ?4, name), canonical_alias = IIF(?5, ?6, canonical_alias),
                avatar_url = IIF(?7, ?8, avatar_url), topic = IIF(?9, ?10, topic),
                is_encrypted = MAX(is_encrypted, ?11), heroes = IIF(?12, ?13, heroes),
                joined_member_count = COALESCE(?14, joined_member_count),
                invited_member_count = COALESCE(?15, invited_member_count),
                notification_count = COALESCE(?16, notification_count),
                highlight_count = COALESCE(?17, highlight_count),
                latest_activity_ts = MAX(latest_activity_ts, ?18),
                preview_event_id = IIF(?19, ?24, preview_event_id), preview_sender = IIF(?19, ?25, preview_sender),
                preview_type = IIF(?19, ?26, preview_type), preview_ts = IIF(?19, ?27, preview_ts),
                preview_body = IIF(?19 OR ?30, ?28, preview_body), preview_msgtype = IIF(?19, ?29, preview_msgtype),
                preview_redacted = IIF(?19, 0, preview_redacted),
                is_favourite = COALESCE(?20, is_favourite), is_low_priority = COALESCE(?21, is_low_priority),
                is_pinned = COALESCE(?22, is_pinned), live_chunk_id = COALESCE(?23, live_chunk_id),
                counts_on_device = ?31, is_muted = COALESCE(?32, is_muted)
            WHERE room_nid = ?1
            """
        try db.withStatement(sql) { statement throws(StoreError) in
            let change = summary
            try statement.bind(row.nid, at: 1)
            try statement.bind(room.membership.rawValue, at: 2)
            for (offset, field) in [change.name, change.canonicalAlias, change.avatarURL, change.topic, change.heroes]
                .enumerated()
            {
                let index = Int32(offset == 4 ? 12 : 3 + offset * 2)
                try statement.bind(field == nil ? 0 : 1, at: index)
                try statement.bind(field ?? nil, at: index + 1)
            }
            try statement.bind(change.isEncrypted ? 1 : 0, at: 11)
            try statement.bind(room.joinedMemberCount, at: 14)
            try statement.bind(room.invitedMemberCount, at: 15)
            // With threaded counts `unread_notifications` is the main timeline's: the room's
            // totals add its threads'.
            let threads = room.threadCounts.values
            try statement.bind(
                room.notificationCount.map { $0 + Int64(threads.reduce(0) { $0 + $1.notifications }) }, at: 16)
            try statement.bind(
                room.highlightCount.map { $0 + Int64(threads.reduce(0) { $0 + $1.highlights }) }, at: 17)
            try statement.bind(change.latestActivity, at: 18)
            // The body and message type are read here, once per room, for the one event that is
            // the preview: not for every message of the batch.
            var preview = change.preview?.resolved()
            let previewID = preview?.eventID ?? row.previewEventID
            let previewSender = preview?.sender ?? row.previewSender
            var editedBody = false
            // Only the original sender may edit; the newest of their edits wins.
            if let previewID, let edit = change.edits[previewID]?.last(where: { $0.sender == previewSender }) {
                editedBody = true
                if preview == nil {
                    preview = PreviewChange(
                        eventID: previewID, sender: edit.sender, type: "", ts: 0, body: nil, messageType: nil)
                }
                preview?.body = edit.body
            }
            try statement.bind(change.preview == nil ? 0 : 1, at: 19)
            try statement.bind(preview?.eventID, at: 24)
            try statement.bind(preview?.sender, at: 25)
            try statement.bind(preview?.type, at: 26)
            try statement.bind(preview?.ts ?? 0, at: 27)
            try statement.bind(preview?.body, at: 28)
            try statement.bind(preview?.messageType, at: 29)
            try statement.bind(editedBody ? 1 : 0, at: 30)
            try statement.bind(countsOnDevice ? 1 : 0, at: 31)
            try statement.bind(mutedRooms.map { Int64($0.contains(room.roomID) ? 1 : 0) }, at: 32)
            let tags = change.tags
            try statement.bind(tags.map { Int64($0.contains("m.favourite") ? 1 : 0) }, at: 20)
            try statement.bind(tags.map { Int64($0.contains("m.lowpriority") ? 1 : 0) }, at: 21)
            try statement.bind(tags.map { Int64($0.contains(ChatStore.pinnedTag) ? 1 : 0) }, at: 22)
            try statement.bind(change.liveChunk, at: 23)
            try statement.step()
        }
    }
}

/// What a room's batch changed in its summary; `nil` means unchanged. A doubly optional field
/// is `.some(nil)` when the batch cleared it.
struct SummaryChange {
    var name: String??
    var canonicalAlias: String??
    var avatarURL: String??
    var topic: String??
    var heroes: String??
    var isEncrypted = false
    var membersChanged = false
    var latestActivity: Int64 = 0
    /// The batch's newest message-like event; its body is read only when the summary is written.
    var preview: PreviewSource?
    /// The edits of each edited event in the batch, oldest first: sender and raw content (the new
    /// body is read only for the edit that ends up shown).
    var edits: [String: [EditSource]] = [:]
    var tags: Set<String>?
    var liveChunk: Int64?

    /// Event types whose arrival moves a room up the conversation list and can be its preview.
    static let activityTypes: Set<String> = [
        "m.room.message", "m.room.encrypted", "m.sticker", "m.poll.start", "m.call.invite", "m.room.create",
    ]

    mutating func absorbState(_ event: SyncEvent, content: UnsafeRawBufferPointer) {
        guard event.stateKey == "" || event.type == "m.room.member" else { return }
        switch event.type {
        case "m.room.name": name = .some(Self.nonEmpty(RawJSON.string("name", in: content)))
        case "m.room.canonical_alias": canonicalAlias = .some(Self.nonEmpty(RawJSON.string("alias", in: content)))
        case "m.room.avatar": avatarURL = .some(Self.nonEmpty(RawJSON.string("url", in: content)))
        case "m.room.topic": topic = .some(Self.nonEmpty(RawJSON.string("topic", in: content)))
        case "m.room.encryption": isEncrypted = true
        case "m.room.member": membersChanged = true
        default: break
        }
    }

    mutating func absorbTimeline(_ event: SyncEvent, content: UnsafeRawBufferPointer) {
        if event.relation?.type == "m.replace", let target = event.relation?.eventID, let sender = event.sender {
            edits[target, default: []].append(EditSource(sender: sender, content: content))
            return
        }
        guard Self.activityTypes.contains(event.type) else { return }
        latestActivity = max(latestActivity, event.originServerTS)
        guard event.type != "m.room.create", let eventID = event.eventID, let sender = event.sender else { return }
        preview = PreviewSource(
            eventID: eventID, sender: sender, type: event.type, ts: event.originServerTS, content: content)
    }

    /// `body`, cut to ``ChatStore/previewLength`` characters.
    static func previewBody(in content: UnsafeRawBufferPointer) -> String? {
        RawJSON.string("body", in: content).map { String($0.prefix(ChatStore.previewLength)) }
    }

    private static func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        return text
    }
}

/// The newest message-like event of a batch, with its raw content (valid during the ingest):
/// what ``PreviewChange`` is read from.
struct PreviewSource {
    var eventID: String
    var sender: String
    var type: String
    var ts: Int64
    var content: UnsafeRawBufferPointer

    /// The preview as the conversation list shows it: body and message type unless encrypted.
    func resolved() -> PreviewChange {
        let readable = type != "m.room.encrypted"
        return PreviewChange(
            eventID: eventID, sender: sender, type: type, ts: ts,
            body: readable ? SummaryChange.previewBody(in: content) : nil,
            messageType: readable ? RawJSON.string("msgtype", in: content) : nil)
    }
}

/// An `m.replace` of a batch: its sender and raw content (valid during the ingest).
struct EditSource {
    var sender: String
    var content: UnsafeRawBufferPointer

    /// `m.new_content.body`, cut to ``ChatStore/previewLength`` characters.
    var body: String? {
        guard let newContent = RawJSON.value("m.new_content", in: content) else { return nil }
        return SummaryChange.previewBody(in: UnsafeRawBufferPointer(rebasing: content[newContent]))
    }
}

/// The last message of a room as the conversation list shows it, computed at ingest.
struct PreviewChange {
    var eventID: String
    var sender: String
    var type: String
    var ts: Int64
    var body: String?
    var messageType: String?
}
