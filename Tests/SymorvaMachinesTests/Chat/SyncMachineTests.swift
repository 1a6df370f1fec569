import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@Suite("SyncMachine")
struct SyncMachineTests {
    let machine = SyncMachine()
    let filter = FilterID("f1")
    let since = SyncToken("s1")
    let next = SyncToken("s2")

    func progress(
        since: SyncToken?, pending: SyncToken? = nil, failures: Int = 0, seed: UInt64 = 7
    ) -> SyncProgress {
        SyncProgress(
            since: since, filterID: filter, pendingBatch: pending, consecutiveFailures: failures,
            jitter: JitterSource(seed: seed))
    }

    /// The jitter stream after `draws` values, and the delay of the last draw.
    func backoff(seed: UInt64 = 7, attempt: Int, retryAfter: Duration? = nil) -> (JitterSource, Duration) {
        var jitter = JitterSource(seed: seed)
        let delay = jitter.delay(attempt: attempt, backoff: .sync, retryAfter: retryAfter)
        return (jitter, delay)
    }

    // MARK: Starting and stopping

    @Test("A first start without a since-token runs the initial sync with timeout 0")
    func startWithoutSince() throws {
        let store = MachineTestStore(machine, initial: .stopped)
        try store.send(
            .started(SyncStart(since: nil, filterID: filter, jitterSeed: 7)),
            expecting: .initialSync(progress(since: nil)),
            effects: [.sendSync(since: nil, timeout: .zero, filterID: filter)])
    }

    @Test("A start from a stored since-token catches up with timeout 0")
    func startWithSince() throws {
        let store = MachineTestStore(machine, initial: .stopped)
        try store.send(
            .started(SyncStart(since: since, filterID: filter, jitterSeed: 7)),
            expecting: .catchingUp(progress(since: since)),
            effects: [.sendSync(since: since, timeout: .zero, filterID: filter)])
    }

    @Test("Stopping a live loop cancels the open request")
    func stopLive() throws {
        let store = MachineTestStore(machine, initial: .live(progress(since: since)))
        try store.send(.stopped, expecting: .stopped, effects: [.cancel(SyncMachine.requestKey)])
    }

    @Test("Stopping while backing off needs no effect: the retry timer is the state timeout")
    func stopBackingOff() throws {
        let store = MachineTestStore(
            machine, initial: .backingOff(progress(since: since, failures: 1), attempt: 1, after: .seconds(1)))
        try store.send(.stopped, expecting: .stopped)
    }

    @Test("A stopped loop ignores results and timers")
    func stoppedIgnoresResults() throws {
        for event: SyncMachine.Event in [
            .syncResponse(.success(SyncBatchSummary(nextBatch: next))), .persisted(.success(next)),
            .timerFired(.retry), .networkChanged, .tokenRejected, .tokenRefreshed,
        ] {
            try MachineTestStore(machine, initial: .stopped).assertIgnored(event)
        }
    }

    @Test("A second start while running is ignored")
    func startWhileRunning() throws {
        let store = MachineTestStore(machine, initial: .live(progress(since: since)))
        try store.assertIgnored(.started(SyncStart(since: nil, jitterSeed: 1)))
    }

    // MARK: Responses and commits

    @Test("A response is handed to the store; the since-token does not move yet")
    func responseIsStored() throws {
        let summary = SyncBatchSummary(nextBatch: next, joinedRoomCount: 3, timelineEventCount: 10)
        let store = MachineTestStore(machine, initial: .initialSync(progress(since: nil)))
        try store.send(
            .syncResponse(.success(summary)), expecting: .initialSync(progress(since: nil, pending: next)),
            effects: [.storeSyncResponse(nextBatch: next)])
    }

    @Test("The commit of the initial batch advances since and starts the long poll")
    func initialCommitGoesLive() throws {
        let store = MachineTestStore(machine, initial: .initialSync(progress(since: nil, pending: next)))
        try store.send(
            .persisted(.success(next)), expecting: .live(progress(since: next)),
            effects: [.sendSync(since: next, timeout: .seconds(30), filterID: filter)])
    }

