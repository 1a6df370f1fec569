import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore

/// What one ingested `/sync` response changed.
package struct SyncIngestReport: Sendable, Hashable {
    /// Rooms written.
    package var rooms = 0
    /// Timeline events written (duplicates of stored events excluded).
    package var timelineEvents = 0
    /// State events written (from `state` and from the timeline).
    package var stateEvents = 0
    /// Redactions applied to stored events.
    package var redactionsApplied = 0
    /// Redactions, edits, reactions and receipts ignored because they name an event of another
    /// room (a misbehaving or federated server can send anything): their events are stored in
    /// their own room, and the other room's event is left as it was.
    package var crossRoomRelationsIgnored = 0
    /// Gaps created by limited timelines.
    package var gapsCreated = 0
    /// Rooms whose limited timeline reached back to the newest stored event and so continued
    /// the live timeline without a gap: room ID → how many of its leading events were already
    /// stored (or lie behind an older gap) and were not written again.
    package var continuedTimelines: [String: Int] = [:]
    /// Events skipped as unusable (kept in `malformed_events`).
    package var malformedEvents = 0
    /// The `next_batch` committed with them.
    package var nextBatch = ""

    /// An empty report.
    package init() {}
}

/// Writes `/sync` responses into a ``ChatStore``: everything a response holds, and its
/// `next_batch`, in one SQLite transaction.
///
/// Committing the token with the data it covers means a crash, a kill or a failed write at any
/// point leaves either the whole response stored and the token advanced, or nothing stored and
/// the old token in place — the next sync then repeats the same response. Data is never
/// skipped and never half-applied.
///
/// The response is decoded whole before the transaction starts: the sync loop decodes it when
/// it arrives (the sync machine needs its summary before asking to store it). Decoding while
/// writing was measured and removed: on the shipped configuration it was no faster
/// (`docs/benchmarks.md`, "One opening path").
package struct SyncIngestor: Sendable {
    /// The store written to.
    package let store: ChatStore
    /// Where the response's to-device events, device lists and key counts go, in the same
    /// transaction (the crypto module's inbox); `nil` drops them (no encryption on this account).
    package let inbox: SyncInboxWriter?

    /// Creates an ingestor for `store`, handing encryption's share of each response to `inbox`.
    package init(store: ChatStore, inbox: SyncInboxWriter? = nil) {
        self.store = store
        self.inbox = inbox
    }

    /// Decodes `document` (a `/sync` response body) and stores it with its `next_batch`.
    ///
    /// - Throws: `.malformedResponse` when the document is not a `/sync` response, `.store`
    ///   when writing fails. Either way nothing was written and the token did not move.
    package func ingest(_ document: [UInt8]) async throws(ChatStoreError) -> SyncIngestReport {
        let body: SyncResponseBody
        do {
            body = try SyncResponseDecoder.decode(document)
        } catch {
            throw .malformedResponse(error)
        }
        return try await ingest(body)
    }

    /// Stores an already decoded response with its `next_batch`, in one transaction.
    ///
    /// - Throws: `.store` when writing fails; nothing was written and the token did not move.
    package func ingest(_ response: SyncResponseBody) async throws(ChatStoreError) -> SyncIngestReport {
        try await store.checkpoint()
        return try await store.write { db throws(StoreError) in
            var writer = try SyncWriter(db: db)
            try writer.begin(response.head, document: response.document, db: db)
            try writer.write(response.rooms, document: response.document, db: db)
            if writer.report.rooms > 0 { FaultPoint.syncIngest.reach() }
            try writer.finish(response.head, document: response.document, inbox: inbox, db: db)
            if !response.head.toDevice.isEmpty { FaultPoint.toDeviceIngest.reach() }
            return writer.report
        }
    }

    /// Stores a decoded simplified sliding sync response, its `pos` and its to-device
    /// `next_batch` in one transaction, through the same writer as v2 (`sync_state`, v2's
    /// since-token, is not touched). The report's `nextBatch` is `pos`.
    ///
    /// - Throws: `.store` when writing fails; nothing was written and neither position moved.
    package func ingest(sliding response: SlidingSyncResponse) async throws(ChatStoreError) -> SyncIngestReport {
        try await store.checkpoint()
        let body = response.body
        return try await store.write { db throws(StoreError) in
            var writer = try SyncWriter(db: db)
            writer.countsOnDevice = true
            try writer.begin(body.head, document: body.document, db: db)
            try writer.write(body.rooms, document: body.document, db: db)
            if writer.report.rooms > 0 { FaultPoint.syncIngest.reach() }
            try writer.finish(
                body.head, position: .sliding(pos: response.pos, toDeviceSince: response.toDeviceNextBatch),
                document: body.document, inbox: inbox, db: db)
            if !body.head.toDevice.isEmpty { FaultPoint.toDeviceIngest.reach() }
            return writer.report
        }
    }
}

