import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@Suite("SendQueueMachine: attachments")
struct SendQueueAttachmentTests {
    typealias F = SendQueueFixture
    let machine = F.machine

    static func withURI(_ uploaded: Bool = false) -> QueuedAttachment {
        var attachment = F.photo
        attachment.mediaURI = F.photoURI
        attachment.isUploaded = uploaded
        return attachment
    }

    @Test("An attachment is persisted first, then its URI is reserved, then uploaded, then its event sent")
    func fullWay() throws {
        let store = MachineTestStore(machine, initial: F.empty())
        let fresh = SendQueueItem(transactionID: F.t1, content: F.image, attachment: F.photo)
        try store.send(
            .attachmentEnqueued(F.t1, F.image, F.photo), expecting: F.state([fresh], .idle), effects: [.persist(fresh)])
        try store.send(
            .persisted(F.t1), expecting: F.state([F.attachmentItem(F.t1, .reservingMedia)], .sending),
            effects: [.reserveMedia(F.t1, F.image)])
        try store.send(
            .mediaReserved(F.t1, .success(F.reservation)),
            expecting: F.state([F.attachmentItem(F.t1, .uploading, uri: F.photoURI)], .sending),
            effects: [.uploadMedia(F.t1, F.imageWithURL, Self.withURI())])
        try store.send(
            .mediaUploaded(F.t1, .success(F.imageWithURL)),
            expecting: F.state([F.attachmentItem(F.t1, .sending, uri: F.photoURI, uploaded: true)], .sending),
            effects: [.sendEvent(F.t1, F.imageWithURL)])
        try store.send(
            .sendResponse(F.t1, .success(F.e1)),
            expecting: F.state([F.attachmentItem(F.t1, .sent(F.e1), uri: F.photoURI, uploaded: true)], .idle),
            effects: [.recordSent(F.t1, F.e1)])
    }

    @Test("A thumbnail's URI is reserved with the file's: the upload step gets both, a retry keeps both")
    func thumbnailReservedWithFile() throws {
        let thumbnailURI = try #require(MediaURI("mxc://example.org/thumb1"))
        var photo = F.photo
        photo.thumbnail = QueuedThumbnail(localPath: "/account/attachments/t1.thumb", contentType: "image/jpeg")
        let reserving = SendQueueItem(
            transactionID: F.t1, content: F.image, status: .reservingMedia, isPersisted: true, attachment: photo)
        let store = MachineTestStore(machine, initial: F.state([reserving], .sending))
        var reserved = photo
        reserved.mediaURI = F.photoURI
        reserved.thumbnail?.uri = thumbnailURI
        let uploading = SendQueueItem(
            transactionID: F.t1, content: F.imageWithURL, status: .uploading, isPersisted: true, attachment: reserved)
        try store.send(
            .mediaReserved(
                F.t1, .success(MediaReservation(uri: F.photoURI, content: F.imageWithURL, thumbnailURI: thumbnailURI))),
            expecting: F.state([uploading], .sending), effects: [.uploadMedia(F.t1, F.imageWithURL, reserved)])
        let (jitter, delay) = F.draw(attempt: 1)
        var waiting = uploading
        waiting.status = .queued
        waiting.failedAttempts = 1
        try store.send(
            .mediaUploaded(F.t1, .failure(.network)),
            expecting: F.state([waiting], .waitingRetry(attempt: 1), jitter: jitter),
            effects: [.scheduleRetry(after: delay)])
        var retrying = uploading
        retrying.failedAttempts = 1
        try store.send(
            .timerFired(.retry), expecting: F.state([retrying], .sending, jitter: jitter),
            effects: [.uploadMedia(F.t1, F.imageWithURL, reserved)])
    }

    @Test("In an encrypted room the uploaded attachment's event is encrypted before its PUT")
    func encryptedRoomEncryptsAfterUpload() throws {
        let store = MachineTestStore(
            machine, initial: F.state([F.attachmentItem(F.t1, .uploading, uri: F.photoURI)], .sending, encrypted: true))
        try store.send(
            .mediaUploaded(F.t1, .success(F.imageWithURL)),
            expecting: F.state(
                [F.attachmentItem(F.t1, .encrypting, uri: F.photoURI, uploaded: true)], .sending, encrypted: true),
            effects: [.encrypt(F.t1, F.imageWithURL)])
    }

