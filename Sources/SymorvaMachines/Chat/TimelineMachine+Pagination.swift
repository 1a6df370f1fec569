import SymorvaRuntime

// Back-pagination: store first, then the server for gaps, continuing across the boundary until
// the request is satisfied or the frontier stops moving.

extension TimelineMachine {
    /// Starts loading `count` older events from `source`.
    func paginate(_ window: TimelineWindow, from source: PageSource, count: Int) -> Transition<State, Effect> {
        .move(
            to: .paginatingBackwards(window, source: source, remaining: count),
            effects: [load(source, count: count)])
    }

    func load(_ source: PageSource, count: Int) -> Effect {
        switch source {
        case .store(let cursor): .loadFromStore(before: cursor, count: count)
        case .server(let token): .fetchMessages(from: token, count: count)
        }
    }

    /// The rules while a page is loading.
    func paginating(
        _ window: TimelineWindow, _ source: PageSource, _ remaining: Int, on event: Event
    ) -> Transition<State, Effect> {
        switch event {
        case .observed, .paginateRequested:
            // Already observed; a second request joins the page that is loading.
            return .ignored
        case .unobserved:
            return .move(to: .idle, effects: [.cancel(Self.paginateKey)])
        case .storePageLoaded(let result):
            // A page from the other source is a stale result of a replaced request.
            guard case .store = source else { return .stay }
            return landed(result, window, source, remaining)
        case .serverPageLoaded(let result):
            guard case .server = source else { return .stay }
            return landed(result, window, source, remaining)
        case .liveEventsArrived(let eventIDs):
            let next = window.appending(eventIDs)
            if next == window { return .stay }
            return .move(to: .paginatingBackwards(next, source: source, remaining: remaining))
        case .gapDetected(let token):
            // The window is replaced by the newest events: the page being loaded no longer fits.
            return .move(to: .gap(TimelineWindow(), token: token), effects: [.cancel(Self.paginateKey)])
        }
    }

    /// A page arrived: prepend it and move to the frontier it reports, or keep loading across a
    /// store/server boundary while events are still wanted and the last page made progress.
    func landed(
        _ result: Result<TimelinePage, TimelineError>, _ window: TimelineWindow, _ source: PageSource,
        _ remaining: Int
    ) -> Transition<State, Effect> {
        switch result {
        case .failure(let error):
            var failed = window
            failed.lastError = error
            return .move(to: frontier(failed, before: source))
        case .success(let page):
            var next = window.prepending(page.eventIDs)
            next.lastError = nil
            let stillWanted = remaining - page.eventIDs.count
            // An empty store page may hand over to the server (a room never paginated before);
            // otherwise only a page that made progress continues, so loading always ends. A
            // server page with hidden events (thread replies…) moved the gap without filling
            // the window: the next server page brings the items still wanted.
            let madeProgress = !page.eventIDs.isEmpty || isStore(source) || page.hiddenCount > 0
            if stillWanted > 0 && madeProgress,
                let continuation = continuation(after: page.before, from: source, hidden: page.hiddenCount > 0)
            {
                if case .server = source, case .server = continuation {
                    // Past hidden events the next page is at least as long as this one: a
                    // thread's hundreds of replies are not crossed one request per reply.
                    let pageSize = max(stillWanted, page.eventIDs.count + page.hiddenCount)
                    return .move(
                        to: .paginatingBackwards(next, source: continuation, remaining: stillWanted),
                        effects: [load(continuation, count: pageSize)])
                }
                return paginate(next, from: continuation, count: stillWanted)
            }
            return .move(to: frontier(next, boundary: page.before))
        }
    }

    func isStore(_ source: PageSource) -> Bool {
        if case .store = source { return true }
        return false
    }

    /// Where the next page comes from when a page ends at a boundary of the other kind, or at
    /// a moved gap after a server page that had hidden events.
    func continuation(after boundary: PageBoundary, from source: PageSource, hidden: Bool) -> PageSource? {
        switch (boundary, source) {
        case (.gap(let token), .store): .server(from: token)
        case (.stored(let cursor), .server): .store(before: cursor)
        case (.gap(let token), .server(let from)): hidden && token != from ? .server(from: token) : nil
        case (.stored, .store), (.roomStart, _): nil
        }
    }

    /// The observed state for a window whose older side is `boundary`.
    func frontier(_ window: TimelineWindow, boundary: PageBoundary) -> State {
        switch boundary {
        case .stored(let cursor): .live(window, olderInStore: cursor)
        case .gap(let token): .gap(window, token: token)
        case .roomStart: .reachedStart(window)
        }
    }

    /// The observed state to return to when loading from `source` failed: the same frontier.
    func frontier(_ window: TimelineWindow, before source: PageSource) -> State {
        switch source {
        case .store(let cursor): .live(window, olderInStore: cursor)
        case .server(let token): .gap(window, token: token)
        }
    }
}