/// Where a response's position is committed.
enum SyncPosition {
    /// `/sync` v2: `next_batch` becomes the since-token (`sync_state`).
    case since(String)
    /// Sliding sync: the connection's `pos`, and the to-device extension's `next_batch` when the
    /// response had one (`sliding_sync_state`).
    case sliding(pos: String, toDeviceSince: String?)
}

/// Writes what a sync response holds for end-to-end encryption into the crypto module's inbox,
/// inside the response's transaction: the crypto store's hand-off (``SymorvaMatrix/SyncDeviceInbox``).
/// Chat's ingest knows no crypto table; the crypto module runs no SQL on chat's.
package typealias SyncInboxWriter = @Sendable (SyncDeviceInbox, isolated SQLiteDatabase) throws(StoreError) -> Void

/// Writes decoded rooms and the response's top level inside one transaction.
struct SyncWriter {
    var report = SyncIngestReport()
    /// The token before this response, recorded with malformed events.
    let previousToken: String?
    /// Whether the send queue has rows (it cannot gain any during the ingest transaction).
    let hasQueuedMessages: Bool
    /// Whether the rooms' unread counts are the device's (sliding sync: the server sends none).
    var countsOnDevice = false
    /// The rooms the response's `m.push_rules` silence, when it has push rules: each room it
    /// writes takes its muted flag from them.
    private(set) var mutedRooms: Set<String>?

    /// Runs inside the ingest transaction.
    init(db: isolated SQLiteDatabase) throws(StoreError) {
        previousToken = try db.queryOne("SELECT since_token FROM sync_state WHERE id = 1") { $0.string(0) }
        hasQueuedMessages = try db.queryOne("SELECT EXISTS (SELECT 1 FROM send_queue)") { $0.int(0) != 0 } ?? true
    }

    mutating func write(_ rooms: [SyncRoomUpdate], document: [UInt8], db: isolated SQLiteDatabase) throws(StoreError) {
        let result = document.withUnsafeBytes { bytes in
            Result { () throws(StoreError) in
                for room in rooms {
                    var writer = RoomWriter(
                        room: room, bytes: bytes, hasQueuedMessages: hasQueuedMessages, countsOnDevice: countsOnDevice,
                        mutedRooms: mutedRooms, newRoomsAreJoins: previousToken != nil && !countsOnDevice)
                    try writer.write(db: db)
                    report.rooms += 1
                    report.timelineEvents += writer.timelineEvents
                    report.stateEvents += writer.stateEvents
                    report.redactionsApplied += writer.redactionsApplied
                    report.crossRoomRelationsIgnored += writer.crossRoomRelationsIgnored
                    report.gapsCreated += writer.gapCreated ? 1 : 0
                    if let repeated = writer.repeatedEvents { report.continuedTimelines[room.roomID] = repeated }
                }
            }
        }
        try result.get()
    }

    /// Writes the global account data, before the rooms. Its `m.push_rules` set the muted flag
    /// of the stored rooms the response does not carry here, and of the others as ``write(_:document:db:)``
    /// writes them: every row is written while its page is still in SQLite's cache. (Written
    /// after the rooms, the flags and the global rows rewrote pages that a large sync had
    /// already spilled to the WAL, and SQLite then re-read and re-checksummed every frame after
    /// the first rewritten one at `COMMIT`: `docs/benchmarks.md`, "The rest of the ingest".)
    mutating func begin(_ head: SyncResponseHead, document: [UInt8], db: isolated SQLiteDatabase) throws(StoreError) {
        guard !head.accountData.isEmpty else { return }
        let result = document.withUnsafeBytes { bytes in
            Result { () throws(StoreError) -> Set<String>? in
                try GlobalWriter(head: head, bytes: bytes, previousToken: previousToken).writeAccountData(db: db)
            }
        }
        if let muted = try result.get() { mutedRooms = muted }
    }

