import SymorvaRuntime

/// The visible timeline of one room: which events are loaded, what lies before them, and
/// whether anyone is looking.
///
/// Work follows observers: the product layer counts subscribers and sends ``Event/observed``
/// for the first one and ``Event/unobserved`` when the last one leaves; only in between do
/// live updates apply and pages load. Nothing is polled for a room nobody looks at.
///
/// The state itself is the live switch: ``State/idle`` ignores ``Event/liveEventsArrived(_:)``
/// and ``Event/gapDetected(_:)``, every observed state applies them. Because sync changes,
/// observers coming and going and page results all pass through the host's one mailbox, a
/// batch committed before ``Event/observed`` is applied is in the first store page (the read
/// starts with that transition), and one routed after it is appended. A flag set by effects
/// would run in tasks of its own, unordered with the read and with each other.
///
/// Back-pagination reads the store first. The store keeps each room's timeline as linked
/// chunks with gap rows, so a store page says what precedes it (``PageBoundary``): more stored
/// events, a gap with its `/messages` token, or the room's start. A gap is filled from the
/// server (`/messages?dir=b&from=<token>`); the interpreter stores that page before reporting it
/// (store first), so the window and the store never disagree.
///
/// The chart states (`StateCharts/Timeline.scxml`) are the state's case names. The observed
/// states name the back-pagination frontier, because that is what decides what the next page
/// request does: ``State/live(_:olderInStore:)`` (older events are in the store),
/// ``State/gap(_:token:)`` (they must come from the server), ``State/reachedStart(_:)`` (there
/// are none) and ``State/paginatingBackwards(_:source:remaining:)`` (a page is loading).
/// A separate pagination-status field would make "gap while idle" and other impossible pairs
/// representable; the cases make them unrepresentable.
///
/// The machine holds event IDs, never event content; the product layer reads content from
/// the store and merges the send queue's local echoes by transaction ID.
package struct TimelineMachine: ChartedMachine {
    package static let name = "Timeline"

    /// The key of the running page load (store or server), one per room host.
    package static let paginateKey: EffectKey = "timeline.paginate"

    /// How many events the first load of an observed timeline asks for.
    package var initialPageSize: Int

    /// Creates the machine.
    package init(initialPageSize: Int = 20) {
        self.initialPageSize = max(1, initialPageSize)
    }

    /// Where the room's timeline is.
    package enum State: Sendable, Equatable, CaseNameListing {
        /// Nobody observes the room: live updates are ignored, nothing loads, nothing is held.
        case idle
        /// Observed and up to date. Older events are in the store before `olderInStore`;
        /// `nil` means nothing is loaded yet and the next page is the newest one.
        case live(TimelineWindow, olderInStore: StoreCursor?)
        /// Observed; a page is loading from `source`. `remaining` events are still wanted: a
        /// store page that ends at a gap continues from the server, and a server page that
        /// joins stored events continues from the store.
        case paginatingBackwards(TimelineWindow, source: PageSource, remaining: Int)
        /// Observed; the window begins with the room's creation. Nothing older exists.
        case reachedStart(TimelineWindow)
        /// Observed; the events before the window must come from the server with `token`
        /// (a limited sync left a hole, or the store has never held older events).
        case gap(TimelineWindow, token: PaginationToken)

        package static let allCaseNames = ["idle", "live", "paginatingBackwards", "reachedStart", "gap"]

        /// The case name, without data.
        package var caseNameLiteral: StaticString? {
            switch self {
            case .idle: "idle"
            case .live: "live"
            case .paginatingBackwards: "paginatingBackwards"
            case .reachedStart: "reachedStart"
            case .gap: "gap"
            }
        }
    }

    /// What happened to the timeline.
    package enum Event: Sendable, Equatable, CaseNameListing {
        /// The first observer arrived: the newest page loads and live updates apply from now on.
        case observed
        /// The last observer left: live updates are ignored from now on and a loading page is
        /// cancelled.
        case unobserved
        /// The reader scrolled to the top and wants `count` older events.
        case paginateRequested(count: Int)
        /// A page read from the store arrived.
        case storePageLoaded(Result<TimelinePage, TimelineError>)
        /// A `/messages` page arrived; the interpreter has already stored it.
        case serverPageLoaded(Result<TimelinePage, TimelineError>)
        /// Sync delivered new events for the room (already stored), oldest first. Ignored while
        /// idle: the next observation reads them from the store.
        case liveEventsArrived([EventID])
        /// Sync delivered a `limited` timeline: the newest events follow a hole whose
        /// `prev_batch` is `token`. The events themselves arrive with ``liveEventsArrived(_:)``.
        case gapDetected(PaginationToken)

        package static let allCaseNames = [
            "observed", "unobserved", "paginateRequested", "storePageLoaded", "serverPageLoaded",
            "liveEventsArrived", "gapDetected",
        ]

        /// The case name, without data.
        package var caseNameLiteral: StaticString? {
            switch self {
            case .observed: "observed"
            case .unobserved: "unobserved"
            case .paginateRequested: "paginateRequested"
            case .storePageLoaded: "storePageLoaded"
            case .serverPageLoaded: "serverPageLoaded"
            case .liveEventsArrived: "liveEventsArrived"
            case .gapDetected: "gapDetected"
            }
        }
    }

    /// What the interpreter must do.
    package enum Effect: MachineEffect, Equatable {
        /// Read up to `count` events before `before` (the newest ones when `nil`) from the store;
        /// answer ``Event/storePageLoaded(_:)``. Keyed by ``TimelineMachine/paginateKey``.
        case loadFromStore(before: StoreCursor?, count: Int)
        /// `GET /rooms/{roomId}/messages?dir=b&from=<token>&limit=<count>`, store the page, then
        /// answer ``Event/serverPageLoaded(_:)``. Keyed by ``TimelineMachine/paginateKey``.
        case fetchMessages(from: PaginationToken, count: Int)
        /// Cancel the effect running under this key.
        case cancel(EffectKey)

        package var caseNameLiteral: StaticString? {
            switch self {
            case .loadFromStore: "loadFromStore"
            case .fetchMessages: "fetchMessages"
            case .cancel: "cancel"
            }
        }

        package var directive: EffectDirective {
            switch self {
            case .loadFromStore, .fetchMessages: .keyed(TimelineMachine.paginateKey)
            case .cancel(let key): .cancel(key)
            }
        }
    }

    /// Every ``State`` case name: the state ids of `StateCharts/Timeline.scxml`.
    package static var stateCaseNames: [String] { State.allCaseNames }

    /// Every ``Event`` case name: the event names of `StateCharts/Timeline.scxml`.
    package static var eventCaseNames: [String] { Event.allCaseNames }

    package func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch state {
        case .idle:
            guard case .observed = event else { return .ignored }
            return .move(
                to: .paginatingBackwards(TimelineWindow(), source: .store(before: nil), remaining: initialPageSize),
                effects: [.loadFromStore(before: nil, count: initialPageSize)])
        case .live(let window, let cursor):
            return observed(state, window, on: event) { count in
                count > 0 ? paginate(window, from: .store(before: cursor), count: count) : .stay
            }
        case .gap(let window, let token):
            return observed(state, window, on: event) { count in
                count > 0 ? paginate(window, from: .server(from: token), count: count) : .stay
            }
        case .reachedStart(let window):
            return observed(state, window, on: event) { _ in .ignored }
        case .paginatingBackwards(let window, let source, let remaining):
            return paginating(window, source, remaining, on: event)
        }
    }

    /// The rules every observed state shares; `onPaginate` decides what a page request does.
    func observed(
        _ state: State, _ window: TimelineWindow, on event: Event,
        onPaginate: (Int) -> Transition<State, Effect>
    ) -> Transition<State, Effect> {
        switch event {
        case .observed, .storePageLoaded, .serverPageLoaded:
            return .ignored
        case .unobserved:
            return .move(to: .idle)
        case .paginateRequested(let count):
            // At a frontier a request for nothing is understood and changes nothing.
            return onPaginate(count)
        case .liveEventsArrived(let eventIDs):
            let next = window.appending(eventIDs)
            return next == window ? .stay : .move(to: state.replacingWindow(next))
        case .gapDetected(let token):
            return .move(to: .gap(TimelineWindow(), token: token))
        }
    }
}

