import SymorvaMachines
import SymorvaStore

// Threads (issue 27): the room's thread list, a thread's own pages, and the events fetched for
// them outside the room's timeline. The `threads` rows and the reset of a thread's pagination
// are kept by triggers (chat schema 15), so no writer of `events` has to know about threads.

/// What the store knows of one thread.
package struct StoredThread: Sendable, Hashable {
    /// The root event.
    package var rootEventID: String
    /// How many replies it has: the server's count when the list was fetched, plus the
    /// replies synced since.
    package var replyCount: Int
    /// The newest reply.
    package var latestEventID: String?
    /// Who sent it.
    package var latestSender: String?
    /// When (milliseconds since 1970; 0 when unknown).
    package var latestTS: Int64
    /// Whether the account replied in it (or the server said so).
    package var participated: Bool
    /// The account's unread events that notify in it, as the device counted them.
    package var unread: DeviceCounts.Counts

    /// Creates a summary.
    package init(
        rootEventID: String, replyCount: Int, latestEventID: String?, latestSender: String?, latestTS: Int64,
        participated: Bool, unread: DeviceCounts.Counts = .init(notifications: 0, highlights: 0)
    ) {
        self.rootEventID = rootEventID
        self.replyCount = replyCount
        self.latestEventID = latestEventID
        self.latestSender = latestSender
        self.latestTS = latestTS
        self.participated = participated
        self.unread = unread
    }
}

/// A thread's position in the store: its replies are ordered by `origin_server_ts`, then by
/// `event_nid` (they come from sync, back-pagination and `/relations`, so no chunk orders them).
package struct ThreadPosition: Sendable, Hashable {
    /// The reply's `origin_server_ts`.
    package var timestamp: Int64
    /// Its `event_nid`.
    package var eventNID: Int64

    /// Creates a position.
    package init(timestamp: Int64, eventNID: Int64) {
        self.timestamp = timestamp
        self.eventNID = eventNID
    }
}

/// One page of a thread's stored replies.
package struct StoredThreadPage: Sendable, Hashable {
    /// The replies, oldest first.
    package var eventIDs: [String]
    /// What precedes them.
    package var boundary: Boundary

    /// What precedes a page of replies.
    package enum Boundary: Sendable, Hashable {
        /// More stored replies, before this position.
        case stored(ThreadPosition)
        /// The server may have older replies: ask `/relations` from `token` (`nil`: from the
        /// newest reply, the thread never having been paginated).
        case server(token: String?)
        /// Nothing older: the thread's pagination reached its root.
        case root
    }

    /// Creates a page.
    package init(eventIDs: [String], boundary: Boundary) {
        self.eventIDs = eventIDs
        self.boundary = boundary
    }
}

/// The bundled thread aggregation of one root of the thread list
/// (`unsigned["m.relations"]["m.thread"]`).
package struct BundledThread: Sendable, Hashable {
    /// The root event.
    package var rootEventID: String
    /// `count`.
    package var count: Int
    /// `current_user_participated`.
    package var participated: Bool
    /// `latest_event`'s ID, sender and timestamp.
    package var latestEventID: String?
    /// `latest_event.sender`.
    package var latestSender: String?
    /// `latest_event.origin_server_ts`.
    package var latestTS: Int64

    /// Creates an aggregation.
    package init(
        rootEventID: String, count: Int, participated: Bool, latestEventID: String?, latestSender: String?,
        latestTS: Int64
    ) {
        self.rootEventID = rootEventID
        self.count = count
        self.participated = participated
        self.latestEventID = latestEventID
        self.latestSender = latestSender
        self.latestTS = latestTS
    }
}

extension BundledThread {
    /// The bundled `m.thread` aggregation of `event` (a root's whole JSON), and its
    /// `latest_event`'s bytes; `nil` when the event carries none.
    package static func parse(event: [UInt8], rootEventID: String) -> (thread: BundledThread, latest: [UInt8]?)? {
        event.withUnsafeBytes { buffer -> (BundledThread, [UInt8]?)? in
            guard let unsigned = RawJSON.value("unsigned", in: buffer) else { return nil }
            let unsignedBytes = UnsafeRawBufferPointer(rebasing: buffer[unsigned])
            guard let relations = RawJSON.value("m.relations", in: unsignedBytes) else { return nil }
            let relationsBytes = UnsafeRawBufferPointer(rebasing: unsignedBytes[relations])
            guard let thread = RawJSON.value("m.thread", in: relationsBytes) else { return nil }
            let threadBytes = UnsafeRawBufferPointer(rebasing: relationsBytes[thread])
            let count = RawJSON.integer("count", in: threadBytes) ?? 0
            let participated =
                RawJSON.value("current_user_participated", in: threadBytes).map {
                    Array(UnsafeRawBufferPointer(rebasing: threadBytes[$0])) == Array("true".utf8)
                } ?? false
            var latest: [UInt8]?
            var latestID: String?
            var latestSender: String?
            var latestTS: Int64 = 0
            if let range = RawJSON.value("latest_event", in: threadBytes) {
                let latestBytes = UnsafeRawBufferPointer(rebasing: threadBytes[range])
                latest = Array(latestBytes)
                latestID = RawJSON.string("event_id", in: latestBytes)
                latestSender = RawJSON.string("sender", in: latestBytes)
                latestTS = RawJSON.integer("origin_server_ts", in: latestBytes) ?? 0
            }
            return (
                BundledThread(
                    rootEventID: rootEventID, count: Int(count), participated: participated, latestEventID: latestID,
                    latestSender: latestSender, latestTS: latestTS), latest
            )
        }
    }
}