    /// Writes the rest of the top level — malformed events, and encryption's share (to-device
    /// events, device lists, key counts) into `inbox` — and then the new token.
    mutating func finish(
        _ head: SyncResponseHead, position: SyncPosition? = nil, document: [UInt8], inbox: SyncInboxWriter? = nil,
        db: isolated SQLiteDatabase
    ) throws(StoreError) {
        let previousToken = previousToken
        let result = document.withUnsafeBytes { bytes in
            Result { () throws(StoreError) in
                try GlobalWriter(head: head, bytes: bytes, previousToken: previousToken).writeMalformedEvents(db: db)
            }
        }
        try result.get()
        if let inbox {
            let handed = SyncDeviceInbox(
                toDevice: head.toDevice.map { event in
                    SyncDeviceInbox.ToDevice(
                        type: event.type, sender: event.sender ?? "", raw: Array(document[event.range]))
                },
                deviceListsChanged: head.deviceListsChanged, deviceListsLeft: head.deviceListsLeft,
                oneTimeKeyCounts: head.oneTimeKeyCounts)
            if !handed.isEmpty { try inbox(handed, db) }
        }
        switch position ?? .since(head.nextBatch) {
        case .since(let token):
            try db.execute(
                "INSERT INTO sync_state(id, since_token) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET since_token = excluded.since_token",
                [.text(token)])
            report.nextBatch = token
        case .sliding(let pos, let toDeviceSince):
            // A response without the to-device extension keeps the stored `since`.
            try db.execute(
                "INSERT INTO sliding_sync_state(id, pos, to_device_since) VALUES (1, ?, ?) ON CONFLICT(id) DO UPDATE SET pos = excluded.pos, to_device_since = COALESCE(excluded.to_device_since, to_device_since)",
                [.text(pos), .text(toDeviceSince)])
            report.nextBatch = pos
        }
        report.malformedEvents = head.malformedEvents.count
    }
}

/// The top level of a response.
private struct GlobalWriter {
    let head: SyncResponseHead
    let bytes: UnsafeRawBufferPointer
    let previousToken: String?

    /// Stores the global account data and returns the rooms its `m.push_rules` silence (`nil`
    /// without push rules), having set the stored rooms' muted flags to match.
    func writeAccountData(db: isolated SQLiteDatabase) throws(StoreError) -> Set<String>? {
        var mutedRooms: Set<String>?
        for event in head.accountData {
            let content = UnsafeRawBufferPointer(rebasing: bytes[event.content])
            try db.withStatement(
                "INSERT INTO account_data(room_nid, type, content) VALUES (0, ?, ?) ON CONFLICT DO UPDATE SET content = excluded.content"
            ) { statement throws(StoreError) in
                try statement.bind(event.type, at: 1)
                try statement.bind(bytes: content, at: 2)
                try statement.step()
            }
            if event.type == "m.push_rules", let muted = try applyPushRules(content, db: db) { mutedRooms = muted }
        }
        return mutedRooms
    }

    func writeMalformedEvents(db: isolated SQLiteDatabase) throws(StoreError) {
        for event in head.malformedEvents {
            try db.withStatement(
                "INSERT INTO malformed_events(since_token, section, room_id, reason, raw) VALUES (?, ?, ?, ?, ?)"
            ) { statement throws(StoreError) in
                try statement.bind(previousToken, at: 1)
                try statement.bind(event.section, at: 2)
                try statement.bind(event.roomID, at: 3)
                try statement.bind(event.reason, at: 4)
                try statement.bind(bytes: UnsafeRawBufferPointer(rebasing: bytes[event.range]), at: 5)
                try statement.step()
            }
        }
    }

    /// Marks the stored rooms that the user's push rules silence (a room or override rule named
    /// after the room whose actions do not notify) as muted, and the others as not muted, and
    /// returns the silenced rooms; a row already right is not written.
    private func applyPushRules(_ content: UnsafeRawBufferPointer, db: isolated SQLiteDatabase) throws(StoreError)
        -> Set<String>?
    {
        var muted: Set<String> = []
        guard let global = RawJSON.value("global", in: content) else { return nil }
        let rules = UnsafeRawBufferPointer(rebasing: content[global])
        for kind in ["room", "override"] {
            let list = kind == "room" ? RawJSON.value("room", in: rules) : RawJSON.value("override", in: rules)
            guard let list else { continue }
            let array = UnsafeRawBufferPointer(rebasing: rules[list])
            RawJSON.forEachElement(in: array) { range in
                let rule = UnsafeRawBufferPointer(rebasing: array[range])
                guard let ruleID = RawJSON.string("rule_id", in: rule), ruleID.hasPrefix("!") else { return }
                if let enabled = RawJSON.value("enabled", in: rule), rule[enabled].elementsEqual("false".utf8) {
                    return
                }
                var notifies = false
                if let actions = RawJSON.value("actions", in: rule) {
                    let list = UnsafeRawBufferPointer(rebasing: rule[actions])
                    RawJSON.forEachElement(in: list) {
                        if list[$0].elementsEqual("\"notify\"".utf8) { notifies = true }
                    }
                }
                if !notifies { muted.insert(ruleID) }
            }
        }
        let unmuted = try db.queryAll("SELECT room_id FROM rooms WHERE is_muted = 1") { $0.string(0) }
        for roomID in unmuted where !muted.contains(roomID) {
            try db.execute("UPDATE rooms SET is_muted = 0 WHERE room_id = ?", [.text(roomID)])
        }
        for roomID in muted {
            try db.execute("UPDATE rooms SET is_muted = 1 WHERE room_id = ? AND is_muted = 0", [.text(roomID)])
        }
        return muted
    }
}
