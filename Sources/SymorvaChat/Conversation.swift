import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Where a conversation's timeline stands, for a spinner at the top and "beginning of the
/// conversation".
public struct TimelinePagination: Sendable, Hashable {
    /// Whether anyone observes the timeline (only then do pages load and live updates arrive).
    public var isObserved: Bool
    /// Whether a page is loading.
    public var isPaginating: Bool
    /// Whether the timeline reaches the room's creation: nothing older exists.
    public var hasReachedStart: Bool
    /// Why the last page failed, until a page loads. Not retried automatically.
    public var lastError: TimelineError?

    /// The pagination of a timeline machine state.
    init(_ state: TimelineMachine.State) {
        switch state {
        case .idle:
            self.init(isObserved: false, isPaginating: false, hasReachedStart: false, lastError: nil)
        case .live(let window, _), .gap(let window, _):
            self.init(isObserved: true, isPaginating: false, hasReachedStart: false, lastError: window.lastError)
        case .paginatingBackwards(let window, _, _):
            self.init(isObserved: true, isPaginating: true, hasReachedStart: false, lastError: window.lastError)
        case .reachedStart(let window):
            self.init(isObserved: true, isPaginating: false, hasReachedStart: true, lastError: window.lastError)
        }
    }

    init(isObserved: Bool, isPaginating: Bool, hasReachedStart: Bool, lastError: TimelineError?) {
        self.isObserved = isObserved
        self.isPaginating = isPaginating
        self.hasReachedStart = hasReachedStart
        self.lastError = lastError
    }
}

/// One room of the account: its timeline, its send queue and what the member can do in it.
///
/// A conversation belongs to the account it was opened for, for good: once that account is
/// switched away from or signed out, its operations throw ``ChatError/accountEnded`` instead of
/// acting for whichever account is active now.
///
/// Work follows observers: the timeline's first observer starts live updates and loads the
/// newest page (store first); when the last one leaves, live updates and paging stop. The send
/// queue runs whether or not anyone looks: a message sent is delivered.
public final class Conversation: Sendable {
    /// The room.
    public let id: RoomID
    /// The rows of the loaded part of the timeline, oldest first, with our messages on their
    /// way at the end. Observing it is what makes the timeline live.
    public var timeline: ObservableValue<[TimelineItem]> { timelinePublisher.observable }
    /// Paging state: loading, reached the start, last error.
    public var pagination: ObservableValue<TimelinePagination> { paginationPublisher.observable }
    /// Our messages the server has not accepted yet, in send order — those an earlier run left
    /// queued included. Empty once every message has reached the server; a `.failed` entry
    /// holds the ones after it until it is resent or cancelled.
    public var outbox: ObservableValue<[OutboxEntry]> { outboxPublisher.observable }
    /// Whether the room's messages are end-to-end encrypted: `.unknown` until the room's state
    /// has synced (or the server was asked), then `.notEncrypted` or `.encrypted`, which is
    /// final (a room never goes back to plaintext). Encryption is automatic: ``send(_:replyingTo:)``
    /// encrypts on this device in an encrypted room.
    public var encryption: ObservableValue<RoomEncryptionState> { encryptionPublisher.observable }
    /// How far the uploads of our attachments have come, by transaction: an entry appears when
    /// an upload starts and goes when its message is sent or cancelled.
    public var uploads: ObservableValue<[TransactionID: MediaTransferProgress]> { uploadBoard.publisher.observable }

    /// The other members typing now (`m.typing`, updated with each sync that changes it).
    public var typing: ObservableValue<[UserID]> { typingPublisher.observable }

    let client: AccountChat
    let typingPublisher = ObservableValue<[UserID]>.Publisher([])
    /// When the room was last told the member is typing (``AccountChat/clock``), `nil` when it
    /// was told they stopped or never told; `typingLock` keeps the notices in call order.
    let typingSentAt = Lock<Duration?>(nil)
    let typingLock = AsyncLock()
    let timelineHost: MachineHost<TimelineMachine>
    let sendQueue: MachineHost<SendQueueMachine>

