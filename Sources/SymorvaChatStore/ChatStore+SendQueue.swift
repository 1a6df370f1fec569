import SymorvaStore

/// Where a persisted outgoing event is in its life (the `send_queue.state` column).
package enum QueuedMessageState: String, Sendable, Hashable, CaseIterable {
    /// Waiting for its turn or for a retry.
    case queued
    /// Being encrypted.
    case encrypting
    /// Its PUT is in flight (after a crash: the server may have it; the retry reuses the txnID).
    case sending
    /// Accepted by the server; removed when its remote echo arrives through sync.
    case sent
    /// Refused for good (see ``QueuedMessage/failureReason``); holds the room's later items.
    case failed
    /// Cancelled by the user; removed once acknowledged.
    case cancelled
}

/// The file a queued message carries (`send_queue.attachment_*`, `media_uri`, `media_uploaded`).
///
/// Its path is where the user's file lies: every textual form shows the size only.
package struct QueuedMessageAttachment: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The copy in the account's folder.
    package var path: String
    /// The MIME type.
    package var contentType: String
    /// The size in bytes.
    package var size: Int64
    /// The reserved `mxc://` URI, once stored.
    package var mediaURI: String?
    /// Whether the bytes are on the server.
    package var isUploaded: Bool

    /// An attachment row.
    package init(path: String, contentType: String, size: Int64, mediaURI: String? = nil, isUploaded: Bool = false) {
        self.path = path
        self.contentType = contentType
        self.size = size
        self.mediaURI = mediaURI
        self.isUploaded = isUploaded
    }

    /// The size only.
    package var description: String { "QueuedMessageAttachment(\(size) bytes)" }
    /// The size only.
    package var customMirror: Mirror { Mirror(self, children: ["size": size], displayStyle: .struct) }
}

/// One row of the persisted send queue.
///
/// Its content is user content: every textual form of this value names the transaction only.
package struct QueuedMessage: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The room it is sent to.
    package var roomID: String
    /// The transaction ID, chosen once and reused on every attempt.
    package var transactionID: String
    /// Its place in the room's queue (increasing).
    package var position: Int64
    /// The event type.
    package var eventType: String
    /// The content as the user wrote it, raw JSON; sealed by the crypto module when
    /// ``contentIsSealed`` (a message to an encrypted room).
    package var content: [UInt8]
    /// Whether ``content`` is sealed (it is never in the clear for an encrypted room).
    package var contentIsSealed: Bool = false
    /// The `m.room.encrypted` content, once encrypted (reused on retries).
    package var encryptedContent: [UInt8]?
    /// Where it is in its life.
    package var state: QueuedMessageState
    /// The stored failure reason when ``state`` is `.failed` (the send queue's storage code).
    package var failureReason: String?
    /// The event ID the server assigned, once sent.
    package var sentEventID: String?
    /// Transient failures so far.
    package var attempts: Int
    /// When it was queued (milliseconds since 1970).
    package var createdAt: Int64
    /// The file it carries, if any.
    package var attachment: QueuedMessageAttachment?

    /// The transaction and state only.
    package var description: String { "QueuedMessage(\(transactionID), \(state.rawValue))" }
    /// No content in reflection.
    package var customMirror: Mirror {
        Mirror(self, children: ["transactionID": transactionID, "state": state.rawValue], displayStyle: .struct)
    }
}

/// One outgoing event to queue (``ChatStore/enqueueMessages(roomID:_:createdAt:)``).
///
/// Its content is user content: every textual form of this value names the transaction only.
package struct QueuedMessageDraft: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The transaction ID, chosen once and reused on every attempt.
    package var transactionID: String
    /// The event type.
    package var eventType: String
    /// The content, raw JSON, or sealed when ``isSealed``.
    package var content: [UInt8]
    /// Whether ``content`` is sealed (a message to an encrypted room).
    package var isSealed: Bool
    /// The file it carries, if any (already copied into the account's folder).
    package var attachment: QueuedMessageAttachment?

    /// Creates a message to queue.
    package init(
        transactionID: String, eventType: String, content: [UInt8], isSealed: Bool = false,
        attachment: QueuedMessageAttachment? = nil
    ) {
        self.transactionID = transactionID
        self.eventType = eventType
        self.content = content
        self.isSealed = isSealed
        self.attachment = attachment
    }

    /// The transaction only.
    package var description: String { "QueuedMessageDraft(\(transactionID))" }
    /// No content in reflection.
    package var customMirror: Mirror { Mirror(self, children: ["transactionID": transactionID], displayStyle: .struct) }
}

