import SymorvaRuntime

/// The `/sync` loop of one account: initial sync, catching up, long-polling, backing off.
///
/// The machine never holds a sync payload. The interpreter receives the response, reports a
/// ``SyncBatchSummary`` (the `next_batch` token and counts) and keeps the payload until the
/// machine asks it to store it; the store commits the room data and the since-token in one
/// transaction and answers ``Event/persisted(_:)``. Only then does the machine advance its
/// since-token and send the next request, so a crash between the two never skips a batch.
///
/// The observable sync status of the product API is this machine's state.
package struct SyncMachine: ChartedMachine {
    package static let name = "Sync"

    /// The key of the running `/sync` request: a new request replaces the old one.
    package static let requestKey: EffectKey = "sync.request"
    /// The key of the running store transaction.
    package static let storeKey: EffectKey = "sync.store"

    /// How long the server may hold a live request open (`timeout` of `/sync`).
    package var longPollTimeout: Duration
    /// Delays between failed attempts.
    package var backoff: RetryBackoff

    /// Creates the machine.
    package init(longPollTimeout: Duration = .seconds(30), backoff: RetryBackoff = .sync) {
        self.longPollTimeout = longPollTimeout
        self.backoff = backoff
    }

    /// The machine state: ``SyncState`` (public: an app observes it).
    package typealias State = SyncState

    /// What happened to the sync loop.
    package enum Event: Sendable, Equatable, CaseNameListing {
        /// The session is signed in: start syncing from the stored since-token (if any).
        case started(SyncStart)
        /// Stop syncing (sign-out, app in background, account switch).
        case stopped
        /// The `/sync` request finished. The payload stays with the interpreter.
        case syncResponse(Result<SyncBatchSummary, SyncError>)
        /// The store committed the batch and its since-token in one transaction (or failed).
        case persisted(Result<SyncToken, SyncError>)
        /// A timer of this machine fired.
        case timerFired(SyncTimer)
        /// Connectivity changed: a hanging request or a pending retry should be retried now.
        case networkChanged
        /// The server answered `M_UNKNOWN_TOKEN` (to `/sync` or, via the session, to any request).
        case tokenRejected
        /// The session obtained a fresh access token.
        case tokenRefreshed

        package static let allCaseNames = [
            "started", "stopped", "syncResponse", "persisted", "timerFired", "networkChanged", "tokenRejected",
            "tokenRefreshed",
        ]

        /// The case name, without data.
        package var caseNameLiteral: StaticString? {
            switch self {
            case .started: "started"
            case .stopped: "stopped"
            case .syncResponse: "syncResponse"
            case .persisted: "persisted"
            case .timerFired: "timerFired"
            case .networkChanged: "networkChanged"
            case .tokenRejected: "tokenRejected"
            case .tokenRefreshed: "tokenRefreshed"
            }
        }
    }

    /// What the interpreter must do.
    package enum Effect: MachineEffect, Equatable {
        /// `GET /sync` with these parameters. Keyed by ``SyncMachine/requestKey``.
        case sendSync(since: SyncToken?, timeout: Duration, filterID: FilterID?)
        /// Commit the payload of the response whose `next_batch` is `nextBatch`, together with
        /// the since-token, in one transaction; answer ``Event/persisted(_:)``.
        case storeSyncResponse(nextBatch: SyncToken)
        /// Fire ``Event/timerFired(_:)`` with ``SyncTimer/retry`` after `after`. Runs as the
        /// state timeout of ``State/backingOff(_:attempt:after:)``.
        case scheduleRetry(after: Duration)
        /// Ask the session to refresh the access token; it answers ``Event/tokenRefreshed``.
        case requestTokenRefresh
        /// Cancel the effect running under this key.
        case cancel(EffectKey)

        package var caseNameLiteral: StaticString? {
            switch self {
            case .sendSync: "sendSync"
            case .storeSyncResponse: "storeSyncResponse"
            case .scheduleRetry: "scheduleRetry"
            case .requestTokenRefresh: "requestTokenRefresh"
            case .cancel: "cancel"
            }
        }

        package var directive: EffectDirective {
            switch self {
            case .sendSync: .keyed(SyncMachine.requestKey)
            case .storeSyncResponse: .keyed(SyncMachine.storeKey)
            case .scheduleRetry(let after): .timer(.stateTimeout, .after(after))
            case .requestTokenRefresh: .perform
            case .cancel(let key): .cancel(key)
            }
        }
    }

    /// Every ``State`` case name: the state ids of `StateCharts/Sync.scxml`.
    package static var stateCaseNames: [String] { State.allCaseNames }

    /// Every ``Event`` case name: the event names of `StateCharts/Sync.scxml`.
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
        case .initialSync(let progress):
            return polling(.initialSync, progress, on: event)
        case .catchingUp(let progress):
            return polling(.catchingUp, progress, on: event)
        case .live(let progress):
            return polling(.live, progress, on: event)
        case .backingOff(let progress, _, _):
            return backingOff(progress, on: event)
        case .awaitingToken(let progress):
            return awaitingToken(progress, on: event)
        }
    }
}