    @Test("A failed upload retries the upload to the same URI, never a new reservation")
    func uploadRetryKeepsURI() throws {
        let store = MachineTestStore(
            machine, initial: F.state([F.attachmentItem(F.t1, .uploading, uri: F.photoURI)], .sending))
        let (jitter, delay) = F.draw(attempt: 1)
        try store.send(
            .mediaUploaded(F.t1, .failure(.network)),
            expecting: F.state(
                [F.attachmentItem(F.t1, .queued, uri: F.photoURI, attempts: 1)], .waitingRetry(attempt: 1),
                jitter: jitter),
            effects: [.scheduleRetry(after: delay)])
        try store.send(
            .timerFired(.retry),
            expecting: F.state(
                [F.attachmentItem(F.t1, .uploading, uri: F.photoURI, attempts: 1)], .sending, jitter: jitter),
            effects: [.uploadMedia(F.t1, F.imageWithURL, Self.withURI())])
    }

    @Test("A failed reservation is retried as a reservation; a token problem waits for the session")
    func reservationFailures() throws {
        let store = MachineTestStore(machine, initial: F.state([F.attachmentItem(F.t1, .reservingMedia)], .sending))
        try store.send(
            .mediaReserved(F.t1, .failure(.unknownToken)),
            expecting: F.state([F.attachmentItem(F.t1)], .waitingToken), effects: [.requestTokenRefresh])
        try store.send(
            .tokenRefreshed, expecting: F.state([F.attachmentItem(F.t1, .reservingMedia)], .sending),
            effects: [.reserveMedia(F.t1, F.image)])
    }

    @Test("M_TOO_LARGE on the upload fails the item and holds the text behind it")
    func tooLargeBlocks() throws {
        let store = MachineTestStore(
            machine,
            initial: F.state([F.attachmentItem(F.t1, .uploading, uri: F.photoURI), F.item(F.t2, F.hello)], .sending))
        try store.send(
            .mediaUploaded(F.t1, .failure(.permanent(.tooLarge))),
            expecting: F.state(
                [F.attachmentItem(F.t1, .failed(.tooLarge), uri: F.photoURI), F.item(F.t2, F.hello)], .blocked(F.t1)),
            effects: [.recordFailure(F.t1, .tooLarge)])
    }

    @Test("Text queued behind an uploading attachment waits for it: order is kept")
    func textWaitsBehindAttachment() throws {
        let store = MachineTestStore(
            machine, initial: F.state([F.attachmentItem(F.t1, .uploading, uri: F.photoURI)], .sending))
        try store.send(
            .enqueued(F.t2, F.hello),
            expecting: F.state(
                [F.attachmentItem(F.t1, .uploading, uri: F.photoURI), F.item(F.t2, F.hello, persisted: false)],
                .sending),
            effects: [.persist(F.item(F.t2, F.hello, persisted: false))])
        try store.send(
            .persisted(F.t2),
            expecting: F.state([F.attachmentItem(F.t1, .uploading, uri: F.photoURI), F.item(F.t2, F.hello)], .sending))
        try store.send(
            .mediaUploaded(F.t1, .success(F.imageWithURL)),
            expecting: F.state(
                [F.attachmentItem(F.t1, .sending, uri: F.photoURI, uploaded: true), F.item(F.t2, F.hello)], .sending),
            effects: [.sendEvent(F.t1, F.imageWithURL)])
    }

    @Test("Cancelling an upload aborts it, discards the item and starts the next")
    func cancelUpload() throws {
        let store = MachineTestStore(
            machine,
            initial: F.state([F.attachmentItem(F.t1, .uploading, uri: F.photoURI), F.item(F.t2, F.hello)], .sending))
        try store.send(
            .cancelRequested(F.t1),
            expecting: F.state(
                [F.attachmentItem(F.t1, .cancelled, uri: F.photoURI), F.item(F.t2, F.hello, .sending)], .sending),
            effects: [.cancel(SendQueueMachine.requestKey), .discard(F.t1), .sendEvent(F.t2, F.hello)])
    }

    @Test("Cancelling a reservation works too; a late answer for it changes nothing")
    func cancelReservation() throws {
        let store = MachineTestStore(machine, initial: F.state([F.attachmentItem(F.t1, .reservingMedia)], .sending))
        try store.send(
            .cancelRequested(F.t1), expecting: F.state([F.attachmentItem(F.t1, .cancelled)], .idle),
            effects: [.cancel(SendQueueMachine.requestKey), .discard(F.t1)])
        try store.assertIgnored(.mediaReserved(F.t1, .success(F.reservation)))
    }

    @Test("Stale answers: an upload result for an item not uploading stays; in idle it is ignored")
    func staleAnswers() throws {
        let store = MachineTestStore(machine, initial: F.state([F.item(F.t1, F.hello, .sending)], .sending))
        try store.send(.mediaUploaded(F.t1, .success(F.imageWithURL)), stayingWith: [])
        try store.send(.mediaReserved(F.t2, .success(F.reservation)), stayingWith: [])
        store.reset(to: F.state([F.attachmentItem(F.t1, uri: F.photoURI)], .idle))
        try store.assertIgnored([
            .mediaUploaded(F.t1, .success(F.imageWithURL)), .mediaReserved(F.t1, .failure(.network)),
        ])
    }