    private let timelinePublisher: ObservableValue<[TimelineItem]>.Publisher
    private let paginationPublisher = ObservableValue<TimelinePagination>.Publisher(TimelinePagination(.idle))
    private let outboxPublisher = ObservableValue<[OutboxEntry]>.Publisher([])
    let encryptionPublisher = ObservableValue<RoomEncryptionState>.Publisher(.unknown)
    let uploadBoard = UploadProgressBoard()
    /// One server question at a time about the room's encryption.
    let encryptionProbe = AsyncLock()
    let pendingReactions = Lock(PendingReactions())
    /// The open threads (``thread(_:)``) and the thread list's pagination.
    let threadRegistry = Lock(ThreadRegistry())
    private let sendLock = AsyncLock()
    /// Keeps one react or unreact at a time, so that an unreact finds the event of a reaction
    /// whose request was still on its way when it was called.
    let reactionLock = AsyncLock()
    private let subscriptions = Lock<[@Sendable () -> Void]>([])
    private let rebuilder: Lock<SerialRunner?> = Lock(nil)

    /// Creates the conversation; `timelineInterpreter` lets tests wrap the timeline's
    /// interpreter (to run its effects in an order of their choosing).
    init(
        roomID: RoomID, client: AccountChat,
        timelineInterpreter: (TimelineInterpreter) -> any EffectInterpreter<TimelineMachine> = { $0 }
    ) {
        self.id = roomID
        self.client = client
        let uploadBoard = self.uploadBoard
        self.timelineHost = MachineHost(
            machine: TimelineMachine(initialPageSize: client.options.initialPageSize), initial: .idle,
            interpreter: timelineInterpreter(TimelineInterpreter(roomID: roomID, client: client)),
            instance: roomID.rawValue, scope: client.scope, clock: client.clock, tracer: client.tracer)
        self.sendQueue = MachineHost(
            machine: SendQueueMachine(backoff: client.options.sendBackoff),
            initial: SendQueueMachine.State(
                roomIsEncrypted: false, jitter: JitterSource(seed: UInt64.random(in: 0...UInt64.max))),
            interpreter: SendQueueInterpreter(roomID: roomID, client: client, uploads: uploadBoard),
            instance: roomID.rawValue,
            scope: client.scope, clock: client.clock, tracer: client.tracer)
        let host = timelineHost
        // An observed timeline is an open conversation: sliding sync subscribes to its room.
        self.timelinePublisher = ObservableValue<[TimelineItem]>.Publisher(
            [],
            hooks: .init(
                firstObserver: { [weak client] in
                    host.post(.observed)
                    client?.conversationOpened(roomID)
                },
                lastObserverGone: { [weak client] in
                    host.post(.unobserved)
                    client?.conversationClosed(roomID)
                }))
        let runner = SerialRunner { [weak self] in await self?.rebuild() }
        rebuilder.withLock { $0 = runner }
        let pagination = paginationPublisher
        let onTimeline = timelineHost.states.subscribe { state in
            let next = TimelinePagination(state)
            if pagination.value != next { pagination.publish(next) }
            runner.request()
        }
        let outbox = outboxPublisher
        let onQueue = sendQueue.states.subscribe { state in
            let entries = OutboxEntry.entries(of: state.items)
            if outbox.value != entries { outbox.publish(entries) }
            runner.request()
        }
        subscriptions.withLock { $0 = [onTimeline, onQueue] }
    }

    /// Restores the room's persisted queue (an earlier run's unsent messages go first).
    func restoreQueue() async throws(ChatError) {
        let rows: [QueuedMessage]
        do { rows = try await client.store.queuedMessages(roomID: id.rawValue) } catch { throw .store(error) }
        await refreshEncryption()
        guard !rows.isEmpty else { return }
        let encryptor = client.encryptor
        let thumbnailing = client.thumbnailer != nil
        let items = rows.map { Self.item(from: $0, opening: encryptor, thumbnailing: thumbnailing) }
        // A copy encrypted because its room became encrypted: the plain copy it replaced goes,
        // should the app have stopped between the row's write and the plain copy's removal.
        for case let attachment? in items.map(\.attachment) where attachment.isEncrypted {
            let plain = String(attachment.localPath.dropLast(".enc".count))
            if attachment.localPath == AttachmentFiles.encryptedPath(of: plain) {
                AttachmentFiles.removeFile(plain)
                AttachmentFiles.removeFile(OutgoingAttachment.thumbnailPath(of: plain))
            }
        }
        await sendQueue.send(.restored(items))
    }

