import SymorvaChatStore
import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Performs a room's ``TimelineMachine`` effects: store pages and `/messages` pages written into
/// the store's gaps before they are reported. Live updates need no effect: the conversation
/// routes every sync change to the machine, which ignores them while idle.
///
/// Concurrent loads of the same page (same room and token) join one request.
struct TimelineInterpreter: EffectInterpreter {
    typealias Machine = TimelineMachine

    let roomID: RoomID
    let client: AccountChat

    func perform(_ effect: TimelineMachine.Effect, context: EffectContext<TimelineMachine.Event>) async
        -> TimelineMachine.Event?
    {
        switch effect {
        case .loadFromStore(let before, let count):
            return .storePageLoaded(await loadFromStore(before: before, count: count))
        case .fetchMessages(let token, let count):
            let roomID = self.roomID
            let client = self.client
            do {
                let key = "messages|\(roomID.rawValue)|\(token.rawValue)"
                let fetched = try await client.messageLoads.value(for: key) {
                    () async throws(TimelineError) -> FetchedPage in
                    try await Self.fetch(roomID: roomID, token: token, count: count, client: client)
                }
                return .serverPageLoaded(.success(fetched.page))
            } catch {
                if Task.isCancelled { return nil }
                return .serverPageLoaded(.failure(error))
            }
        case .cancel:
            return nil
        }
    }

    private func loadFromStore(before: StoreCursor?, count: Int) async -> Result<TimelinePage, TimelineError> {
        let position = before.map { TimelinePosition(chunkID: $0.chunkID, position: Int64($0.index)) }
        do {
            let page = try await client.store.loadTimelinePage(roomID: roomID.rawValue, before: position, limit: count)
            let boundary: PageBoundary
            switch page.boundary {
            case .stored(let position):
                boundary = .stored(StoreCursor(chunkID: position.chunkID, index: Int(position.position)))
            case .gap(let token, _):
                boundary = .gap(PaginationToken(token))
            case .roomStart:
                boundary = .roomStart
            }
            return .success(TimelinePage(eventIDs: page.items.map { EventID($0.eventID) }, before: boundary))
        } catch {
            client.logger.error("timeline page read failed: \(error)")
            return .failure(.storeFailed)
        }
    }

    /// A `/messages` page written into its gap: the page the timeline machine reads, and the
    /// thread replies it brought that the store did not hold (their threads show them).
    struct FetchedPage: Sendable {
        var page: TimelinePage
        var threadReplies: [(root: EventID, reply: EventID)]
    }

    /// `GET /messages`, then the page is written into the gap it fills, then reported.
    static func fetch(roomID: RoomID, token: PaginationToken, count: Int, client: AccountChat)
        async throws(TimelineError) -> FetchedPage
    {
        let (_, page) = try await Self.requestPage(
            ChatAPI.messages(roomID: roomID, from: token, limit: count), named: "messages", client: client)
        let result: BackfillResult?
        do {
            result = try await client.store.backfill(roomID: roomID, token: token, page: page)
        } catch {
            client.logger.error("messages page write failed: \(error)")
            throw .storeFailed
        }
        guard let result else { throw .storeFailed }
        if page.chunk.contains(where: { $0.type == "m.room.encrypted" }) { client.encryptedEventsStored() }
        // Thread replies and relations are not the window's items: a page of them still moved the gap.
        let hidden = page.chunk.lazy.filter { $0.isRelation || $0.isThreadReply }.count
        return FetchedPage(
            page: TimelinePage(eventIDs: result.eventIDs, before: result.boundary, hiddenCount: hidden),
            threadReplies: result.threadReplies)
    }

