import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@Suite("SendQueueMachine: the thumbnail step")
struct SendQueueThumbnailTests {
    typealias F = SendQueueFixture
    let machine = F.machine

    /// The photo once its thumbnail is stored: the copy named, nothing more to make.
    static var thumbnailedPhoto: QueuedAttachment {
        var attachment = F.photoToThumbnail
        attachment.needsThumbnail = false
        attachment.thumbnail = F.thumbnailCopy
        return attachment
    }

    @Test("The thumbnail is the item's first step once it is stored, then the reservation with its content")
    func thumbnailFirst() throws {
        let store = MachineTestStore(machine, initial: F.empty())
        let fresh = SendQueueItem(transactionID: F.t1, content: F.image, attachment: F.photoToThumbnail)
        try store.send(
            .attachmentEnqueued(F.t1, F.image, F.photoToThumbnail), expecting: F.state([fresh], .idle),
            effects: [.persist(fresh)])
        try store.send(
            .persisted(F.t1), expecting: F.state([F.thumbnailingItem(F.t1)], .sending),
            effects: [.makeThumbnail(F.t1, F.image, F.photoToThumbnail)])
        let reserving = SendQueueItem(
            transactionID: F.t1, content: F.imageWithThumbnail, status: .reservingMedia, isPersisted: true,
            attachment: Self.thumbnailedPhoto)
        try store.send(
            .thumbnailMade(F.t1, .success(F.thumbnailed)), expecting: F.state([reserving], .sending),
            effects: [.reserveMedia(F.t1, F.imageWithThumbnail)])
    }

    @Test("No thumbnail made: the item goes on with its content unchanged and nothing more to make")
    func noneMade() throws {
        let store = MachineTestStore(machine, initial: F.state([F.thumbnailingItem(F.t1)], .sending))
        var attachment = F.photoToThumbnail
        attachment.needsThumbnail = false
        let reserving = SendQueueItem(
            transactionID: F.t1, content: F.image, status: .reservingMedia, isPersisted: true, attachment: attachment)
        try store.send(
            .thumbnailMade(F.t1, .success(ThumbnailedAttachment(content: F.image, thumbnail: nil))),
            expecting: F.state([reserving], .sending), effects: [.reserveMedia(F.t1, F.image)])
    }

    @Test("Text queued behind an attachment whose thumbnail is being made waits for it: order kept")
    func textWaitsBehind() throws {
        let store = MachineTestStore(machine, initial: F.state([F.thumbnailingItem(F.t1)], .sending))
        try store.send(
            .enqueued(F.t2, F.hello),
            expecting: F.state([F.thumbnailingItem(F.t1), F.item(F.t2, F.hello, persisted: false)], .sending),
            effects: [.persist(F.item(F.t2, F.hello, persisted: false))])
        try store.send(
            .persisted(F.t2), expecting: F.state([F.thumbnailingItem(F.t1), F.item(F.t2, F.hello)], .sending),
            effects: [])
        let reserving = SendQueueItem(
            transactionID: F.t1, content: F.imageWithThumbnail, status: .reservingMedia, isPersisted: true,
            attachment: Self.thumbnailedPhoto)
        try store.send(
            .thumbnailMade(F.t1, .success(F.thumbnailed)),
            expecting: F.state([reserving, F.item(F.t2, F.hello)], .sending),
            effects: [.reserveMedia(F.t1, F.imageWithThumbnail)])
    }

    @Test("A thumbnail not stored is made again after the backoff; a permanent failure holds the queue")
    func failures() throws {
        let store = MachineTestStore(
            machine, initial: F.state([F.thumbnailingItem(F.t1), F.item(F.t2, F.hello)], .sending))
        let (jitter, delay) = F.draw(attempt: 1)
        try store.send(
            .thumbnailMade(F.t1, .failure(.network)),
            expecting: F.state(
                [F.thumbnailingItem(F.t1, .queued, attempts: 1), F.item(F.t2, F.hello)], .waitingRetry(attempt: 1),
                jitter: jitter),
            effects: [.scheduleRetry(after: delay)])
        try store.send(
            .timerFired(.retry),
            expecting: F.state(
                [F.thumbnailingItem(F.t1, attempts: 1), F.item(F.t2, F.hello)], .sending, jitter: jitter),
            effects: [.makeThumbnail(F.t1, F.image, F.photoToThumbnail)])
        try store.send(
            .thumbnailMade(F.t1, .failure(.permanent(.encryptionFailed))),
            expecting: F.state(
                [F.thumbnailingItem(F.t1, .failed(.encryptionFailed), attempts: 1), F.item(F.t2, F.hello)],
                .blocked(F.t1), jitter: jitter),
            effects: [.recordFailure(F.t1, .encryptionFailed)])
    }