    @Test("Catching up goes live after its batch is committed")
    func catchUpCommitGoesLive() throws {
        let store = MachineTestStore(machine, initial: .catchingUp(progress(since: since, pending: next)))
        try store.send(
            .persisted(.success(next)), expecting: .live(progress(since: next)),
            effects: [.sendSync(since: next, timeout: .seconds(30), filterID: filter)])
    }

    @Test("A live commit resets the failure count and polls again")
    func liveCommitPollsAgain() throws {
        let store = MachineTestStore(machine, initial: .live(progress(since: since, pending: next, failures: 2)))
        try store.send(
            .persisted(.success(next)), expecting: .live(progress(since: next)),
            effects: [.sendSync(since: next, timeout: .seconds(30), filterID: filter)])
    }

    @Test("A commit for another batch is stale and changes nothing")
    func staleCommitIgnored() throws {
        let store = MachineTestStore(machine, initial: .live(progress(since: since, pending: next)))
        try store.send(.persisted(.success(SyncToken("old"))), stayingWith: [])
    }

    @Test("A response while a commit is running changes nothing")
    func responseWhileStoringIgnored() throws {
        let store = MachineTestStore(machine, initial: .live(progress(since: since, pending: next)))
        try store.send(.syncResponse(.success(SyncBatchSummary(nextBatch: SyncToken("s3")))), stayingWith: [])
    }

    @Test("A failed commit is permanent")
    func commitFailure() throws {
        let store = MachineTestStore(machine, initial: .live(progress(since: since, pending: next)))
        try store.send(.persisted(.failure(.storeFailed)), expecting: .failed(.storeFailed))
    }

    @Test("A commit that fails because the store is full backs off, then asks for the same batch again")
    func commitStoreFullBacksOff() throws {
        let (jitter, delay) = backoff(attempt: 1)
        var expected = progress(since: since, failures: 1)
        expected.jitter = jitter
        let store = MachineTestStore(machine, initial: .live(progress(since: since, pending: next)))
        try store.send(
            .persisted(.failure(.storeUnavailable(.full))),
            expecting: .backingOff(expected, attempt: 1, after: delay), effects: [.scheduleRetry(after: delay)])
        try store.send(
            .timerFired(.retry), expecting: .catchingUp(expected),
            effects: [.sendSync(since: since, timeout: .zero, filterID: filter)])
    }

    @Test("A busy store during the initial sync backs off and starts the initial sync again")
    func initialCommitStoreBusyBacksOff() throws {
        let (jitter, delay) = backoff(attempt: 1)
        var expected = progress(since: nil, failures: 1)
        expected.jitter = jitter
        let store = MachineTestStore(machine, initial: .initialSync(progress(since: nil, pending: next)))
        try store.send(
            .persisted(.failure(.storeUnavailable(.busy))),
            expecting: .backingOff(expected, attempt: 1, after: delay), effects: [.scheduleRetry(after: delay)])
        try store.send(
            .timerFired(.retry), expecting: .initialSync(expected),
            effects: [.sendSync(since: nil, timeout: .zero, filterID: filter)])
    }

    @Test("A full store while the token is refreshed drops the batch; the refresh asks for it again")
    func commitStoreFullWhileAwaitingToken() throws {
        let store = MachineTestStore(machine, initial: .awaitingToken(progress(since: since, pending: next)))
        try store.send(
            .persisted(.failure(.storeUnavailable(.full))), expecting: .awaitingToken(progress(since: since)))
        try store.send(
            .tokenRefreshed, expecting: .catchingUp(progress(since: since)),
            effects: [.sendSync(since: since, timeout: .zero, filterID: filter)])
    }

    // MARK: Failures and backoff

    @Test("A network failure backs off with jitter from the seeded stream")
    func networkFailureBacksOff() throws {
        let (jitter, delay) = backoff(attempt: 1)
        var expected = progress(since: since, failures: 1)
        expected.jitter = jitter
        let store = MachineTestStore(machine, initial: .live(progress(since: since)))
        try store.send(
            .syncResponse(.failure(.network)), expecting: .backingOff(expected, attempt: 1, after: delay),
            effects: [.scheduleRetry(after: delay)])

        #expect(delay >= .milliseconds(500) && delay < .seconds(1))
    }

