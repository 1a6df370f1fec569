import SymorvaStore

/// A place in a room's stored timeline: a chunk and a position inside it (the chat feature's
/// `StoreCursor` is this pair).
package struct TimelinePosition: Sendable, Hashable {
    /// The linked chunk.
    package var chunkID: Int64
    /// The event's position in the chunk (increasing, not necessarily contiguous).
    package var position: Int64

    /// Creates a position.
    package init(chunkID: Int64, position: Int64) {
        self.chunkID = chunkID
        self.position = position
    }
}

/// What lies before the oldest item of a page.
package enum StoredTimelineBoundary: Sendable, Hashable {
    /// More stored events: ask again from this position.
    case stored(TimelinePosition)
    /// A gap: the server must be asked with `/messages?dir=b&from=token`; the gap is chunk
    /// `chunkID`.
    case gap(token: String, chunkID: Int64)
    /// Nothing: the page reaches the oldest known event with nothing before it.
    case roomStart
}

/// The reactions with one key on an event.
package struct ReactionGroup: Sendable, Hashable {
    /// The key (usually an emoji).
    package var key: String
    /// Who reacted, in order of reaction.
    package var senders: [String]

    /// Creates a group.
    package init(key: String, senders: [String]) {
        self.key = key
        self.senders = senders
    }
}

/// One event of a timeline page, with its relations applied: the latest edit's content,
/// reactions grouped by key, redaction.
///
/// Its content is user content: every textual form of this value names the event only.
package struct StoredTimelineItem: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The event.
    package var eventID: String
    /// Where it is stored (the cursor for the next page).
    package var position: TimelinePosition
    /// Its type.
    package var type: String
    /// Who sent it.
    package var sender: String
    /// When the server received it (milliseconds since 1970).
    package var originServerTS: Int64
    /// Set for state events.
    package var stateKey: String?
    /// Set on this device's own events (the send queue's transaction ID).
    package var transactionID: String?
    /// The content to show, raw JSON: the latest valid edit's `m.new_content` when edited,
    /// the redacted remains when redacted, else the original.
    package var content: [UInt8]
    /// The edit whose content is shown, if any.
    package var replacedBy: String?
    /// The redaction that removed the content, if any.
    package var redactedBy: String?
    /// Reactions, grouped by key in order of first reaction.
    package var reactions: [ReactionGroup]
    /// The event this one replies to.
    package var inReplyTo: String?
    /// The thread root, for an event in a thread (`m.thread`).
    package var threadRootID: String?
    /// For a thread's root: the thread's summary (replies, latest reply, unread counts).
    package var thread: StoredThread? = nil
    /// For an `m.room.encrypted` event: how it was decrypted (``type`` and ``content`` are the
    /// plaintext's then), or why it could not be.
    package var encryption: StoredEncryption? = nil
    /// When the latest edit is an encrypted event (``replacedBy``): its decrypted content as the
    /// decryptor sealed it. Whoever opens it shows its `m.new_content` in place of ``content``.
    package var sealedEdit: SealedEvent? = nil

    /// The event ID and type only.
    package var description: String { "StoredTimelineItem(\(eventID), \(type))" }
    /// No content in reflection.
    package var customMirror: Mirror {
        Mirror(self, children: ["eventID": eventID, "type": type], displayStyle: .struct)
    }
}

/// One page of stored timeline, oldest item first.
package struct StoredTimelinePage: Sendable, Hashable {
    /// The items, oldest first.
    package var items: [StoredTimelineItem]
    /// What precedes the first item.
    package var boundary: StoredTimelineBoundary
}

extension ChatStore {
    /// The `limit` items before `before` (`nil`: the newest) in `roomID`'s stored timeline,
    /// with edits, reactions and redactions applied.
    ///
    /// Relation events (edits, reactions, redactions) are not items of their own, and thread
    /// replies are their thread's (``loadThreadPage(roomID:root:before:limit:)``); the walk
    /// follows the linked chunks backwards and stops at a gap or at the oldest chunk.
    package func loadTimelinePage(
        roomID: String, before: TimelinePosition? = nil, limit: Int = 50
    ) async throws(ChatStoreError) -> StoredTimelinePage {
        try await read { db throws(StoreError) in
            try Self.timelinePage(roomID: roomID, before: before, limit: limit, db: db)
        }
    }