extension ChatStore {
    /// The room's threads, most recently active first (at most `limit`), each with the
    /// account's unread counts in it: the device's where the conversation list shows the
    /// device's (encrypted rooms, rooms whose sync sends no real counts), else the server's
    /// (`unread_thread_notifications`).
    package func threads(roomID: RoomID, ownUserID: String, limit: Int = 1_000) async throws(ChatStoreError)
        -> [StoredThread]
    {
        try await read { db throws(StoreError) in
            guard let nid = try Self.roomNID(roomID, db: db) else { return [] }
            let onDevice =
                try db.queryOne(
                    "SELECT is_encrypted OR counts_on_device FROM rooms WHERE room_nid = ?", [.integer(nid)]
                ) { $0.int(0) != 0 } ?? true
            let counts =
                onDevice
                ? try Self.threadCounts(room: nid, ownUserID: ownUserID, db: db)
                : try Self.serverThreadCounts(room: nid, db: db)
            return try db.queryAll(
                """
                SELECT t.root_event_id, t.reply_count, t.latest_event_id, t.latest_sender, t.latest_ts,
                    t.participated OR EXISTS (
                        SELECT 1 FROM events e WHERE e.relates_to_event_id = t.root_event_id
                            AND e.rel_type = 'm.thread' AND e.sender = ?2)
                FROM threads t WHERE t.room_nid = ?1 ORDER BY t.latest_ts DESC LIMIT ?3
                """, [.integer(nid), .text(ownUserID), .integer(Int64(max(0, limit)))]
            ) { row in
                let root = row.string(0)
                return StoredThread(
                    rootEventID: root, replyCount: row.int(1), latestEventID: row.optionalString(2),
                    latestSender: row.optionalString(3), latestTS: row.int64(4), participated: row.int(5) != 0,
                    unread: counts[root] ?? .init(notifications: 0, highlights: 0))
            }
        }
    }

    /// The server's unread counts per thread of a room (`unread_thread_notifications`).
    static func serverThreadCounts(room nid: Int64, db: isolated SQLiteDatabase) throws(StoreError)
        -> [String: DeviceCounts.Counts]
    {
        var counts: [String: DeviceCounts.Counts] = [:]
        try db.query(
            "SELECT thread_id, notification_count, highlight_count FROM server_thread_counts WHERE room_nid = ?",
            [.integer(nid)]
        ) { row in counts[row.string(0)] = DeviceCounts.Counts(notifications: row.int(1), highlights: row.int(2)) }
        return counts
    }

    /// The stored summary of the thread rooted at `root`, if the store knows of a reply.
    package func thread(roomID: RoomID, root: EventID) async throws(ChatStoreError) -> StoredThread? {
        try await read { db throws(StoreError) in
            guard let nid = try Self.roomNID(roomID, db: db) else { return nil }
            return try Self.thread(room: nid, root: root.rawValue, db: db)
        }
    }

    static func thread(room nid: Int64, root: String, db: isolated SQLiteDatabase) throws(StoreError) -> StoredThread? {
        try db.queryOne(
            """
            SELECT reply_count, latest_event_id, latest_sender, latest_ts, participated FROM threads
            WHERE room_nid = ? AND root_event_id = ?
            """, [.integer(nid), .text(root)]
        ) { row in
            StoredThread(
                rootEventID: root, replyCount: row.int(0), latestEventID: row.optionalString(1),
                latestSender: row.optionalString(2), latestTS: row.int64(3), participated: row.int(4) != 0)
        }
    }

    /// The thread root of `eventID` when it is a stored thread reply.
    package func threadRoot(of eventID: EventID) async throws(ChatStoreError) -> String? {
        try await read { db throws(StoreError) in
            try db.queryOne(
                "SELECT relates_to_event_id FROM events WHERE event_id = ? AND rel_type = 'm.thread'",
                [.text(eventID.rawValue)]
            ) { $0.optionalString(0) } ?? nil
        }
    }