    /// Sends a page request (`/messages`, a thread's `/relations`) and decodes the page: a failed
    /// request is classified by ``RequestFailure``, an unreadable page is a server fault
    /// (`malformed`), logged as `named` (the kind of page, never its content).
    static func requestPage(_ endpoint: MatrixEndpoint, named: String, client: AccountChat)
        async throws(TimelineError) -> (HTTPResponse, MessagesPage)
    {
        let response: HTTPResponse
        do {
            response = try await client.requester.send(endpoint)
        } catch {
            throw RequestFailure.timelineError(error)
        }
        do {
            return (response, try SyncResponseDecoder.decodeMessages(response.body))
        } catch {
            client.logger.warning("\(LogLabel(named)) page unreadable: \(LogLabel(error.description))")
            throw .server(status: response.status, errorCode: "malformed")
        }
    }
}

/// Performs a room's ``SendQueueMachine`` effects: the `send_queue` rows, the idempotent PUT
/// with the stored transaction ID, retry timers, and the receipts callers hold.
struct SendQueueInterpreter: EffectInterpreter {
    typealias Machine = SendQueueMachine

    let roomID: RoomID
    let client: AccountChat
    /// Where the attachments' upload progress is published (``Conversation/uploads``).
    let uploads: UploadProgressBoard

    func perform(_ effect: SendQueueMachine.Effect, context: EffectContext<SendQueueMachine.Event>) async
        -> SendQueueMachine.Event?
    {
        let store = client.store
        switch effect {
        case .persist(let item):
            // `Conversation.send` writes the row before queueing; this confirms it (or writes
            // it for callers that queue directly).
            do {
                _ = try await store.enqueueMessage(
                    roomID: roomID.rawValue, transactionID: item.transactionID.rawValue,
                    eventType: item.content.eventType, content: Array(item.content.json.utf8),
                    createdAt: client.currentUnixMilliseconds(),
                    attachment: item.attachment.map {
                        QueuedMessageAttachment(path: $0.localPath, contentType: $0.contentType, size: $0.size)
                    })
            } catch .store(.constraint) {
                // Already stored under this transaction ID.
            } catch {
                // Never stored, so never sent: the queue drops it and goes on, and whoever holds
                // the receipt sees why.
                client.logger.error("send queue write failed: \(error)")
                let failure: StoreFailure
                if case .store(let storeError) = error {
                    failure = storeError.storeFailure
                } else {
                    failure = .database
                }
                client.receipts.update(item.transactionID, .failed(.notStored(failure)))
                return .persistFailed(item.transactionID, failure)
            }
            return .persisted(item.transactionID)
        case .makeThumbnail(let transactionID, let content, let attachment):
            return await makeThumbnail(transactionID, content, attachment)
        case .reserveMedia(let transactionID, let content):
            return await reserveMedia(transactionID, content)
        case .uploadMedia(let transactionID, let content, let attachment):
            return await uploadMedia(transactionID, content, attachment)
        case .encryptAttachment(let transactionID, let content, let attachment):
            return await encryptCopy(transactionID, content, attachment)
        case .encrypt(let transactionID, let content):
            return .encrypted(transactionID, await encrypt(transactionID, content))
        case .sendEvent(let transactionID, let content):
            return await send(transactionID, content)
        case .requestTokenRefresh:
            client.sendQueueTokenRejected()
            return nil
        case .recordFailure(let transactionID, let reason):
            _ = try? await store.updateQueuedMessage(
                transactionID: transactionID.rawValue, state: .failed, failureReason: reason.storageCode)
            client.receipts.update(transactionID, .failed(reason))
            uploads.finish(transactionID)
            return nil
        case .clearFailure(let transactionID):
            _ = try? await store.updateQueuedMessage(transactionID: transactionID.rawValue, state: .queued)
            client.receipts.update(transactionID, .sending)
            return nil
        case .recordSent(let transactionID, let eventID):
            _ = try? await store.updateQueuedMessage(
                transactionID: transactionID.rawValue, state: .sent, sentEventID: eventID.rawValue)
            client.receipts.update(transactionID, .sent(eventID))
            removeCopy(transactionID)
            return nil
        case .discard(let transactionID):
            _ = try? await store.removeQueuedMessage(transactionID: transactionID.rawValue)
            removeCopy(transactionID)
            return .discarded(transactionID)
        case .scheduleRetry, .cancel:
            // The retry timer and cancellations are performed by the host (their directives).
            return nil
        }
    }