// MARK: - Values

/// The loaded part of a room's timeline: event IDs, oldest first.
package struct TimelineWindow: Sendable, Equatable {
    /// The loaded events, oldest first, each once.
    package var eventIDs: [EventID]
    /// Why the last page failed to load, until a page loads.
    package var lastError: TimelineError?

    /// Creates a window.
    package init(eventIDs: [EventID] = [], lastError: TimelineError? = nil) {
        self.eventIDs = eventIDs
        self.lastError = lastError
    }

    /// The window with `newer` appended, skipping events it already holds.
    package func appending(_ newer: [EventID]) -> TimelineWindow {
        var known = Set(eventIDs)
        var next = self
        for eventID in newer where known.insert(eventID).inserted { next.eventIDs.append(eventID) }
        return next
    }

    /// The window with `older` prepended, skipping events it already holds.
    package func prepending(_ older: [EventID]) -> TimelineWindow {
        var known = Set(eventIDs)
        let fresh = older.filter { known.insert($0).inserted }
        return TimelineWindow(eventIDs: fresh + eventIDs, lastError: lastError)
    }
}

/// Where a page is loading from.
package enum PageSource: Sendable, Hashable {
    /// The store, before this position (`nil`: the newest events).
    case store(before: StoreCursor?)
    /// The server, from this `/messages` token.
    case server(from: PaginationToken)
}