    /// Those of `eventIDs` that are replies in the thread rooted at `root`, in the given order.
    package func threadReplies(roomID: RoomID, root: EventID, among eventIDs: [EventID]) async throws(ChatStoreError)
        -> [EventID]
    {
        guard !eventIDs.isEmpty else { return [] }
        return try await read { db throws(StoreError) in
            var found: [EventID] = []
            for eventID in eventIDs {
                let isReply = try db.queryOne(
                    "SELECT 1 FROM events WHERE event_id = ? AND rel_type = 'm.thread' AND relates_to_event_id = ?",
                    [.text(eventID.rawValue), .text(root.rawValue)]
                ) { _ in true }
                if isReply != nil { found.append(eventID) }
            }
            return found
        }
    }

    /// Up to `limit` stored replies of the thread rooted at `root` before `before` (`nil`: the
    /// newest), oldest first, and what precedes them.
    package func loadThreadPage(
        roomID: RoomID, root: EventID, before: ThreadPosition?, limit: Int
    ) async throws(ChatStoreError) -> StoredThreadPage {
        try await read { db throws(StoreError) in
            guard let nid = try Self.roomNID(roomID, db: db) else {
                return StoredThreadPage(eventIDs: [], boundary: .server(token: nil))
            }
            let rows = try db.queryAll(
                """
                SELECT event_id, origin_server_ts, event_nid FROM events
                WHERE relates_to_event_id = ?2 AND rel_type = 'm.thread' AND room_nid = ?1
                    AND (?3 IS NULL OR origin_server_ts < ?3 OR (origin_server_ts = ?3 AND event_nid < ?4))
                ORDER BY origin_server_ts DESC, event_nid DESC LIMIT ?5
                """,
                [
                    .integer(nid), .text(root.rawValue), before.map { .integer($0.timestamp) } ?? .null,
                    .integer(before?.eventNID ?? 0), .integer(Int64(max(1, limit))),
                ]
            ) { (eventID: $0.string(0), position: ThreadPosition(timestamp: $0.int64(1), eventNID: $0.int64(2))) }
            let eventIDs = rows.reversed().map(\.eventID)
            if rows.count >= max(1, limit), let oldest = rows.last {
                return StoredThreadPage(eventIDs: eventIDs, boundary: .stored(oldest.position))
            }
            let pagination = try db.queryOne(
                "SELECT next_batch, fully_paginated FROM threads WHERE room_nid = ? AND root_event_id = ?",
                [.integer(nid), .text(root.rawValue)]
            ) { (token: $0.optionalString(0), done: $0.int(1) != 0) }
            if pagination?.done == true { return StoredThreadPage(eventIDs: eventIDs, boundary: .root) }
            return StoredThreadPage(eventIDs: eventIDs, boundary: .server(token: pagination?.token))
        }
    }

    /// Writes a `/relations/{root}/m.thread?dir=b` page: its replies the store lacks go into the
    /// room's detached chunk, and the thread's pagination moves to `nextBatch` (`nil`: the root
    /// is reached). The reply count never falls below the replies stored. One transaction.
    ///
    /// Returns the page's replies, oldest first.
    package func storeThreadPage(
        roomID: RoomID, root: EventID, page: MessagesPage, nextBatch: String?
    ) async throws(ChatStoreError) -> [EventID] {
        try await write { db throws(StoreError) in
            guard let nid = try Self.roomNID(roomID, db: db) else { return [] }
            let replies = page.chunk.filter { $0.relation?.type == "m.thread" && $0.relation?.eventID == root.rawValue }
            try Self.insertDetached(replies, room: nid, document: page.document, db: db)
            try Self.insertMissingThreadMembers(page.state, room: nid, document: page.document, db: db)
            try db.execute(
                "INSERT INTO threads(room_nid, root_event_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
                [.integer(nid), .text(root.rawValue)])
            try db.execute(
                """
                UPDATE threads SET next_batch = ?3, fully_paginated = ?4,
                    reply_count = MAX(reply_count, (SELECT COUNT(*) FROM events
                        WHERE relates_to_event_id = ?2 AND rel_type = 'm.thread' AND room_nid = ?1))
                WHERE room_nid = ?1 AND root_event_id = ?2
                """, [.integer(nid), .text(root.rawValue), .text(nextBatch), .bool(nextBatch == nil)])
            return replies.reversed().compactMap { $0.eventID.map(EventID.init(rawValue:)) }
        }
    }