    /// ``loadTimelinePage(roomID:before:limit:)`` on the database's thread.
    package static func timelinePage(
        roomID: String, before: TimelinePosition?, limit: Int, db: isolated SQLiteDatabase
    ) throws(StoreError) -> StoredTimelinePage {
        guard
            let live = try db.queryOne(
                "SELECT live_chunk_id FROM rooms WHERE room_id = ?", [.text(roomID)],
                {
                    $0.optionalInt64(0)
                }), let live
        else { return StoredTimelinePage(items: [], boundary: .roomStart) }
        var chunk = before?.chunkID ?? live
        var start = before?.position ?? .max
        var newestFirst: [StoredTimelineItem] = []
        var boundary = StoredTimelineBoundary.roomStart
        while true {
            try readChunk(chunk, before: start, limit: limit - newestFirst.count, into: &newestFirst, db: db)
            if newestFirst.count >= limit {
                boundary = .stored(newestFirst[newestFirst.count - 1].position)
                break
            }
            let previous = try db.queryOne(
                "SELECT c.prev_chunk_id, g.prev_batch FROM timeline_chunks c LEFT JOIN timeline_gaps g ON g.chunk_id = c.prev_chunk_id WHERE c.chunk_id = ?",
                [.integer(chunk)]
            ) { (id: $0.optionalInt64(0), gap: $0.optionalString(1)) }
            guard let previous, let previousID = previous.id else { break }
            if let token = previous.gap {
                boundary = .gap(token: token, chunkID: previousID)
                break
            }
            chunk = previousID
            start = .max
        }
        for index in newestFirst.indices {
            try applyDecryption(to: &newestFirst[index], db: db)
            try applyRelations(to: &newestFirst[index], db: db)
        }
        return StoredTimelinePage(items: newestFirst.reversed(), boundary: boundary)
    }

    private static func readChunk(
        _ chunk: Int64, before start: Int64, limit: Int, into items: inout [StoredTimelineItem],
        db: isolated SQLiteDatabase
    ) throws(StoreError) {
        let sql = """
            SELECT event_id, position, type, sender, origin_server_ts, state_key, txn_id, content,
                redacted_by, rel_type, relates_to_event_id, in_reply_to
            FROM events WHERE chunk_id = ? AND position < ?
                AND (rel_type IS NULL OR rel_type NOT IN ('m.replace', 'm.annotation', 'm.room.redaction', 'm.thread'))
            ORDER BY position DESC LIMIT ?
            """
        try db.query(sql, [.integer(chunk), .integer(start), .int(limit)]) { row in
            let relationType = row.optionalString(9)
            items.append(
                StoredTimelineItem(
                    eventID: row.string(0), position: TimelinePosition(chunkID: chunk, position: row.int64(1)),
                    type: row.string(2), sender: row.string(3), originServerTS: row.int64(4),
                    stateKey: row.optionalString(5), transactionID: row.optionalString(6), content: row.blob(7),
                    replacedBy: nil, redactedBy: row.optionalString(8), reactions: [],
                    inReplyTo: row.optionalString(11),
                    threadRootID: relationType == "m.thread" ? row.optionalString(10) : nil))
        }
    }

    /// Shows the plaintext of a decrypted `m.room.encrypted` item in place of its ciphertext,
    /// or records why it cannot be decrypted.
    static func applyDecryption(to item: inout StoredTimelineItem, db: isolated SQLiteDatabase) throws(StoreError) {
        guard item.type == "m.room.encrypted", item.redactedBy == nil else { return }
        if let decrypted = try db.queryOne(
            """
            SELECT type, content, sender_key, sender_device, device_known, transaction_id, sender_trust
            FROM decrypted_events WHERE event_id = ?
            """,
            [.text(item.eventID)],
            {
                (
                    $0.string(0), $0.blob(1),
                    StoredEncryption(
                        senderKey: $0.string(2), senderDevice: $0.optionalString(3), deviceKnown: $0.int(4) != 0,
                        failure: nil, sealedForTransaction: $0.optionalString(5), senderTrust: $0.optionalString(6))
                )
            })
        {
            item.type = decrypted.0
            item.content = decrypted.1
            item.encryption = decrypted.2
            return
        }
        let reason = try db.queryOne(
            "SELECT reason FROM undecryptable_events WHERE event_id = ?", [.text(item.eventID)]
        ) {
            $0.string(0)
        }
        item.encryption = StoredEncryption(
            senderKey: "", senderDevice: nil, deviceKnown: false, failure: reason ?? "missingKey")
    }

