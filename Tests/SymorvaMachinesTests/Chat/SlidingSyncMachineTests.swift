import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@Suite("SlidingSyncMachine")
struct SlidingSyncMachineTests {
    /// A first window of 20 rows, steps of 100.
    let machine = SlidingSyncMachine(firstWindow: 20, growthStep: 100)
    let pos = SlidingSyncPosition("p1")
    let next = SlidingSyncPosition("p2")
    let room = "!open:example.org"

    func progress(
        pos: SlidingSyncPosition?, rangeEnd: Int = 19, count: Int? = nil, subscriptions: Set<String> = [],
        pending: SlidingSyncSummary? = nil, failures: Int = 0, seed: UInt64 = 7
    ) -> SlidingSyncProgress {
        SlidingSyncProgress(
            pos: pos, rangeEnd: rangeEnd, roomCount: count, subscriptions: subscriptions, pending: pending,
            consecutiveFailures: failures, jitter: JitterSource(seed: seed))
    }

    func request(
        pos: SlidingSyncPosition?, timeout: Duration = .zero, rangeEnd: Int = 19, subscriptions: [String] = []
    ) -> SlidingSyncMachine.Effect {
        .sendSlidingSync(
            SlidingSyncRequest(pos: pos, timeout: timeout, range: 0...rangeEnd, subscriptions: subscriptions))
    }

    func summary(_ pos: SlidingSyncPosition, count: Int) -> SlidingSyncSummary {
        SlidingSyncSummary(pos: pos, roomCount: count, roomsInResponse: min(count, 20))
    }

    /// The jitter stream after one draw, and the delay of that draw.
    func backoff(seed: UInt64 = 7, attempt: Int, retryAfter: Duration? = nil) -> (JitterSource, Duration) {
        var jitter = JitterSource(seed: seed)
        let delay = jitter.delay(attempt: attempt, backoff: .sync, retryAfter: retryAfter)
        return (jitter, delay)
    }

    // MARK: Starting and stopping

    @Test("A first start opens a new connection for the first window, timeout 0")
    func startWithoutPosition() throws {
        let store = MachineTestStore(machine, initial: .stopped)
        try store.send(
            .started(SlidingSyncStart(pos: nil, subscriptions: [room], jitterSeed: 7)),
            expecting: .firstWindow(progress(pos: nil, subscriptions: [room])),
            effects: [request(pos: nil, subscriptions: [room])])
    }

    @Test("A start from a stored position catches up on the same connection, from the first window")
    func startWithPosition() throws {
        let store = MachineTestStore(machine, initial: .stopped)
        try store.send(
            .started(SlidingSyncStart(pos: pos, jitterSeed: 7)), expecting: .growing(progress(pos: pos)),
            effects: [request(pos: pos)])
    }

    @Test("Stopping a running loop cancels the open request")
    func stopLive() throws {
        let store = MachineTestStore(machine, initial: .live(progress(pos: pos, rangeEnd: 99, count: 50)))
        try store.send(.stopped, expecting: .stopped, effects: [.cancel(SlidingSyncMachine.requestKey)])
    }

    @Test("Stopping while backing off or waiting for a token needs no effect")
    func stopWaiting() throws {
        try MachineTestStore(
            machine, initial: .backingOff(progress(pos: pos, failures: 1), attempt: 1, after: .seconds(1))
        ).send(.stopped, expecting: .stopped)
        try MachineTestStore(machine, initial: .awaitingToken(progress(pos: pos))).send(.stopped, expecting: .stopped)
    }

    @Test("A stopped or failed loop ignores everything but a start and a stop")
    func idleIgnores() throws {
        for initial: SlidingSyncMachine.State in [.stopped, .failed(.storeFailed)] {
            for event: SlidingSyncMachine.Event in [
                .syncResponse(.success(summary(next, count: 3))), .positionExpired, .persisted(.success(next)),
                .timerFired(.retry), .networkChanged, .tokenRejected, .tokenRefreshed, .subscriptionsChanged([room]),
            ] {
                try MachineTestStore(machine, initial: initial).assertIgnored(event)
            }
        }
    }