    /// The queue item for a stored row; a sealed content is opened with `encryptor`. A content
    /// that cannot be opened leaves the item failed (`encryptionFailed`) unless its ciphertext
    /// is stored, which can still be sent; its local echo then has no text.
    ///
    /// With `thumbnailing` (the account has a thumbnailer), an image or a video with no thumbnail
    /// and no reservation yet gets its thumbnail step (again: a stop before its row was written).
    static func item(
        from row: QueuedMessage, opening encryptor: (any RoomEncryptor)?, thumbnailing: Bool = false
    ) -> SendQueueItem {
        var content = row.content
        var unreadable = false
        if row.contentIsSealed {
            if let opened = encryptor?.open(row.content, transactionID: TransactionID(row.transactionID)) {
                content = opened
            } else {
                content = Array("{}".utf8)
                unreadable = row.encryptedContent == nil
            }
        }
        var status: SendItemStatus
        switch row.state {
        case .queued, .encrypting, .sending: status = .queued
        case .sent: status = row.sentEventID.map { .sent(EventID($0)) } ?? .queued
        case .failed:
            status = .failed(row.failureReason.flatMap(SendFailureReason.init(storageCode:)) ?? .forbidden)
        case .cancelled: status = .cancelled
        }
        if unreadable, case .queued = status { status = .failed(.encryptionFailed) }
        let encrypted = row.encryptedContent.map {
            MessageContent(eventType: "m.room.encrypted", json: String(decoding: $0, as: UTF8.self))
        }
        let openedContent = MessageContent(eventType: row.eventType, json: String(decoding: content, as: UTF8.self))
        let attachment = row.attachment.map { file in
            QueuedAttachment(
                localPath: file.path, contentType: file.contentType, size: file.size,
                mediaURI: file.mediaURI.flatMap(MediaURI.init), isUploaded: file.isUploaded,
                isEncrypted: row.contentIsSealed && OutgoingAttachment.encryptedFile(in: openedContent) != nil,
                thumbnail: QueuedThumbnailMembers.read(openedContent).map { thumbnail in
                    QueuedThumbnail(
                        localPath: OutgoingAttachment.thumbnailPath(of: file.path),
                        contentType: thumbnail.members.encryptedFile == nil
                            ? thumbnail.members.contentType : "application/octet-stream",
                        uri: thumbnail.members.reservedURI)
                },
                needsThumbnail: thumbnailing && file.mediaURI == nil && !file.isUploaded && !unreadable
                    && OutgoingAttachment.queuedInfo(in: openedContent)?.wantsThumbnail == true)
        }
        return SendQueueItem(
            transactionID: TransactionID(row.transactionID),
            content: openedContent, encryptedContent: encrypted, status: status, isPersisted: true,
            failedAttempts: row.attempts,
            attachment: attachment)
    }

    func shutDown() async {
        for unsubscribe in subscriptions.withLock({ $0 }) { unsubscribe() }
        await shutDownThreads()
        await timelineHost.stop()
        await sendQueue.stop()
    }

    // MARK: Sync

    /// A committed sync batch touched this room.
    func apply(_ change: SyncChanges.Room) async {
        for (transactionID, eventID) in change.remoteEchoes {
            await sendQueue.send(.remoteEchoReceived(transactionID, eventID))
        }
        if change.encryptionEnabled {
            await encryptionTurnedOn()
        } else if encryption.value == .unknown {
            await refreshEncryption()
        }
        // Always routed: the timeline machine itself ignores them while nobody observes it, in
        // order with `.observed` / `.unobserved` and with the first page's store read.
        var events: [TimelineMachine.Event] = []
        if let token = change.gapToken { events.append(.gapDetected(token)) }
        if !change.itemEventIDs.isEmpty { events.append(.liveEventsArrived(change.itemEventIDs)) }
        if !events.isEmpty { await timelineHost.send(contentsOf: events) }
        await applyToThreads(change)
        if change.touchesTimeline {
            requestRebuild()
            await refreshTyping()
        }
    }

