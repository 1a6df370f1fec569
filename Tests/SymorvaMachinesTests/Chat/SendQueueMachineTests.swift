import SymorvaMachines
import SymorvaRuntime
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
    func enqueuePersistsFirst() {
        let step = ChatStep(machine, from: F.empty(), on: .enqueued(F.t1, F.hello))
        #expect(step.state == F.state([F.item(F.t1, F.hello, persisted: false)], .idle))
        #expect(step.effects == [.persist(F.item(F.t1, F.hello, persisted: false))])
    }

    @Test("The first attempt starts only once the item is persisted")
    func persistedStartsSending() {
        let step = ChatStep(
            machine, from: F.state([F.item(F.t1, F.hello, persisted: false)], .idle), on: .persisted(F.t1))
        #expect(step.state == F.state([F.item(F.t1, F.hello, .sending)], .sending))
        #expect(step.effects == [.sendEvent(F.t1, F.hello)])
    }

    @Test("A later item persisted first waits for the head")
    func laterPersistedWaits() {
        let start = F.state([F.item(F.t1, F.hello, persisted: false), F.item(F.t2, F.world, persisted: false)], .idle)
        let step = ChatStep(machine, from: start, on: .persisted(F.t2))
        #expect(step.state == F.state([F.item(F.t1, F.hello, persisted: false), F.item(F.t2, F.world)], .idle))
        #expect(step.effects == [])
    }

    @Test("An item enqueued while another is in flight waits its turn")
    func enqueueWhileSending() {
        let start = F.state([F.item(F.t1, F.hello, .sending)], .sending)
        let step = ChatStep(machine, from: start, on: .enqueued(F.t2, F.world))
        #expect(
            step.state == F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world, persisted: false)], .sending))
        #expect(step.effects == [.persist(F.item(F.t2, F.world, persisted: false))])
    }

    @Test("A duplicate transaction ID changes nothing")
    func duplicateEnqueue() {
        let start = F.state([F.item(F.t1, F.hello, .sending)], .sending)
        #expect(ChatStep(machine, from: start, on: .enqueued(F.t1, F.world)).isUnchanged(from: start))
    }

    // MARK: Success and the remote echo

    @Test("A PUT response marks the head sent once and starts the next item")
    func responseStartsNext() {
        let start = F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world)], .sending)
        let step = ChatStep(machine, from: start, on: .sendResponse(F.t1, .success(F.e1)))
        #expect(step.state == F.state([F.item(F.t1, F.hello, .sent(F.e1)), F.item(F.t2, F.world, .sending)], .sending))
        #expect(step.effects == [.recordSent(F.t1, F.e1), .sendEvent(F.t2, F.world)])
    }

    @Test("The remote echo after the PUT response removes the local echo without effects")
    func echoAfterResponse() {
        let start = F.state([F.item(F.t1, F.hello, .sent(F.e1))], .idle)
        let step = ChatStep(machine, from: start, on: .remoteEchoReceived(F.t1, F.e1))
        #expect(step.state == F.state([], .idle))
        #expect(step.effects == [])
    }

    @Test("The remote echo before the PUT response records sent once and moves on")
    func echoBeforeResponse() {
        let start = F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world)], .sending)
        let step = ChatStep(machine, from: start, on: .remoteEchoReceived(F.t1, F.e1))
        #expect(step.state == F.state([F.item(F.t2, F.world, .sending)], .sending))
        #expect(
            step.effects == [.cancel(SendQueueMachine.requestKey), .recordSent(F.t1, F.e1), .sendEvent(F.t2, F.world)])
    }

    @Test("Both orders of response and echo end the same, with one recordSent")
    func bothOrdersAgree() {
        let start = F.state([F.item(F.t1, F.hello, .sending)], .sending)
        let responseFirst = run(
            machine, from: start, [.sendResponse(F.t1, .success(F.e1)), .remoteEchoReceived(F.t1, F.e1)])
        let echoFirst = run(
            machine, from: start, [.remoteEchoReceived(F.t1, F.e1), .sendResponse(F.t1, .success(F.e1))])
        #expect(responseFirst.state == F.state([], .idle))
        #expect(echoFirst.state == F.state([], .idle))
        #expect(responseFirst.effects == [.recordSent(F.t1, F.e1)])
        #expect(echoFirst.effects == [.cancel(SendQueueMachine.requestKey), .recordSent(F.t1, F.e1)])
    }

    @Test("An echo for an unknown transaction changes nothing")
    func unknownEcho() {
        #expect(ChatStep(machine, from: F.empty(), on: .remoteEchoReceived(F.t1, F.e1)).isUnchanged(from: F.empty()))
    }

    @Test("A late response for an item no longer in flight is ignored")
    func staleResponse() {
        let start = F.state([F.item(F.t1, F.hello, .sent(F.e1))], .idle)
        #expect(ChatStep(machine, from: start, on: .sendResponse(F.t1, .failure(.network))).isIgnored)
    }

    // MARK: Transient failures

    @Test("A network error pauses the queue and schedules a retry with backoff")
    func networkErrorRetries() {
        let (jitter, delay) = F.draw(attempt: 1)
        let start = F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world)], .sending)
        let step = ChatStep(machine, from: start, on: .sendResponse(F.t1, .failure(.network)))
        #expect(
            step.state
                == F.state(
                    [F.item(F.t1, F.hello, attempts: 1), F.item(F.t2, F.world)], .waitingRetry(attempt: 1),
                    jitter: jitter))
        #expect(step.effects == [.scheduleRetry(after: delay)])
    }

    @Test("A rate limit waits exactly Retry-After")
    func rateLimitRetryAfter() {
        let (jitter, _) = F.draw(attempt: 1)
        let start = F.state([F.item(F.t1, F.hello, .sending)], .sending)
        let step = ChatStep(
            machine, from: start, on: .sendResponse(F.t1, .failure(.rateLimited(retryAfter: .seconds(12)))))
        #expect(step.state == F.state([F.item(F.t1, F.hello, attempts: 1)], .waitingRetry(attempt: 1), jitter: jitter))
        #expect(step.effects == [.scheduleRetry(after: .seconds(12))])
    }

    @Test("The retry resends the same transaction ID and content")
    func retryReusesTransactionID() {
        let start = F.state([F.item(F.t1, F.hello, attempts: 1), F.item(F.t2, F.world)], .waitingRetry(attempt: 1))
        let step = ChatStep(machine, from: start, on: .timerFired(.retry))
        #expect(step.state == F.state([F.item(F.t1, F.hello, .sending, attempts: 1), F.item(F.t2, F.world)], .sending))
        #expect(step.effects == [.sendEvent(F.t1, F.hello)])
    }

    @Test("A second 5xx doubles the base delay")
    func secondServerError() {
        var jitter = JitterSource(seed: 9)
        let delay = jitter.delay(attempt: 2, backoff: .sendQueue)
        let start = F.state([F.item(F.t1, F.hello, .sending, attempts: 1)], .sending)
        let step = ChatStep(machine, from: start, on: .sendResponse(F.t1, .failure(.server(status: 503))))
        #expect(step.state == F.state([F.item(F.t1, F.hello, attempts: 2)], .waitingRetry(attempt: 2), jitter: jitter))
        #expect(step.effects == [.scheduleRetry(after: delay)])
        #expect(delay >= .seconds(2) && delay < .seconds(4))
    }

    @Test("A network change retries at once and cancels the timer")
    func networkChangeRetries() {
        let start = F.state([F.item(F.t1, F.hello, attempts: 3)], .waitingRetry(attempt: 3))
        let step = ChatStep(machine, from: start, on: .networkChanged)
        #expect(step.state == F.state([F.item(F.t1, F.hello, .sending, attempts: 3)], .sending))
        #expect(step.effects == [.cancel(SendQueueMachine.retryKey), .sendEvent(F.t1, F.hello)])
    }

    @Test("A retry timer outside waitingRetry is ignored")
    func strayTimer() {
        #expect(
            ChatStep(machine, from: F.state([F.item(F.t1, F.hello, .sending)], .sending), on: .timerFired(.retry))
                .isIgnored
        )
    }

    // MARK: Token refresh

    @Test("M_UNKNOWN_TOKEN asks for a refresh and waits; the item is not failed")
    func unknownTokenWaits() {
        let start = F.state([F.item(F.t1, F.hello, .sending)], .sending)
        let step = ChatStep(machine, from: start, on: .sendResponse(F.t1, .failure(.unknownToken)))
        #expect(step.state == F.state([F.item(F.t1, F.hello)], .waitingToken))
        #expect(step.effects == [.requestTokenRefresh])
    }

    @Test("A refreshed token resends the head with the same transaction ID")
    func tokenRefreshedResends() {
        let start = F.state([F.item(F.t1, F.hello)], .waitingToken)
        let step = ChatStep(machine, from: start, on: .tokenRefreshed)
        #expect(step.state == F.state([F.item(F.t1, F.hello, .sending)], .sending))
        #expect(step.effects == [.sendEvent(F.t1, F.hello)])
    }

    @Test("Cancelling the head while waiting for a token keeps waiting")
    func cancelWhileWaitingToken() {
        let start = F.state([F.item(F.t1, F.hello), F.item(F.t2, F.world)], .waitingToken)
        let step = ChatStep(machine, from: start, on: .cancelRequested(F.t1))
        #expect(step.state == F.state([F.item(F.t1, F.hello, .cancelled), F.item(F.t2, F.world)], .waitingToken))
        #expect(step.effects == [.discard(F.t1)])
    }

    // MARK: Permanent failures

    @Test("A permanent error fails the head with a persisted reason and holds later items")
    func permanentErrorBlocks() {
        let start = F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world)], .sending)
        let step = ChatStep(machine, from: start, on: .sendResponse(F.t1, .failure(.permanent(.forbidden))))
        #expect(
            step.state == F.state([F.item(F.t1, F.hello, .failed(.forbidden)), F.item(F.t2, F.world)], .blocked(F.t1)))
        #expect(step.effects == [.recordFailure(F.t1, .forbidden)])
    }

    @Test("Items enqueued behind a failed head are persisted but held")
    func enqueueWhileBlocked() {
        let start = F.state([F.item(F.t1, F.hello, .failed(.tooLarge))], .blocked(F.t1))
        let result = run(machine, from: start, [.enqueued(F.t2, F.world), .persisted(F.t2)])
        #expect(
            result.state == F.state([F.item(F.t1, F.hello, .failed(.tooLarge)), F.item(F.t2, F.world)], .blocked(F.t1)))
        #expect(result.effects == [.persist(F.item(F.t2, F.world, persisted: false))])
    }

    @Test("Resending the failed head clears its reason and sends it again, first")
    func resendFailed() {
        let start = F.state(
            [F.item(F.t1, F.hello, .failed(.forbidden), attempts: 2), F.item(F.t2, F.world)], .blocked(F.t1))
        let step = ChatStep(machine, from: start, on: .resendRequested(F.t1))
        #expect(step.state == F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world)], .sending))
        #expect(step.effects == [.clearFailure(F.t1), .sendEvent(F.t1, F.hello)])
    }

    @Test("Cancelling the failed head releases the items behind it, in order")
    func cancelFailedHead() {
        let start = F.state([F.item(F.t1, F.hello, .failed(.forbidden)), F.item(F.t2, F.world)], .blocked(F.t1))
        let step = ChatStep(machine, from: start, on: .cancelRequested(F.t1))
        #expect(step.state == F.state([F.item(F.t1, F.hello, .cancelled), F.item(F.t2, F.world, .sending)], .sending))
        #expect(step.effects == [.discard(F.t1), .sendEvent(F.t2, F.world)])
    }

    @Test("Resending while nothing is blocked is ignored")
    func resendNotFailed() {
        #expect(
            ChatStep(machine, from: F.state([F.item(F.t1, F.hello, .sending)], .sending), on: .resendRequested(F.t1))
                .isIgnored)
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
    func cancelQueued() {
        let start = F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world)], .sending)
        let step = ChatStep(machine, from: start, on: .cancelRequested(F.t2))
        #expect(step.state == F.state([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world, .cancelled)], .sending))
        #expect(step.effects == [.discard(F.t2)])
    }

    @Test("The store's deletion removes a cancelled item")
    func discardedRemoves() {
        let start = F.state([F.item(F.t1, F.hello, .cancelled)], .idle)
        let step = ChatStep(machine, from: start, on: .discarded(F.t1))
        #expect(step.state == F.state([], .idle))
        #expect(step.effects == [])
    }

    @Test("An item cancelled before it was persisted is deleted once the store has it")
    func cancelBeforePersisted() {
        let start = F.state([F.item(F.t1, F.hello, persisted: false)], .idle)
        let result = run(machine, from: start, [.cancelRequested(F.t1), .persisted(F.t1)])
        #expect(result.state == F.state([F.item(F.t1, F.hello, .cancelled)], .idle))
        #expect(result.effects == [.discard(F.t1)])
    }

    @Test("An item whose PUT is in flight cannot be cancelled")
    func cancelInFlightIgnored() {
        let start = F.state([F.item(F.t1, F.hello, .sending)], .sending)
        #expect(ChatStep(machine, from: start, on: .cancelRequested(F.t1)).isUnchanged(from: start))
    }

    @Test("Cancelling the head during its retry wait cancels the timer and starts the next")
    func cancelWaitingRetryHead() {
        let start = F.state([F.item(F.t1, F.hello, attempts: 1), F.item(F.t2, F.world)], .waitingRetry(attempt: 1))
        let step = ChatStep(machine, from: start, on: .cancelRequested(F.t1))
        #expect(
            step.state
                == F.state([F.item(F.t1, F.hello, .cancelled, attempts: 1), F.item(F.t2, F.world, .sending)], .sending))
        #expect(step.effects == [.discard(F.t1), .cancel(SendQueueMachine.retryKey), .sendEvent(F.t2, F.world)])
    }

    @Test("A remote echo for a cancelled item changes nothing")
    func echoForCancelled() {
        let start = F.state([F.item(F.t1, F.hello, .cancelled)], .idle)
        #expect(ChatStep(machine, from: start, on: .remoteEchoReceived(F.t1, F.e1)).isUnchanged(from: start))
    }

    @Test("A remote echo while waiting to retry proves an earlier attempt landed")
    func echoWhileWaitingRetry() {
        let start = F.state([F.item(F.t1, F.hello, attempts: 1)], .waitingRetry(attempt: 1))
        let step = ChatStep(machine, from: start, on: .remoteEchoReceived(F.t1, F.e1))
        #expect(step.state == F.state([], .idle))
        #expect(step.effects == [.recordSent(F.t1, F.e1), .cancel(SendQueueMachine.retryKey)])
    }

    // MARK: Encryption

    @Test("In an encrypted room the head is encrypted before it is sent")
    func encryptFirst() {
        let start = F.state([F.item(F.t1, F.hello, persisted: false)], .idle, encrypted: true)
        let step = ChatStep(machine, from: start, on: .persisted(F.t1))
        #expect(step.state == F.state([F.item(F.t1, F.hello, .encrypting)], .sending, encrypted: true))
        #expect(step.effects == [.encrypt(F.t1, F.hello)])
    }

    @Test("The encrypted content is sent and kept for retries")
    func encryptedIsSent() {
        let start = F.state([F.item(F.t1, F.hello, .encrypting)], .sending, encrypted: true)
        let step = ChatStep(machine, from: start, on: .encrypted(F.t1, .success(F.cipher)))
        #expect(
            step.state == F.state([F.item(F.t1, F.hello, .sending, encrypted: F.cipher)], .sending, encrypted: true))
        #expect(step.effects == [.sendEvent(F.t1, F.cipher)])
    }

    @Test("A retry in an encrypted room resends the same ciphertext")
    func retryKeepsCiphertext() {
        let start = F.state(
            [F.item(F.t1, F.hello, attempts: 1, encrypted: F.cipher)], .waitingRetry(attempt: 1), encrypted: true)
        let step = ChatStep(machine, from: start, on: .timerFired(.retry))
        #expect(
            step.state
                == F.state(
                    [F.item(F.t1, F.hello, .sending, attempts: 1, encrypted: F.cipher)], .sending, encrypted: true))
        #expect(step.effects == [.sendEvent(F.t1, F.cipher)])
    }

    @Test("An encryption failure fails the head like a permanent send error")
    func encryptionFails() {
        let start = F.state([F.item(F.t1, F.hello, .encrypting)], .sending, encrypted: true)
        let step = ChatStep(machine, from: start, on: .encrypted(F.t1, .failure(.permanent(.encryptionFailed))))
        #expect(
            step.state == F.state([F.item(F.t1, F.hello, .failed(.encryptionFailed))], .blocked(F.t1), encrypted: true))
        #expect(step.effects == [.recordFailure(F.t1, .encryptionFailed)])
    }

    @Test("Cancelling the head while it is being encrypted cancels the encryption")
    func cancelEncrypting() {
        let start = F.state([F.item(F.t1, F.hello, .encrypting)], .sending, encrypted: true)
        let step = ChatStep(machine, from: start, on: .cancelRequested(F.t1))
        #expect(step.state == F.state([F.item(F.t1, F.hello, .cancelled)], .idle, encrypted: true))
        #expect(step.effects == [.cancel(SendQueueMachine.requestKey), .discard(F.t1)])
    }

    @Test("Turning on encryption applies to items not yet encrypted")
    func encryptionEnabled() {
        let start = F.state([F.item(F.t1, F.hello, attempts: 1)], .waitingRetry(attempt: 1))
        let result = run(machine, from: start, [.encryptionEnabled, .timerFired(.retry)])
        #expect(result.state == F.state([F.item(F.t1, F.hello, .encrypting, attempts: 1)], .sending, encrypted: true))
        #expect(result.effects == [.encrypt(F.t1, F.hello)])
    }

    @Test("Encryption cannot be turned on twice")
    func encryptionEnabledTwice() {
        let start = F.empty(encrypted: true)
        #expect(ChatStep(machine, from: start, on: .encryptionEnabled).isUnchanged(from: start))
    }

    // MARK: Restore

    @Test("Restored items go first; an interrupted request is tried again")
    func restore() {
        let start = F.state([F.item(F.t3, F.world, persisted: false)], .idle)
        let step = ChatStep(
            machine, from: start,
            on: .restored([F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world, .failed(.tooLarge))]))
        #expect(
            step.state
                == F.state(
                    [
                        F.item(F.t1, F.hello, .sending), F.item(F.t2, F.world, .failed(.tooLarge)),
                        F.item(F.t3, F.world, persisted: false),
                    ],
                    .sending))
        #expect(step.effects == [.sendEvent(F.t1, F.hello)])
    }

    @Test("A restored failed head blocks the queue")
    func restoreFailedHead() {
        let step = ChatStep(machine, from: F.empty(), on: .restored([F.item(F.t1, F.hello, .failed(.forbidden))]))
        #expect(step.state == F.state([F.item(F.t1, F.hello, .failed(.forbidden))], .blocked(F.t1)))
        #expect(step.effects == [])
    }

    @Test("A restored cancelled item is deleted again")
    func restoreCancelled() {
        let step = ChatStep(machine, from: F.empty(), on: .restored([F.item(F.t1, F.hello, .cancelled)]))
        #expect(step.state == F.state([F.item(F.t1, F.hello, .cancelled)], .idle))
        #expect(step.effects == [.discard(F.t1)])
    }

    @Test("Restoring while a request is in flight is ignored")
    func restoreWhileSending() {
        #expect(
            ChatStep(machine, from: F.state([F.item(F.t1, F.hello, .sending)], .sending), on: .restored([])).isIgnored)
    }

    @Test("Resending another item than the failed head changes nothing")
    func resendOtherWhileBlocked() {
        let start = F.state([F.item(F.t1, F.hello, .failed(.forbidden)), F.item(F.t2, F.world)], .blocked(F.t1))
        #expect(ChatStep(machine, from: start, on: .resendRequested(F.t2)).isUnchanged(from: start))
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