    @Test("A start while running is ignored")
    func startWhileRunning() throws {
        try MachineTestStore(machine, initial: .live(progress(pos: pos, count: 5)))
            .assertIgnored(.started(SlidingSyncStart(pos: nil, jitterSeed: 1)))
    }

    // MARK: The first window, the rest, live

    @Test("A response is handed to the store; pos does not move until the commit")
    func responseIsStored() throws {
        let store = MachineTestStore(machine, initial: .firstWindow(progress(pos: nil)))
        try store.send(
            .syncResponse(.success(summary(pos, count: 1_000))),
            expecting: .firstWindow(progress(pos: nil, pending: summary(pos, count: 1_000))),
            effects: [.storeSlidingSyncResponse(pos: pos)])
    }

    @Test("The committed first window of a long list grows the range by one step, at once")
    func firstWindowGrows() throws {
        let store = MachineTestStore(
            machine, initial: .firstWindow(progress(pos: nil, pending: summary(pos, count: 1_000))))
        try store.send(
            .persisted(.success(pos)), expecting: .growing(progress(pos: pos, rangeEnd: 119, count: 1_000)),
            effects: [request(pos: pos, rangeEnd: 119)])
    }

    @Test("The range grows step by step until it covers the list, then the loop long-polls")
    func growsThenLive() throws {
        let store = MachineTestStore(
            machine, initial: .growing(progress(pos: pos, rangeEnd: 119, count: 250)))
        try store.send(
            .syncResponse(.success(summary(next, count: 250))),
            expecting: .growing(progress(pos: pos, rangeEnd: 119, count: 250, pending: summary(next, count: 250))),
            effects: [.storeSlidingSyncResponse(pos: next)])
        try store.send(
            .persisted(.success(next)), expecting: .growing(progress(pos: next, rangeEnd: 219, count: 250)),
            effects: [request(pos: next, rangeEnd: 219)])
        let third = SlidingSyncPosition("p3")
        try store.send(
            .syncResponse(.success(summary(third, count: 250))),
            expecting: .growing(progress(pos: next, rangeEnd: 219, count: 250, pending: summary(third, count: 250))),
            effects: [.storeSlidingSyncResponse(pos: third)])
        // Clamped to the list's last row (249), not 219 + 100.
        try store.send(
            .persisted(.success(third)), expecting: .growing(progress(pos: third, rangeEnd: 249, count: 250)),
            effects: [request(pos: third, rangeEnd: 249)])
        let fourth = SlidingSyncPosition("p4")
        try store.send(
            .syncResponse(.success(summary(fourth, count: 250))),
            expecting: .growing(progress(pos: third, rangeEnd: 249, count: 250, pending: summary(fourth, count: 250))),
            effects: [.storeSlidingSyncResponse(pos: fourth)])
        try store.send(
            .persisted(.success(fourth)), expecting: .live(progress(pos: fourth, rangeEnd: 249, count: 250)),
            effects: [request(pos: fourth, timeout: .seconds(30), rangeEnd: 249)])
    }

    @Test("A short list is live after its first window")
    func shortListLive() throws {
        let store = MachineTestStore(
            machine, initial: .firstWindow(progress(pos: nil, pending: summary(pos, count: 7))))
        try store.send(
            .persisted(.success(pos)), expecting: .live(progress(pos: pos, count: 7)),
            effects: [request(pos: pos, timeout: .seconds(30))])
    }

    @Test("An account without rooms is live at once")
    func emptyListLive() throws {
        let store = MachineTestStore(
            machine, initial: .firstWindow(progress(pos: nil, pending: summary(pos, count: 0))))
        try store.send(
            .persisted(.success(pos)), expecting: .live(progress(pos: pos, count: 0)),
            effects: [request(pos: pos, timeout: .seconds(30))])
    }