/// Where an account's `/sync` loop is: the sync status an app observes (`ChatClient.syncState`).
///
/// The state of the SDK's sync machine; the machine, its events and its effects are internal
/// to the SDK (`package`).
public enum SyncState: Sendable, Equatable, CaseNameListing {
    /// Not syncing: before sign-in completes, after sign-out, or paused by the app.
    case stopped
    /// The first sync of this account (no since-token yet): full state, `timeout=0`.
    case initialSync(SyncProgress)
    /// Syncing from a stored since-token with `timeout=0` to reach the present quickly,
    /// after a start, a retry, a network change or a token refresh.
    case catchingUp(SyncProgress)
    /// Up to date; long-polling with `SyncMachine.longPollTimeout`.
    case live(SyncProgress)
    /// The last request failed transiently; retry number `attempt` is due `after` the
    /// failure. The retry timer is this state's timeout, so leaving the state cancels it.
    case backingOff(SyncProgress, attempt: Int, after: Duration)
    /// The server rejected the access token; the session is refreshing it. Nothing is
    /// sent until `Event.tokenRefreshed`.
    case awaitingToken(SyncProgress)
    /// A permanent error: the loop stops until it is started again.
    case failed(SyncError)

    public static let allCaseNames = [
        "stopped", "initialSync", "catchingUp", "live", "backingOff", "awaitingToken", "failed",
    ]

    /// The case name, without data.
    public var caseNameLiteral: StaticString? {
        switch self {
        case .stopped: "stopped"
        case .initialSync: "initialSync"
        case .catchingUp: "catchingUp"
        case .live: "live"
        case .backingOff: "backingOff"
        case .awaitingToken: "awaitingToken"
        case .failed: "failed"
        }
    }
}

// MARK: - Values

/// Everything the loop remembers between requests (never the payload).
public struct SyncProgress: Sendable, Equatable {
    /// The since-token of the last batch the store committed; `nil` before the first one.
    public var since: SyncToken?
    /// The filter sent with every request.
    public var filterID: FilterID?
    /// The `next_batch` of a response the store is committing now.
    public var pendingBatch: SyncToken?
    /// Transient failures since the last committed batch; the attempt number of the next retry.
    public var consecutiveFailures: Int
    /// The jitter stream for retry delays.
    public var jitter: JitterSource

    /// Creates progress.
    public init(
        since: SyncToken?, filterID: FilterID?, pendingBatch: SyncToken? = nil, consecutiveFailures: Int = 0,
        jitter: JitterSource
    ) {
        self.since = since
        self.filterID = filterID
        self.pendingBatch = pendingBatch
        self.consecutiveFailures = consecutiveFailures
        self.jitter = jitter
    }
}

/// What the loop starts from.
package struct SyncStart: Sendable, Equatable {
    /// The since-token read from the store, `nil` for a first sync.
    package var since: SyncToken?
    /// The filter to use.
    package var filterID: FilterID?
    /// Randomness for retry jitter, drawn by the caller (machines draw none).
    package var jitterSeed: UInt64

    /// Creates a start.
    package init(since: SyncToken?, filterID: FilterID? = nil, jitterSeed: UInt64) {
        self.since = since
        self.filterID = filterID
        self.jitterSeed = jitterSeed
    }
}