    /// The attachment's copy is no longer needed (its event is sent, or it was cancelled).
    private func removeCopy(_ transactionID: TransactionID) {
        uploads.finish(transactionID)
        guard let directory = client.options.attachmentsDirectory else { return }
        AttachmentFiles.remove(in: directory, transactionID: transactionID.rawValue)
    }

    /// Makes the attachment's thumbnail (an image's, a video's first frame with its size and
    /// length) with the account's thumbnailer from the queue's copy, writes it next to the copy
    /// (encrypted in an encrypted room), and stores the content naming it before answering; the
    /// caller's `send()` returned long before. An encrypted room's copy is ciphertext: it is
    /// decrypted into a file in memory for the thumbnailer (``AttachmentFiles/memoryFile()``),
    /// never to disk; where there is none (Apple platforms) such a file goes without a thumbnail.
    /// No thumbnail made (none can be, no thumbnailer) leaves the content as it was. A stop
    /// before the row's write makes it again after a restart (the row still has none).
    private func makeThumbnail(
        _ transactionID: TransactionID, _ content: MessageContent, _ attachment: QueuedAttachment
    ) async -> SendQueueMachine.Event? {
        let unchanged = SendQueueMachine.Event.thumbnailMade(
            transactionID, .success(ThumbnailedAttachment(content: content, thumbnail: nil)))
        guard let thumbnailer = client.thumbnailer, let info = OutgoingAttachment.queuedInfo(in: content),
            info.wantsThumbnail
        else { return unchanged }
        var source = attachment.localPath
        var memory: (descriptor: Int32, path: String)?
        defer { if let memory { AttachmentFiles.closeMemoryFile(memory.descriptor) } }
        if attachment.isEncrypted {
            guard let file = OutgoingAttachment.encryptedFile(in: content), let inMemory = AttachmentFiles.memoryFile()
            else { return unchanged }
            memory = inMemory
            do throws(EncryptedAttachmentError) {
                _ = try EncryptedAttachment.decryptOwnCopy(attachment.localPath, to: inMemory.path, file: file)
            } catch {
                client.logger.info("attachment copy not decrypted for its thumbnail error=\(error)")
                return unchanged
            }
            source = inMemory.path
        }
        let made: AttachmentThumbnail?
        switch info.kind {
        case .image: made = await thumbnailer.thumbnail(ofImageAt: source, contentType: info.mimeType)
        case .video: made = await thumbnailer.thumbnail(ofVideoAt: source, contentType: info.mimeType)
        case .file, .audio: made = nil
        }
        if Task.isCancelled { return nil }
        guard let made else { return unchanged }
        let stored: (members: QueuedThumbnailMembers, copy: QueuedThumbnail)?
        do throws(ChatError) {
            stored = try made.stored(next: attachment.localPath, encrypted: attachment.isEncrypted)
        } catch .encryptionUnavailable {
            return .thumbnailMade(transactionID, .failure(.permanent(.encryptionFailed)))
        } catch {
            client.logger.error("thumbnail copy not written error=\(error)")
            return .thumbnailMade(transactionID, .failure(.network))
        }
        guard let thumbnailed = OutgoingAttachment.adding(stored?.members, readFrom: made, to: content) else {
            return unchanged
        }
        var row = Array(thumbnailed.json.utf8)
        if attachment.isEncrypted {
            guard let sealed = client.encryptor?.seal(row, transactionID: transactionID) else {
                return .thumbnailMade(transactionID, .failure(.permanent(.encryptionFailed)))
            }
            row = sealed
        }
        do {
            _ = try await client.store.recordThumbnailMade(transactionID: transactionID.rawValue, content: row)
        } catch {
            client.logger.error("thumbnail not stored error=\(error)")
            return .thumbnailMade(transactionID, .failure(.network))
        }
        return .thumbnailMade(
            transactionID, .success(ThumbnailedAttachment(content: thumbnailed, thumbnail: stored?.copy)))
    }