    @Test("Cancelling while the thumbnail is made stops the step and starts the next item")
    func cancelWhileThumbnailing() throws {
        let store = MachineTestStore(
            machine, initial: F.state([F.thumbnailingItem(F.t1), F.item(F.t2, F.hello)], .sending))
        try store.send(
            .cancelRequested(F.t1),
            expecting: F.state([F.thumbnailingItem(F.t1, .cancelled), F.item(F.t2, F.hello, .sending)], .sending),
            effects: [.cancel(SendQueueMachine.requestKey), .discard(F.t1), .sendEvent(F.t2, F.hello)])
        // The step's late answer is about an item that left: nothing changes.
        try store.send(.thumbnailMade(F.t1, .success(F.thumbnailed)), stayingWith: [])
        try store.assertState(
            F.state([F.thumbnailingItem(F.t1, .cancelled), F.item(F.t2, F.hello, .sending)], .sending))
    }

    @Test("In a room encrypted since, the thumbnail is made from the plain copy, then both are encrypted")
    func thumbnailBeforeCopyEncryption() throws {
        let store = MachineTestStore(machine, initial: F.state([F.thumbnailingItem(F.t1)], .sending, encrypted: true))
        let encrypting = SendQueueItem(
            transactionID: F.t1, content: F.imageWithThumbnail, status: .encrypting, isPersisted: true,
            attachment: Self.thumbnailedPhoto)
        try store.send(
            .thumbnailMade(F.t1, .success(F.thumbnailed)), expecting: F.state([encrypting], .sending, encrypted: true),
            effects: [.encryptAttachment(F.t1, F.imageWithThumbnail, Self.thumbnailedPhoto)])
    }

    @Test("An encrypted room's ciphertext copy gets its thumbnail step, then its reservation")
    func encryptedCopyThumbnailed() throws {
        var sealed = F.encryptedPhoto
        sealed.needsThumbnail = true
        let queued = SendQueueItem(
            transactionID: F.t1, content: F.encryptedImage, isPersisted: false, attachment: sealed)
        let store = MachineTestStore(machine, initial: F.state([queued], .idle, encrypted: true))
        var thumbnailing = queued
        thumbnailing.isPersisted = true
        thumbnailing.status = .thumbnailing
        try store.send(
            .persisted(F.t1), expecting: F.state([thumbnailing], .sending, encrypted: true),
            effects: [.makeThumbnail(F.t1, F.encryptedImage, sealed)])
        var done = sealed
        done.needsThumbnail = false
        done.thumbnail = QueuedThumbnail(
            localPath: "/account/attachments/t1.thumb", contentType: "application/octet-stream")
        var reserving = thumbnailing
        reserving.status = .reservingMedia
        reserving.attachment = done
        try store.send(
            .thumbnailMade(F.t1, .success(ThumbnailedAttachment(content: F.encryptedImage, thumbnail: done.thumbnail))),
            expecting: F.state([reserving], .sending, encrypted: true),
            effects: [.reserveMedia(F.t1, F.encryptedImage)])
    }

    @Test("A restored item whose thumbnail was being made when the app stopped makes it again first")
    func restoredThumbnailStep() throws {
        let store = MachineTestStore(machine, initial: F.empty())
        try store.send(
            .restored([F.thumbnailingItem(F.t1), F.item(F.t2, F.hello)]),
            expecting: F.state([F.thumbnailingItem(F.t1), F.item(F.t2, F.hello)], .sending),
            effects: [.makeThumbnail(F.t1, F.image, F.photoToThumbnail)])
    }

    @Test("The step's answer for an item not in the step, or while the queue is not sending, changes nothing")
    func staleAnswers() throws {
        let store = MachineTestStore(
            machine, initial: F.state([F.attachmentItem(F.t1, .reservingMedia)], .sending))
        try store.send(.thumbnailMade(F.t1, .success(F.thumbnailed)), stayingWith: [])
        let waiting = MachineTestStore(
            machine, initial: F.state([F.thumbnailingItem(F.t1, .queued)], .waitingRetry(attempt: 1)))
        try waiting.assertIgnored(.thumbnailMade(F.t1, .success(F.thumbnailed)))
    }
}