    /// Rebuilds the rows of the timeline and of the open threads.
    func requestRebuild() {
        rebuilder.withLock { $0 }?.request()
        rebuildThreads()
    }

    /// Rebuilds the rows from the window, the store, the queue and pending reactions.
    private func rebuild() async {
        let state = await timelineHost.currentState
        guard let window = state.window else { return }
        // Our replies in threads show in their thread.
        let queue = await sendQueue.currentState.items.filter { $0.content.threadRootID == nil }
        let reactionEventIDs = pendingReactions.withLock { $0.reactionEventIDs }
        var snapshot: WindowSnapshot
        do {
            snapshot = try await client.store.windowSnapshot(
                roomID: id, eventIDs: window.eventIDs, reactionEventIDs: reactionEventIDs,
                ownUserID: client.userID.rawValue)
        } catch {
            client.logger.error("timeline read failed: \(error)")
            return
        }
        client.openDecrypted(&snapshot.items)
        // Ignored users' events are hidden, those stored before they were ignored too.
        let ignored = client.ignored.withLock { $0 }
        if !ignored.isEmpty { snapshot.items.removeAll { ignored.contains($0.sender) } }
        // Replies in threads are shown in their thread (``thread(_:)``); the root carries
        // the thread's summary.
        snapshot.items.removeAll { $0.threadRootID != nil }
        let own = client.userID
        // Pending reactions the store now reflects are settled. A change made since the read
        // above is not in `storedReactionEventIDs` and stays pending until the next rebuild.
        let pending = pendingReactions.withLock { pending -> [PendingReaction] in
            pending.settle(
                items: snapshot.items, storedReactions: snapshot.storedReactionEventIDs, ownUserID: own.rawValue)
            return pending.changes
        }
        let rows = TimelineAssembler.items(snapshot: snapshot, queue: queue, pending: pending, ownUserID: own)
        if timelinePublisher.value != rows { timelinePublisher.publish(rows) }
    }

    // MARK: Paging

    /// Loads `count` older events: from the store first, then from the server for gaps. Returns
    /// when the page has landed (or failed: see ``TimelinePagination/lastError``). Does nothing
    /// while nobody observes ``timeline``.
    @discardableResult
    public func paginateBackwards(_ count: Int) async -> TimelinePagination {
        let settled = await timelineHost.send(.paginateRequested(count: max(0, count))) {
            state -> TimelineMachine.State? in
            if case .paginatingBackwards = state { return nil }
            return state
        }
        return TimelinePagination(settled ?? .idle)
    }

    // MARK: Sending

    /// Sends a message: persisted in the room's queue before anything goes out, then sent in
    /// order with the queue's retries. Long text is split into several messages, in order.
    ///
    /// Returns once the message is safely queued; the receipt follows it to `.sent` or
    /// `.failed`.
    ///
    /// - Throws: `.invalidArgument` for an empty message, `.store` when it cannot be queued,
    ///   `.accountEnded` when the conversation's account is no longer the one signed in.
    public func send(_ message: OutgoingMessage, replyingTo: EventID? = nil) async throws(ChatError) -> SendReceipt {
        try client.ensureCurrent()
        let contents = message.contents(inReplyTo: replyingTo)
        guard !contents.isEmpty else { throw .invalidArgument(name: "message") }
        return try await enqueue(contents)
    }