    /// Reserves the attachment's URI and stores it, with the content naming it, before
    /// answering: the upload that follows (now or after a restart) goes to this URI.
    private func reserveMedia(_ transactionID: TransactionID, _ content: MessageContent) async
        -> SendQueueMachine.Event?
    {
        let reserved: ReservedMedia
        do {
            reserved = try await client.media.reserveURI()
        } catch {
            if Task.isCancelled { return nil }
            client.logger.info("media reservation failed error=\(error)")
            return .mediaReserved(transactionID, .failure(Self.sendError(error)))
        }
        var named = OutgoingAttachment.naming(reserved.uri, in: content)
        var thumbnailURI: MediaURI?
        if OutgoingAttachment.thumbnailNeedsURI(content) {
            // The thumbnail's URI is reserved and stored with the file's: its upload, like the
            // file's, then goes to a stored URI only.
            do {
                thumbnailURI = try await client.media.reserveURI().uri
            } catch {
                if Task.isCancelled { return nil }
                client.logger.info("thumbnail reservation failed error=\(error)")
                return .mediaReserved(transactionID, .failure(Self.sendError(error)))
            }
            if let thumbnailURI { named = OutgoingAttachment.namingThumbnail(thumbnailURI, in: named) }
        }
        var stored = Array(named.json.utf8)
        if OutgoingAttachment.encryptedFile(in: named) != nil {
            // An encrypted room's attachment: its key is in the content, which stays sealed.
            guard let sealed = client.encryptor?.seal(stored, transactionID: transactionID) else {
                return .mediaReserved(transactionID, .failure(.permanent(.encryptionFailed)))
            }
            stored = sealed
        }
        do {
            _ = try await client.store.recordMediaReserved(
                transactionID: transactionID.rawValue, mediaURI: reserved.uri.uriString, content: stored)
        } catch {
            client.logger.error("reserved media not stored error=\(error)")
            return .mediaReserved(transactionID, .failure(.network))
        }
        return .mediaReserved(
            transactionID, .success(MediaReservation(uri: reserved.uri, content: named, thumbnailURI: thumbnailURI)))
    }