/// What the machine learns from one `/sync` response: its position and its size, never its data.
package struct SyncBatchSummary: Sendable, Equatable {
    /// `next_batch`: the since-token of the following request.
    package var nextBatch: SyncToken
    /// Joined rooms with updates.
    package var joinedRoomCount: Int
    /// Rooms with pending invites.
    package var invitedRoomCount: Int
    /// Rooms left.
    package var leftRoomCount: Int
    /// Timeline events across all rooms.
    package var timelineEventCount: Int
    /// Rooms whose timeline was `limited` (a gap the timeline fills with `/messages`).
    package var limitedRoomCount: Int

    /// Creates a summary.
    package init(
        nextBatch: SyncToken, joinedRoomCount: Int = 0, invitedRoomCount: Int = 0, leftRoomCount: Int = 0,
        timelineEventCount: Int = 0, limitedRoomCount: Int = 0
    ) {
        self.nextBatch = nextBatch
        self.joinedRoomCount = joinedRoomCount
        self.invitedRoomCount = invitedRoomCount
        self.leftRoomCount = leftRoomCount
        self.timelineEventCount = timelineEventCount
        self.limitedRoomCount = limitedRoomCount
    }
}

/// The sync machine's timers.
package enum SyncTimer: Sendable, Equatable, CaseNamed {
    /// The backoff delay is over: send the request again.
    case retry
}

/// Why a `/sync` request or its commit failed.
public enum SyncError: Error, Sendable, Hashable, CaseNamed {
    /// No usable response: offline, connection reset, client-side timeout. Retried.
    case network
    /// A 5xx response. Retried.
    case server(status: Int)
    /// 429 `M_LIMIT_EXCEEDED`; the next attempt waits `retryAfter` (`Retry-After` header or
    /// `retry_after_ms`) when the server gave one, else the backoff delay.
    case rateLimited(retryAfter: Duration?)
    /// Another 4xx (`M_BAD_JSON`, `M_INVALID_PARAM` for a bad filter…). Not retried.
    case rejected(status: Int, errorCode: String)
    /// The store could not commit a batch. Not retried: the store is broken.
    case storeFailed
    /// The store could not commit a batch for a reason that passes: the disk is full or the
    /// database stayed locked (``StoreFailure/full``, ``StoreFailure/busy``). Nothing of the
    /// batch was written and the since-token did not move; the loop backs off and asks for the
    /// same batch again.
    case storeUnavailable(StoreFailure)

    /// Whether retrying later can succeed.
    public var isRetryable: Bool {
        switch self {
        case .network, .server, .rateLimited, .storeUnavailable: true
        case .rejected, .storeFailed: false
        }
    }
}

// MARK: - Transitions

extension SyncMachine {
    /// The request-carrying states share one set of rules.
    enum Phase {
        case initialSync, catchingUp, live
    }

    func state(_ phase: Phase, _ progress: SyncProgress) -> State {
        switch phase {
        case .initialSync: .initialSync(progress)
        case .catchingUp: .catchingUp(progress)
        case .live: .live(progress)
        }
    }

    /// `stopped` and `failed`: only a start does anything.
    func idle(on event: Event) -> Transition<State, Effect> {
        switch event {
        case .started(let start):
            let progress = SyncProgress(
                since: start.since, filterID: start.filterID, jitter: JitterSource(seed: start.jitterSeed))
            return resume(progress)
        case .stopped:
            return .move(to: .stopped)
        case .syncResponse, .persisted, .timerFired, .networkChanged, .tokenRejected, .tokenRefreshed:
            return .ignored
        }
    }