    /// Replaces the text of one of our messages (`m.replace`); sent through the queue.
    ///
    /// - Throws: `.unknownEvent` when the event is not stored, `.invalidArgument` when it is not ours.
    public func edit(_ eventID: EventID, newText: String) async throws(ChatError) -> SendReceipt {
        try client.ensureCurrent()
        guard try await sender(of: eventID) == client.userID.rawValue else { throw .invalidArgument(name: "eventID") }
        guard !newText.isEmpty else { throw .invalidArgument(name: "newText") }
        var newContent = JSONObjectWriter()
        newContent.string("msgtype", "m.text")
        newContent.string("body", newText)
        var relation = JSONObjectWriter()
        relation.string("rel_type", "m.replace")
        relation.string("event_id", eventID.rawValue)
        var content = JSONObjectWriter()
        content.string("msgtype", "m.text")
        content.string("body", "* " + newText)
        content.raw("m.new_content", newContent.text)
        content.raw("m.relates_to", relation.text)
        return try await enqueue([MessageContent(eventType: "m.room.message", json: content.text)])
    }

    /// The sender of `eventID`: from the store, from our own sent messages not synced yet, else
    /// from the server.
    func sender(of eventID: EventID) async throws(ChatError) -> String {
        let stored: String?
        do { stored = try await client.store.sender(of: eventID) } catch { throw .store(error) }
        if let stored { return stored }
        let ownSent = await sendQueue.currentState.items.contains { $0.status == .sent(eventID) }
        if ownSent || client.receipts.isOwn(eventID) { return client.userID.rawValue }
        let response = try await client.perform(ChatAPI.event(roomID: id, eventID: eventID))
        guard let sender = RawJSON.string("sender", in: response.body) else { throw .unknownEvent(eventID) }
        return sender
    }

    func enqueue(_ contents: [MessageContent]) async throws(ChatError) -> SendReceipt {
        let transactionIDs = contents.map { _ in client.makeTransactionID() }
        let receipt = SendReceipt(roomID: id, transactionIDs: transactionIDs)
        client.receipts.register(receipt)
        let store = client.store
        let roomID = id
        let queue = sendQueue
        let isEncrypted: Bool
        do throws(ChatError) { isEncrypted = try await resolveEncryption() } catch {
            client.receipts.forget(receipt)
            throw error
        }
        let encryptor = client.encryptor
        try await sendLock.withLock { () async throws(ChatError) in
            // All parts (a long text is split) are written in call order, in one durable
            // transaction, before the queue sees any: a restart keeps the order, a power loss
            // keeps them, and a failed write (a full disk) queues none, so no part goes out alone.
            // In an encrypted room what the user wrote is stored sealed, never in the clear.
            var drafts: [QueuedMessageDraft] = []
            for (transactionID, content) in zip(transactionIDs, contents) {
                let plain = Array(content.json.utf8)
                if isEncrypted {
                    guard let sealed = encryptor?.seal(plain, transactionID: transactionID) else {
                        client.receipts.forget(receipt)
                        throw .encryptionUnavailable
                    }
                    drafts.append(
                        QueuedMessageDraft(
                            transactionID: transactionID.rawValue, eventType: content.eventType, content: sealed,
                            isSealed: true))
                } else {
                    drafts.append(
                        QueuedMessageDraft(
                            transactionID: transactionID.rawValue, eventType: content.eventType, content: plain))
                }
            }
            do throws(ChatStoreError) {
                _ = try await store.enqueueMessages(
                    roomID: roomID.rawValue, drafts, createdAt: client.currentUnixMilliseconds())
            } catch {
                client.receipts.forget(receipt)
                throw .store(error)
            }
            for (transactionID, content) in zip(transactionIDs, contents) {
                await queue.send(.enqueued(transactionID, content))
            }
        }
        return receipt
    }

