import SymorvaRuntime

// The values of the send queue: items, their lifecycle, the content they carry and why a send
// fails. The machine that moves them is `SendQueueMachine`.

/// The content of one outgoing event: its type and its JSON content, already encoded.
///
/// The machine never looks inside; it only hands the content to the store, the encryptor and
/// the transport. A message body must never reach a log, so every textual form of this value
/// shows the event type only.
package struct MessageContent: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The Matrix event type: `m.room.message`, `m.reaction`, `m.room.encrypted`.
    package var eventType: String
    /// The event content as JSON text. Private: never log it.
    package var json: String

    /// Creates content.
    package init(eventType: String, json: String) {
        self.eventType = eventType
        self.json = json
    }

    package var description: String { "MessageContent(\(eventType), <private>)" }
    package var debugDescription: String { description }
    package var customMirror: Mirror { Mirror(self, children: ["eventType": eventType], displayStyle: .struct) }
}

/// Where one queued event is in its life.
package enum SendItemStatus: Sendable, Hashable, CaseNamed {
    /// Waiting for its turn, for its first write to the store, or for a retry.
    case queued
    /// An attachment's thumbnail is being made from its copy (and a video's size and length
    /// read), after the item was stored and off the caller's `send()`, before anything of it
    /// goes to the server. Cancellable: nothing of it has left.
    case thumbnailing
    /// An attachment's `mxc://` URI is being reserved (`POST /media/v1/create`), before its upload.
    case reservingMedia
    /// An attachment's bytes are being uploaded to its reserved URI. Cancellable: the upload
    /// is aborted, and no event names the media yet.
    case uploading
    /// Being encrypted for the room (encrypted rooms only), before its first PUT.
    case encrypting
    /// Its PUT is in flight. It cannot be cancelled any more: the server may already have it.
    case sending
    /// The server accepted it as `eventID`. Kept until the remote echo arrives through sync, so
    /// the local echo does not flicker.
    case sent(EventID)
    /// The server rejected it for good. It holds every later item until it is resent or cancelled.
    case failed(SendFailureReason)
    /// Cancelled by the user; removed once the store has deleted it.
    case cancelled

    /// Whether the item still takes part in the queue's order (not sent, not cancelled).
    package var isActive: Bool {
        switch self {
        case .queued, .thumbnailing, .reservingMedia, .uploading, .encrypting, .sending, .failed: true
        case .sent, .cancelled: false
        }
    }

    /// Whether a request for the item is running now.
    package var isInFlight: Bool {
        switch self {
        case .thumbnailing, .reservingMedia, .uploading, .encrypting, .sending: true
        case .queued, .sent, .failed, .cancelled: false
        }
    }
}

/// One outgoing event of a room's queue.
package struct SendQueueItem: Sendable, Hashable {
    /// Chosen once when the event is enqueued, stored, and reused for every attempt.
    package let transactionID: TransactionID
    /// What the user sent (shown as the local echo).
    package var content: MessageContent
    /// The `m.room.encrypted` content, once encrypted. Reused on retries.
    package var encryptedContent: MessageContent?
    /// Where the item is in its life.
    package var status: SendItemStatus
    /// Whether the store has the item. No attempt starts before it does.
    package var isPersisted: Bool
    /// Transient failures so far: the attempt number of the next retry.
    package var failedAttempts: Int
    /// The file the event carries (an image, a file, audio, video), uploaded before the event
    /// is sent; `nil` for text.
    package var attachment: QueuedAttachment?

    /// Creates an item.
    package init(
        transactionID: TransactionID, content: MessageContent, encryptedContent: MessageContent? = nil,
        status: SendItemStatus = .queued, isPersisted: Bool = false, failedAttempts: Int = 0,
        attachment: QueuedAttachment? = nil
    ) {
        self.transactionID = transactionID
        self.content = content
        self.encryptedContent = encryptedContent
        self.status = status
        self.isPersisted = isPersisted
        self.failedAttempts = failedAttempts
        self.attachment = attachment
    }
}