    @Test("A second failure doubles the base delay")
    func secondFailure() throws {
        var expected = progress(since: since, failures: 2)
        var jitter = JitterSource(seed: 7)
        _ = jitter.next()
        let delay = jitter.delay(attempt: 2, backoff: .sync)
        expected.jitter = jitter
        var start = progress(since: since, failures: 1)
        start.jitter = JitterSource(seed: 7)
        _ = start.jitter.next()
        let store = MachineTestStore(machine, initial: .catchingUp(start))
        try store.send(
            .syncResponse(.failure(.server(status: 502))), expecting: .backingOff(expected, attempt: 2, after: delay),
            effects: [.scheduleRetry(after: delay)])

        #expect(delay >= .seconds(1) && delay < .seconds(2))
    }

    @Test("Rate limiting waits exactly the server's Retry-After")
    func rateLimitedHonoursRetryAfter() throws {
        let (jitter, _) = backoff(attempt: 1)
        var expected = progress(since: since, failures: 1)
        expected.jitter = jitter
        let store = MachineTestStore(machine, initial: .live(progress(since: since)))
        try store.send(
            .syncResponse(.failure(.rateLimited(retryAfter: .seconds(7)))),
            expecting: .backingOff(expected, attempt: 1, after: .seconds(7)),
            effects: [.scheduleRetry(after: .seconds(7))])
    }

    @Test(
        "Rate limiting clamps the server's hint: huge waits the ceiling, 0 the floor",
        arguments: [(Duration.milliseconds(999_999_999), Duration.seconds(300)), (.zero, .seconds(1))])
    func rateLimitedClampsRetryAfter(hint: Duration, wait: Duration) throws {
        let (jitter, _) = backoff(attempt: 1)
        var expected = progress(since: since, failures: 1)
        expected.jitter = jitter
        let store = MachineTestStore(machine, initial: .live(progress(since: since)))
        try store.send(
            .syncResponse(.failure(.rateLimited(retryAfter: hint))),
            expecting: .backingOff(expected, attempt: 1, after: wait), effects: [.scheduleRetry(after: wait)])
    }

    @Test("Rate limiting with a negative Retry-After uses the backoff, as if there were none")
    func rateLimitedNegativeRetryAfter() throws {
        let (jitter, delay) = backoff(attempt: 1)
        var expected = progress(since: since, failures: 1)
        expected.jitter = jitter
        let store = MachineTestStore(machine, initial: .live(progress(since: since)))
        try store.send(
            .syncResponse(.failure(.rateLimited(retryAfter: .milliseconds(-5)))),
            expecting: .backingOff(expected, attempt: 1, after: delay), effects: [.scheduleRetry(after: delay)])
    }

    @Test("Rate limiting without Retry-After uses the backoff")
    func rateLimitedWithoutRetryAfter() throws {
        let (jitter, delay) = backoff(attempt: 1)
        var expected = progress(since: since, failures: 1)
        expected.jitter = jitter
        let store = MachineTestStore(machine, initial: .live(progress(since: since)))
        try store.send(
            .syncResponse(.failure(.rateLimited(retryAfter: nil))),
            expecting: .backingOff(expected, attempt: 1, after: delay), effects: [.scheduleRetry(after: delay)])
    }

    @Test("A permanent rejection fails the loop")
    func permanentFailure() throws {
        let error = SyncError.rejected(status: 400, errorCode: "M_INVALID_PARAM")
        let store = MachineTestStore(machine, initial: .catchingUp(progress(since: since)))
        try store.send(.syncResponse(.failure(error)), expecting: .failed(error))
    }

    @Test("The retry timer catches up from the committed since-token")
    func retryCatchesUp() throws {
        let start = progress(since: since, failures: 1)
        let store = MachineTestStore(machine, initial: .backingOff(start, attempt: 1, after: .seconds(1)))
        try store.send(
            .timerFired(.retry), expecting: .catchingUp(start),
            effects: [.sendSync(since: since, timeout: .zero, filterID: filter)])
    }

    @Test("The retry timer repeats the initial sync when nothing was committed yet")
    func retryInitial() throws {
        let start = progress(since: nil, failures: 1)
        let store = MachineTestStore(machine, initial: .backingOff(start, attempt: 1, after: .seconds(1)))
        try store.send(
            .timerFired(.retry), expecting: .initialSync(start),
            effects: [.sendSync(since: nil, timeout: .zero, filterID: filter)])
    }