    /// Uploads the copy to its reserved URI and stores that it is up before answering. The
    /// server refusing to overwrite the URI proves an earlier upload finished (a restart between
    /// the upload and its record): that counts as uploaded, and nothing is sent twice.
    ///
    /// An encrypted room's copy is the ciphertext: it is hashed (SHA-256) as libcurl reads it,
    /// and the content naming that hash is stored, sealed, in the same write as the upload, so
    /// the event is only ever made with it. After a `409` the hash is taken from the copy (the
    /// same bytes, the same key and IV). A content that already states a hash (a copy encrypted
    /// when its room became encrypted) must match it.
    private func uploadMedia(
        _ transactionID: TransactionID, _ content: MessageContent, _ attachment: QueuedAttachment
    ) async -> SendQueueMachine.Event? {
        guard let uri = attachment.mediaURI else { return .mediaUploaded(transactionID, .failure(.network)) }
        var encryptedFile: EncryptedFile?
        if attachment.isEncrypted {
            guard let file = OutgoingAttachment.encryptedFile(in: content) else {
                return .mediaUploaded(transactionID, .failure(.permanent(.encryptionFailed)))
            }
            encryptedFile = file
        }
        let board = uploads
        board.update(transactionID, MediaTransferProgress(completedBytes: 0, totalBytes: attachment.size))
        if let thumbnail = attachment.thumbnail, let thumbnailURI = thumbnail.uri {
            // The thumbnail first (small): the same stored-URI and 409 rules as the file.
            do {
                try await client.media.upload(
                    fileAt: thumbnail.localPath, contentType: thumbnail.contentType, to: thumbnailURI)
            } catch .server(409, "M_CANNOT_OVERWRITE_MEDIA") {
                client.logger.info("thumbnail already uploaded txn=\(transactionID)")
            } catch {
                if Task.isCancelled { return nil }
                client.logger.info("thumbnail upload failed error=\(error)")
                return .mediaUploaded(transactionID, .failure(Self.sendError(error)))
            }
        }
        let progress: @Sendable (MediaTransferProgress) -> Void = { progress in board.update(transactionID, progress) }
        var hash: [UInt8]?
        do {
            if encryptedFile != nil {
                hash = try await client.media.uploadHashing(
                    fileAt: attachment.localPath, contentType: attachment.contentType, to: uri, progress: progress)
            } else {
                try await client.media.upload(
                    fileAt: attachment.localPath, contentType: attachment.contentType, to: uri, progress: progress)
            }
        } catch .server(409, "M_CANNOT_OVERWRITE_MEDIA") {
            client.logger.info("media already uploaded txn=\(transactionID)")
        } catch {
            if Task.isCancelled { return nil }
            client.logger.info("media upload failed error=\(error)")
            return .mediaUploaded(transactionID, .failure(Self.sendError(error)))
        }
        var uploaded = content
        var sealed: [UInt8]?
        if let encryptedFile {
            if hash == nil {
                // Up before a stop, not recorded: the copy is what went up.
                do throws(EncryptedAttachmentError) {
                    hash = try EncryptedAttachment.sha256(of: attachment.localPath)
                } catch {
                    client.logger.error("uploaded copy not hashed error=\(error)")
                    return .mediaUploaded(transactionID, .failure(.permanent(.encryptionFailed)))
                }
            }
            guard let sha256 = hash, encryptedFile.sha256.isEmpty || sha256 == encryptedFile.sha256,
                let hashed = OutgoingAttachment.hashing(sha256, in: content),
                let sealedContent = client.encryptor?.seal(Array(hashed.json.utf8), transactionID: transactionID)
            else {
                client.logger.error("uploaded ciphertext does not match its file txn=\(transactionID)")
                return .mediaUploaded(transactionID, .failure(.permanent(.encryptionFailed)))
            }
            uploaded = hashed
            sealed = sealedContent
        }
        do {
            _ = try await client.store.recordMediaUploaded(transactionID: transactionID.rawValue, content: sealed)
        } catch {
            client.logger.error("upload not stored error=\(error)")
            return .mediaUploaded(transactionID, .failure(.network))
        }
        board.update(transactionID, MediaTransferProgress(completedBytes: attachment.size, totalBytes: attachment.size))
        return .mediaUploaded(transactionID, .success(uploaded))
    }