    @Test("A live list that grows past its range (rooms joined) grows again")
    func liveListGrows() throws {
        let store = MachineTestStore(
            machine, initial: .live(progress(pos: pos, rangeEnd: 49, count: 50, pending: summary(next, count: 52))))
        try store.send(
            .persisted(.success(next)), expecting: .growing(progress(pos: next, rangeEnd: 51, count: 52)),
            effects: [request(pos: next, rangeEnd: 51)])
    }

    @Test("A live commit resets the failure count and polls again")
    func liveCommitPollsAgain() throws {
        let store = MachineTestStore(
            machine, initial: .live(progress(pos: pos, count: 10, pending: summary(next, count: 10), failures: 2)))
        try store.send(
            .persisted(.success(next)), expecting: .live(progress(pos: next, count: 10)),
            effects: [request(pos: next, timeout: .seconds(30))])
    }

    @Test("A commit of another response, or a response during a commit, changes nothing")
    func staleResults() throws {
        let store = MachineTestStore(
            machine, initial: .live(progress(pos: pos, count: 10, pending: summary(next, count: 10))))
        try store.send(.persisted(.success(SlidingSyncPosition("old"))), stayingWith: [])
        try store.send(.syncResponse(.success(summary(SlidingSyncPosition("p9"), count: 10))), stayingWith: [])
        try store.send(.syncResponse(.failure(.network)), stayingWith: [])
        try store.send(.positionExpired, stayingWith: [])
        try store.send(.networkChanged, stayingWith: [])
    }

    @Test("A commit result with nothing pending is stale")
    func commitWithoutPending() throws {
        let store = MachineTestStore(machine, initial: .live(progress(pos: pos, count: 10)))
        try store.send(.persisted(.success(pos)), stayingWith: [])
        try store.send(.persisted(.failure(.storeFailed)), stayingWith: [])
    }

    // MARK: M_UNKNOWN_POS

    @Test("M_UNKNOWN_POS opens a new connection from the first window, keeping the subscriptions")
    func unknownPositionResets() throws {
        let store = MachineTestStore(
            machine, initial: .live(progress(pos: pos, rangeEnd: 999, count: 1_000, subscriptions: [room])))
        try store.send(
            .positionExpired, expecting: .firstWindow(progress(pos: nil, subscriptions: [room])),
            effects: [request(pos: nil, subscriptions: [room])])
        // The new connection's first window is committed like any response; growing starts over.
        try store.send(
            .syncResponse(.success(summary(next, count: 1_000))),
            expecting: .firstWindow(progress(pos: nil, subscriptions: [room], pending: summary(next, count: 1_000))),
            effects: [.storeSlidingSyncResponse(pos: next)])
        try store.send(
            .persisted(.success(next)),
            expecting: .growing(progress(pos: next, rangeEnd: 119, count: 1_000, subscriptions: [room])),
            effects: [request(pos: next, rangeEnd: 119, subscriptions: [room])])
    }

    @Test("M_UNKNOWN_POS while growing resets the same way")
    func unknownPositionWhileGrowing() throws {
        let store = MachineTestStore(machine, initial: .growing(progress(pos: pos, rangeEnd: 119, count: 500)))
        try store.send(.positionExpired, expecting: .firstWindow(progress(pos: nil)), effects: [request(pos: nil)])
    }

    @Test("M_UNKNOWN_POS for a request without pos is a broken server: the loop fails instead of looping")
    func unknownPositionWithoutPosition() throws {
        let store = MachineTestStore(machine, initial: .firstWindow(progress(pos: nil)))
        try store.send(.positionExpired, expecting: .failed(.rejected(status: 400, errorCode: "M_UNKNOWN_POS")))
    }

    // MARK: Room subscriptions

