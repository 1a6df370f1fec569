import SymorvaRuntime

/// The simplified sliding sync loop (MSC4186) of one account: a first window of the
/// conversation list, then the rest of it in growing ranges, then long-polling.
///
/// Where the server offers it, sliding sync replaces `/sync` v2 (``SyncMachine``): instead of
/// every room at once, the server sends the rooms of a range of one list ordered by recency
/// (rows `0...19` first), and a room subscription for each conversation open on screen. The
/// machine decides what each request asks for — the connection position `pos`, the long-poll
/// timeout, the list's range, the subscribed rooms — and the interpreter builds the body
/// (required state with lazy-loaded members, timeline limits, extensions).
///
/// As in v2, the machine never holds a payload and `pos` moves only with what it covers: the
/// interpreter reports a ``SlidingSyncSummary``, keeps the response until the machine asks to
/// store it, and the store commits the rooms, the extensions' data (to-device events with
/// their own `since`) and the new `pos` in one transaction, answering ``Event/persisted(_:)``.
/// A kill between the response and the commit repeats the same request with the old `pos`.
///
/// `M_UNKNOWN_POS` (the server dropped the connection, or it expired) is not an error: the
/// machine forgets `pos` and opens a new connection from the first window
/// (``Event/positionExpired``). Nothing stored is lost — a room sent again merges into its
/// stored row and timeline, and the to-device extension's `since` is kept apart from `pos`,
/// so no to-device message is skipped.
package struct SlidingSyncMachine: ChartedMachine {
    package static let name = "SlidingSync"

    /// The key of the running sliding sync request: a new request replaces the old one.
    package static let requestKey: EffectKey = "slidingSync.request"
    /// The key of the running store transaction.
    package static let storeKey: EffectKey = "slidingSync.store"

    /// How long the server may hold a live request open (`timeout`).
    package var longPollTimeout: Duration
    /// Delays between failed attempts.
    package var backoff: RetryBackoff
    /// Rows of the conversation list in the first window (the first screen).
    package var firstWindow: Int
    /// Rows added to the range by each request while the list grows in the background.
    package var growthStep: Int

    /// Creates the machine. `firstWindow` and `growthStep` are at least 1.
    package init(
        longPollTimeout: Duration = .seconds(30), backoff: RetryBackoff = .sync, firstWindow: Int = 20,
        growthStep: Int = 200
    ) {
        self.longPollTimeout = longPollTimeout
        self.backoff = backoff
        self.firstWindow = max(1, firstWindow)
        self.growthStep = max(1, growthStep)
    }

    /// The machine state.
    package typealias State = SlidingSyncState

    /// What happened to the loop.
    package enum Event: Sendable, Equatable, CaseNameListing {
        /// The session is signed in: start from the stored position (if any).
        case started(SlidingSyncStart)
        /// Stop syncing (sign-out, app in background, account switch).
        case stopped
        /// The request finished. The payload stays with the interpreter.
        case syncResponse(Result<SlidingSyncSummary, SyncError>)
        /// The server does not know the request's `pos` (`M_UNKNOWN_POS`): the connection
        /// expired or the server restarted it.
        case positionExpired
        /// The store committed the response and its `pos` in one transaction (or failed).
        case persisted(Result<SlidingSyncPosition, SyncError>)
        /// A timer of this machine fired.
        case timerFired(SyncTimer)
        /// Connectivity changed: a hanging request or a pending retry should be retried now.
        case networkChanged
        /// The server answered `M_UNKNOWN_TOKEN`.
        case tokenRejected
        /// The session obtained a fresh access token.
        case tokenRefreshed
        /// The conversations open on screen changed: these rooms get a room subscription
        /// (their timeline and state at once, whatever their place in the list).
        case subscriptionsChanged(Set<String>)

        package static let allCaseNames = [
            "started", "stopped", "syncResponse", "positionExpired", "persisted", "timerFired", "networkChanged",
            "tokenRejected", "tokenRefreshed", "subscriptionsChanged",
        ]

        /// The case name, without data.
        package var caseNameLiteral: StaticString? {
            switch self {
            case .started: "started"
            case .stopped: "stopped"
            case .syncResponse: "syncResponse"
            case .positionExpired: "positionExpired"
            case .persisted: "persisted"
            case .timerFired: "timerFired"
            case .networkChanged: "networkChanged"
            case .tokenRejected: "tokenRejected"
            case .tokenRefreshed: "tokenRefreshed"
            case .subscriptionsChanged: "subscriptionsChanged"
            }
        }
    }

    /// What the interpreter must do.
    package enum Effect: MachineEffect, Equatable {
        /// `POST …/org.matrix.simplified_msc3575/sync` asking for `request`. Keyed by
        /// ``SlidingSyncMachine/requestKey``: it replaces the open request.
        case sendSlidingSync(SlidingSyncRequest)
        /// Commit the payload of the response whose position is `pos`, together with `pos`, in
        /// one transaction; answer ``Event/persisted(_:)``.
        case storeSlidingSyncResponse(pos: SlidingSyncPosition)
        /// Fire ``Event/timerFired(_:)`` with ``SyncTimer/retry`` after `after`: the state
        /// timeout of ``State/backingOff(_:attempt:after:)``.
        case scheduleRetry(after: Duration)
        /// Ask the session to refresh the access token; it answers ``Event/tokenRefreshed``.
        case requestTokenRefresh
        /// Cancel the effect running under this key.
        case cancel(EffectKey)

        package var caseNameLiteral: StaticString? {
            switch self {
            case .sendSlidingSync: "sendSlidingSync"
            case .storeSlidingSyncResponse: "storeSlidingSyncResponse"
            case .scheduleRetry: "scheduleRetry"
            case .requestTokenRefresh: "requestTokenRefresh"
            case .cancel: "cancel"
            }
        }

        package var directive: EffectDirective {
            switch self {
            case .sendSlidingSync: .keyed(SlidingSyncMachine.requestKey)
            case .storeSlidingSyncResponse: .keyed(SlidingSyncMachine.storeKey)
            case .scheduleRetry(let after): .timer(.stateTimeout, .after(after))
            case .requestTokenRefresh: .perform
            case .cancel(let key): .cancel(key)
            }
        }
    }

    /// Every ``State`` case name: the state ids of `StateCharts/SlidingSync.scxml`.
    package static var stateCaseNames: [String] { State.allCaseNames }

    /// Every ``Event`` case name: the event names of `StateCharts/SlidingSync.scxml`.
    package static var eventCaseNames: [String] { Event.allCaseNames }

    /// The event of the retry timer, which the host performs.
    package func event(firing timer: Effect) -> Event? {
        if case .scheduleRetry = timer { return .timerFired(.retry) }
        return nil
    }

    package func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch state {
        case .stopped, .failed:
            return idle(on: event)
        case .firstWindow(let progress):
            return polling(.firstWindow, progress, on: event)
        case .growing(let progress):
            return polling(.growing, progress, on: event)
        case .live(let progress):
            return polling(.live, progress, on: event)
        case .backingOff(let progress, let attempt, let after):
            return backingOff(progress, attempt: attempt, after: after, on: event)
        case .awaitingToken(let progress):
            return awaitingToken(progress, on: event)
        }
    }
}