    @Test("After a restart: a reserved item uploads to its stored URI, an uploaded one only sends its event")
    func restartResumesAtItsStep() throws {
        let store = MachineTestStore(machine, initial: F.empty())
        try store.send(
            .restored([F.attachmentItem(F.t1, .uploading, uri: F.photoURI)]),
            expecting: F.state([F.attachmentItem(F.t1, .uploading, uri: F.photoURI)], .sending),
            effects: [.uploadMedia(F.t1, F.imageWithURL, Self.withURI())])
        store.reset(to: F.empty())
        try store.send(
            .restored([F.attachmentItem(F.t1, .sending, uri: F.photoURI, uploaded: true)]),
            expecting: F.state([F.attachmentItem(F.t1, .sending, uri: F.photoURI, uploaded: true)], .sending),
            effects: [.sendEvent(F.t1, F.imageWithURL)])
    }

    // MARK: A room that became encrypted after the attachment was queued

    /// The encrypted copy's item at `status`, reserved when `uri` is given.
    static func sealedItem(
        _ status: SendItemStatus, uri: MediaURI? = nil, uploaded: Bool = false, attempts: Int = 0
    ) -> SendQueueItem {
        var attachment = F.encryptedPhoto
        attachment.mediaURI = uri
        attachment.isUploaded = uploaded
        return SendQueueItem(
            transactionID: F.t1, content: uri == nil ? F.encryptedImage : F.encryptedImageWithURL, status: status,
            isPersisted: true, failedAttempts: attempts, attachment: attachment)
    }

    @Test("A plain copy whose room became encrypted before its upload is encrypted first, then reserved anew")
    func plainCopyEncryptedBeforeUpload() throws {
        let store = MachineTestStore(machine, initial: F.state([F.attachmentItem(F.t1, .reservingMedia)], .sending))
        try store.send(
            .encryptionEnabled,
            expecting: F.state([F.attachmentItem(F.t1, .reservingMedia)], .sending, encrypted: true))
        // The reservation was running: it lands, but the upload does not start in the clear.
        try store.send(
            .mediaReserved(F.t1, .success(F.reservation)),
            expecting: F.state([F.attachmentItem(F.t1, .encrypting, uri: F.photoURI)], .sending, encrypted: true),
            effects: [.encryptAttachment(F.t1, F.imageWithURL, Self.withURI())])
        // A text's encryption result is not the copy's: it changes nothing.
        try store.send(.encrypted(F.t1, .success(F.cipher)), stayingWith: [])
        try store.send(
            .attachmentEncrypted(F.t1, .success(F.encryptedCopy)),
            expecting: F.state([Self.sealedItem(.reservingMedia)], .sending, encrypted: true),
            effects: [.reserveMedia(F.t1, F.encryptedImage)])
        var sealedWithURI = F.encryptedPhoto
        sealedWithURI.mediaURI = F.sealedURI
        try store.send(
            .mediaReserved(F.t1, .success(MediaReservation(uri: F.sealedURI, content: F.encryptedImageWithURL))),
            expecting: F.state([Self.sealedItem(.uploading, uri: F.sealedURI)], .sending, encrypted: true),
            effects: [.uploadMedia(F.t1, F.encryptedImageWithURL, sealedWithURI)])
        // The upload's answer carries the content with the ciphertext's hash: the event is made of it.
        var hashed = Self.sealedItem(.encrypting, uri: F.sealedURI, uploaded: true)
        hashed.content = F.encryptedImageHashed
        try store.send(
            .mediaUploaded(F.t1, .success(F.encryptedImageHashed)),
            expecting: F.state([hashed], .sending, encrypted: true),
            effects: [.encrypt(F.t1, F.encryptedImageHashed)])
        // The encrypted copy is never encrypted again: a stale answer changes nothing.
        try store.send(.attachmentEncrypted(F.t1, .success(F.encryptedCopy)), stayingWith: [])
    }

    @Test("An upload already running when the room turns encrypted finishes; its event is encrypted")
    func runningUploadKeepsItsDecision() throws {
        let store = MachineTestStore(
            machine, initial: F.state([F.attachmentItem(F.t1, .uploading, uri: F.photoURI)], .sending))
        try store.send(
            .encryptionEnabled,
            expecting: F.state([F.attachmentItem(F.t1, .uploading, uri: F.photoURI)], .sending, encrypted: true))
        try store.send(
            .mediaUploaded(F.t1, .success(F.imageWithURL)),
            expecting: F.state(
                [F.attachmentItem(F.t1, .encrypting, uri: F.photoURI, uploaded: true)], .sending, encrypted: true),
            effects: [.encrypt(F.t1, F.imageWithURL)])
    }

