import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

/// Shorthands shared by the send-queue tests.
enum SendQueueFixture {
    static let machine = SendQueueMachine()
    static let t1 = TransactionID("t1")
    static let t2 = TransactionID("t2")
    static let t3 = TransactionID("t3")
    static let e1 = EventID("$e1")
    static let e2 = EventID("$e2")

    static func text(_ body: String) -> MessageContent {
        MessageContent(eventType: "m.room.message", json: #"{"msgtype":"m.text","body":"\#(body)"}"#)
    }

    static let hello = text("hello")
    static let world = text("world")
    static let cipher = MessageContent(eventType: "m.room.encrypted", json: #"{"ciphertext":"AAA"}"#)
    static let photoURI = MediaURI("mxc://example.org/photo1")!
    static let photo = QueuedAttachment(localPath: "/account/attachments/t1", contentType: "image/png", size: 2048)
    static let image = MessageContent(eventType: "m.room.message", json: #"{"msgtype":"m.image","body":"p.png"}"#)
    static let imageWithURL = MessageContent(
        eventType: "m.room.message", json: #"{"msgtype":"m.image","body":"p.png","url":"mxc://example.org/photo1"}"#)
    static let reservation = MediaReservation(uri: photoURI, content: imageWithURL)
    // The same attachment after its plain copy was encrypted for a room that became encrypted.
    static let sealedURI = MediaURI("mxc://example.org/sealed1")!
    static let encryptedPhoto = QueuedAttachment(
        localPath: "/account/attachments/t1.enc", contentType: "application/octet-stream", size: 2048,
        isEncrypted: true)
    static let encryptedImage = MessageContent(
        eventType: "m.room.message", json: #"{"file":{"v":"v2"},"msgtype":"m.image","body":"p.png"}"#)
    static let encryptedImageWithURL = MessageContent(
        eventType: "m.room.message",
        json: #"{"file":{"v":"v2","url":"mxc://example.org/sealed1"},"msgtype":"m.image","body":"p.png"}"#)
    /// What the upload step answers for it: the content with the hash of the ciphertext it sent.
    static let encryptedImageHashed = MessageContent(
        eventType: "m.room.message",
        json:
            #"{"file":{"v":"v2","url":"mxc://example.org/sealed1","hashes":{"sha256":"AA"}},"msgtype":"m.image","body":"p.png"}"#
    )
    static let encryptedCopy = EncryptedAttachmentCopy(content: encryptedImage, attachment: encryptedPhoto)
    // The same photo queued with its thumbnail still to make, and what the thumbnail step stores.
    static let photoToThumbnail = QueuedAttachment(
        localPath: "/account/attachments/t1", contentType: "image/png", size: 2048, needsThumbnail: true)
    static let imageWithThumbnail = MessageContent(
        eventType: "m.room.message",
        json: #"{"msgtype":"m.image","body":"p.png","info":{"thumbnail_info":{"mimetype":"image/jpeg"}}}"#)
    static let thumbnailCopy = QueuedThumbnail(localPath: "/account/attachments/t1.thumb", contentType: "image/jpeg")
    static let thumbnailed = ThumbnailedAttachment(content: imageWithThumbnail, thumbnail: thumbnailCopy)

    /// An attachment item whose thumbnail is still to make, at `status` (in its step by default).
    static func thumbnailingItem(
        _ id: TransactionID, _ status: SendItemStatus = .thumbnailing, attempts: Int = 0
    ) -> SendQueueItem {
        SendQueueItem(
            transactionID: id, content: image, status: status, isPersisted: true, failedAttempts: attempts,
            attachment: photoToThumbnail)
    }

    /// An attachment item at a step of its way: reserved when `uri` is given, uploaded when `uploaded`.
    static func attachmentItem(
        _ id: TransactionID, _ status: SendItemStatus = .queued, uri: MediaURI? = nil, uploaded: Bool = false,
        persisted: Bool = true, attempts: Int = 0
    ) -> SendQueueItem {
        var attachment = photo
        attachment.mediaURI = uri
        attachment.isUploaded = uploaded
        return SendQueueItem(
            transactionID: id, content: uri == nil ? image : imageWithURL, status: status, isPersisted: persisted,
            failedAttempts: attempts, attachment: attachment)
    }

    static func empty(encrypted: Bool = false) -> SendQueueMachine.State {
        SendQueueMachine.State(roomIsEncrypted: encrypted, jitter: JitterSource(seed: 9))
    }

    static func item(
        _ id: TransactionID, _ content: MessageContent, _ status: SendItemStatus = .queued,
        persisted: Bool = true, attempts: Int = 0, encrypted: MessageContent? = nil
    ) -> SendQueueItem {
        SendQueueItem(
            transactionID: id, content: content, encryptedContent: encrypted, status: status,
            isPersisted: persisted, failedAttempts: attempts)
    }

    static func state(
        _ items: [SendQueueItem], _ status: SendQueueStatus, encrypted: Bool = false,
        jitter: JitterSource = JitterSource(seed: 9)
    ) -> SendQueueMachine.State {
        SendQueueMachine.State(items: items, status: status, roomIsEncrypted: encrypted, jitter: jitter)
    }

    /// The jitter stream after one draw, and that draw's delay for `attempt`.
    static func draw(attempt: Int, retryAfter: Duration? = nil) -> (JitterSource, Duration) {
        var jitter = JitterSource(seed: 9)
        let delay = jitter.delay(attempt: attempt, backoff: .sendQueue, retryAfter: retryAfter)
        return (jitter, delay)
    }
}

@Suite("SendQueueMachine")
struct SendQueueMachineTests {
    typealias F = SendQueueFixture
    let machine = F.machine

    // MARK: Enqueue and persist

    @Test("An enqueued item is persisted before anything else")
    func enqueuePersistsFirst() throws {
        let store = MachineTestStore(machine, initial: F.empty())
        try store.send(
            .enqueued(F.t1, F.hello), expecting: F.state([F.item(F.t1, F.hello, persisted: false)], .idle),
            effects: [.persist(F.item(F.t1, F.hello, persisted: false))])
    }

    @Test("The first attempt starts only once the item is persisted")
    func persistedStartsSending() throws {
        let store = MachineTestStore(machine, initial: F.state([F.item(F.t1, F.hello, persisted: false)], .idle))
        try store.send(
            .persisted(F.t1), expecting: F.state([F.item(F.t1, F.hello, .sending)], .sending),
            effects: [.sendEvent(F.t1, F.hello)])
    }

    @Test("An item the store could not write is dropped, and the persisted item behind it starts")
    func persistFailureDropsItem() throws {
        let store = MachineTestStore(
            machine,
            initial: F.state([F.item(F.t1, F.hello, persisted: false), F.item(F.t2, F.world)], .idle))
        try store.send(
            .persistFailed(F.t1, .full), expecting: F.state([F.item(F.t2, F.world, .sending)], .sending),
            effects: [.sendEvent(F.t2, F.world)])
    }

    @Test("A persist failure for a stored or unknown item changes nothing")
    func persistFailureOfStoredItem() throws {
        let store = MachineTestStore(machine, initial: F.state([F.item(F.t1, F.hello, .sending)], .sending))
        try store.send(.persistFailed(F.t1, .full), stayingWith: [])
        try store.send(.persistFailed(F.t2, .busy), stayingWith: [])
    }

    @Test("A later item persisted first waits for the head")
    func laterPersistedWaits() throws {
        let start = F.state([F.item(F.t1, F.hello, persisted: false), F.item(F.t2, F.world, persisted: false)], .idle)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .persisted(F.t2),
            expecting: F.state([F.item(F.t1, F.hello, persisted: false), F.item(F.t2, F.world)], .idle))
    }

    @Test("An item enqueued while another is in flight waits its turn")
    func enqueueWhileSending() throws {
        let start = F.state([F.item(F.t1, F.hello, .sending)], .sending)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .enqueued(F.t2, F.world),
            expecting: F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world, persisted: false)], .sending),
            effects: [.persist(F.item(F.t2, F.world, persisted: false))])
    }

    @Test("A duplicate transaction ID changes nothing")
    func duplicateEnqueue() throws {
        let start = F.state([F.item(F.t1, F.hello, .sending)], .sending)
        try MachineTestStore(machine, initial: start).send(.enqueued(F.t1, F.world), stayingWith: [])
    }

    // MARK: Success and the remote echo

    @Test("A PUT response marks the head sent once and starts the next item")
    func responseStartsNext() throws {
        let start = F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world)], .sending)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .sendResponse(F.t1, .success(F.e1)),
            expecting: F.state([F.item(F.t1, F.hello, .sent(F.e1)), F.item(F.t2, F.world, .sending)], .sending),
            effects: [.recordSent(F.t1, F.e1), .sendEvent(F.t2, F.world)])
    }

    @Test("The remote echo after the PUT response removes the local echo without effects")
    func echoAfterResponse() throws {
        let start = F.state([F.item(F.t1, F.hello, .sent(F.e1))], .idle)
        let store = MachineTestStore(machine, initial: start)
        try store.send(.remoteEchoReceived(F.t1, F.e1), expecting: F.state([], .idle))
    }

    @Test("The remote echo before the PUT response records sent once and moves on")
    func echoBeforeResponse() throws {
        let start = F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world)], .sending)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .remoteEchoReceived(F.t1, F.e1), expecting: F.state([F.item(F.t2, F.world, .sending)], .sending),
            effects: [.cancel(SendQueueMachine.requestKey), .recordSent(F.t1, F.e1), .sendEvent(F.t2, F.world)])
    }

    @Test("Both orders of response and echo end the same, with one recordSent")
    func bothOrdersAgree() throws {
        let start = F.state([F.item(F.t1, F.hello, .sending)], .sending)
        let responseFirst = MachineTestStore(machine, initial: start)
        try responseFirst.send(
            .sendResponse(F.t1, .success(F.e1)), expecting: F.state([F.item(F.t1, F.hello, .sent(F.e1))], .idle),
            effects: [.recordSent(F.t1, F.e1)])
        try responseFirst.send(.remoteEchoReceived(F.t1, F.e1), expecting: F.state([], .idle))
        let echoFirst = MachineTestStore(machine, initial: start)
        try echoFirst.send(
            .remoteEchoReceived(F.t1, F.e1), expecting: F.state([], .idle),
            effects: [.cancel(SendQueueMachine.requestKey), .recordSent(F.t1, F.e1)])
        try echoFirst.assertIgnored(.sendResponse(F.t1, .success(F.e1)))
    }

    @Test("An echo for an unknown transaction changes nothing")
    func unknownEcho() throws {
        try MachineTestStore(machine, initial: F.empty()).send(.remoteEchoReceived(F.t1, F.e1), stayingWith: [])
    }

    @Test("A late response for an item no longer in flight is ignored")
    func staleResponse() throws {
        let start = F.state([F.item(F.t1, F.hello, .sent(F.e1))], .idle)
        try MachineTestStore(machine, initial: start).assertIgnored(.sendResponse(F.t1, .failure(.network)))
    }

    // MARK: Transient failures

    @Test("A network error pauses the queue and schedules a retry with backoff")
    func networkErrorRetries() throws {
        let (jitter, delay) = F.draw(attempt: 1)
        let start = F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world)], .sending)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .sendResponse(F.t1, .failure(.network)),
            expecting: F.state(
                [F.item(F.t1, F.hello, attempts: 1), F.item(F.t2, F.world)], .waitingRetry(attempt: 1),
                jitter: jitter), effects: [.scheduleRetry(after: delay)])
    }

    @Test("A rate limit waits exactly Retry-After")
    func rateLimitRetryAfter() throws {
        let (jitter, _) = F.draw(attempt: 1)
        let start = F.state([F.item(F.t1, F.hello, .sending)], .sending)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .sendResponse(F.t1, .failure(.rateLimited(retryAfter: .seconds(12)))),
            expecting: F.state([F.item(F.t1, F.hello, attempts: 1)], .waitingRetry(attempt: 1), jitter: jitter),
            effects: [.scheduleRetry(after: .seconds(12))])
    }

    @Test("A rate limit's huge Retry-After is clamped to the server-wait ceiling")
    func rateLimitHugeRetryAfter() throws {
        let (jitter, _) = F.draw(attempt: 1)
        let start = F.state([F.item(F.t1, F.hello, .sending)], .sending)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .sendResponse(F.t1, .failure(.rateLimited(retryAfter: .milliseconds(999_999_999)))),
            expecting: F.state([F.item(F.t1, F.hello, attempts: 1)], .waitingRetry(attempt: 1), jitter: jitter),
            effects: [.scheduleRetry(after: .seconds(300))])
    }

    @Test("The retry resends the same transaction ID and content")
    func retryReusesTransactionID() throws {
        let start = F.state([F.item(F.t1, F.hello, attempts: 1), F.item(F.t2, F.world)], .waitingRetry(attempt: 1))
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .timerFired(.retry),
            expecting: F.state([F.item(F.t1, F.hello, .sending, attempts: 1), F.item(F.t2, F.world)], .sending),
            effects: [.sendEvent(F.t1, F.hello)])
    }

    @Test("A second 5xx doubles the base delay")
    func secondServerError() throws {
        var jitter = JitterSource(seed: 9)
        let delay = jitter.delay(attempt: 2, backoff: .sendQueue)
        let start = F.state([F.item(F.t1, F.hello, .sending, attempts: 1)], .sending)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .sendResponse(F.t1, .failure(.server(status: 503))),
            expecting: F.state([F.item(F.t1, F.hello, attempts: 2)], .waitingRetry(attempt: 2), jitter: jitter),
            effects: [.scheduleRetry(after: delay)])

        #expect(delay >= .seconds(2) && delay < .seconds(4))
    }

    @Test("A network change retries at once and cancels the timer")
    func networkChangeRetries() throws {
        let start = F.state([F.item(F.t1, F.hello, attempts: 3)], .waitingRetry(attempt: 3))
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .networkChanged, expecting: F.state([F.item(F.t1, F.hello, .sending, attempts: 3)], .sending),
            effects: [.cancel(SendQueueMachine.retryKey), .sendEvent(F.t1, F.hello)])
    }

    @Test("A retry timer outside waitingRetry is ignored")
    func strayTimer() throws {
        try MachineTestStore(machine, initial: F.state([F.item(F.t1, F.hello, .sending)], .sending)).assertIgnored(
            .timerFired(.retry))
    }

    // MARK: Token refresh

    @Test("M_UNKNOWN_TOKEN asks for a refresh and waits; the item is not failed")
    func unknownTokenWaits() throws {
        let start = F.state([F.item(F.t1, F.hello, .sending)], .sending)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .sendResponse(F.t1, .failure(.unknownToken)), expecting: F.state([F.item(F.t1, F.hello)], .waitingToken),
            effects: [.requestTokenRefresh])
    }

    @Test("A refreshed token resends the head with the same transaction ID")
    func tokenRefreshedResends() throws {
        let start = F.state([F.item(F.t1, F.hello)], .waitingToken)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .tokenRefreshed, expecting: F.state([F.item(F.t1, F.hello, .sending)], .sending),
            effects: [.sendEvent(F.t1, F.hello)])
    }

    @Test("Cancelling the head while waiting for a token keeps waiting")
    func cancelWhileWaitingToken() throws {
        let start = F.state([F.item(F.t1, F.hello), F.item(F.t2, F.world)], .waitingToken)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .cancelRequested(F.t1),
            expecting: F.state([F.item(F.t1, F.hello, .cancelled), F.item(F.t2, F.world)], .waitingToken),
            effects: [.discard(F.t1)])
    }

    // MARK: Permanent failures

    @Test("A permanent error fails the head with a persisted reason and holds later items")
    func permanentErrorBlocks() throws {
        let start = F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world)], .sending)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .sendResponse(F.t1, .failure(.permanent(.forbidden))),
            expecting: F.state([F.item(F.t1, F.hello, .failed(.forbidden)), F.item(F.t2, F.world)], .blocked(F.t1)),
            effects: [.recordFailure(F.t1, .forbidden)])
    }

    @Test("Items enqueued behind a failed head are persisted but held")
    func enqueueWhileBlocked() throws {
        let failed = F.item(F.t1, F.hello, .failed(.tooLarge))
        let store = MachineTestStore(machine, initial: F.state([failed], .blocked(F.t1)))
        try store.send(
            .enqueued(F.t2, F.world),
            expecting: F.state([failed, F.item(F.t2, F.world, persisted: false)], .blocked(F.t1)),
            effects: [.persist(F.item(F.t2, F.world, persisted: false))])
        try store.send(.persisted(F.t2), expecting: F.state([failed, F.item(F.t2, F.world)], .blocked(F.t1)))
    }

    @Test("Resending the failed head clears its reason and sends it again, first")
    func resendFailed() throws {
        let start = F.state(
            [F.item(F.t1, F.hello, .failed(.forbidden), attempts: 2), F.item(F.t2, F.world)], .blocked(F.t1))
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .resendRequested(F.t1),
            expecting: F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world)], .sending),
            effects: [.clearFailure(F.t1), .sendEvent(F.t1, F.hello)])
    }

    @Test("Cancelling the failed head releases the items behind it, in order")
    func cancelFailedHead() throws {
        let start = F.state([F.item(F.t1, F.hello, .failed(.forbidden)), F.item(F.t2, F.world)], .blocked(F.t1))
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .cancelRequested(F.t1),
            expecting: F.state([F.item(F.t1, F.hello, .cancelled), F.item(F.t2, F.world, .sending)], .sending),
            effects: [.discard(F.t1), .sendEvent(F.t2, F.world)])
    }

    @Test("Resending while nothing is blocked is ignored")
    func resendNotFailed() throws {
        try MachineTestStore(machine, initial: F.state([F.item(F.t1, F.hello, .sending)], .sending)).assertIgnored(
            .resendRequested(F.t1))
    }

    @Test("Failure reasons survive the store as stable codes")
    func storageCodes() {
        let reasons: [SendFailureReason] = [
            .forbidden, .tooLarge, .encryptionFailed, .rejected(status: 400, errorCode: "M_BAD_JSON"),
        ]
        for reason in reasons {
            #expect(SendFailureReason(storageCode: reason.storageCode) == reason)
        }
        #expect(SendFailureReason(storageCode: "something_new") == nil)
    }

    // MARK: Cancelling

    @Test("Cancelling a queued item behind the head leaves the head alone")
    func cancelQueued() throws {
        let start = F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world)], .sending)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .cancelRequested(F.t2),
            expecting: F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world, .cancelled)], .sending),
            effects: [.discard(F.t2)])
    }

    @Test("The store's deletion removes a cancelled item")
    func discardedRemoves() throws {
        let start = F.state([F.item(F.t1, F.hello, .cancelled)], .idle)
        let store = MachineTestStore(machine, initial: start)
        try store.send(.discarded(F.t1), expecting: F.state([], .idle))
    }

    @Test("An item cancelled before it was persisted is deleted once the store has it")
    func cancelBeforePersisted() throws {
        let store = MachineTestStore(machine, initial: F.state([F.item(F.t1, F.hello, persisted: false)], .idle))
        try store.send(
            .cancelRequested(F.t1), expecting: F.state([F.item(F.t1, F.hello, .cancelled, persisted: false)], .idle))
        try store.send(
            .persisted(F.t1), expecting: F.state([F.item(F.t1, F.hello, .cancelled)], .idle), effects: [.discard(F.t1)])
    }

    @Test("An item whose PUT is in flight cannot be cancelled")
    func cancelInFlightIgnored() throws {
        let start = F.state([F.item(F.t1, F.hello, .sending)], .sending)
        try MachineTestStore(machine, initial: start).send(.cancelRequested(F.t1), stayingWith: [])
    }

    @Test("Cancelling the head during its retry wait cancels the timer and starts the next")
    func cancelWaitingRetryHead() throws {
        let start = F.state([F.item(F.t1, F.hello, attempts: 1), F.item(F.t2, F.world)], .waitingRetry(attempt: 1))
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .cancelRequested(F.t1),
            expecting: F.state(
                [F.item(F.t1, F.hello, .cancelled, attempts: 1), F.item(F.t2, F.world, .sending)], .sending),
            effects: [.discard(F.t1), .cancel(SendQueueMachine.retryKey), .sendEvent(F.t2, F.world)])
    }

    @Test("A remote echo for a cancelled item changes nothing")
    func echoForCancelled() throws {
        let start = F.state([F.item(F.t1, F.hello, .cancelled)], .idle)
        try MachineTestStore(machine, initial: start).send(.remoteEchoReceived(F.t1, F.e1), stayingWith: [])
    }

    @Test("A remote echo while waiting to retry proves an earlier attempt landed")
    func echoWhileWaitingRetry() throws {
        let start = F.state([F.item(F.t1, F.hello, attempts: 1)], .waitingRetry(attempt: 1))
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .remoteEchoReceived(F.t1, F.e1), expecting: F.state([], .idle),
            effects: [.recordSent(F.t1, F.e1), .cancel(SendQueueMachine.retryKey)])
    }

    // MARK: Encryption

    @Test("In an encrypted room the head is encrypted before it is sent")
    func encryptFirst() throws {
        let start = F.state([F.item(F.t1, F.hello, persisted: false)], .idle, encrypted: true)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .persisted(F.t1), expecting: F.state([F.item(F.t1, F.hello, .encrypting)], .sending, encrypted: true),
            effects: [.encrypt(F.t1, F.hello)])
    }

    @Test("The encrypted content is sent and kept for retries")
    func encryptedIsSent() throws {
        let start = F.state([F.item(F.t1, F.hello, .encrypting)], .sending, encrypted: true)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .encrypted(F.t1, .success(F.cipher)),
            expecting: F.state([F.item(F.t1, F.hello, .sending, encrypted: F.cipher)], .sending, encrypted: true),
            effects: [.sendEvent(F.t1, F.cipher)])
    }

    @Test("A retry in an encrypted room resends the same ciphertext")
    func retryKeepsCiphertext() throws {
        let start = F.state(
            [F.item(F.t1, F.hello, attempts: 1, encrypted: F.cipher)], .waitingRetry(attempt: 1), encrypted: true)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .timerFired(.retry),
            expecting: F.state(
                [F.item(F.t1, F.hello, .sending, attempts: 1, encrypted: F.cipher)], .sending, encrypted: true),
            effects: [.sendEvent(F.t1, F.cipher)])
    }

    @Test("An encryption failure fails the head like a permanent send error")
    func encryptionFails() throws {
        let start = F.state([F.item(F.t1, F.hello, .encrypting)], .sending, encrypted: true)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .encrypted(F.t1, .failure(.permanent(.encryptionFailed))),
            expecting: F.state([F.item(F.t1, F.hello, .failed(.encryptionFailed))], .blocked(F.t1), encrypted: true),
            effects: [.recordFailure(F.t1, .encryptionFailed)])
    }

    @Test("Cancelling the head while it is being encrypted cancels the encryption")
    func cancelEncrypting() throws {
        let start = F.state([F.item(F.t1, F.hello, .encrypting)], .sending, encrypted: true)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .cancelRequested(F.t1), expecting: F.state([F.item(F.t1, F.hello, .cancelled)], .idle, encrypted: true),
            effects: [.cancel(SendQueueMachine.requestKey), .discard(F.t1)])
    }

    @Test("Turning on encryption applies to items not yet encrypted")
    func encryptionEnabled() throws {
        let store = MachineTestStore(
            machine, initial: F.state([F.item(F.t1, F.hello, attempts: 1)], .waitingRetry(attempt: 1)))
        try store.send(
            .encryptionEnabled,
            expecting: F.state([F.item(F.t1, F.hello, attempts: 1)], .waitingRetry(attempt: 1), encrypted: true))
        try store.send(
            .timerFired(.retry),
            expecting: F.state([F.item(F.t1, F.hello, .encrypting, attempts: 1)], .sending, encrypted: true),
            effects: [.encrypt(F.t1, F.hello)])
    }

    @Test("Encryption cannot be turned on twice")
    func encryptionEnabledTwice() throws {
        let start = F.empty(encrypted: true)
        try MachineTestStore(machine, initial: start).send(.encryptionEnabled, stayingWith: [])
    }

    // MARK: Restore

    @Test("Restored items go first; an interrupted request is tried again")
    func restore() throws {
        let start = F.state([F.item(F.t3, F.world, persisted: false)], .idle)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .restored([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world, .failed(.tooLarge))]),
            expecting: F.state(
                [
                    F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world, .failed(.tooLarge)),
                    F.item(F.t3, F.world, persisted: false),
                ],
                .sending), effects: [.sendEvent(F.t1, F.hello)])
    }

    @Test("A restored failed head blocks the queue")
    func restoreFailedHead() throws {
        let store = MachineTestStore(machine, initial: F.empty())
        try store.send(
            .restored([F.item(F.t1, F.hello, .failed(.forbidden))]),
            expecting: F.state([F.item(F.t1, F.hello, .failed(.forbidden))], .blocked(F.t1)))
    }

    @Test("A restored cancelled item is deleted again")
    func restoreCancelled() throws {
        let store = MachineTestStore(machine, initial: F.empty())
        try store.send(
            .restored([F.item(F.t1, F.hello, .cancelled)]),
            expecting: F.state([F.item(F.t1, F.hello, .cancelled)], .idle), effects: [.discard(F.t1)])
    }

    @Test("Restoring while a request is in flight is ignored")
    func restoreWhileSending() throws {
        try MachineTestStore(machine, initial: F.state([F.item(F.t1, F.hello, .sending)], .sending)).assertIgnored(
            .restored([]))
    }

    @Test("Resending another item than the failed head changes nothing")
    func resendOtherWhileBlocked() throws {
        let start = F.state([F.item(F.t1, F.hello, .failed(.forbidden)), F.item(F.t2, F.world)], .blocked(F.t1))
        try MachineTestStore(machine, initial: start).send(.resendRequested(F.t2), stayingWith: [])
    }

    // MARK: Effects

    @Test("Requests share one key; the retry timer has its own")
    func directives() {
        #expect(SendQueueMachine.Effect.sendEvent(F.t1, F.hello).directive == .keyed("sendQueue.request"))
        #expect(SendQueueMachine.Effect.encrypt(F.t1, F.hello).directive == .keyed("sendQueue.request"))
        #expect(
            SendQueueMachine.Effect.scheduleRetry(after: .seconds(1)).directive
                == .timer("sendQueue.retry", .after(.seconds(1))))
        #expect(SendQueueMachine.Effect.persist(F.item(F.t1, F.hello)).directive == .perform)
        #expect(SendQueueMachine().event(firing: .scheduleRetry(after: .seconds(1))) == .timerFired(.retry))
        #expect(SendQueueMachine().event(firing: .requestTokenRefresh) == nil)
        #expect(SendQueueMachine.Effect.cancel("x").directive == .cancel("x"))
    }

    @Test("Message content never prints its body")
    func contentIsPrivate() {
        let secret = F.text("canary-7781")
        #expect(!String(describing: secret).contains("canary"))
        #expect(!String(reflecting: secret).contains("canary"))
        #expect(!String(describing: SendQueueMachine.Event.enqueued(F.t1, secret)).contains("canary"))
        #expect(!String(describing: SendQueueMachine.Effect.sendEvent(F.t1, secret)).contains("canary"))
        #expect(SendQueueMachine.Event.enqueued(F.t1, secret).caseName == "enqueued")
    }
}