/// Where an account's sliding sync loop is.
package enum SlidingSyncState: Sendable, Equatable, CaseNameListing {
    /// Not syncing: before sign-in completes, after sign-out, or paused by the app.
    case stopped
    /// A new connection (no `pos`: the first sync of this account, or after `M_UNKNOWN_POS`):
    /// asking for the first window of the list, `timeout=0`.
    case firstWindow(SlidingSyncProgress)
    /// The list's range grows toward the whole list, one step per committed response, with
    /// `timeout=0`; also a catch-up after a start, a retry or a network change.
    case growing(SlidingSyncProgress)
    /// The range covers every room of the list; long-polling.
    case live(SlidingSyncProgress)
    /// The last request failed transiently; retry number `attempt` is due `after` the failure.
    /// The retry timer is this state's timeout, so leaving the state cancels it.
    case backingOff(SlidingSyncProgress, attempt: Int, after: Duration)
    /// The server rejected the access token; the session is refreshing it.
    case awaitingToken(SlidingSyncProgress)
    /// A permanent error: the loop stops until it is started again.
    case failed(SyncError)

    package static let allCaseNames = [
        "stopped", "firstWindow", "growing", "live", "backingOff", "awaitingToken", "failed",
    ]

    /// The case name, without data.
    package var caseNameLiteral: StaticString? {
        switch self {
        case .stopped: "stopped"
        case .firstWindow: "firstWindow"
        case .growing: "growing"
        case .live: "live"
        case .backingOff: "backingOff"
        case .awaitingToken: "awaitingToken"
        case .failed: "failed"
        }
    }

    /// The progress of a running loop; `nil` when stopped or failed.
    package var progress: SlidingSyncProgress? {
        switch self {
        case .stopped, .failed: nil
        case .firstWindow(let progress), .growing(let progress), .live(let progress), .awaitingToken(let progress),
            .backingOff(let progress, _, _):
            progress
        }
    }
}