    /// Encrypts a plain attachment copy whose room became encrypted before its upload: the
    /// ciphertext (a fresh key and IV) is written and synced next to the copy, the row then names
    /// it with the sealed content carrying its `file` (durably, the old reservation forgotten:
    /// it may hold the plain bytes), and only then is the plain copy removed. A stop between the
    /// two leaves a row naming the ciphertext; the restore removes the plain copy
    /// (``Conversation/restoreQueue()``). Before the row's write nothing changed: this runs again.
    private func encryptCopy(
        _ transactionID: TransactionID, _ content: MessageContent, _ attachment: QueuedAttachment
    ) async -> SendQueueMachine.Event? {
        guard let encryptor = client.encryptor else {
            return .attachmentEncrypted(transactionID, .failure(.permanent(.encryptionFailed)))
        }
        let sealedPath = AttachmentFiles.encryptedPath(of: attachment.localPath)
        let encrypted: (file: EncryptedFile, size: Int64)
        do throws(EncryptedAttachmentError) {
            encrypted = try EncryptedAttachment.encrypt(attachment.localPath, to: sealedPath)
        } catch {
            client.logger.error("attachment copy not encrypted error=\(error)")
            let reason: SendFailureReason =
                switch error {
                case .unreadable: .rejected(status: 0, errorCode: "file_unreadable")
                case .unwritable: .notStored(.full)
                case .hashMismatch, .cipher: .encryptionFailed
                }
            return .attachmentEncrypted(transactionID, .failure(.permanent(reason)))
        }
        var named = OutgoingAttachment.carrying(encrypted.file, in: content)
        // The thumbnail's copy is encrypted too (its own key), next to the file's ciphertext.
        let sealedThumbnailPath = OutgoingAttachment.thumbnailPath(of: sealedPath)
        var thumbnail: QueuedThumbnail?
        if let plainThumbnail = attachment.thumbnail, var members = QueuedThumbnailMembers.read(named)?.members {
            do throws(EncryptedAttachmentError) {
                members.encryptedFile = try EncryptedAttachment.encrypt(
                    plainThumbnail.localPath, to: sealedThumbnailPath
                ).file
            } catch {
                client.logger.error("thumbnail copy not encrypted error=\(error)")
                AttachmentFiles.removeFile(sealedPath)
                return .attachmentEncrypted(transactionID, .failure(.permanent(.encryptionFailed)))
            }
            members.uri = nil
            named = members.replacing(in: named) ?? named
            thumbnail = QueuedThumbnail(localPath: sealedThumbnailPath, contentType: "application/octet-stream")
        }
        let removeCiphertext = {
            AttachmentFiles.removeFile(sealedPath)
            AttachmentFiles.removeFile(sealedThumbnailPath)
        }
        if Task.isCancelled {
            removeCiphertext()
            return nil
        }
        guard let sealed = encryptor.seal(Array(named.json.utf8), transactionID: transactionID) else {
            removeCiphertext()
            return .attachmentEncrypted(transactionID, .failure(.permanent(.encryptionFailed)))
        }
        let uploadType = "application/octet-stream"
        do {
            guard
                try await client.store.recordAttachmentEncrypted(
                    transactionID: transactionID.rawValue, sealedContent: sealed, path: sealedPath,
                    contentType: uploadType)
            else {
                // The row is gone (cancelled meanwhile): nothing names the ciphertext.
                removeCiphertext()
                return nil
            }
        } catch {
            client.logger.error("encrypted attachment not stored error=\(error)")
            removeCiphertext()
            return .attachmentEncrypted(transactionID, .failure(.network))
        }
        AttachmentFiles.removeFile(attachment.localPath)
        if let plainThumbnail = attachment.thumbnail { AttachmentFiles.removeFile(plainThumbnail.localPath) }
        let copy = QueuedAttachment(
            localPath: sealedPath, contentType: uploadType, size: encrypted.size, isEncrypted: true,
            thumbnail: thumbnail)
        return .attachmentEncrypted(transactionID, .success(EncryptedAttachmentCopy(content: named, attachment: copy)))
    }

    /// What a failed media request means for the send queue.
    static func sendError(_ error: MediaError) -> SendError {
        switch error {
        case .network, .cancelled, .unexpectedResponse: .network
        case .rateLimited(let retryAfter): .rateLimited(retryAfter: retryAfter)
        case .tokenRejected, .notSignedIn: .unknownToken
        case .tooLarge: .permanent(.tooLarge)
        case .notFound: .permanent(.rejected(status: 404, errorCode: "M_NOT_FOUND"))
        case .server(let status, let errorCode):
            status >= 500 || status == 408
                ? .server(status: status) : .permanent(.rejected(status: status, errorCode: errorCode))
        case .fileUnreadable, .fileNotWritable: .permanent(.rejected(status: 0, errorCode: "file_unreadable"))
        case .responseTooLarge(let limit): .permanent(.rejected(status: 0, errorCode: "response_too_large_\(limit)"))
        case .invalidArgument, .streamingUnavailable: .permanent(.rejected(status: 0, errorCode: "invalid_request"))
        case .hashMismatch, .decryptionFailed: .permanent(.encryptionFailed)
        }
    }

