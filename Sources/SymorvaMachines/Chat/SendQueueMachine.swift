import SymorvaRuntime

/// The outgoing events of one room: a persisted FIFO where only the head is ever in flight.
///
/// Rules (see `docs/chat.md`):
/// - An item is written to the store before its first attempt: ``Effect/persist(_:)`` and then
///   ``Event/persisted(_:)`` before any ``Effect/sendEvent(_:_:)``.
/// - The transaction ID comes in with ``Event/enqueued(_:_:)``, is stored, and is reused on
///   every retry, so the PUT is idempotent.
/// - Transient errors (network, 5xx) pause the queue and retry the head with backoff; a rate
///   limit waits for `Retry-After`; `M_UNKNOWN_TOKEN` asks the session for a refresh and waits.
/// - A permanent error marks the head failed with a typed, persisted reason and holds the items
///   behind it, in order, until it is resent or cancelled.
/// - The local echo is reconciled with the remote echo by transaction ID, whichever of the PUT
///   response and the sync echo arrives first; ``Effect/recordSent(_:_:)`` happens once.
///
/// The state is the ordered item list plus the queue's ``SendQueueStatus``, whose case names
/// are the chart's state ids (`StateCharts/SendQueue.scxml`).
package struct SendQueueMachine: ChartedMachine {
    package static let name = "SendQueue"

    /// The key of the head's running request (encryption or PUT).
    package static let requestKey: EffectKey = "sendQueue.request"
    /// The key of the retry timer. A named timer, not a state timeout: the state changes with
    /// every enqueued item, and that must not cancel the retry.
    package static let retryKey: EffectKey = "sendQueue.retry"

    /// Delays between transient failures.
    package var backoff: RetryBackoff

    /// Creates the machine.
    package init(backoff: RetryBackoff = .sendQueue) {
        self.backoff = backoff
    }

    /// A room's queue.
    package struct State: Sendable, Equatable, CaseNameListing {
        /// Items in enqueue order, including sent items awaiting their remote echo and cancelled
        /// items awaiting their deletion from the store.
        package var items: [SendQueueItem]
        /// What the queue is doing; its case name is the chart state.
        package var status: SendQueueStatus
        /// Whether events must be encrypted before they are sent (`m.room.encryption` is set).
        package var roomIsEncrypted: Bool
        /// The jitter stream for retry delays, seeded by whoever creates the queue.
        package var jitter: JitterSource

        /// An empty, idle queue.
        package init(
            items: [SendQueueItem] = [], status: SendQueueStatus = .idle, roomIsEncrypted: Bool,
            jitter: JitterSource
        ) {
            self.items = items
            self.status = status
            self.roomIsEncrypted = roomIsEncrypted
            self.jitter = jitter
        }

        /// The queue status's case name: the chart state.
        package var caseNameLiteral: StaticString? { status.caseNameLiteral }

        package static var allCaseNames: [String] { SendQueueStatus.allCaseNames }

        /// The index of the first item that still takes part in the order.
        package var headIndex: Int? { items.firstIndex { $0.status.isActive } }

        /// The index of the item with this transaction ID.
        package func index(of transactionID: TransactionID) -> Int? {
            items.firstIndex { $0.transactionID == transactionID }
        }
    }

    /// What happened to the queue.
    package enum Event: Sendable, Equatable, CaseNameListing {
        /// The items the store kept from an earlier run (all persisted), sent first by whoever
        /// creates the queue. Accepted only while nothing is in flight.
        case restored([SendQueueItem])
        /// The user sent something; the caller chose its transaction ID.
        case enqueued(TransactionID, MessageContent)
        /// The user sent a file (its copy already in the account's folder): uploaded first,
        /// then the event, in its place in the queue.
        case attachmentEnqueued(TransactionID, MessageContent, QueuedAttachment)
        /// The store wrote the item.
        case persisted(TransactionID)
        /// The store could not write an item it did not hold yet (the disk is full, …): the
        /// item is dropped, never sent, and its receipt fails with
        /// ``SendFailureReason/notStored(_:)``.
        case persistFailed(TransactionID, StoreFailure)
        /// The head's thumbnail was made from its copy and stored with the content naming it
        /// (or none could be made: the content is unchanged), or storing it failed.
        case thumbnailMade(TransactionID, Result<ThumbnailedAttachment, SendError>)
        /// The head's attachment has a reserved URI, stored with the content naming it (or the
        /// reservation failed).
        case mediaReserved(TransactionID, Result<MediaReservation, SendError>)
        /// The head's attachment is on the server, and that is stored with the content the event
        /// is made of (an encrypted file's now names the hash of its ciphertext, taken while it
        /// uploaded), or the upload failed.
        case mediaUploaded(TransactionID, Result<MessageContent, SendError>)
        /// The head was encrypted (or could not be).
        case encrypted(TransactionID, Result<MessageContent, SendError>)
        /// The head's plain attachment copy was encrypted (the room became encrypted after it
        /// was queued) and stored with its new content; its URI is reserved next.
        case attachmentEncrypted(TransactionID, Result<EncryptedAttachmentCopy, SendError>)
        /// The head's PUT finished.
        case sendResponse(TransactionID, Result<EventID, SendError>)
        /// Sync delivered an event of ours carrying this `unsigned.transaction_id`.
        case remoteEchoReceived(TransactionID, EventID)
        /// A timer of this queue fired.
        case timerFired(SendQueueTimer)
        /// Connectivity changed: a pending retry should run now.
        case networkChanged
        /// The session obtained a fresh access token.
        case tokenRefreshed
        /// The user asked to send a failed item again.
        case resendRequested(TransactionID)
        /// The user asked to drop an item that is not in flight.
        case cancelRequested(TransactionID)
        /// The store deleted a cancelled item.
        case discarded(TransactionID)
        /// The room turned on end-to-end encryption (it can never be turned off).
        case encryptionEnabled

        package static let allCaseNames = [
            "restored", "enqueued", "attachmentEnqueued", "persisted", "persistFailed", "thumbnailMade",
            "mediaReserved",
            "mediaUploaded", "encrypted", "attachmentEncrypted", "sendResponse", "remoteEchoReceived",
            "timerFired",
            "networkChanged", "tokenRefreshed", "resendRequested", "cancelRequested", "discarded",
            "encryptionEnabled",
        ]

        /// The case name, without data (never the content).
        package var caseNameLiteral: StaticString? {
            switch self {
            case .restored: "restored"
            case .enqueued: "enqueued"
            case .attachmentEnqueued: "attachmentEnqueued"
            case .persisted: "persisted"
            case .persistFailed: "persistFailed"
            case .thumbnailMade: "thumbnailMade"
            case .mediaReserved: "mediaReserved"
            case .mediaUploaded: "mediaUploaded"
            case .encrypted: "encrypted"
            case .attachmentEncrypted: "attachmentEncrypted"
            case .sendResponse: "sendResponse"
            case .remoteEchoReceived: "remoteEchoReceived"
            case .timerFired: "timerFired"
            case .networkChanged: "networkChanged"
            case .tokenRefreshed: "tokenRefreshed"
            case .resendRequested: "resendRequested"
            case .cancelRequested: "cancelRequested"
            case .discarded: "discarded"
            case .encryptionEnabled: "encryptionEnabled"
            }
        }
    }

    /// What the interpreter must do.
    package enum Effect: MachineEffect, Equatable {
        /// Write the item to the store; answer ``Event/persisted(_:)``.
        case persist(SendQueueItem)
        /// Make the head's thumbnail from its copy (decrypted in memory when the copy is
        /// ciphertext), write it next to the copy, store the content naming it, and answer
        /// ``Event/thumbnailMade(_:_:)``. Keyed by ``SendQueueMachine/requestKey``.
        case makeThumbnail(TransactionID, MessageContent, QueuedAttachment)
        /// Reserve an `mxc://` URI for the head's attachment, store it with the content naming
        /// it, and answer ``Event/mediaReserved(_:_:)``. Keyed by ``SendQueueMachine/requestKey``.
        case reserveMedia(TransactionID, MessageContent)
        /// Upload the attachment's bytes to its reserved URI, store that they are up with the
        /// content (an encrypted file's given the SHA-256 of its ciphertext, hashed as it
        /// uploads), and answer ``Event/mediaUploaded(_:_:)`` with that content (a URI that
        /// already has its bytes counts as uploaded). Keyed by ``SendQueueMachine/requestKey``.
        case uploadMedia(TransactionID, MessageContent, QueuedAttachment)
        /// Encrypt the content for the room; answer ``Event/encrypted(_:_:)``. Keyed by
        /// ``SendQueueMachine/requestKey``.
        case encrypt(TransactionID, MessageContent)
        /// Encrypt the head's plain attachment copy (the room is encrypted now, the upload has
        /// not started): the ciphertext replaces the copy, the content gets `file` instead of
        /// `url`, both stored before answering ``Event/attachmentEncrypted(_:_:)``. Keyed by
        /// ``SendQueueMachine/requestKey``.
        case encryptAttachment(TransactionID, MessageContent, QueuedAttachment)
        /// `PUT /rooms/{roomId}/send/{eventType}/{txnId}`; answer ``Event/sendResponse(_:_:)``.
        /// Keyed by ``SendQueueMachine/requestKey``.
        case sendEvent(TransactionID, MessageContent)
        /// Fire ``Event/timerFired(_:)`` with ``SendQueueTimer/retry`` after `after`. Keyed by
        /// ``SendQueueMachine/retryKey``.
        case scheduleRetry(after: Duration)
        /// Ask the session to refresh the access token; it answers ``Event/tokenRefreshed``.
        case requestTokenRefresh
        /// Store the failure reason with the item.
        case recordFailure(TransactionID, SendFailureReason)
        /// Clear the stored failure: the item is queued again.
        case clearFailure(TransactionID)
        /// Record that the server has the event: it is never sent again, and the receipt resolves.
        case recordSent(TransactionID, EventID)
        /// Delete the cancelled item from the store; answer ``Event/discarded(_:)``.
        case discard(TransactionID)
        /// Cancel the effect running under this key.
        case cancel(EffectKey)

        package var caseNameLiteral: StaticString? {
            switch self {
            case .persist: "persist"
            case .makeThumbnail: "makeThumbnail"
            case .reserveMedia: "reserveMedia"
            case .uploadMedia: "uploadMedia"
            case .encrypt: "encrypt"
            case .encryptAttachment: "encryptAttachment"
            case .sendEvent: "sendEvent"
            case .scheduleRetry: "scheduleRetry"
            case .requestTokenRefresh: "requestTokenRefresh"
            case .recordFailure: "recordFailure"
            case .clearFailure: "clearFailure"
            case .recordSent: "recordSent"
            case .discard: "discard"
            case .cancel: "cancel"
            }
        }

        package var directive: EffectDirective {
            switch self {
            case .makeThumbnail, .reserveMedia, .uploadMedia, .encrypt, .encryptAttachment, .sendEvent:
                .keyed(SendQueueMachine.requestKey)
            case .scheduleRetry(let after): .timer(SendQueueMachine.retryKey, .after(after))
            case .cancel(let key): .cancel(key)
            case .persist, .requestTokenRefresh, .recordFailure, .clearFailure, .recordSent, .discard: .perform
            }
        }
    }

    /// Every queue status case name: the state ids of `StateCharts/SendQueue.scxml`.
    package static var stateCaseNames: [String] { State.allCaseNames }

    /// Every ``Event`` case name: the event names of `StateCharts/SendQueue.scxml`.
    package static var eventCaseNames: [String] { Event.allCaseNames }

    /// The event of the retry timer, which the host performs.
    package func event(firing timer: Effect) -> Event? {
        if case .scheduleRetry = timer { return .timerFired(.retry) }
        return nil
    }

    package func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        var next = state
        let effects: [Effect]?
        switch event {
        case .restored(let items): effects = restore(items, in: &next)
        case .enqueued(let transactionID, let content):
            effects = enqueue(transactionID, content, attachment: nil, in: &next)
        case .attachmentEnqueued(let transactionID, let content, let attachment):
            effects = enqueue(transactionID, content, attachment: attachment, in: &next)
        case .persisted(let transactionID): effects = persisted(transactionID, in: &next)
        case .persistFailed(let transactionID, _): effects = persistFailed(transactionID, in: &next)
        case .thumbnailMade(let transactionID, let result): effects = thumbnailed(transactionID, result, in: &next)
        case .mediaReserved(let transactionID, let result): effects = reserved(transactionID, result, in: &next)
        case .mediaUploaded(let transactionID, let result): effects = uploaded(transactionID, result, in: &next)
        case .encrypted(let transactionID, let result): effects = encrypted(transactionID, result, in: &next)
        case .attachmentEncrypted(let transactionID, let result):
            effects = attachmentEncrypted(transactionID, result, in: &next)
        case .sendResponse(let transactionID, let result): effects = responded(transactionID, result, in: &next)
        case .remoteEchoReceived(let transactionID, let eventID): effects = echoed(transactionID, eventID, in: &next)
        case .timerFired(.retry): effects = retryNow(in: &next, cancellingTimer: false)
        case .networkChanged: effects = retryNow(in: &next, cancellingTimer: true)
        case .tokenRefreshed: effects = tokenRefreshed(in: &next)
        case .resendRequested(let transactionID): effects = resend(transactionID, in: &next)
        case .cancelRequested(let transactionID): effects = cancel(transactionID, in: &next)
        case .discarded(let transactionID): effects = discarded(transactionID, in: &next)
        case .encryptionEnabled: effects = enableEncryption(in: &next)
        }
        guard let effects else { return .ignored }
        return next == state ? .stay(effects: effects) : .move(to: next, effects: effects)
    }
}