    @Test("Opening a conversation replaces the open long-poll with a quick request carrying its subscription")
    func subscriptionResends() throws {
        let store = MachineTestStore(machine, initial: .live(progress(pos: pos, rangeEnd: 49, count: 50)))
        try store.send(
            .subscriptionsChanged([room, "!b:x"]),
            expecting: .live(progress(pos: pos, rangeEnd: 49, count: 50, subscriptions: [room, "!b:x"])),
            effects: [request(pos: pos, rangeEnd: 49, subscriptions: ["!b:x", room])])
    }

    @Test("Unchanged subscriptions send nothing")
    func subscriptionsUnchanged() throws {
        let store = MachineTestStore(machine, initial: .growing(progress(pos: pos, subscriptions: [room])))
        try store.send(.subscriptionsChanged([room]), stayingWith: [])
    }

    @Test("During a commit the subscriptions wait for the next request")
    func subscriptionDuringCommit() throws {
        let pending = summary(next, count: 10)
        let store = MachineTestStore(machine, initial: .firstWindow(progress(pos: nil, pending: pending)))
        try store.send(
            .subscriptionsChanged([room]),
            expecting: .firstWindow(progress(pos: nil, subscriptions: [room], pending: pending)))
        try store.send(
            .persisted(.success(next)), expecting: .live(progress(pos: next, count: 10, subscriptions: [room])),
            effects: [request(pos: next, timeout: .seconds(30), subscriptions: [room])])
    }

    @Test("While backing off a new subscription is kept and the retry timer restarts with the same delay")
    func subscriptionWhileBackingOff() throws {
        let store = MachineTestStore(
            machine, initial: .backingOff(progress(pos: pos, failures: 1), attempt: 1, after: .seconds(1)))
        try store.send(
            .subscriptionsChanged([room]),
            expecting: .backingOff(
                progress(pos: pos, subscriptions: [room], failures: 1), attempt: 1, after: .seconds(1)),
            effects: [.scheduleRetry(after: .seconds(1))])
        try store.send(.subscriptionsChanged([room]), stayingWith: [])
        try store.send(
            .timerFired(.retry), expecting: .growing(progress(pos: pos, subscriptions: [room], failures: 1)),
            effects: [request(pos: pos, subscriptions: [room])])
    }

    @Test("While the token is refreshed a subscription is kept for the request after it")
    func subscriptionWhileAwaitingToken() throws {
        let store = MachineTestStore(machine, initial: .awaitingToken(progress(pos: pos)))
        try store.send(
            .subscriptionsChanged([room]), expecting: .awaitingToken(progress(pos: pos, subscriptions: [room])))
        try store.send(
            .tokenRefreshed, expecting: .growing(progress(pos: pos, subscriptions: [room])),
            effects: [request(pos: pos, subscriptions: [room])])
    }

    // MARK: Failures, backoff, tokens, network

    @Test("A network failure backs off with jitter from the seeded stream, then catches up")
    func networkFailureBacksOff() throws {
        let (jitter, delay) = backoff(attempt: 1)
        var expected = progress(pos: pos, count: 10, failures: 1)
        expected.jitter = jitter
        let store = MachineTestStore(machine, initial: .live(progress(pos: pos, count: 10)))
        try store.send(
            .syncResponse(.failure(.network)), expecting: .backingOff(expected, attempt: 1, after: delay),
            effects: [.scheduleRetry(after: delay)])
        try store.send(.timerFired(.retry), expecting: .growing(expected), effects: [request(pos: pos)])
    }

    @Test("Rate limiting waits for Retry-After")
    func rateLimited() throws {
        let (jitter, delay) = backoff(attempt: 1, retryAfter: .seconds(5))
        var expected = progress(pos: nil, failures: 1)
        expected.jitter = jitter
        let store = MachineTestStore(machine, initial: .firstWindow(progress(pos: nil)))
        try store.send(
            .syncResponse(.failure(.rateLimited(retryAfter: .seconds(5)))),
            expecting: .backingOff(expected, attempt: 1, after: delay), effects: [.scheduleRetry(after: delay)])
        #expect(delay == .seconds(5))
        try store.send(.networkChanged, expecting: .firstWindow(expected), effects: [request(pos: nil)])
    }