extension ChatStore {
    /// Persists a new outgoing event at the end of its room's queue, before any attempt to send
    /// it, and returns the stored row.
    ///
    /// - Throws: `.store(.constraint…)` if `transactionID` is already queued.
    package func enqueueMessage(
        roomID: String, transactionID: String, eventType: String, content: [UInt8], createdAt: Int64,
        attachment: QueuedMessageAttachment? = nil
    ) async throws(ChatStoreError) -> QueuedMessage {
        let message = QueuedMessageDraft(
            transactionID: transactionID, eventType: eventType, content: content, attachment: attachment)
        return try await enqueueMessages(roomID: roomID, [message], createdAt: createdAt)[0]
    }

    /// Persists new outgoing events at the end of their room's queue, in order, in one durable
    /// transaction: all of them or, when it throws, none (the parts of a split message are
    /// queued whole). The rows are on stable storage when this returns
    /// (``/SymorvaStore/SQLiteDatabase/Durability/full``), before any attempt to send them, so a
    /// power loss cannot forget a message that may have left.
    ///
    /// - Throws: `.store(.constraint…)` if a transaction ID is already queued, `.store(.full)`
    ///   when the disk is full; nothing was queued.
    package func enqueueMessages(
        roomID: String, _ messages: [QueuedMessageDraft], createdAt: Int64
    ) async throws(ChatStoreError) -> [QueuedMessage] {
        try await write(durability: .full) { db throws(StoreError) in
            let first =
                try db.queryOne("SELECT MAX(position) + 1 FROM send_queue WHERE room_id = ?", [.text(roomID)]) {
                    $0.optionalInt64(0)
                } ?? nil
            var queued: [QueuedMessage] = []
            for (offset, outgoing) in messages.enumerated() {
                let message = QueuedMessage(
                    roomID: roomID, transactionID: outgoing.transactionID, position: (first ?? 0) + Int64(offset),
                    eventType: outgoing.eventType, content: outgoing.content, contentIsSealed: outgoing.isSealed,
                    encryptedContent: nil, state: .queued, failureReason: nil, sentEventID: nil, attempts: 0,
                    createdAt: createdAt, attachment: outgoing.attachment)
                let file = outgoing.attachment
                try db.execute(
                    "INSERT INTO send_queue(room_id, txn_id, position, event_type, content, content_sealed, state, attempts, created_at, attachment_path, attachment_type, attachment_size) VALUES (?, ?, ?, ?, ?, ?, 'queued', 0, ?, ?, ?, ?)",
                    [
                        .text(roomID), .text(message.transactionID), .integer(message.position),
                        .text(message.eventType), .blob(message.content), .integer(outgoing.isSealed ? 1 : 0),
                        .integer(createdAt), .text(file?.path), .text(file?.contentType), .integer(file?.size),
                    ])
                queued.append(message)
            }
            return queued
        }
    }

    /// The queued events, by room and position; all rooms when `roomID` is `nil`.
    package func queuedMessages(roomID: String? = nil) async throws(ChatStoreError) -> [QueuedMessage] {
        try await read { db throws(StoreError) in
            let columns =
                "room_id, txn_id, position, event_type, content, encrypted_content, state, failure_reason, sent_event_id, attempts, created_at, content_sealed, attachment_path, attachment_type, attachment_size, media_uri, media_uploaded"
            let sql =
                roomID == nil
                ? "SELECT \(columns) FROM send_queue ORDER BY room_id, position"
                : "SELECT \(columns) FROM send_queue WHERE room_id = ? ORDER BY position"
            return try db.queryAll(sql, roomID.map { [.text($0)] } ?? []) { row in
                QueuedMessage(
                    roomID: row.string(0), transactionID: row.string(1), position: row.int64(2),
                    eventType: row.string(3), content: row.blob(4), contentIsSealed: row.int(11) != 0,
                    encryptedContent: row.optionalBlob(5),
                    state: QueuedMessageState(rawValue: row.string(6)) ?? .queued, failureReason: row.optionalString(7),
                    sentEventID: row.optionalString(8), attempts: row.int(9), createdAt: row.int64(10),
                    attachment: row.optionalString(12).map { path in
                        QueuedMessageAttachment(
                            path: path, contentType: row.optionalString(13) ?? "application/octet-stream",
                            size: row.optionalInt64(14) ?? 0, mediaURI: row.optionalString(15),
                            isUploaded: row.int(16) != 0)
                    })
            }
        }
    }