    @Test("A network change while backing off retries at once")
    func networkChangeRetries() throws {
        let start = progress(since: since, failures: 3)
        let store = MachineTestStore(machine, initial: .backingOff(start, attempt: 3, after: .seconds(4)))
        try store.send(
            .networkChanged, expecting: .catchingUp(start),
            effects: [.sendSync(since: since, timeout: .zero, filterID: filter)])
    }

    @Test("A network change replaces a hanging long poll with a quick catch-up")
    func networkChangeLive() throws {
        let store = MachineTestStore(machine, initial: .live(progress(since: since)))
        try store.send(
            .networkChanged, expecting: .catchingUp(progress(since: since)),
            effects: [.sendSync(since: since, timeout: .zero, filterID: filter)])
    }

    @Test("A network change during a commit changes nothing: the next request follows the commit")
    func networkChangeWhileStoring() throws {
        let start = SyncMachine.State.live(progress(since: since, pending: next))
        try MachineTestStore(machine, initial: start).send(.networkChanged, stayingWith: [])
    }

    @Test("Start from failed begins again")
    func restartFromFailed() throws {
        let store = MachineTestStore(machine, initial: .failed(.storeFailed))
        try store.send(
            .started(SyncStart(since: since, filterID: filter, jitterSeed: 7)),
            expecting: .catchingUp(progress(since: since)),
            effects: [.sendSync(since: since, timeout: .zero, filterID: filter)])
    }

    // MARK: Token refresh

    @Test("A rejected token cancels the request and asks the session for a refresh")
    func tokenRejected() throws {
        let store = MachineTestStore(machine, initial: .live(progress(since: since)))
        try store.send(
            .tokenRejected, expecting: .awaitingToken(progress(since: since)),
            effects: [.cancel(SyncMachine.requestKey), .requestTokenRefresh])
    }

    @Test("A rejected token while backing off asks for a refresh; the move cancels the timer")
    func tokenRejectedBackingOff() throws {
        let start = progress(since: since, failures: 1)
        let store = MachineTestStore(machine, initial: .backingOff(start, attempt: 1, after: .seconds(1)))
        try store.send(.tokenRejected, expecting: .awaitingToken(start), effects: [.requestTokenRefresh])
    }

    @Test("A refreshed token resumes with a catch-up")
    func tokenRefreshed() throws {
        let store = MachineTestStore(machine, initial: .awaitingToken(progress(since: since)))
        try store.send(
            .tokenRefreshed, expecting: .catchingUp(progress(since: since)),
            effects: [.sendSync(since: since, timeout: .zero, filterID: filter)])
    }

    @Test("A commit that finishes while waiting for the token still advances since")
    func commitWhileAwaitingToken() throws {
        let store = MachineTestStore(machine, initial: .awaitingToken(progress(since: since, pending: next)))
        try store.send(.persisted(.success(next)), expecting: .awaitingToken(progress(since: next)))
    }

    @Test("A refreshed token while a commit runs waits for the commit before polling")
    func refreshedWhileStoring() throws {
        let store = MachineTestStore(machine, initial: .awaitingToken(progress(since: since, pending: next)))
        try store.send(.tokenRefreshed, expecting: .catchingUp(progress(since: since, pending: next)))
        try store.send(
            .persisted(.success(next)), expecting: .live(progress(since: next)),
            effects: [.sendSync(since: next, timeout: .seconds(30), filterID: filter)])
    }

    @Test("A failed commit while waiting for the token fails the loop")
    func commitFailsWhileAwaitingToken() throws {
        let store = MachineTestStore(machine, initial: .awaitingToken(progress(since: since, pending: next)))
        try store.send(.persisted(.failure(.storeFailed)), expecting: .failed(.storeFailed))
    }

    // MARK: Effects and the chart