    /// Encrypts the head for the room and stores the ciphertext with it (durably) before the
    /// machine sends it: a restart re-sends the same ciphertext under the same transaction ID.
    /// Without an encryptor the send fails: never plaintext in an encrypted room.
    private func encrypt(_ transactionID: TransactionID, _ content: MessageContent) async
        -> Result<MessageContent, SendError>
    {
        guard let encryptor = client.encryptor else { return .failure(.permanent(.encryptionFailed)) }
        // An encrypted attachment's event names the hash of its ciphertext, stored with its upload.
        if let file = OutgoingAttachment.encryptedFile(in: content), file.sha256.isEmpty {
            return .failure(.permanent(.encryptionFailed))
        }
        let room: EncryptedRoom
        do throws(MemberListError) {
            guard let stored = try await client.roomForEncryption(roomID) else {
                return .failure(.permanent(.encryptionFailed))
            }
            room = stored
        } catch {
            switch error {
            case .request(let request):
                client.logger.info("members not read for encryption error=\(request)")
                return .failure(RequestFailure.sendError(request, now: client.wallClock.now))
            case .unreadable(let decoding):
                client.logger.error("members unreadable error=\(decoding)")
                return .failure(.network)
            case .store(let store):
                client.logger.error("room not read for encryption error=\(store)")
                return .failure(.network)
            }
        }
        let encrypted: MessageContent
        do throws(SendError) {
            encrypted = try await encryptor.encrypt(content, in: room)
        } catch {
            client.logger.info("encryption failed error=\(error)")
            return .failure(error)
        }
        // The plaintext is sealed too, should the message have been queued before the room was
        // known encrypted: from here on nothing of it is in the clear on disk.
        guard let sealed = encryptor.seal(Array(content.json.utf8), transactionID: transactionID) else {
            return .failure(.permanent(.encryptionFailed))
        }
        do {
            _ = try await client.store.updateQueuedMessage(
                transactionID: transactionID.rawValue, state: .queued, encryptedContent: Array(encrypted.json.utf8),
                sealedContent: sealed)
        } catch {
            client.logger.error("encrypted content not stored error=\(error)")
            return .failure(.network)
        }
        return .success(encrypted)
    }

    private func send(_ transactionID: TransactionID, _ content: MessageContent) async -> SendQueueMachine.Event? {
        FaultPoint.messagePersisted.reach()
        // An encrypted attachment's content holds its key: it leaves Megolm-encrypted or not at all.
        if content.eventType != "m.room.encrypted", OutgoingAttachment.encryptedFile(in: content) != nil {
            return .sendResponse(transactionID, .failure(.permanent(.encryptionFailed)))
        }
        do {
            let response = try await client.requester.send(
                ChatAPI.send(roomID: roomID, transactionID: transactionID, content: content))
            guard let eventID = RawJSON.string("event_id", in: response.body) else {
                return .sendResponse(transactionID, .failure(.server(status: 502)))
            }
            return .sendResponse(transactionID, .success(EventID(eventID)))
        } catch {
            if Task.isCancelled { return nil }
            let failure = RequestFailure.sendError(error, now: client.wallClock.now)
            client.logger.info("send failed: \(error)")
            return .sendResponse(transactionID, .failure(failure))
        }
    }
}

/// The upload progress of a conversation's attachments (``Conversation/uploads``): changed from
/// the transport's thread and the queue's interpreter, one change at a time.
final class UploadProgressBoard: Sendable {
    let publisher = ObservableValue<[TransactionID: MediaTransferProgress]>.Publisher([:])
    private let lock = Lock(())

    /// Sets the progress of `transactionID`'s upload.
    func update(_ transactionID: TransactionID, _ progress: MediaTransferProgress) {
        lock.withLock { _ in
            var value = publisher.value
            guard value[transactionID] != progress else { return }
            value[transactionID] = progress
            publisher.publish(value)
        }
    }

    /// The upload is over (sent or cancelled): its entry goes.
    func finish(_ transactionID: TransactionID) {
        lock.withLock { _ in
            var value = publisher.value
            guard value.removeValue(forKey: transactionID) != nil else { return }
            publisher.publish(value)
        }
    }
}