    /// Sends a file: copied into the account's folder (synced) and persisted in the room's
    /// queue before anything goes out, then, in its place in the queue, its `mxc://` URI is
    /// reserved, its bytes uploaded from the copy (``uploads`` shows the progress) and its
    /// event sent; each step is stored before the next, so a restart never uploads it twice or
    /// sends two events. The copy is removed once the event is sent or the message cancelled
    /// (``cancelSend(_:)`` also aborts a running upload).
    ///
    /// In an encrypted room the copy is the file encrypted (AES-256-CTR with a fresh key, the
    /// spec's `EncryptedFile` v2): the ciphertext is what is kept and uploaded, its SHA-256 taken
    /// while it uploads, and the event's `file` (key, IV, hash, URI) is stored sealed and sent
    /// Megolm-encrypted. Nothing of the file is in the clear on disk or on the server.
    ///
    /// An image's or a video's thumbnail, unless the attachment gives one, is made by the
    /// account's ``AttachmentThumbnailer`` as the queue's first step for the message, after this
    /// returns (the local echo shows meanwhile).
    ///
    /// - Throws: `.attachmentsUnavailable` (no folder for copies), `.encryptionUnavailable` (an
    ///   encrypted room without the account's crypto), `.fileUnreadable`, `.store` when it
    ///   cannot be queued, `.accountEnded`.
    public func send(_ attachment: OutgoingAttachment) async throws(ChatError) -> SendReceipt {
        try client.ensureCurrent()
        guard let directory = client.options.attachmentsDirectory, AttachmentFiles.makeDirectory(directory) else {
            throw .attachmentsUnavailable
        }
        let isEncrypted = try await resolveEncryption()
        let encryptor = client.encryptor
        if isEncrypted, encryptor == nil { throw .encryptionUnavailable }
        let transactionID = client.makeTransactionID()
        let copy = AttachmentFiles.path(in: directory, transactionID: transactionID.rawValue)
        let copied: (size: Int64, header: [UInt8])
        var encryptedFile: EncryptedFile?
        if isEncrypted {
            guard let header = AttachmentFiles.header(of: attachment.path) else { throw .fileUnreadable }
            do throws(EncryptedAttachmentError) {
                // The hash of the ciphertext is taken while it uploads (stored with the upload).
                let encrypted = try EncryptedAttachment.encrypt(attachment.path, to: copy, hashing: false)
                encryptedFile = encrypted.file
                copied = (encrypted.size, header)
            } catch .unreadable {
                throw .fileUnreadable
            } catch .unwritable {
                throw .store(.store(.full))
            } catch {
                throw .encryptionUnavailable
            }
        } else {
            do throws(AttachmentFiles.CopyFailure) {
                copied = try AttachmentFiles.copy(attachment.path, to: copy)
            } catch .unreadable {
                throw .fileUnreadable
            } catch {
                throw .store(.store(.full))
            }
        }
        // The ciphertext goes up as what it is; the MIME type travels inside the encrypted event.
        let uploadType = isEncrypted ? "application/octet-stream" : attachment.contentType
        // The app's thumbnail is written now (a small write); the thumbnailer's is made by the
        // queue's first step for the message, once it is stored, so that this returns at once.
        var attachment = attachment
        if attachment.kind == .video, let given = attachment.thumbnail {
            attachment.width = attachment.width ?? given.sourceWidth
            attachment.height = attachment.height ?? given.sourceHeight
            attachment.duration = attachment.duration ?? given.duration
        }
        let needsThumbnail =
            attachment.thumbnail == nil && client.thumbnailer != nil
            && (attachment.kind == .image || attachment.kind == .video)
        let thumbnail: (members: QueuedThumbnailMembers, copy: QueuedThumbnail)?
        do throws(ChatError) {
            thumbnail = try attachment.thumbnail?.stored(next: copy, encrypted: isEncrypted)
        } catch {
            AttachmentFiles.remove(in: directory, transactionID: transactionID.rawValue)
            throw error
        }
        let content = attachment.content(
            size: copied.size,
            pixelSize: attachment.contentType == "image/png" ? OutgoingAttachment.pngSize(copied.header) : nil,
            encryptedFile: encryptedFile, thumbnail: thumbnail?.members)
        var stored = Array(content.json.utf8)
        if isEncrypted {
            guard let sealed = encryptor?.seal(stored, transactionID: transactionID) else {
                AttachmentFiles.remove(in: directory, transactionID: transactionID.rawValue)
                throw .encryptionUnavailable
            }
            stored = sealed
        }
        let queued = QueuedAttachment(
            localPath: copy, contentType: uploadType, size: copied.size, isEncrypted: isEncrypted,
            thumbnail: thumbnail?.copy, needsThumbnail: needsThumbnail)
        let receipt = SendReceipt(roomID: id, transactionIDs: [transactionID])
        client.receipts.register(receipt)
        let queue = sendQueue
        let store = client.store
        let roomID = id
        let createdAt = client.currentUnixMilliseconds()
        let draft = QueuedMessageDraft(
            transactionID: transactionID.rawValue, eventType: content.eventType, content: stored,
            isSealed: isEncrypted,
            attachment: QueuedMessageAttachment(path: copy, contentType: uploadType, size: copied.size))
        try await sendLock.withLock { () async throws(ChatError) in
            do throws(ChatStoreError) {
                _ = try await store.enqueueMessages(roomID: roomID.rawValue, [draft], createdAt: createdAt)
            } catch {
                client.receipts.forget(receipt)
                AttachmentFiles.remove(in: directory, transactionID: transactionID.rawValue)
                throw .store(error)
            }
            await queue.send(.attachmentEnqueued(transactionID, content, queued))
        }
        return receipt
    }