    /// Applies the stored edits, reactions and late redactions that point at `item` from its own
    /// room: a relation sent in another room naming the same event ID is never applied.
    static func applyRelations(to item: inout StoredTimelineItem, db: isolated SQLiteDatabase) throws(StoreError) {
        let sql = """
            SELECT rel_type, relation_key, event_id, sender, origin_server_ts, content, type
            FROM events WHERE relates_to_event_id = ?1 AND redacted_by IS NULL
                AND rel_type IN ('m.replace', 'm.annotation', 'm.room.redaction')
                AND room_nid = (SELECT room_nid FROM events WHERE event_id = ?1)
            ORDER BY origin_server_ts, event_nid
            """
        var edits: [(id: String, content: [UInt8]?)] = []
        var lateRedaction: String?
        var reactions: [ReactionGroup] = []
        try db.query(sql, [.text(item.eventID)]) { row in
            switch row.string(0) {
            case "m.replace":
                // Only the original sender may edit; the newest edit wins. An encrypted edit's
                // new content is in its decrypted content (looked up below).
                guard row.string(3) == item.sender else { return }
                if row.string(6) == "m.room.encrypted" {
                    edits.append((row.string(2), nil))
                    return
                }
                row.withBlob(5) { content in
                    if let range = RawJSON.value("m.new_content", in: content) {
                        edits.append((row.string(2), Array(content[range])))
                    }
                }
            case "m.annotation":
                guard let key = row.optionalString(1) else { return }
                if let index = reactions.firstIndex(where: { $0.key == key }) {
                    reactions[index].senders.append(row.string(3))
                } else {
                    reactions.append(ReactionGroup(key: key, senders: [row.string(3)]))
                }
            default:
                lateRedaction = lateRedaction ?? row.string(2)
            }
        }
        if item.redactedBy == nil, let lateRedaction {
            item.redactedBy = lateRedaction
            item.content = item.content.withUnsafeBytes { RawJSON.redactedContent(type: item.type, content: $0) }
        }
        guard item.redactedBy == nil else {
            item.reactions = []
            return
        }
        for edit in edits.reversed() {
            if let content = edit.content {
                item.content = content
                item.replacedBy = edit.id
                break
            }
            if let sealed = try db.queryOne(
                "SELECT type, content, transaction_id FROM decrypted_events WHERE event_id = ? AND type = 'm.room.message'",
                [.text(edit.id)],
                { SealedEvent(type: $0.string(0), content: $0.blob(1), sealedForTransaction: $0.optionalString(2)) })
            {
                item.sealedEdit = sealed
                item.replacedBy = edit.id
                break
            }
        }
        item.reactions = reactions
    }
}

/// How an encrypted event was decrypted on this device, or why it was not.
package struct StoredEncryption: Sendable, Hashable {
    /// The sending device's Curve25519 key (empty when not decrypted).
    package var senderKey: String
    /// The sending device's ID, when known.
    package var senderDevice: String?
    /// Whether the sending device is known and its keys unchanged.
    package var deviceKnown: Bool
    /// Why it is not decrypted (`missingKey`, `replayed`, `unsupportedAlgorithm`), or `nil`.
    package var failure: String?
    /// Set on this device's own message whose content is the one it queued, sealed for the send
    /// queue under this transaction ID (before the decryption pass read the event).
    package var sealedForTransaction: String? = nil
    /// The sending device's trust when the event was decrypted (`verified`, `crossSigned`,
    /// `notCrossSigned`), or `nil` when not recorded (this device's own echo, or decrypted
    /// before schema 14).
    package var senderTrust: String? = nil
}

/// An `m.room.encrypted` event not decrypted yet.
package struct UndecryptedEvent: Sendable {
    /// Its row in `events`.
    package var eventNID: Int64
    package var eventID: String
    package var roomID: String
    package var sender: String
    package var content: [UInt8]
    /// `origin_server_ts`, in milliseconds.
    package var originServerTS: Int64 = 0
}

/// What decrypting an event gave.
package enum DecryptionOutcome: Sendable {
    /// The plaintext type, the content sealed by the decryptor, and who sent it.
    /// `senderTrust`: the sending device's trust at decryption (`verified`, `crossSigned`,
    /// `notCrossSigned`), `nil` when the decryptor does not say.
    case decrypted(
        type: String, content: [UInt8], senderKey: String, senderDevice: String?, deviceKnown: Bool,
        senderTrust: String? = nil)
    /// It cannot ever be decrypted, for this reason.
    case undecryptable(reason: String)
    /// It is not shown while its sending device is not trusted (under a policy that refuses
    /// such devices): shown as undecryptable for `reason`, and tried again when its sender's
    /// devices are brought up to date (``ChatStore/retryEventsRefusedForTrust(senders:)``).
    case refusedUntilSenderTrusted(reason: String)
}

extension ChatStore {
    /// Encrypted events that have neither a plaintext nor a permanent failure yet and are not
    /// waiting for their key (``markWaitingForKeys(_:)``), newest first: read from
    /// `pending_decryption`, so the cost does not grow with the events already decrypted.
    package func undecryptedEvents(limit: Int) async throws(ChatStoreError) -> [UndecryptedEvent] {
        try await read { db throws(StoreError) in
            try db.queryAll(
                """
                SELECT e.event_nid, e.event_id, r.room_id, e.sender, e.content, e.origin_server_ts
                FROM pending_decryption p
                JOIN events e ON e.event_nid = p.event_nid
                JOIN rooms r ON r.room_nid = e.room_nid
                WHERE p.waiting = 0
                ORDER BY p.event_nid DESC LIMIT ?
                """, [.int(limit)]
            ) {
                UndecryptedEvent(
                    eventNID: $0.int64(0), eventID: $0.string(1), roomID: $0.string(2), sender: $0.string(3),
                    content: $0.blob(4), originServerTS: $0.int64(5))
            }
        }
    }