/// The file of a queued attachment message: copied into the account's folder when it was
/// queued, then uploaded in two persisted steps so that a restart never uploads it twice:
/// its `mxc://` URI is reserved and stored (with the event content naming it) before the first
/// byte goes up, and its upload is recorded before the event is sent. An upload to a URI that
/// already has its bytes is refused by the server, which proves the earlier upload finished.
///
/// Its path is where the user's file lies: the descriptions show the size only.
package struct QueuedAttachment: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The copy in the account's folder; removed once the event is sent or cancelled.
    package var localPath: String
    /// The file's MIME type, sent as the upload's `Content-Type`.
    package var contentType: String
    /// The file's size in bytes.
    package var size: Int64
    /// The reserved URI, once stored; the content names it from then on.
    package var mediaURI: MediaURI?
    /// Whether the bytes are on the server (stored).
    package var isUploaded: Bool
    /// Whether the copy is the file encrypted for an encrypted room (the content carries its
    /// `file`). A plain copy is never uploaded once the room is encrypted: it is encrypted first.
    package var isEncrypted: Bool
    /// The image's thumbnail, uploaded before the file to a URI reserved with the file's.
    package var thumbnail: QueuedThumbnail?
    /// Whether the thumbnail (an image's, a video's first frame) is still to be made from the
    /// copy: the queue's first step for the item, so that `send()` returns once the copy and
    /// the row are stored. Never set once the URI is reserved.
    package var needsThumbnail: Bool

    /// An attachment.
    package init(
        localPath: String, contentType: String, size: Int64, mediaURI: MediaURI? = nil, isUploaded: Bool = false,
        isEncrypted: Bool = false, thumbnail: QueuedThumbnail? = nil, needsThumbnail: Bool = false
    ) {
        self.localPath = localPath
        self.contentType = contentType
        self.size = size
        self.mediaURI = mediaURI
        self.isUploaded = isUploaded
        self.isEncrypted = isEncrypted
        self.thumbnail = thumbnail
        self.needsThumbnail = needsThumbnail
    }

    /// The size and the upload's progress, never the path or the URI.
    package var description: String {
        let step = isUploaded ? "uploaded" : mediaURI == nil ? "new" : "reserved"
        let thumbnailNote = thumbnail != nil ? ", thumbnail" : needsThumbnail ? ", thumbnail to make" : ""
        return "QueuedAttachment(\(size) bytes, \(step)\(isEncrypted ? ", encrypted" : "")\(thumbnailNote))"
    }
    /// The same as the description.
    package var customMirror: Mirror { Mirror(self, children: ["attachment": description], displayStyle: .struct) }
}

/// The copy of an attachment's thumbnail (next to the file's copy, encrypted in an encrypted
/// room) and the URI reserved for it with the file's. Its upload goes before the file's, to that
/// URI, so a restart never uploads it twice either (the server refuses a second upload).
package struct QueuedThumbnail: Sendable, Hashable {
    /// The copy in the account's folder.
    package var localPath: String
    /// The upload's `Content-Type`.
    package var contentType: String
    /// The reserved URI, once stored.
    package var uri: MediaURI?

    /// A thumbnail copy.
    package init(localPath: String, contentType: String, uri: MediaURI? = nil) {
        self.localPath = localPath
        self.contentType = contentType
        self.uri = uri
    }
}

/// A reserved `mxc://` URI and the event content that now names it
/// (``SendQueueMachine/Event/mediaReserved(_:_:)``).
package struct MediaReservation: Sendable, Hashable {
    /// The reserved URI.
    package var uri: MediaURI
    /// The event's content with its `url` (stored with the URI).
    package var content: MessageContent
    /// The URI reserved for the thumbnail, when the attachment has one (the content names it).
    package var thumbnailURI: MediaURI?

    /// A reservation.
    package init(uri: MediaURI, content: MessageContent, thumbnailURI: MediaURI? = nil) {
        self.uri = uri
        self.content = content
        self.thumbnailURI = thumbnailURI
    }
}

/// What the thumbnail step made of a queued attachment
/// (``SendQueueMachine/Event/thumbnailMade(_:_:)``), stored before it is answered: the content
/// with `thumbnail_info` (and, encrypted, `thumbnail_file`) at the end of its `info`, and a
/// video's `w`, `h` and `duration` read from the file; `thumbnail` the copy of the thumbnail next
/// to the file's. When no thumbnail could be made the content is unchanged and `thumbnail` `nil`.
package struct ThumbnailedAttachment: Sendable, Hashable {
    /// The content the item is sent with from now on.
    package var content: MessageContent
    /// The thumbnail's copy, to reserve and upload with the file; `nil` for none.
    package var thumbnail: QueuedThumbnail?

    /// A result of the thumbnail step.
    package init(content: MessageContent, thumbnail: QueuedThumbnail?) {
        self.content = content
        self.thumbnail = thumbnail
    }
}