    @Test("A failed upload retried after the room turned encrypted encrypts the copy first")
    func retryAfterEncryptionEncrypts() throws {
        let (jitter, delay) = F.draw(attempt: 1)
        let store = MachineTestStore(
            machine, initial: F.state([F.attachmentItem(F.t1, .uploading, uri: F.photoURI)], .sending))
        try store.send(
            .mediaUploaded(F.t1, .failure(.network)),
            expecting: F.state(
                [F.attachmentItem(F.t1, .queued, uri: F.photoURI, attempts: 1)], .waitingRetry(attempt: 1),
                jitter: jitter),
            effects: [.scheduleRetry(after: delay)])
        try store.send(
            .encryptionEnabled,
            expecting: F.state(
                [F.attachmentItem(F.t1, .queued, uri: F.photoURI, attempts: 1)], .waitingRetry(attempt: 1),
                encrypted: true, jitter: jitter))
        try store.send(
            .timerFired(.retry),
            expecting: F.state(
                [F.attachmentItem(F.t1, .encrypting, uri: F.photoURI, attempts: 1)], .sending, encrypted: true,
                jitter: jitter),
            effects: [.encryptAttachment(F.t1, F.imageWithURL, Self.withURI())])
    }

    @Test("The copy's encryption: a transient failure retries it, a permanent one blocks, a cancel aborts it")
    func copyEncryptionFailures() throws {
        let encrypting = F.state(
            [F.attachmentItem(F.t1, .encrypting), F.item(F.t2, F.hello)], .sending, encrypted: true)
        let store = MachineTestStore(machine, initial: encrypting)
        let (jitter, delay) = F.draw(attempt: 1)
        try store.send(
            .attachmentEncrypted(F.t1, .failure(.network)),
            expecting: F.state(
                [F.attachmentItem(F.t1, attempts: 1), F.item(F.t2, F.hello)], .waitingRetry(attempt: 1),
                encrypted: true, jitter: jitter),
            effects: [.scheduleRetry(after: delay)])
        try store.send(
            .timerFired(.retry),
            expecting: F.state(
                [F.attachmentItem(F.t1, .encrypting, attempts: 1), F.item(F.t2, F.hello)], .sending, encrypted: true,
                jitter: jitter),
            effects: [.encryptAttachment(F.t1, F.image, F.photo)])
        store.reset(to: encrypting)
        try store.send(
            .attachmentEncrypted(F.t1, .failure(.permanent(.encryptionFailed))),
            expecting: F.state(
                [F.attachmentItem(F.t1, .failed(.encryptionFailed)), F.item(F.t2, F.hello)], .blocked(F.t1),
                encrypted: true),
            effects: [.recordFailure(F.t1, .encryptionFailed)])
        store.reset(to: encrypting)
        try store.send(
            .cancelRequested(F.t1),
            expecting: F.state(
                [F.attachmentItem(F.t1, .cancelled), F.item(F.t2, F.hello, .encrypting)], .sending, encrypted: true),
            effects: [.cancel(SendQueueMachine.requestKey), .discard(F.t1), .encrypt(F.t2, F.hello)])
        try store.send(.attachmentEncrypted(F.t1, .success(F.encryptedCopy)), stayingWith: [])
        store.reset(to: F.state([F.attachmentItem(F.t1)], .idle, encrypted: true))
        try store.assertIgnored(.attachmentEncrypted(F.t1, .success(F.encryptedCopy)))
    }

    @Test("After a restart in an encrypted room, a plain copy is encrypted first; an encrypted one is not")
    func restartEncryptsPlainCopy() throws {
        let store = MachineTestStore(machine, initial: F.empty(encrypted: true))
        try store.send(
            .restored([F.attachmentItem(F.t1, .uploading, uri: F.photoURI)]),
            expecting: F.state([F.attachmentItem(F.t1, .encrypting, uri: F.photoURI)], .sending, encrypted: true),
            effects: [.encryptAttachment(F.t1, F.imageWithURL, Self.withURI())])
        store.reset(to: F.empty(encrypted: true))
        var sealedWithURI = F.encryptedPhoto
        sealedWithURI.mediaURI = F.sealedURI
        try store.send(
            .restored([Self.sealedItem(.uploading, uri: F.sealedURI)]),
            expecting: F.state([Self.sealedItem(.uploading, uri: F.sealedURI)], .sending, encrypted: true),
            effects: [.uploadMedia(F.t1, F.encryptedImageWithURL, sealedWithURI)])
    }
}
