import SymorvaRuntime

extension SlidingSyncMachine {
    /// The request-carrying states share one set of rules.
    enum Phase {
        case firstWindow, growing, live
    }

    func state(_ phase: Phase, _ progress: SlidingSyncProgress) -> State {
        switch phase {
        case .firstWindow: .firstWindow(progress)
        case .growing: .growing(progress)
        case .live: .live(progress)
        }
    }

    /// `stopped` and `failed`: only a start does anything.
    func idle(on event: Event) -> Transition<State, Effect> {
        switch event {
        case .started(let start):
            let progress = SlidingSyncProgress(
                pos: start.pos, rangeEnd: firstWindow - 1, subscriptions: start.subscriptions,
                jitter: JitterSource(seed: start.jitterSeed))
            return resume(progress)
        case .stopped:
            return .move(to: .stopped)
        case .syncResponse, .positionExpired, .persisted, .timerFired, .networkChanged, .tokenRejected,
            .tokenRefreshed, .subscriptionsChanged:
            return .ignored
        }
    }

    func polling(_ phase: Phase, _ progress: SlidingSyncProgress, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .started, .timerFired, .tokenRefreshed:
            return .ignored
        case .stopped:
            return .move(to: .stopped, effects: [.cancel(Self.requestKey)])
        case .syncResponse(.success(let summary)):
            // One request at a time: a response during a commit is a stale duplicate.
            guard progress.pending == nil else { return .stay }
            var next = progress
            next.pending = summary
            return .move(to: state(phase, next), effects: [.storeSlidingSyncResponse(pos: summary.pos)])
        case .syncResponse(.failure(let error)):
            guard progress.pending == nil else { return .stay }
            return fail(progress, error)
        case .positionExpired:
            guard progress.pending == nil else { return .stay }
            guard progress.pos != nil else {
                // A request without a position cannot have an unknown one: the server is broken,
                // and asking again would loop. Stop until the next start.
                return fail(progress, .rejected(status: 400, errorCode: "M_UNKNOWN_POS"))
            }
            return reset(progress)
        case .persisted(let result):
            return committed(phase, progress, result)
        case .networkChanged:
            // During a commit no request is open; the next one starts when the commit ends.
            guard progress.pending == nil else { return .stay }
            // The open request may hang on a dead connection: replace it with a quick one.
            let next: State = phase == .firstWindow ? .firstWindow(progress) : .growing(progress)
            return .move(to: next, effects: [request(progress, timeout: .zero)])
        case .tokenRejected:
            return .move(
                to: .awaitingToken(progress), effects: [.cancel(Self.requestKey), .requestTokenRefresh])
        case .subscriptionsChanged(let rooms):
            guard rooms != progress.subscriptions else { return .stay }
            var next = progress
            next.subscriptions = rooms
            // The request after a running commit carries them; otherwise replace the open
            // request at once, so that a newly opened conversation does not wait for the poll.
            guard progress.pending == nil else { return .move(to: state(phase, next)) }
            return .move(to: state(phase, next), effects: [request(next, timeout: .zero)])
        }
    }

    func backingOff(_ progress: SlidingSyncProgress, attempt: Int, after: Duration, on event: Event)
        -> Transition<State, Effect>
    {
        switch event {
        case .started, .syncResponse, .positionExpired, .persisted, .tokenRefreshed:
            return .ignored
        case .stopped:
            return .move(to: .stopped)
        case .timerFired(.retry), .networkChanged:
            return resume(progress)
        case .tokenRejected:
            return .move(to: .awaitingToken(progress), effects: [.requestTokenRefresh])
        case .subscriptionsChanged(let rooms):
            // Kept for the retry. Moving cancels the state's retry timer, so it starts again
            // with the same delay: never sooner than a server's `Retry-After` asked.
            guard rooms != progress.subscriptions else { return .stay }
            var next = progress
            next.subscriptions = rooms
            return .move(
                to: .backingOff(next, attempt: attempt, after: after), effects: [.scheduleRetry(after: after)])
        }
    }

    func awaitingToken(_ progress: SlidingSyncProgress, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .started, .syncResponse, .positionExpired, .timerFired, .networkChanged, .tokenRejected:
            return .ignored
        case .stopped:
            return .move(to: .stopped)
        case .persisted(.success(let pos)):
            // A response received before the token was rejected has been committed: keep it.
            guard let pending = progress.pending, pending.pos == pos else { return .stay }
            return .move(to: .awaitingToken(advanced(progress, by: pending)))
        case .persisted(.failure(let error)):
            guard progress.pending != nil else { return .stay }
            guard error.isRetryable else { return .move(to: .failed(error)) }
            // The response was dropped: the request after the refresh asks for it again.
            var next = progress
            next.pending = nil
            return .move(to: .awaitingToken(next))
        case .tokenRefreshed:
            return resume(progress)
        case .subscriptionsChanged(let rooms):
            var next = progress
            next.subscriptions = rooms
            return .move(to: .awaitingToken(next))
        }
    }

    // MARK: Helpers

    /// Starts the next request from `progress`: a new connection's first window without a
    /// position, else a catch-up of the current range. While a commit is still running, waits
    /// for it in `growing` instead.
    func resume(_ progress: SlidingSyncProgress) -> Transition<State, Effect> {
        guard progress.pending == nil else { return .move(to: .growing(progress)) }
        guard progress.pos != nil else {
            return .move(to: .firstWindow(progress), effects: [request(progress, timeout: .zero)])
        }
        return .move(to: .growing(progress), effects: [request(progress, timeout: .zero)])
    }

    /// `M_UNKNOWN_POS`: a new connection from the first window. What the store holds stays (a
    /// room sent again merges into its row); the subscriptions are kept.
    func reset(_ progress: SlidingSyncProgress) -> Transition<State, Effect> {
        var next = progress
        next.pos = nil
        next.rangeEnd = firstWindow - 1
        next.roomCount = nil
        return .move(to: .firstWindow(next), effects: [request(next, timeout: .zero)])
    }

    /// `progress` once `summary`'s response is committed: the position moves and the list's
    /// size is known.
    func advanced(_ progress: SlidingSyncProgress, by summary: SlidingSyncSummary) -> SlidingSyncProgress {
        var next = progress
        next.pos = summary.pos
        next.roomCount = summary.roomCount
        next.pending = nil
        next.consecutiveFailures = 0
        return next
    }

    func committed(
        _ phase: Phase, _ progress: SlidingSyncProgress, _ result: Result<SlidingSyncPosition, SyncError>
    ) -> Transition<State, Effect> {
        switch result {
        case .success(let pos):
            // A commit of another response than the pending one is stale.
            guard let pending = progress.pending, pending.pos == pos else { return .stay }
            var next = advanced(progress, by: pending)
            guard next.coversList else {
                // The rest of the list, one step at a time, at once.
                next.rangeEnd = min(pending.roomCount - 1, next.rangeEnd + growthStep)
                return .move(to: .growing(next), effects: [request(next, timeout: .zero)])
            }
            return .move(to: .live(next), effects: [request(next, timeout: longPollTimeout)])
        case .failure(let error):
            guard progress.pending != nil else { return .stay }
            // A store that is full or busy can recover: nothing was written and `pos` did not
            // move, so back off and ask for the same response again.
            var next = progress
            next.pending = nil
            return fail(next, error)
        }
    }

    func fail(_ progress: SlidingSyncProgress, _ error: SyncError) -> Transition<State, Effect> {
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

    func request(_ progress: SlidingSyncProgress, timeout: Duration) -> Effect {
        .sendSlidingSync(
            SlidingSyncRequest(
                pos: progress.pos, timeout: timeout, range: 0...max(0, progress.rangeEnd),
                subscriptions: progress.subscriptions.sorted()))
    }
}