/// A plain attachment's copy encrypted for a room that became encrypted after it was queued
/// (``SendQueueMachine/Event/attachmentEncrypted(_:_:)``): the content now carries `file` and
/// no `url`, and the attachment names the ciphertext, with no reservation yet.
package struct EncryptedAttachmentCopy: Sendable, Hashable {
    /// The content with `file` (key, IV, hash) and without `url` (stored sealed).
    package var content: MessageContent
    /// The ciphertext copy: encrypted, not reserved, not uploaded.
    package var attachment: QueuedAttachment

    /// A copy.
    package init(content: MessageContent, attachment: QueuedAttachment) {
        self.content = content
        self.attachment = attachment
    }
}

/// Why the server (or the encryptor) refused an event for good. Persisted with the item, so a
/// failed message still says why after a restart.
public enum SendFailureReason: Sendable, Hashable {
    /// `M_FORBIDDEN`: the user may not post this here (power levels, banned, left the room).
    case forbidden
    /// `M_TOO_LARGE` (or HTTP 413): the event exceeds the server's size limit.
    case tooLarge
    /// Another 4xx answer, kept with its status and error code.
    case rejected(status: Int, errorCode: String)
    /// The event could not be encrypted for the room.
    case encryptionFailed
    /// The event could not be written to the store (the disk is full, …), so it was never
    /// sent; sending it again once the store recovers is safe.
    case notStored(StoreFailure)

    /// The stable text the store keeps for this reason.
    public var storageCode: String {
        switch self {
        case .forbidden: "forbidden"
        case .tooLarge: "too_large"
        case .rejected(let status, let errorCode): "rejected:\(status):\(errorCode)"
        case .encryptionFailed: "encryption_failed"
        case .notStored(let failure): "not_stored:\(failure)"
        }
    }

    /// Reads a reason the store kept; `nil` for text this version does not know.
    public init?(storageCode: String) {
        switch storageCode {
        case "forbidden": self = .forbidden
        case "too_large": self = .tooLarge
        case "encryption_failed": self = .encryptionFailed
        case "not_stored:full": self = .notStored(.full)
        case "not_stored:busy": self = .notStored(.busy)
        default:
            let fields = storageCode.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3, fields[0] == "rejected", let status = Int(fields[1]) else { return nil }
            self = .rejected(status: status, errorCode: String(fields[2]))
        }
    }
}

/// Why one attempt to encrypt or send an event failed, as the interpreter classifies it.
package enum SendError: Error, Sendable, Hashable, CaseNamed {
    /// No usable response (offline, reset, timeout). The queue pauses and retries with backoff.
    case network
    /// A 5xx answer. The queue pauses and retries with backoff.
    case server(status: Int)
    /// 429 `M_LIMIT_EXCEEDED`: wait `retryAfter` when the server said, else the backoff.
    case rateLimited(retryAfter: Duration?)
    /// `M_UNKNOWN_TOKEN`: the access token expired. Not a failure of the item: the session
    /// refreshes the token and the same PUT is tried again.
    case unknownToken
    /// A refusal that retrying cannot fix.
    case permanent(SendFailureReason)
}

/// What the whole room queue is doing: the chart's states.
package enum SendQueueStatus: Sendable, Hashable, CaseNameListing {
    /// Nothing in flight: the queue is empty, or its head waits for its first store write.
    case idle
    /// The head is being encrypted or its PUT is in flight.
    case sending
    /// The head failed transiently; retry number `attempt` runs when the retry timer fires.
    case waitingRetry(attempt: Int)
    /// The head met `M_UNKNOWN_TOKEN`; the queue waits for the session's refreshed token.
    case waitingToken
    /// The head failed for good; later items wait until it is resent or cancelled.
    case blocked(TransactionID)

    package static let allCaseNames = ["idle", "sending", "waitingRetry", "waitingToken", "blocked"]

    /// The case name without reflection: the queue's state is named on every transition.
    package var caseNameLiteral: StaticString? {
        switch self {
        case .idle: "idle"
        case .sending: "sending"
        case .waitingRetry: "waitingRetry"
        case .waitingToken: "waitingToken"
        case .blocked: "blocked"
        }
    }
}

/// The send queue's timers.
package enum SendQueueTimer: Sendable, Hashable, CaseNamed {
    /// The backoff delay of a transient failure is over.
    case retry
}