// MARK: - Values

/// The position of a sliding sync connection (`pos`), as the server spelled it.
package struct SlidingSyncPosition: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The position as the server spelled it.
    package let rawValue: String
    /// Wraps a position.
    package init(rawValue: String) { self.rawValue = rawValue }
    /// Wraps a position.
    package init(_ rawValue: String) { self.rawValue = rawValue }
    /// The position (opaque, not a secret).
    package var description: String { rawValue }
}

/// Everything the loop remembers between requests (never the payload).
package struct SlidingSyncProgress: Sendable, Equatable {
    /// The position of the last response the store committed; `nil` on a new connection.
    package var pos: SlidingSyncPosition?
    /// The last row of the list's range the requests ask for (rows `0...rangeEnd`, by recency).
    package var rangeEnd: Int
    /// The list's size as of the last committed response (`lists.*.count`); `nil` before one.
    package var roomCount: Int?
    /// The rooms with a room subscription (conversations open on screen).
    package var subscriptions: Set<String>
    /// The response the store is committing now.
    package var pending: SlidingSyncSummary?
    /// Transient failures since the last committed response; the attempt number of the next
    /// retry.
    package var consecutiveFailures: Int
    /// The jitter stream for retry delays.
    package var jitter: JitterSource

    /// Creates progress.
    package init(
        pos: SlidingSyncPosition?, rangeEnd: Int, roomCount: Int? = nil, subscriptions: Set<String> = [],
        pending: SlidingSyncSummary? = nil, consecutiveFailures: Int = 0, jitter: JitterSource
    ) {
        self.pos = pos
        self.rangeEnd = rangeEnd
        self.roomCount = roomCount
        self.subscriptions = subscriptions
        self.pending = pending
        self.consecutiveFailures = consecutiveFailures
        self.jitter = jitter
    }

    /// Whether the range covers every room of the list the server reported.
    package var coversList: Bool { roomCount.map { rangeEnd + 1 >= $0 } ?? false }
}

/// What the loop starts from.
package struct SlidingSyncStart: Sendable, Equatable {
    /// The position read from the store, `nil` for a first sync.
    package var pos: SlidingSyncPosition?
    /// The conversations open on screen already.
    package var subscriptions: Set<String>
    /// Randomness for retry jitter, drawn by the caller (machines draw none).
    package var jitterSeed: UInt64

    /// Creates a start.
    package init(pos: SlidingSyncPosition?, subscriptions: Set<String> = [], jitterSeed: UInt64) {
        self.pos = pos
        self.subscriptions = subscriptions
        self.jitterSeed = jitterSeed
    }
}

/// What one request asks for; the interpreter adds the list's sort, required state, timeline
/// limits and extensions.
package struct SlidingSyncRequest: Sendable, Equatable {
    /// The connection's position; `nil` opens a new connection.
    package var pos: SlidingSyncPosition?
    /// How long the server may hold the request (zero: answer at once).
    package var timeout: Duration
    /// The rows of the conversation list to send, by recency (`ranges: [[0, rangeEnd]]`).
    package var range: ClosedRange<Int>
    /// The rooms to subscribe to, sorted (one request, one order).
    package var subscriptions: [String]

    /// Creates a request.
    package init(pos: SlidingSyncPosition?, timeout: Duration, range: ClosedRange<Int>, subscriptions: [String]) {
        self.pos = pos
        self.timeout = timeout
        self.range = range
        self.subscriptions = subscriptions
    }
}

/// What the machine learns from one response: its position and the list's size, never its data.
package struct SlidingSyncSummary: Sendable, Equatable {
    /// `pos`: the position of the following request.
    package var pos: SlidingSyncPosition
    /// The list's size on the server (`lists.*.count`): how far the range can grow.
    package var roomCount: Int
    /// Rooms the response carried.
    package var roomsInResponse: Int

    /// Creates a summary.
    package init(pos: SlidingSyncPosition, roomCount: Int, roomsInResponse: Int = 0) {
        self.pos = pos
        self.roomCount = roomCount
        self.roomsInResponse = roomsInResponse
    }
}