    @Test("Effects are scheduled under their keys")
    func directives() {
        #expect(
            SyncMachine.Effect.sendSync(since: nil, timeout: .zero, filterID: nil).directive == .keyed("sync.request"))
        #expect(SyncMachine.Effect.storeSyncResponse(nextBatch: next).directive == .keyed("sync.store"))
        #expect(
            SyncMachine.Effect.scheduleRetry(after: .seconds(1)).directive == .timer(.stateTimeout, .after(.seconds(1)))
        )
        #expect(SyncMachine.Effect.requestTokenRefresh.directive == .perform)
        #expect(SyncMachine().event(firing: .scheduleRetry(after: .seconds(1))) == .timerFired(.retry))
        #expect(SyncMachine().event(firing: .requestTokenRefresh) == nil)
        #expect(SyncMachine.Effect.cancel("sync.request").directive == .cancel("sync.request"))
    }

    @Test("Every (state, event) pair matches StateCharts/Sync.scxml")
    func chart() throws {
        let states: [SyncMachine.State] = [
            .stopped,
            .initialSync(progress(since: nil)), .initialSync(progress(since: nil, pending: next)),
            .catchingUp(progress(since: since)), .catchingUp(progress(since: since, pending: next)),
            .live(progress(since: since)), .live(progress(since: since, pending: next)),
            .backingOff(progress(since: nil, failures: 1), attempt: 1, after: .seconds(1)),
            .backingOff(progress(since: since, failures: 1), attempt: 1, after: .seconds(1)),
            .awaitingToken(progress(since: nil)), .awaitingToken(progress(since: since)),
            .awaitingToken(progress(since: since, pending: next)),
            .failed(.storeFailed),
        ]
        let events: [SyncMachine.Event] = [
            .started(SyncStart(since: nil, jitterSeed: 1)), .started(SyncStart(since: since, jitterSeed: 1)),
            .stopped,
            .syncResponse(.success(SyncBatchSummary(nextBatch: SyncToken("s3")))),
            .syncResponse(.failure(.network)), .syncResponse(.failure(.rateLimited(retryAfter: .seconds(2)))),
            .syncResponse(.failure(.rejected(status: 403, errorCode: "M_FORBIDDEN"))),
            .persisted(.success(next)), .persisted(.success(SyncToken("other"))), .persisted(.failure(.storeFailed)),
            .persisted(.failure(.storeUnavailable(.full))), .timerFired(.retry), .networkChanged, .tokenRejected,
            .tokenRefreshed,
        ]
        try ChartChecker(machine: machine).assertConforms(states: states, events: events, initial: .stopped)
    }
}

@Suite("RetryBackoff")
struct RetryBackoffTests {
    @Test("The base doubles per attempt and stops at the cap")
    func growthAndCap() {
        let backoff = RetryBackoff(initialDelay: .seconds(1), maximumDelay: .seconds(60), jitterRatio: 0)
        #expect(backoff.delay(attempt: 1, jitter: 0.9) == .seconds(1))
        #expect(backoff.delay(attempt: 2, jitter: 0.9) == .seconds(2))
        #expect(backoff.delay(attempt: 6, jitter: 0.9) == .seconds(32))
        #expect(backoff.delay(attempt: 7, jitter: 0.9) == .seconds(60))
        #expect(backoff.delay(attempt: 10_000, jitter: 0.9) == .seconds(60))
    }

    @Test("Equal jitter stays between half the base and the base")
    func jitterBounds() {
        let backoff = RetryBackoff.sync
        #expect(backoff.delay(attempt: 3, jitter: 0) == .seconds(2))
        #expect(backoff.delay(attempt: 3, jitter: 0.5) == .seconds(3))
        #expect(backoff.delay(attempt: 3, jitter: 0.999_999) < .seconds(4))
    }

    @Test("Retry-After wins over the backoff, without jitter, clamped to the server-wait ceiling")
    func retryAfter() {
        #expect(RetryBackoff.sync.delay(attempt: 9, jitter: 0.3, retryAfter: .seconds(200)) == .seconds(200))
        #expect(RetryBackoff.sync.delay(attempt: 9, jitter: 0.3, retryAfter: .seconds(600)) == ServerWait.ceiling)
    }

    @Test("The jitter stream is deterministic per seed and stays in 0..<1")
    func jitterStream() {
        var first = JitterSource(seed: 42)
        var second = JitterSource(seed: 42)
        for _ in 0..<1_000 {
            let value = first.next()
            #expect(value == second.next())
            #expect(value >= 0 && value < 1)
        }
        var other = JitterSource(seed: 43)
        #expect(JitterSource(seed: 42) != other)
        _ = other.next()
    }
}
