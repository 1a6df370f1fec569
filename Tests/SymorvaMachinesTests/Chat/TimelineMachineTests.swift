import SymorvaMachines
import SymorvaTesting
import Testing

@Suite("TimelineMachine")
struct TimelineMachineTests {
    let machine = TimelineMachine(initialPageSize: 20)
    let c1 = StoreCursor(chunkID: 1, index: 0)
    let c2 = StoreCursor(chunkID: 2, index: 5)
    let t1 = PaginationToken("t1")
    let t2 = PaginationToken("t2")

    func ids(_ names: String...) -> [EventID] { names.map { EventID("$\($0)") } }
    func window(_ names: String..., error: TimelineError? = nil) -> TimelineWindow {
        TimelineWindow(eventIDs: names.map { EventID("$\($0)") }, lastError: error)
    }
    func page(_ names: [String], before: PageBoundary) -> TimelinePage {
        TimelinePage(eventIDs: names.map { EventID("$\($0)") }, before: before)
    }

    // MARK: Observers

    @Test("The first observer loads the newest page from the store; live updates apply from then on")
    func observedLoadsFromStore() throws {
        let store = MachineTestStore(machine, initial: .idle)
        try store.send(
            .observed, expecting: .paginatingBackwards(TimelineWindow(), source: .store(before: nil), remaining: 20),
            effects: [.loadFromStore(before: nil, count: 20)])
    }

    @Test("Live events routed before the first page lands are kept, and the page adds only what precedes them")
    func liveEventsBeforeFirstPage() throws {
        // A batch committed while the newest page was being read: its events arrive live, and
        // the page, read after the commit, holds them too.
        let store = MachineTestStore(machine, initial: .idle)
        try store.send(
            .observed, expecting: .paginatingBackwards(TimelineWindow(), source: .store(before: nil), remaining: 20),
            effects: [.loadFromStore(before: nil, count: 20)])
        try store.send(
            .liveEventsArrived(ids("c", "d")),
            expecting: .paginatingBackwards(window("c", "d"), source: .store(before: nil), remaining: 20))
        try store.send(
            .storePageLoaded(.success(page(["a", "b", "c", "d"], before: .stored(c1)))),
            expecting: .live(window("a", "b", "c", "d"), olderInStore: c1))
    }

    @Test("An idle timeline ignores everything but an observer")
    func idleIgnores() throws {
        let events: [TimelineMachine.Event] = [
            .unobserved, .paginateRequested(count: 10), .storePageLoaded(.failure(.storeFailed)),
            .serverPageLoaded(.failure(.network)), .liveEventsArrived(ids("a")), .gapDetected(t1),
        ]
        for event in events { try MachineTestStore(machine, initial: .idle).assertIgnored(event) }
    }

    @Test("The last observer leaving drops the window; live updates are ignored from then on")
    func unobservedStops() throws {
        let store = MachineTestStore(machine, initial: .live(window("a"), olderInStore: c1))
        try store.send(.unobserved, expecting: .idle)

        try store.assertIgnored(.liveEventsArrived(ids("b")))
    }

    @Test("The last observer leaving during pagination also cancels the page")
    func unobservedCancelsPagination() throws {
        let store = MachineTestStore(
            machine, initial: .paginatingBackwards(window("a"), source: .server(from: t1), remaining: 20))
        try store.send(.unobserved, expecting: .idle, effects: [.cancel(TimelineMachine.paginateKey)])
    }

    @Test("A second observed is ignored")
    func observedTwice() throws {
        try MachineTestStore(machine, initial: .gap(window("a"), token: t1)).assertIgnored(.observed)
    }

    // MARK: Store pages