    @Test("A permanent error fails the loop")
    func permanentFailure() throws {
        let store = MachineTestStore(machine, initial: .growing(progress(pos: pos)))
        try store.send(
            .syncResponse(.failure(.rejected(status: 400, errorCode: "M_INVALID_PARAM"))),
            expecting: .failed(.rejected(status: 400, errorCode: "M_INVALID_PARAM")))
    }

    @Test("A full store backs off and asks for the same response again: pos did not move")
    func storeFullBacksOff() throws {
        let (jitter, delay) = backoff(attempt: 1)
        var expected = progress(pos: pos, rangeEnd: 119, count: 500, failures: 1)
        expected.jitter = jitter
        let store = MachineTestStore(
            machine,
            initial: .growing(progress(pos: pos, rangeEnd: 119, count: 500, pending: summary(next, count: 500))))
        try store.send(
            .persisted(.failure(.storeUnavailable(.full))), expecting: .backingOff(expected, attempt: 1, after: delay),
            effects: [.scheduleRetry(after: delay)])
        try store.send(.timerFired(.retry), expecting: .growing(expected), effects: [request(pos: pos, rangeEnd: 119)])
    }

    @Test("A broken store fails the loop")
    func storeBroken() throws {
        let store = MachineTestStore(
            machine, initial: .firstWindow(progress(pos: nil, pending: summary(pos, count: 3))))
        try store.send(.persisted(.failure(.storeFailed)), expecting: .failed(.storeFailed))
    }

    @Test("A rejected token cancels the request and asks for a refresh; the commit running meanwhile is kept")
    func tokenRejectedDuringCommit() throws {
        let pending = summary(next, count: 10)
        let store = MachineTestStore(machine, initial: .live(progress(pos: pos, count: 10, pending: pending)))
        try store.send(
            .tokenRejected, expecting: .awaitingToken(progress(pos: pos, count: 10, pending: pending)),
            effects: [.cancel(SlidingSyncMachine.requestKey), .requestTokenRefresh])
        try store.send(.persisted(.success(next)), expecting: .awaitingToken(progress(pos: next, count: 10)))
        try store.send(
            .tokenRefreshed, expecting: .growing(progress(pos: next, count: 10)), effects: [request(pos: next)])
    }

    @Test("A refresh that ends before the commit waits for it in growing")
    func refreshBeforeCommit() throws {
        let pending = summary(pos, count: 10)
        let store = MachineTestStore(machine, initial: .awaitingToken(progress(pos: nil, pending: pending)))
        try store.send(.tokenRefreshed, expecting: .growing(progress(pos: nil, pending: pending)))
        try store.send(
            .persisted(.success(pos)), expecting: .live(progress(pos: pos, count: 10)),
            effects: [request(pos: pos, timeout: .seconds(30))])
    }

    @Test("While the token is refreshed a full store drops the response and a broken one fails")
    func commitFailuresWhileAwaitingToken() throws {
        let pending = summary(next, count: 10)
        try MachineTestStore(machine, initial: .awaitingToken(progress(pos: pos, pending: pending)))
            .send(.persisted(.failure(.storeUnavailable(.busy))), expecting: .awaitingToken(progress(pos: pos)))
        try MachineTestStore(machine, initial: .awaitingToken(progress(pos: pos, pending: pending)))
            .send(.persisted(.failure(.storeFailed)), expecting: .failed(.storeFailed))
        try MachineTestStore(machine, initial: .awaitingToken(progress(pos: pos)))
            .send(.persisted(.success(next)), stayingWith: [])
    }

    @Test("Backing off, a rejected token goes to the refresh")
    func tokenRejectedWhileBackingOff() throws {
        let store = MachineTestStore(
            machine, initial: .backingOff(progress(pos: pos, failures: 1), attempt: 1, after: .seconds(1)))
        try store.send(
            .tokenRejected, expecting: .awaitingToken(progress(pos: pos, failures: 1)),
            effects: [.requestTokenRefresh])
    }