    /// Records a queued event's new state (and, when given, its failure reason, sent event ID,
    /// attempts, encrypted content and sealed content, which replaces the content in the clear).
    /// Returns whether the row exists.
    @discardableResult
    package func updateQueuedMessage(
        transactionID: String, state: QueuedMessageState, failureReason: String? = nil, sentEventID: String? = nil,
        attempts: Int? = nil, encryptedContent: [UInt8]? = nil, sealedContent: [UInt8]? = nil
    ) async throws(ChatStoreError) -> Bool {
        try await write(durability: sealedContent == nil ? .normal : .full) { db throws(StoreError) in
            try db.execute(
                """
                UPDATE send_queue SET state = ?, failure_reason = ?, sent_event_id = COALESCE(?, sent_event_id),
                    attempts = COALESCE(?, attempts), encrypted_content = COALESCE(?, encrypted_content),
                    content = COALESCE(?, content), content_sealed = IIF(? IS NULL, content_sealed, 1)
                WHERE txn_id = ?
                """,
                [
                    .text(state.rawValue), .text(failureReason), .text(sentEventID), .integer(attempts.map(Int64.init)),
                    encryptedContent.map { .blob($0) } ?? .null, sealedContent.map { .blob($0) } ?? .null,
                    sealedContent.map { .blob($0) } ?? .null, .text(transactionID),
                ])
            return db.changes > 0
        }
    }

    /// Records, durably, the `mxc://` URI reserved for a queued attachment and the content that
    /// now names it, before any byte of it is uploaded: a restart uploads to this URI, never to
    /// a new one. Returns whether the row exists.
    @discardableResult
    package func recordMediaReserved(
        transactionID: String, mediaURI: String, content: [UInt8]
    ) async throws(ChatStoreError) -> Bool {
        try await write(durability: .full) { db throws(StoreError) in
            try db.execute(
                "UPDATE send_queue SET media_uri = ?, content = ? WHERE txn_id = ? AND attachment_path IS NOT NULL",
                [.text(mediaURI), .blob(content), .text(transactionID)])
            return db.changes > 0
        }
    }

    /// Records, durably, the content of a queued attachment whose thumbnail the queue made
    /// (`thumbnail_info` and, encrypted, `thumbnail_file` at the end of its `info`; a video's size
    /// and length), sealed as the row's content was, before the item goes on: a restart sends it
    /// with this thumbnail, whose copy was written next to the file's first. Only a row with no
    /// reservation yet changes. Returns whether it did.
    @discardableResult
    package func recordThumbnailMade(transactionID: String, content: [UInt8]) async throws(ChatStoreError) -> Bool {
        try await write(durability: .full) { db throws(StoreError) in
            try db.execute(
                "UPDATE send_queue SET content = ? WHERE txn_id = ? AND attachment_path IS NOT NULL AND media_uri IS NULL AND media_uploaded = 0",
                [.blob(content), .text(transactionID)])
            return db.changes > 0
        }
    }

    /// Records, durably, that a queued attachment's plain copy was encrypted (its room became
    /// encrypted before the upload): the row names the ciphertext at `path` (uploaded as
    /// `contentType`), holds the sealed `content` that carries its `file`, and forgets any
    /// reservation, which may hold the plain bytes. Only a row whose upload is not recorded
    /// changes. Returns whether it did.
    @discardableResult
    package func recordAttachmentEncrypted(
        transactionID: String, sealedContent: [UInt8], path: String, contentType: String
    ) async throws(ChatStoreError) -> Bool {
        try await write(durability: .full) { db throws(StoreError) in
            try db.execute(
                """
                UPDATE send_queue SET content = ?, content_sealed = 1, attachment_path = ?, attachment_type = ?,
                    media_uri = NULL, media_uploaded = 0
                WHERE txn_id = ? AND attachment_path IS NOT NULL AND media_uploaded = 0
                """,
                [.blob(sealedContent), .text(path), .text(contentType), .text(transactionID)])
            return db.changes > 0
        }
    }

    /// Records, durably, that a queued attachment's bytes are on the server: a restart sends
    /// its event without uploading again. `content`, when given, replaces the stored content in
    /// the same write (an encrypted room's, sealed, now naming the hash of the ciphertext taken
    /// while it uploaded): the event is made of it. Returns whether the row exists.
    @discardableResult
    package func recordMediaUploaded(transactionID: String, content: [UInt8]? = nil) async throws(ChatStoreError)
        -> Bool
    {
        try await write(durability: .full) { db throws(StoreError) in
            if let content {
                try db.execute(
                    "UPDATE send_queue SET media_uploaded = 1, content = ? WHERE txn_id = ? AND media_uri IS NOT NULL",
                    [.blob(content), .text(transactionID)])
            } else {
                try db.execute(
                    "UPDATE send_queue SET media_uploaded = 1 WHERE txn_id = ? AND media_uri IS NOT NULL",
                    [.text(transactionID)])
            }
            return db.changes > 0
        }
    }

    /// Deletes a queued event (cancelled, or sent and echoed). Returns whether it existed.
    @discardableResult
    package func removeQueuedMessage(transactionID: String) async throws(ChatStoreError) -> Bool {
        try await write { db throws(StoreError) in
            try db.execute("DELETE FROM send_queue WHERE txn_id = ?", [.text(transactionID)])
            return db.changes > 0
        }
    }
}