    /// Marks events tried without their key: they are read again only after
    /// ``retryEventsWaitingForKeys()`` (new keys arrived).
    package func markWaitingForKeys(_ events: [UndecryptedEvent]) async throws(ChatStoreError) {
        guard !events.isEmpty else { return }
        try await write { db throws(StoreError) in
            for event in events {
                try db.execute(
                    "UPDATE pending_decryption SET waiting = 1 WHERE event_nid = ?", [.integer(event.eventNID)])
            }
        }
    }

    /// Makes every event that waits for a key ready to be tried again (keys arrived). Returns
    /// how many.
    @discardableResult
    package func retryEventsWaitingForKeys() async throws(ChatStoreError) -> Int {
        try await write { db throws(StoreError) in
            try db.execute("UPDATE pending_decryption SET waiting = 0 WHERE waiting = 1")
            return db.changes
        }
    }

    /// Makes the events of `senders` refused while their sending device was not trusted
    /// (``DecryptionOutcome/refusedUntilSenderTrusted(reason:)``) ready to be decrypted again;
    /// returns how many.
    @discardableResult
    package func retryEventsRefusedForTrust(senders: Set<String>) async throws(ChatStoreError) -> Int {
        guard !senders.isEmpty else { return 0 }
        return try await write { db throws(StoreError) in
            // The refused events are few (read through the `waiting` index); the queried users
            // may be a whole room's members.
            let refused = try db.queryAll(
                """
                SELECT p.event_nid, e.sender FROM pending_decryption p JOIN events e ON e.event_nid = p.event_nid
                WHERE p.waiting = \(Self.refusedForTrust)
                """, []
            ) { (nid: $0.int64(0), sender: $0.string(1)) }
            var reset = 0
            for event in refused where senders.contains(event.sender) {
                try db.execute("UPDATE pending_decryption SET waiting = 0 WHERE event_nid = ?", [.integer(event.nid)])
                reset += 1
            }
            return reset
        }
    }

    /// `pending_decryption.waiting` of an event refused while its sending device was not trusted
    /// (0: to try, 1: its key had not arrived).
    static let refusedForTrust = 2

    /// Stores decryption outcomes (the content as the decryptor sealed it).
    package func storeDecryption(_ outcomes: [(event: UndecryptedEvent, outcome: DecryptionOutcome)])
        async throws(ChatStoreError)
    {
        guard !outcomes.isEmpty else { return }
        try await write { db throws(StoreError) in
            for (event, outcome) in outcomes {
                if case .refusedUntilSenderTrusted(let reason) = outcome {
                    // Shown as refused, and kept to be tried again once the sender's devices change.
                    try db.execute(
                        "UPDATE pending_decryption SET waiting = \(Self.refusedForTrust) WHERE event_nid = ?",
                        [.integer(event.eventNID)])
                    try db.execute(
                        "INSERT OR REPLACE INTO undecryptable_events(event_id, reason) VALUES (?, ?)",
                        [.text(event.eventID), .text(reason)])
                    continue
                }
                try db.execute("DELETE FROM pending_decryption WHERE event_nid = ?", [.integer(event.eventNID)])
                switch outcome {
                case .decrypted(let type, let content, let senderKey, let senderDevice, let deviceKnown, let trust):
                    try db.execute(
                        """
                        INSERT OR REPLACE INTO decrypted_events(
                            event_id, type, content, sender_key, sender_device, device_known, sender_trust)
                        VALUES (?, ?, ?, ?, ?, ?, ?)
                        """,
                        [
                            .text(event.eventID), .text(type), .blob(content), .text(senderKey),
                            senderDevice.map { .text($0) } ?? .null, .integer(deviceKnown ? 1 : 0),
                            trust.map { .text($0) } ?? .null,
                        ])
                    // An event refused earlier while its sender was not trusted reads now.
                    try db.execute("DELETE FROM undecryptable_events WHERE event_id = ?", [.text(event.eventID)])
                case .undecryptable(let reason):
                    try db.execute(
                        "INSERT OR REPLACE INTO undecryptable_events(event_id, reason) VALUES (?, ?)",
                        [.text(event.eventID), .text(reason)])
                case .refusedUntilSenderTrusted: break
                }
            }
        }
    }
}