    @Test("A full store page with more stored events is live")
    func storePageMoreStored() throws {
        let start = TimelineMachine.State.paginatingBackwards(
            TimelineWindow(), source: .store(before: nil), remaining: 2)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .storePageLoaded(.success(page(["a", "b"], before: .stored(c1)))),
            expecting: .live(window("a", "b"), olderInStore: c1))
    }

    @Test("A full store page ending at a gap stops at the gap")
    func storePageEndsAtGap() throws {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .store(before: c1), remaining: 2)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .storePageLoaded(.success(page(["a", "b"], before: .gap(t1)))),
            expecting: .gap(window("a", "b", "c"), token: t1))
    }

    @Test("A short store page ending at a gap continues from the server for the rest")
    func storePageContinuesToServer() throws {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .store(before: c1), remaining: 20)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .storePageLoaded(.success(page(["a", "b"], before: .gap(t1)))),
            expecting: .paginatingBackwards(window("a", "b", "c"), source: .server(from: t1), remaining: 18),
            effects: [.fetchMessages(from: t1, count: 18)])
    }

    @Test("An empty store for a new room goes straight to the server")
    func emptyStoreGoesToServer() throws {
        let start = TimelineMachine.State.paginatingBackwards(
            TimelineWindow(), source: .store(before: nil), remaining: 20)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .storePageLoaded(.success(page([], before: .gap(t1)))),
            expecting: .paginatingBackwards(TimelineWindow(), source: .server(from: t1), remaining: 20),
            effects: [.fetchMessages(from: t1, count: 20)])
    }

    @Test("A store page that reaches the room's creation ends pagination")
    func storePageReachesStart() throws {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .store(before: c1), remaining: 20)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .storePageLoaded(.success(page(["a", "b"], before: .roomStart))),
            expecting: .reachedStart(window("a", "b", "c")))
    }

    @Test("A failed store read returns to the same frontier with the error")
    func storeFailure() throws {
        let start = TimelineMachine.State.paginatingBackwards(
            TimelineWindow(), source: .store(before: nil), remaining: 20)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .storePageLoaded(.failure(.storeFailed)), expecting: .live(window(error: .storeFailed), olderInStore: nil))
    }

    @Test("Paginating again after a failed first read loads the newest page again")
    func retryAfterFailure() throws {
        let store = MachineTestStore(machine, initial: .live(window(error: .storeFailed), olderInStore: nil))
        try store.send(
            .paginateRequested(count: 20),
            expecting: .paginatingBackwards(window(error: .storeFailed), source: .store(before: nil), remaining: 20),
            effects: [.loadFromStore(before: nil, count: 20)])
    }

    // MARK: Requests

    @Test("A page request with older events in the store reads the store")
    func paginateFromStore() throws {
        let store = MachineTestStore(machine, initial: .live(window("c"), olderInStore: c1))
        try store.send(
            .paginateRequested(count: 30),
            expecting: .paginatingBackwards(window("c"), source: .store(before: c1), remaining: 30),
            effects: [.loadFromStore(before: c1, count: 30)])
    }

    @Test("A page request at a gap asks the server with the gap's token")
    func paginateFromServer() throws {
        let store = MachineTestStore(machine, initial: .gap(window("c"), token: t1))
        try store.send(
            .paginateRequested(count: 30),
            expecting: .paginatingBackwards(window("c"), source: .server(from: t1), remaining: 30),
            effects: [.fetchMessages(from: t1, count: 30)])
    }

    @Test("A page request at the room's start is ignored")
    func paginateAtStart() throws {
        try MachineTestStore(machine, initial: .reachedStart(window("a"))).assertIgnored(.paginateRequested(count: 10))
    }

    @Test("A page request while a page loads joins it")
    func paginateWhileLoading() throws {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .store(before: c1), remaining: 20)
        try MachineTestStore(machine, initial: start).assertIgnored(.paginateRequested(count: 10))
    }

    @Test("A request for no events changes nothing")
    func paginateZero() throws {
        let start = TimelineMachine.State.live(window("c"), olderInStore: c1)
        try MachineTestStore(machine, initial: start).send(.paginateRequested(count: 0), stayingWith: [])
    }

    // MARK: Server pages

    @Test("A server page that leaves more gap moves the gap's token")
    func serverPageMoreGap() throws {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .server(from: t1), remaining: 2)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .serverPageLoaded(.success(page(["a", "b"], before: .gap(t2)))),
            expecting: .gap(window("a", "b", "c"), token: t2))
    }

    @Test("A short server page whose other events were hidden (thread replies) goes on from the moved gap")
    func serverPageWithHiddenEvents() throws {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .server(from: t1), remaining: 3)
        let store = MachineTestStore(machine, initial: start)
        var hiddenOnly = page([], before: .gap(t2))
        hiddenOnly.hiddenCount = 3
        try store.send(
            .serverPageLoaded(.success(hiddenOnly)),
            expecting: .paginatingBackwards(window("c"), source: .server(from: t2), remaining: 3),
            effects: [.fetchMessages(from: t2, count: 3)])
        // The next request is as long as the last page (3), though 2 are still wanted.
        var mixed = page(["b"], before: .gap(t1))
        mixed.hiddenCount = 2
        try store.send(
            .serverPageLoaded(.success(mixed)),
            expecting: .paginatingBackwards(window("b", "c"), source: .server(from: t1), remaining: 2),
            effects: [.fetchMessages(from: t1, count: 3)])
        // A gap that did not move ends the request, whatever was hidden.
        var stuck = page(["a"], before: .gap(t1))
        stuck.hiddenCount = 1
        try store.send(.serverPageLoaded(.success(stuck)), expecting: .gap(window("a", "b", "c"), token: t1))
    }

    @Test("A short server page that closes the gap continues from the store")
    func serverPageJoinsStore() throws {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .server(from: t1), remaining: 5)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .serverPageLoaded(.success(page(["b"], before: .stored(c2)))),
            expecting: .paginatingBackwards(window("b", "c"), source: .store(before: c2), remaining: 4),
            effects: [.loadFromStore(before: c2, count: 4)])
    }

    @Test("An empty server page that closes the gap stops at the stored events")
    func emptyServerPageJoinsStore() throws {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .server(from: t1), remaining: 5)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .serverPageLoaded(.success(page([], before: .stored(c2)))), expecting: .live(window("c"), olderInStore: c2))
    }

    @Test("A server page without an end token reaches the start")
    func serverPageReachesStart() throws {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .server(from: t1), remaining: 20)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .serverPageLoaded(.success(page(["a"], before: .roomStart))), expecting: .reachedStart(window("a", "c")))
    }

    @Test("A failed server page stays at the gap with the error; the next page clears it")
    func serverFailureThenSuccess() throws {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .server(from: t1), remaining: 1)
        let forbidden = TimelineError.server(status: 403, errorCode: "M_FORBIDDEN")
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .serverPageLoaded(.failure(forbidden)), expecting: .gap(window("c", error: forbidden), token: t1))
        try store.send(
            .paginateRequested(count: 1),
            expecting: .paginatingBackwards(window("c", error: forbidden), source: .server(from: t1), remaining: 1),
            effects: [.fetchMessages(from: t1, count: 1)])
        try store.send(
            .serverPageLoaded(.success(page(["b"], before: .gap(t2)))), expecting: .gap(window("b", "c"), token: t2))
    }

    @Test("A server page overlapping the window adds only new events")
    func overlappingPage() throws {
        let start = TimelineMachine.State.paginatingBackwards(window("b", "c"), source: .server(from: t1), remaining: 3)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .serverPageLoaded(.success(page(["a", "b"], before: .gap(t2)))),
            expecting: .gap(window("a", "b", "c"), token: t2))
    }

    @Test("A store page while loading from the server is stale and changes nothing")
    func stalePage() throws {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .server(from: t1), remaining: 3)
        try MachineTestStore(machine, initial: start).send(
            .storePageLoaded(.success(page(["a"], before: .roomStart))), stayingWith: [])
    }

    @Test("Pages arriving when no page is loading are ignored")
    func pageWithoutRequest() throws {
        let store = MachineTestStore(machine, initial: .live(window("c"), olderInStore: c1))
        try store.assertIgnored(.serverPageLoaded(.failure(.network)))
    }

    // MARK: Live events and gaps

    @Test("Live events are appended once each")
    func liveEventsAppended() throws {
        let store = MachineTestStore(machine, initial: .live(window("a", "b"), olderInStore: c1))
        try store.send(
            .liveEventsArrived(ids("b", "c", "d")), expecting: .live(window("a", "b", "c", "d"), olderInStore: c1))
    }

    @Test("Live events already in the window change nothing")
    func liveEventsDuplicate() throws {
        let store = MachineTestStore(machine, initial: .reachedStart(window("a", "b")))
        try store.send(.liveEventsArrived(ids("a", "b")), stayingWith: [])
    }

    @Test("Live events during pagination are kept")
    func liveEventsWhilePaginating() throws {
        let start = TimelineMachine.State.paginatingBackwards(window("b"), source: .store(before: c1), remaining: 3)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .liveEventsArrived(ids("c")),
            expecting: .paginatingBackwards(window("b", "c"), source: .store(before: c1), remaining: 3))
    }

    @Test("A limited sync replaces the window; its prev_batch becomes the gap")
    func gapDetected() throws {
        let store = MachineTestStore(machine, initial: .live(window("a", "b"), olderInStore: c1))
        try store.send(.gapDetected(t1), expecting: .gap(TimelineWindow(), token: t1))
        try store.send(.liveEventsArrived(ids("x", "y")), expecting: .gap(window("x", "y"), token: t1))
    }

    @Test("A limited sync during pagination cancels the page")
    func gapDetectedWhilePaginating() throws {
        let start = TimelineMachine.State.paginatingBackwards(window("b"), source: .server(from: t1), remaining: 3)
        let store = MachineTestStore(machine, initial: start)
        try store.send(
            .gapDetected(t2), expecting: .gap(TimelineWindow(), token: t2),
            effects: [.cancel(TimelineMachine.paginateKey)])
    }

    // MARK: Effects and the chart

    @Test("Store reads and server fetches share the pagination key")
    func directives() {
        #expect(TimelineMachine.Effect.loadFromStore(before: nil, count: 1).directive == .keyed("timeline.paginate"))
        #expect(TimelineMachine.Effect.fetchMessages(from: t1, count: 1).directive == .keyed("timeline.paginate"))
        #expect(TimelineMachine.Effect.cancel("timeline.paginate").directive == .cancel("timeline.paginate"))
    }

    @Test("Every (state, event) pair matches StateCharts/Timeline.scxml")
    func chart() throws {
        let states: [TimelineMachine.State] = [
            .idle,
            .live(window("a"), olderInStore: c1), .live(TimelineWindow(), olderInStore: nil),
            .paginatingBackwards(window("c"), source: .store(before: c1), remaining: 20),
            .paginatingBackwards(window("c"), source: .store(before: c1), remaining: 1),
            .paginatingBackwards(window("c"), source: .server(from: t1), remaining: 20),
            .paginatingBackwards(window("c"), source: .server(from: t1), remaining: 1),
            .reachedStart(window("a")), .gap(window("a"), token: t1),
        ]
        var events: [TimelineMachine.Event] = [
            .observed, .unobserved, .paginateRequested(count: 10), .paginateRequested(count: 0),
            .liveEventsArrived(ids("z")), .gapDetected(t2),
            .storePageLoaded(.failure(.storeFailed)), .serverPageLoaded(.failure(.network)),
        ]
        for boundary in [PageBoundary.stored(c2), .gap(t2), .roomStart] {
            events.append(.storePageLoaded(.success(page(["x"], before: boundary))))
            events.append(.serverPageLoaded(.success(page(["x"], before: boundary))))
        }
        try ChartChecker(machine: machine).assertConforms(states: states, events: events, initial: .idle)
    }
}