    /// Sends a failed message again (and the ones held behind it).
    public func resend(_ transactionID: TransactionID) async {
        await sendQueue.send(.resendRequested(transactionID))
    }

    /// Drops a message that is not in flight.
    public func cancelSend(_ transactionID: TransactionID) async {
        await sendQueue.send(.cancelRequested(transactionID))
    }
}

extension TimelineMachine.State {
    /// The loaded window, `nil` while idle.
    var window: TimelineWindow? {
        switch self {
        case .idle: nil
        case .live(let window, _), .gap(let window, _), .reachedStart(let window): window
        case .paginatingBackwards(let window, _, _): window
        }
    }
}

extension Conversation {
    // Pending-reaction bookkeeping for ``react(to:key:)`` and ``unreact(to:key:)``.

    /// The pending change of our reaction with `key` to `target`, if any.
    func pendingReaction(for target: EventID, key: String) -> PendingReaction? {
        pendingReactions.withLock { $0.change(for: target, key: key) }
    }

    /// Shows `change` at once; returns the change it replaces, for a rollback.
    func applyPending(_ change: PendingReaction) -> PendingReaction? {
        let previous = pendingReactions.withLock { $0.replace(with: change) }
        requestRebuild()
        return previous
    }

    /// The server refused `change`: what it replaced shows again.
    func rollBackPending(_ change: PendingReaction, to previous: PendingReaction?) {
        pendingReactions.withLock { $0.rollBack(change, to: previous) }
        requestRebuild()
    }

    /// The server created the reaction that `change` adds as `eventID`.
    func acceptPending(_ change: PendingReaction, as eventID: EventID) {
        pendingReactions.withLock { $0.accept(change, as: eventID) }
        requestRebuild()
    }
}

/// What to send: the kinds of message a member writes.
///
/// Text over `MessageSplitter.limit` UTF-16 code units is split into several messages by
/// the SDK's one documented rule, in order.
public enum OutgoingMessage: Sendable, Hashable, CustomStringConvertible {
    /// `m.text`.
    case text(String)
    /// `m.notice`.
    case notice(String)
    /// `m.emote`.
    case emote(String)

    var kind: MessageKind {
        switch self {
        case .text: .text
        case .notice: .notice
        case .emote: .emote
        }
    }

    var body: String {
        switch self {
        case .text(let body), .notice(let body), .emote(let body): body
        }
    }

    /// The kind only: the body is user content.
    public var description: String { "OutgoingMessage.\(kind.rawValue)(<private>)" }

    /// The `m.room.message` contents, one per part, replying to `inReplyTo` (the first part only).
    func contents(inReplyTo: EventID?) -> [MessageContent] {
        MessageSplitter.split(body).enumerated().map { index, part in
            var content = JSONObjectWriter()
            content.string("msgtype", "m.\(kind.rawValue)")
            content.string("body", part)
            if index == 0, let inReplyTo {
                var reply = JSONObjectWriter()
                reply.string("event_id", inReplyTo.rawValue)
                content.raw("m.relates_to", #"{"m.in_reply_to":"# + reply.text + "}")
            }
            return MessageContent(eventType: "m.room.message", json: content.text)
        }
    }
}

/// One of our messages on its way to the server (``Conversation/outbox``).
public struct OutboxEntry: Sendable, Hashable, CustomStringConvertible {
    /// The message's transaction, the same on every attempt.
    public let transactionID: TransactionID
    /// `.sending` while queued, in flight or waiting to retry; `.failed` when refused for good.
    public let state: SendState