    /// Stores `page`'s events the store lacks in the room's detached chunk (a thread's root
    /// fetched with `GET /event`, shown at the top of its thread).
    package func storeDetached(roomID: RoomID, page: MessagesPage) async throws(ChatStoreError) {
        try await write { db throws(StoreError) in
            guard let nid = try Self.roomNID(roomID, db: db) else { return }
            try Self.insertDetached(page.chunk, room: nid, document: page.document, db: db)
        }
    }

    /// Writes one page of the room's thread list: the roots and their latest replies the store
    /// lacks go into the room's detached chunk, then each thread takes the server's bundled
    /// count and latest reply, unless the store already holds a newer reply (synced since),
    /// whose count it keeps. One transaction.
    package func storeThreadList(
        roomID: RoomID, roots: MessagesPage, latest: MessagesPage, threads: [BundledThread]
    ) async throws(ChatStoreError) {
        try await write { db throws(StoreError) in
            guard let nid = try Self.roomNID(roomID, db: db) else { return }
            try Self.insertDetached(roots.chunk, room: nid, document: roots.document, db: db)
            try Self.insertDetached(latest.chunk, room: nid, document: latest.document, db: db)
            for thread in threads { try Self.recordBundled(thread, room: nid, db: db) }
        }
    }

    /// Records a thread's bundled aggregation (the server's count and latest reply), unless the
    /// store already holds a newer reply, whose count it keeps.
    static func recordBundled(_ thread: BundledThread, room nid: Int64, db: isolated SQLiteDatabase)
        throws(StoreError)
    {
        try db.execute(
            """
            INSERT INTO threads(room_nid, root_event_id, reply_count, latest_event_id, latest_sender,
                latest_ts, participated)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(room_nid, root_event_id) DO UPDATE SET
                reply_count = CASE WHEN excluded.latest_ts >= threads.latest_ts THEN excluded.reply_count
                    ELSE MAX(threads.reply_count, excluded.reply_count) END,
                latest_event_id = CASE WHEN excluded.latest_ts >= threads.latest_ts
                    THEN excluded.latest_event_id ELSE threads.latest_event_id END,
                latest_sender = CASE WHEN excluded.latest_ts >= threads.latest_ts
                    THEN excluded.latest_sender ELSE threads.latest_sender END,
                latest_ts = MAX(threads.latest_ts, excluded.latest_ts),
                participated = MAX(threads.participated, excluded.participated)
            """,
            [
                .integer(nid), .text(thread.rootEventID), .integer(Int64(thread.count)),
                .text(thread.latestEventID), .text(thread.latestSender), .integer(thread.latestTS),
                .bool(thread.participated),
            ])
    }

    /// The room's detached chunk (created on first use).
    static func detachedChunk(room nid: Int64, db: isolated SQLiteDatabase) throws(StoreError) -> Int64 {
        if let chunk = try db.queryOne(
            "SELECT chunk_id FROM detached_chunks WHERE room_nid = ?", [.integer(nid)], { $0.int64(0) })
        {
            return chunk
        }
        try db.execute("INSERT INTO timeline_chunks(room_nid) VALUES (?)", [.integer(nid)])
        let chunk = db.lastInsertRowID
        try db.execute(
            "INSERT INTO detached_chunks(room_nid, chunk_id) VALUES (?, ?)", [.integer(nid), .integer(chunk)])
        return chunk
    }

    /// Inserts the events the store lacks into the room's detached chunk, below its lowest
    /// position (their order there means nothing: threads order by timestamp).
    static func insertDetached(
        _ events: [SyncEvent], room nid: Int64, document: [UInt8], db: isolated SQLiteDatabase
    ) throws(StoreError) {
        guard !events.isEmpty else { return }
        let chunk = try detachedChunk(room: nid, db: db)
        let lowest = try db.queryOne("SELECT MIN(position) FROM events WHERE chunk_id = ?", [.integer(chunk)]) {
            $0.optionalInt64(0)
        }
        var position: Int64 = (lowest ?? nil) ?? 0
        for event in events {
            guard let eventID = event.eventID, let sender = event.sender else { continue }
            position -= 1
            try db.execute(
                """
                INSERT INTO events(room_nid, chunk_id, position, event_id, type, sender, origin_server_ts, state_key,
                    txn_id, content, relates_to_event_id, rel_type, relation_key, in_reply_to)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(event_id) DO NOTHING
                """,
                [
                    .integer(nid), .integer(chunk), .integer(position), .text(eventID), .text(event.type),
                    .text(sender), .integer(event.originServerTS), .text(event.stateKey), .text(event.transactionID),
                    .blob(Array(document[event.content])), .text(event.relation?.eventID), .text(event.relation?.type),
                    .text(event.relation?.key), .text(event.relation?.inReplyTo),
                ])
        }
    }

    /// Member events sent with a page fill in profiles the store lacks; never current state.
    private static func insertMissingThreadMembers(
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
}