    @Test("A network change replaces a hanging long-poll with a quick catch-up")
    func networkChangedLive() throws {
        let store = MachineTestStore(machine, initial: .live(progress(pos: pos, rangeEnd: 49, count: 50)))
        try store.send(
            .networkChanged, expecting: .growing(progress(pos: pos, rangeEnd: 49, count: 50)),
            effects: [request(pos: pos, rangeEnd: 49)])
    }

    // MARK: Effects and the chart

    @Test("Effects are scheduled under their keys")
    func directives() {
        #expect(request(pos: nil).directive == .keyed("slidingSync.request"))
        #expect(SlidingSyncMachine.Effect.storeSlidingSyncResponse(pos: pos).directive == .keyed("slidingSync.store"))
        #expect(
            SlidingSyncMachine.Effect.scheduleRetry(after: .seconds(1)).directive
                == .timer(.stateTimeout, .after(.seconds(1))))
        #expect(SlidingSyncMachine.Effect.requestTokenRefresh.directive == .perform)
        #expect(SlidingSyncMachine.Effect.cancel("x").directive == .cancel("x"))
        #expect(machine.event(firing: .scheduleRetry(after: .seconds(1))) == .timerFired(.retry))
        #expect(machine.event(firing: .requestTokenRefresh) == nil)
    }

    @Test("Every (state, event) pair matches StateCharts/SlidingSync.scxml")
    func chart() throws {
        let pendingShort = summary(next, count: 10)
        let pendingLong = summary(next, count: 1_000)
        let states: [SlidingSyncMachine.State] = [
            .stopped,
            .firstWindow(progress(pos: nil)), .firstWindow(progress(pos: nil, pending: pendingShort)),
            .firstWindow(progress(pos: nil, pending: pendingLong)),
            .firstWindow(progress(pos: nil, subscriptions: [room])),
            .growing(progress(pos: pos, count: 1_000)),
            .growing(progress(pos: pos, count: 1_000, pending: pendingLong)),
            .growing(progress(pos: pos, count: 10, pending: pendingShort)),
            .live(progress(pos: pos, count: 10)), .live(progress(pos: pos, count: 10, pending: pendingShort)),
            .live(progress(pos: pos, count: 10, pending: pendingLong)),
            .live(progress(pos: pos, count: 10, subscriptions: [room])),
            .backingOff(progress(pos: nil, failures: 1), attempt: 1, after: .seconds(1)),
            .backingOff(progress(pos: pos, failures: 1), attempt: 1, after: .seconds(1)),
            .backingOff(progress(pos: pos, subscriptions: [room], failures: 1), attempt: 1, after: .seconds(1)),
            .awaitingToken(progress(pos: nil)), .awaitingToken(progress(pos: pos)),
            .awaitingToken(progress(pos: pos, pending: pendingShort)),
            .failed(.storeFailed),
        ]
        let events: [SlidingSyncMachine.Event] = [
            .started(SlidingSyncStart(pos: nil, jitterSeed: 1)), .started(SlidingSyncStart(pos: pos, jitterSeed: 1)),
            .stopped,
            .syncResponse(.success(summary(SlidingSyncPosition("p3"), count: 10))),
            .syncResponse(.failure(.network)), .syncResponse(.failure(.rateLimited(retryAfter: .seconds(2)))),
            .syncResponse(.failure(.rejected(status: 403, errorCode: "M_FORBIDDEN"))),
            .positionExpired,
            .persisted(.success(next)), .persisted(.success(SlidingSyncPosition("other"))),
            .persisted(.failure(.storeFailed)), .persisted(.failure(.storeUnavailable(.full))),
            .timerFired(.retry), .networkChanged, .tokenRejected, .tokenRefreshed,
            .subscriptionsChanged([]), .subscriptionsChanged([room]),
        ]
        try ChartChecker(machine: machine).assertConforms(states: states, events: events, initial: .stopped)
    }
}