    /// The transaction and state only: the content is user content.
    public var description: String { "OutboxEntry(\(transactionID), \(state))" }

    /// The entries for the queue's items that the server has not accepted: sent items (waiting
    /// for their remote echo) and cancelled ones are not on their way any more.
    static func entries(of items: [SendQueueItem]) -> [OutboxEntry] {
        items.compactMap { item in
            switch item.status {
            case .queued, .thumbnailing, .reservingMedia, .uploading, .encrypting, .sending:
                OutboxEntry(transactionID: item.transactionID, state: .sending)
            case .failed(let reason): OutboxEntry(transactionID: item.transactionID, state: .failed(reason))
            case .sent, .cancelled: nil
            }
        }
    }
}

/// The outcome of a send, observable while it is on its way.
///
/// A long text split into several messages has one transaction per part; the receipt is
/// `.sent` when every part is (with the last part's event ID), `.failed` as soon as one part
/// fails, else `.sending`.
public final class SendReceipt: Sendable, CustomStringConvertible {
    /// The room.
    public let roomID: RoomID
    /// One transaction per part, in order.
    public let transactionIDs: [TransactionID]
    /// Sending, sent or failed.
    public var state: ObservableValue<SendState> { publisher.observable }

    private let publisher = ObservableValue<SendState>.Publisher(.sending)
    private let parts: Lock<[TransactionID: SendState]>

    init(roomID: RoomID, transactionIDs: [TransactionID]) {
        self.roomID = roomID
        self.transactionIDs = transactionIDs
        self.parts = Lock(Dictionary(uniqueKeysWithValues: transactionIDs.map { ($0, SendState.sending) }))
    }

    /// The event IDs of the parts the server has, in order.
    public var eventIDs: [EventID] {
        let parts = self.parts.withLock { $0 }
        return transactionIDs.compactMap {
            if case .sent(let eventID) = parts[$0] { return eventID }
            return nil
        }
    }

    /// The transactions only.
    public var description: String { "SendReceipt(\(transactionIDs.map(\.rawValue).joined(separator: ",")))" }

    func update(_ transactionID: TransactionID, _ state: SendState) {
        let overall = parts.withLock { parts -> SendState in
            parts[transactionID] = state
            var last: EventID?
            for id in transactionIDs {
                switch parts[id] ?? .sending {
                case .failed(let reason): return .failed(reason)
                case .sending: return .sending
                case .sent(let eventID): last = eventID
                }
            }
            return last.map(SendState.sent) ?? .sending
        }
        if publisher.value != overall { publisher.publish(overall) }
    }
}

/// The receipts handed out and not yet settled, by transaction.
final class SendReceiptRegistry: Sendable {
    private let receipts = Lock<[TransactionID: SendReceipt]>([:])
    /// Event IDs of messages this client sent (recent ones), for edits before the sync echo.
    private let sent = Lock<Set<EventID>>([])

    func isOwn(_ eventID: EventID) -> Bool { sent.withLock { $0.contains(eventID) } }

    func register(_ receipt: SendReceipt) {
        receipts.withLock { receipts in
            for id in receipt.transactionIDs { receipts[id] = receipt }
        }
    }

    /// Drops a receipt whose messages were never queued (the caller got the error instead).
    func forget(_ receipt: SendReceipt) {
        receipts.withLock { receipts in
            for id in receipt.transactionIDs { receipts[id] = nil }
        }
    }

    func update(_ transactionID: TransactionID, _ state: SendState) {
        if case .sent(let eventID) = state { sent.withLock { _ = $0.insert(eventID) } }
        let receipt = receipts.withLock { receipts -> SendReceipt? in
            let receipt = receipts[transactionID]
            if case .sent = state { receipts[transactionID] = nil }
            return receipt
        }
        receipt?.update(transactionID, state)
    }
}
