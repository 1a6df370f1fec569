import SymorvaRuntime

/// One observable directory search: the homeserver's public rooms, the community's members or
/// the homeserver's user directory, for the query the member typed last.
///
/// ```
/// idle ─queryChanged→ searching ─pageLoaded→ loaded ─moreRequested→ loadingMore ─pageLoaded→ loaded
///                        │  ↑ queryChanged (another query: the old request is cancelled)
///                        └──────pageLoaded(failure)→ failed ─refreshRequested→ searching
/// ```
///
/// Two rules live here and nowhere else:
/// - **One request per query key.** The same query again (a second observer, a retyped term)
///   while it is being searched or shown starts nothing; only another query, a refresh or the
///   next page does.
/// - **Stale results are dropped.** Every request carries the search's generation; a page
///   that answers an older generation (a query the member has typed over) is ignored, never
///   shown, even if the host delivered it before the cancellation took hold.
package struct DirectorySearchMachine<Item: Sendable & Equatable>: StateMachine {
    package static var name: String { "DirectorySearch" }

    /// A machine.
    package init() {}

    /// Keys of the machine's cancellable effects.
    package enum Keys {
        /// The page request in flight; a new one replaces it.
        package static var fetch: EffectKey { EffectKey("directory.request.page") }
    }

    // MARK: - State

    /// The machine state: ``DirectorySearchState`` (public: an app observes it).
    package typealias State = DirectorySearchState<Item>

    // MARK: - Event

    /// What happened.
    package enum Event: Sendable, Equatable, CaseNamed, CustomStringConvertible {
        /// The member's query is now this one (typed, or asked for by another observer).
        case queryChanged(DirectoryQuery)
        /// A page request answered, for the search of `generation`.
        case pageLoaded(generation: Int, Result<DirectoryPage<Item>, DirectoryFailure>)
        /// The member scrolled to the end: fetch the next page.
        case moreRequested
        /// Search the current query again from its first page.
        case refreshRequested
        /// Forget the search (its request is cancelled).
        case cleared

        /// Every event case name, in declaration order: the chart's event names.
        package static var caseNames: [String] {
            ["queryChanged", "pageLoaded", "moreRequested", "refreshRequested", "cleared"]
        }

        package var caseNameLiteral: StaticString? {
            switch self {
            case .queryChanged: "queryChanged"
            case .pageLoaded: "pageLoaded"
            case .moreRequested: "moreRequested"
            case .refreshRequested: "refreshRequested"
            case .cleared: "cleared"
            }
        }

        /// The case name only: queries are what the member typed, results hold names.
        package var description: String { caseName }
    }

    // MARK: - Effect

    /// What the interpreter must do.
    package enum Effect: MachineEffect, Equatable, CustomStringConvertible {
        /// Fetch one page of `query` (from its start when `page` is `nil`); answers
        /// ``Event/pageLoaded(generation:_:)`` with `generation`.
        case fetchPage(DirectoryQuery, page: DirectoryPageToken?, generation: Int)
        /// Cancel the effect running under this key.
        case cancel(EffectKey)

        package var directive: EffectDirective {
            switch self {
            case .fetchPage: .keyed(Keys.fetch)
            case .cancel(let key): .cancel(key)
            }
        }

        /// Every effect case name, in declaration order.
        package static var caseNames: [String] { ["fetchPage", "cancel"] }

        package var caseNameLiteral: StaticString? {
            switch self {
            case .fetchPage: "fetchPage"
            case .cancel: "cancel"
            }
        }

        /// The case name only: a query is what the member typed.
        package var description: String { caseName }
    }

    /// Every state case name: the chart checker compares these with its samples and the chart.
    package static var stateCaseNames: [String] { State.caseNames }
    /// Every event case name: the chart checker compares these with its samples and the chart.
    package static var eventCaseNames: [String] { Event.caseNames }

    // MARK: - Transition

    package func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .queryChanged(let query):
            if state.query == query, !state.isFailed { return .stay }  // one request per query key
            return search(query, after: state)
        case .pageLoaded(let generation, let result):
            switch state {
            case .idle, .loaded, .failed: return .ignored  // nothing is being fetched
            case .searching, .loadingMore:
                guard generation == state.generation else { return .stay }  // an older search's answer: dropped
                return pageLoaded(result, in: state)
            }
        case .moreRequested:
            guard case .loaded(let results, let generation) = state else { return .ignored }
            guard let next = results.nextPage else { return .stay }  // every page is there
            return .move(
                to: .loadingMore(results, generation: generation),
                effects: [.fetchPage(results.query, page: next, generation: generation)])
        case .refreshRequested:
            switch state {
            case .idle, .searching: return .ignored
            case .loaded(let results, _), .loadingMore(let results, _): return search(results.query, after: state)
            case .failed(let query, _, _): return search(query, after: state)
            }
        case .cleared:
            switch state {
            case .idle: return .ignored
            case .searching, .loadingMore:
                return .move(to: .idle(generation: state.generation + 1), effects: [.cancel(Keys.fetch)])
            case .loaded, .failed: return .move(to: .idle(generation: state.generation + 1))
            }
        }
    }

    /// A new search for `query`: a new generation, its first page fetched (which replaces any
    /// request in flight under the same key).
    private func search(_ query: DirectoryQuery, after state: State) -> Transition<State, Effect> {
        let generation = state.generation + 1
        return .move(
            to: .searching(query, generation: generation),
            effects: [.fetchPage(query, page: nil, generation: generation)])
    }

    private func pageLoaded(
        _ result: Result<DirectoryPage<Item>, DirectoryFailure>, in state: State
    ) -> Transition<State, Effect> {
        switch (state, result) {
        case (.searching(let query, let generation), .success(let page)):
            return .move(to: .loaded(DirectoryResults(query: query, first: page), generation: generation))
        case (.searching(let query, let generation), .failure(let failure)):
            return .move(to: .failed(query, failure, generation: generation))
        case (.loadingMore(let results, let generation), .success(let page)):
            return .move(to: .loaded(results.appending(page), generation: generation))
        case (.loadingMore(var results, let generation), .failure(let failure)):
            // The pages already shown stay; the failure is kept for the UI to show.
            results.lastFailure = failure
            return .move(to: .loaded(results, generation: generation))
        case (.idle, _), (.loaded, _), (.failed, _):
            return .ignored
        }
    }
}

