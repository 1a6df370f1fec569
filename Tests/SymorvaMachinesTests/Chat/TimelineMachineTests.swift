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
    func observedLoadsFromStore() {
        let step = ChatStep(machine, from: .idle, on: .observed)
        #expect(step.state == .paginatingBackwards(TimelineWindow(), source: .store(before: nil), remaining: 20))
        #expect(step.effects == [.loadFromStore(before: nil, count: 20)])
    }

    @Test("Live events routed before the first page lands are kept, and the page adds only what precedes them")
    func liveEventsBeforeFirstPage() {
        // A batch committed while the newest page was being read: its events arrive live, and
        // the page, read after the commit, holds them too.
        let (state, effects) = run(
            machine, from: .idle,
            [
                .observed, .liveEventsArrived(ids("c", "d")),
                .storePageLoaded(.success(page(["a", "b", "c", "d"], before: .stored(c1)))),
            ])
        #expect(state == .live(window("a", "b", "c", "d"), olderInStore: c1))
        #expect(effects == [.loadFromStore(before: nil, count: 20)])
    }

    @Test("An idle timeline ignores everything but an observer")
    func idleIgnores() {
        let events: [TimelineMachine.Event] = [
            .unobserved, .paginateRequested(count: 10), .storePageLoaded(.failure(.storeFailed)),
            .serverPageLoaded(.failure(.network)), .liveEventsArrived(ids("a")), .gapDetected(t1),
        ]
        for event in events { #expect(ChatStep(machine, from: .idle, on: event).isIgnored) }
    }

    @Test("The last observer leaving drops the window; live updates are ignored from then on")
    func unobservedStops() {
        let step = ChatStep(machine, from: .live(window("a"), olderInStore: c1), on: .unobserved)
        #expect(step.state == .idle)
        #expect(step.effects == [])
        #expect(ChatStep(machine, from: step.state, on: .liveEventsArrived(ids("b"))).isIgnored)
    }

    @Test("The last observer leaving during pagination also cancels the page")
    func unobservedCancelsPagination() {
        let step = ChatStep(
            machine, from: .paginatingBackwards(window("a"), source: .server(from: t1), remaining: 20), on: .unobserved)
        #expect(step.state == .idle)
        #expect(step.effects == [.cancel(TimelineMachine.paginateKey)])
    }

    @Test("A second observed is ignored")
    func observedTwice() {
        #expect(ChatStep(machine, from: .gap(window("a"), token: t1), on: .observed).isIgnored)
    }

    // MARK: Store pages

    @Test("A full store page with more stored events is live")
    func storePageMoreStored() {
        let start = TimelineMachine.State.paginatingBackwards(
            TimelineWindow(), source: .store(before: nil), remaining: 2)
        let step = ChatStep(
            machine, from: start, on: .storePageLoaded(.success(page(["a", "b"], before: .stored(c1)))))
        #expect(step.state == .live(window("a", "b"), olderInStore: c1))
        #expect(step.effects == [])
    }

    @Test("A full store page ending at a gap stops at the gap")
    func storePageEndsAtGap() {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .store(before: c1), remaining: 2)
        let step = ChatStep(machine, from: start, on: .storePageLoaded(.success(page(["a", "b"], before: .gap(t1)))))
        #expect(step.state == .gap(window("a", "b", "c"), token: t1))
        #expect(step.effects == [])
    }

    @Test("A short store page ending at a gap continues from the server for the rest")
    func storePageContinuesToServer() {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .store(before: c1), remaining: 20)
        let step = ChatStep(machine, from: start, on: .storePageLoaded(.success(page(["a", "b"], before: .gap(t1)))))
        #expect(step.state == .paginatingBackwards(window("a", "b", "c"), source: .server(from: t1), remaining: 18))
        #expect(step.effects == [.fetchMessages(from: t1, count: 18)])
    }

    @Test("An empty store for a new room goes straight to the server")
    func emptyStoreGoesToServer() {
        let start = TimelineMachine.State.paginatingBackwards(
            TimelineWindow(), source: .store(before: nil), remaining: 20)
        let step = ChatStep(machine, from: start, on: .storePageLoaded(.success(page([], before: .gap(t1)))))
        #expect(step.state == .paginatingBackwards(TimelineWindow(), source: .server(from: t1), remaining: 20))
        #expect(step.effects == [.fetchMessages(from: t1, count: 20)])
    }

    @Test("A store page that reaches the room's creation ends pagination")
    func storePageReachesStart() {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .store(before: c1), remaining: 20)
        let step = ChatStep(machine, from: start, on: .storePageLoaded(.success(page(["a", "b"], before: .roomStart))))
        #expect(step.state == .reachedStart(window("a", "b", "c")))
        #expect(step.effects == [])
    }

    @Test("A failed store read returns to the same frontier with the error")
    func storeFailure() {
        let start = TimelineMachine.State.paginatingBackwards(
            TimelineWindow(), source: .store(before: nil), remaining: 20)
        let step = ChatStep(machine, from: start, on: .storePageLoaded(.failure(.storeFailed)))
        #expect(step.state == .live(window(error: .storeFailed), olderInStore: nil))
        #expect(step.effects == [])
    }

    @Test("Paginating again after a failed first read loads the newest page again")
    func retryAfterFailure() {
        let step = ChatStep(
            machine, from: .live(window(error: .storeFailed), olderInStore: nil), on: .paginateRequested(count: 20))
        #expect(
            step.state == .paginatingBackwards(window(error: .storeFailed), source: .store(before: nil), remaining: 20))
        #expect(step.effects == [.loadFromStore(before: nil, count: 20)])
    }

    // MARK: Requests

    @Test("A page request with older events in the store reads the store")
    func paginateFromStore() {
        let step = ChatStep(machine, from: .live(window("c"), olderInStore: c1), on: .paginateRequested(count: 30))
        #expect(step.state == .paginatingBackwards(window("c"), source: .store(before: c1), remaining: 30))
        #expect(step.effects == [.loadFromStore(before: c1, count: 30)])
    }

    @Test("A page request at a gap asks the server with the gap's token")
    func paginateFromServer() {
        let step = ChatStep(machine, from: .gap(window("c"), token: t1), on: .paginateRequested(count: 30))
        #expect(step.state == .paginatingBackwards(window("c"), source: .server(from: t1), remaining: 30))
        #expect(step.effects == [.fetchMessages(from: t1, count: 30)])
    }

    @Test("A page request at the room's start is ignored")
    func paginateAtStart() {
        #expect(ChatStep(machine, from: .reachedStart(window("a")), on: .paginateRequested(count: 10)).isIgnored)
    }

    @Test("A page request while a page loads joins it")
    func paginateWhileLoading() {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .store(before: c1), remaining: 20)
        #expect(ChatStep(machine, from: start, on: .paginateRequested(count: 10)).isIgnored)
    }

    @Test("A request for no events changes nothing")
    func paginateZero() {
        let start = TimelineMachine.State.live(window("c"), olderInStore: c1)
        #expect(ChatStep(machine, from: start, on: .paginateRequested(count: 0)).isUnchanged(from: start))
    }

    // MARK: Server pages

    @Test("A server page that leaves more gap moves the gap's token")
    func serverPageMoreGap() {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .server(from: t1), remaining: 2)
        let step = ChatStep(machine, from: start, on: .serverPageLoaded(.success(page(["a", "b"], before: .gap(t2)))))
        #expect(step.state == .gap(window("a", "b", "c"), token: t2))
        #expect(step.effects == [])
    }

    @Test("A short server page that closes the gap continues from the store")
    func serverPageJoinsStore() {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .server(from: t1), remaining: 5)
        let step = ChatStep(machine, from: start, on: .serverPageLoaded(.success(page(["b"], before: .stored(c2)))))
        #expect(step.state == .paginatingBackwards(window("b", "c"), source: .store(before: c2), remaining: 4))
        #expect(step.effects == [.loadFromStore(before: c2, count: 4)])
    }

    @Test("An empty server page that closes the gap stops at the stored events")
    func emptyServerPageJoinsStore() {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .server(from: t1), remaining: 5)
        let step = ChatStep(machine, from: start, on: .serverPageLoaded(.success(page([], before: .stored(c2)))))
        #expect(step.state == .live(window("c"), olderInStore: c2))
        #expect(step.effects == [])
    }

    @Test("A server page without an end token reaches the start")
    func serverPageReachesStart() {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .server(from: t1), remaining: 20)
        let step = ChatStep(machine, from: start, on: .serverPageLoaded(.success(page(["a"], before: .roomStart))))
        #expect(step.state == .reachedStart(window("a", "c")))
        #expect(step.effects == [])
    }

    @Test("A failed server page stays at the gap with the error; the next page clears it")
    func serverFailureThenSuccess() {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .server(from: t1), remaining: 1)
        let result = run(
            machine, from: start,
            [
                .serverPageLoaded(.failure(.server(status: 403, errorCode: "M_FORBIDDEN"))),
                .paginateRequested(count: 1),
                .serverPageLoaded(.success(page(["b"], before: .gap(t2)))),
            ])
        #expect(result.state == .gap(window("b", "c"), token: t2))
        #expect(result.effects == [.fetchMessages(from: t1, count: 1)])
    }

    @Test("A server page overlapping the window adds only new events")
    func overlappingPage() {
        let start = TimelineMachine.State.paginatingBackwards(window("b", "c"), source: .server(from: t1), remaining: 3)
        let step = ChatStep(machine, from: start, on: .serverPageLoaded(.success(page(["a", "b"], before: .gap(t2)))))
        #expect(step.state == .gap(window("a", "b", "c"), token: t2))
    }

    @Test("A store page while loading from the server is stale and changes nothing")
    func stalePage() {
        let start = TimelineMachine.State.paginatingBackwards(window("c"), source: .server(from: t1), remaining: 3)
        #expect(
            ChatStep(machine, from: start, on: .storePageLoaded(.success(page(["a"], before: .roomStart)))).isUnchanged(
                from: start))
    }

    @Test("Pages arriving when no page is loading are ignored")
    func pageWithoutRequest() {
        let step = ChatStep(
            machine, from: .live(window("c"), olderInStore: c1), on: .serverPageLoaded(.failure(.network)))
        #expect(step.isIgnored)
    }

    // MARK: Live events and gaps

    @Test("Live events are appended once each")
    func liveEventsAppended() {
        let step = ChatStep(
            machine, from: .live(window("a", "b"), olderInStore: c1), on: .liveEventsArrived(ids("b", "c", "d")))
        #expect(step.state == .live(window("a", "b", "c", "d"), olderInStore: c1))
        #expect(step.effects == [])
    }

    @Test("Live events already in the window change nothing")
    func liveEventsDuplicate() {
        let step = ChatStep(machine, from: .reachedStart(window("a", "b")), on: .liveEventsArrived(ids("a", "b")))
        #expect(step.state == .reachedStart(window("a", "b")))
        #expect(step.effects == [])
        #expect(!step.isIgnored)
    }

    @Test("Live events during pagination are kept")
    func liveEventsWhilePaginating() {
        let start = TimelineMachine.State.paginatingBackwards(window("b"), source: .store(before: c1), remaining: 3)
        let step = ChatStep(machine, from: start, on: .liveEventsArrived(ids("c")))
        #expect(step.state == .paginatingBackwards(window("b", "c"), source: .store(before: c1), remaining: 3))
        #expect(step.effects == [])
    }

    @Test("A limited sync replaces the window; its prev_batch becomes the gap")
    func gapDetected() {
        let result = run(
            machine, from: .live(window("a", "b"), olderInStore: c1),
            [.gapDetected(t1), .liveEventsArrived(ids("x", "y"))])
        #expect(result.state == .gap(window("x", "y"), token: t1))
        #expect(result.effects == [])
    }

    @Test("A limited sync during pagination cancels the page")
    func gapDetectedWhilePaginating() {
        let start = TimelineMachine.State.paginatingBackwards(window("b"), source: .server(from: t1), remaining: 3)
        let step = ChatStep(machine, from: start, on: .gapDetected(t2))
        #expect(step.state == .gap(TimelineWindow(), token: t2))
        #expect(step.effects == [.cancel(TimelineMachine.paginateKey)])
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