/// What precedes the oldest event of a page.
package enum PageBoundary: Sendable, Hashable {
    /// More events in the store, before this position.
    case stored(StoreCursor)
    /// A hole the server must fill, starting from this token.
    case gap(PaginationToken)
    /// Nothing: the page reaches the room's creation (`/messages` returned no `end`).
    case roomStart
}

/// One page of older events.
package struct TimelinePage: Sendable, Equatable {
    /// The page's events, oldest first.
    package var eventIDs: [EventID]
    /// What precedes the page's oldest event.
    package var before: PageBoundary
    /// How many events the page brought that are not items of the window (thread replies,
    /// which their thread shows; edits, reactions, redactions): a server page made of them
    /// still moved the gap, so pagination goes on for the items still wanted.
    package var hiddenCount: Int

    /// Creates a page.
    package init(eventIDs: [EventID], before: PageBoundary, hiddenCount: Int = 0) {
        self.eventIDs = eventIDs
        self.before = before
        self.hiddenCount = hiddenCount
    }
}

/// Why a page failed to load. Pagination is not retried automatically: the reader scrolls again.
public enum TimelineError: Error, Sendable, Hashable, CaseNamed {
    /// The store could not be read.
    case storeFailed
    /// No usable response from the server.
    case network
    /// The server answered with an error status (`M_FORBIDDEN` for history the user may not see,
    /// 429, 5xx…).
    case server(status: Int, errorCode: String?)
}

extension TimelineMachine.State {
    /// The same state case holding `window`.
    func replacingWindow(_ window: TimelineWindow) -> Self {
        switch self {
        case .idle: .idle
        case .live(_, let cursor): .live(window, olderInStore: cursor)
        case .paginatingBackwards(_, let source, let remaining):
            .paginatingBackwards(window, source: source, remaining: remaining)
        case .reachedStart: .reachedStart(window)
        case .gap(_, let token): .gap(window, token: token)
        }
    }
}