    func polling(_ phase: Phase, _ progress: SyncProgress, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .started, .timerFired, .tokenRefreshed:
            return .ignored
        case .stopped:
            return .move(to: .stopped, effects: [.cancel(Self.requestKey)])
        case .syncResponse(.success(let summary)):
            // Only one request runs at a time: a response during a commit is a stale duplicate.
            guard progress.pendingBatch == nil else { return .stay }
            var next = progress
            next.pendingBatch = summary.nextBatch
            return .move(to: state(phase, next), effects: [.storeSyncResponse(nextBatch: summary.nextBatch)])
        case .syncResponse(.failure(let error)):
            guard progress.pendingBatch == nil else { return .stay }
            return fail(progress, error)
        case .persisted(let result):
            return committed(phase, progress, result)
        case .networkChanged:
            // During a commit no request is open; the next one starts when the commit ends.
            guard progress.pendingBatch == nil else { return .stay }
            // The open request may hang on a dead connection: replace it with a quick one.
            let next: State = phase == .initialSync ? .initialSync(progress) : .catchingUp(progress)
            return .move(to: next, effects: [request(progress, timeout: .zero)])
        case .tokenRejected:
            return .move(
                to: .awaitingToken(progress), effects: [.cancel(Self.requestKey), .requestTokenRefresh])
        }
    }

    func backingOff(_ progress: SyncProgress, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .started, .syncResponse, .persisted, .tokenRefreshed:
            return .ignored
        case .stopped:
            return .move(to: .stopped)
        case .timerFired(.retry), .networkChanged:
            return resume(progress)
        case .tokenRejected:
            return .move(to: .awaitingToken(progress), effects: [.requestTokenRefresh])
        }
    }

    func awaitingToken(_ progress: SyncProgress, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .started, .syncResponse, .timerFired, .networkChanged, .tokenRejected:
            return .ignored
        case .stopped:
            return .move(to: .stopped)
        case .persisted(.success(let token)):
            // A batch received before the token was rejected has been committed: keep it.
            guard progress.pendingBatch == token else { return .stay }
            var next = progress
            next.since = token
            next.pendingBatch = nil
            next.consecutiveFailures = 0
            return .move(to: .awaitingToken(next))
        case .persisted(.failure(let error)):
            guard progress.pendingBatch != nil else { return .stay }
            guard error.isRetryable else { return .move(to: .failed(error)) }
            // The batch was dropped: the request after the refresh asks for it again.
            var next = progress
            next.pendingBatch = nil
            return .move(to: .awaitingToken(next))
        case .tokenRefreshed:
            return resume(progress)
        }
    }

    /// Starts the next request from `progress`: a first sync without a since-token, else a
    /// catch-up. While a commit is still running, waits for it in `catchingUp` instead.
    func resume(_ progress: SyncProgress) -> Transition<State, Effect> {
        guard progress.pendingBatch == nil else { return .move(to: .catchingUp(progress)) }
        guard progress.since != nil else {
            return .move(to: .initialSync(progress), effects: [request(progress, timeout: .zero)])
        }
        return .move(to: .catchingUp(progress), effects: [request(progress, timeout: .zero)])
    }

    func committed(
        _ phase: Phase, _ progress: SyncProgress, _ result: Result<SyncToken, SyncError>
    ) -> Transition<State, Effect> {
        switch result {
        case .success(let token):
            // A commit of another batch than the pending one is stale.
            guard progress.pendingBatch == token else { return .stay }
            var next = progress
            next.since = token
            next.pendingBatch = nil
            next.consecutiveFailures = 0
            return .move(to: .live(next), effects: [request(next, timeout: longPollTimeout)])
        case .failure(let error):
            guard progress.pendingBatch != nil else { return .stay }
            // A store that is full or busy can recover: the batch was not written and the
            // since-token did not move, so back off and ask for the same batch again.
            var next = progress
            next.pendingBatch = nil
            return fail(next, error)
        }
    }

    func fail(_ progress: SyncProgress, _ error: SyncError) -> Transition<State, Effect> {
        guard error.isRetryable else { return .move(to: .failed(error)) }
        var next = progress
        next.consecutiveFailures += 1
        var retryAfter: Duration?
        if case .rateLimited(let after) = error { retryAfter = after }
        let delay = next.jitter.delay(attempt: next.consecutiveFailures, backoff: backoff, retryAfter: retryAfter)
        return .move(
            to: .backingOff(next, attempt: next.consecutiveFailures, after: delay),
            effects: [.scheduleRetry(after: delay)])
    }

    func request(_ progress: SyncProgress, timeout: Duration) -> Effect {
        .sendSync(since: progress.since, timeout: timeout, filterID: progress.filterID)
    }
}
