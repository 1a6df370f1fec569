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
            effects: [.uploadMedia(F.t1, Self.withURI())])
        try store.send(
            .mediaUploaded(F.t1, .success(F.photoURI)),
            expecting: F.state([F.attachmentItem(F.t1, .sending, uri: F.photoURI, uploaded: true)], .sending),
            effects: [.sendEvent(F.t1, F.imageWithURL)])
        try store.send(
            .sendResponse(F.t1, .success(F.e1)),
            expecting: F.state([F.attachmentItem(F.t1, .sent(F.e1), uri: F.photoURI, uploaded: true)], .idle),
            effects: [.recordSent(F.t1, F.e1)])
    }

    @Test("In an encrypted room the uploaded attachment's event is encrypted before its PUT")
    func encryptedRoomEncryptsAfterUpload() throws {
        let store = MachineTestStore(
            machine, initial: F.state([F.attachmentItem(F.t1, .uploading, uri: F.photoURI)], .sending, encrypted: true))
        try store.send(
            .mediaUploaded(F.t1, .success(F.photoURI)),
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
            effects: [.uploadMedia(F.t1, Self.withURI())])
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
            .mediaUploaded(F.t1, .success(F.photoURI)),
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
        try store.send(.mediaUploaded(F.t1, .success(F.photoURI)), stayingWith: [])
        try store.send(.mediaReserved(F.t2, .success(F.reservation)), stayingWith: [])
        store.reset(to: F.state([F.attachmentItem(F.t1, uri: F.photoURI)], .idle))
        try store.assertIgnored([.mediaUploaded(F.t1, .success(F.photoURI)), .mediaReserved(F.t1, .failure(.network))])
    }

    @Test("After a restart: a reserved item uploads to its stored URI, an uploaded one only sends its event")
    func restartResumesAtItsStep() throws {
        let store = MachineTestStore(machine, initial: F.empty())
        try store.send(
            .restored([F.attachmentItem(F.t1, .uploading, uri: F.photoURI)]),
            expecting: F.state([F.attachmentItem(F.t1, .uploading, uri: F.photoURI)], .sending),
            effects: [.uploadMedia(F.t1, Self.withURI())])
        store.reset(to: F.empty())
        try store.send(
            .restored([F.attachmentItem(F.t1, .sending, uri: F.photoURI, uploaded: true)]),
            expecting: F.state([F.attachmentItem(F.t1, .sending, uri: F.photoURI, uploaded: true)], .sending),
            effects: [.sendEvent(F.t1, F.imageWithURL)])
    }
}