/// Where a directory search is: what an app observes (`DirectorySearch.results`).
///
/// The state of the SDK's directory-search machine; the machine, its events and its effects
/// are internal to the SDK (`package`).
public enum DirectorySearchState<Item: Sendable & Equatable>: Sendable, Equatable, CaseNamed {
    /// Nothing asked yet, or the search was cleared. `generation` counts the searches so far.
    case idle(generation: Int)
    /// The first page of `query` is being fetched.
    case searching(DirectoryQuery, generation: Int)
    /// The results so far; more may be fetched when `results.nextPage` is set.
    case loaded(DirectoryResults<Item>, generation: Int)
    /// The next page of the shown results is being fetched.
    case loadingMore(DirectoryResults<Item>, generation: Int)
    /// The first page of `query` could not be fetched.
    case failed(DirectoryQuery, DirectoryFailure, generation: Int)

    /// The generation of the search this state belongs to.
    public var generation: Int {
        switch self {
        case .idle(let generation), .searching(_, let generation), .loaded(_, let generation),
            .loadingMore(_, let generation), .failed(_, _, let generation):
            generation
        }
    }

    /// The query being searched or shown, `nil` while idle.
    public var query: DirectoryQuery? {
        switch self {
        case .idle: nil
        case .searching(let query, _), .failed(let query, _, _): query
        case .loaded(let results, _), .loadingMore(let results, _): results.query
        }
    }

    /// The results shown now (empty while idle, searching or failed).
    public var results: DirectoryResults<Item>? {
        switch self {
        case .loaded(let results, _), .loadingMore(let results, _): results
        case .idle, .searching, .failed: nil
        }
    }

    /// Every state case name, in declaration order: the chart's state ids.
    public static var caseNames: [String] { ["idle", "searching", "loaded", "loadingMore", "failed"] }

    public var caseNameLiteral: StaticString? {
        switch self {
        case .idle: "idle"
        case .searching: "searching"
        case .loaded: "loaded"
        case .loadingMore: "loadingMore"
        case .failed: "failed"
        }
    }
}

extension DirectorySearchState {
    var isFailed: Bool {
        if case .failed = self { return true }
        return false
    }
}

extension DirectorySearchMachine: ChartedMachine {}

extension DirectorySearchState: CaseNameListing {
    public static var allCaseNames: [String] { caseNames }
}

extension DirectorySearchMachine.Event: CaseNameListing {
    package static var allCaseNames: [String] { caseNames }
}
