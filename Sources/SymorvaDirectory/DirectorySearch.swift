import SymorvaMachines
import SymorvaRuntime

/// An observable search of one directory (public rooms, members, users): the member types,
/// ``results`` shows the answer to the latest query only.
///
/// Each search runs a `DirectorySearchMachine` in its own host: typing the
/// same query again starts nothing, a new query cancels the request of the old one, and a page
/// that answers an older query is dropped rather than shown. Requests with the same key (source,
/// term, page) from different searches of one client join one request in flight.
///
/// ```swift
/// let search = community.publicRooms.search()
/// let stop = search.results.subscribe { state in show(state.results?.items ?? []) }
/// search.update(term: "gov")                       // as the member types
/// let first = try await search.search("governance") // or: wait for the answer
/// if first.hasMore { try await search.loadMore() }
/// ```
public final class DirectorySearch<Item: Sendable & Equatable>: Sendable {
    /// The search machine's state: idle, searching, loaded (with the results so far),
    /// loadingMore or failed.
    public var results: ObservableValue<DirectorySearchState<Item>> { host.states }

    /// What this search reads.
    public let source: DirectorySource
    /// Entries per page.
    public let pageSize: Int

    let host: MachineHost<DirectorySearchMachine<Item>>

    init(
        source: DirectorySource, pageSize: Int, scope: AccountScope?, tracer: Tracer,
        fetch:
            @escaping @Sendable (DirectoryQuery, DirectoryPageToken?) async -> Result<
                DirectoryPage<Item>, DirectoryError
            >
    ) {
        self.source = source
        self.pageSize = pageSize
        let interpreter = ClosureInterpreter<DirectorySearchMachine<Item>> { effect, _ in
            switch effect {
            case .fetchPage(let query, let page, let generation):
                return .pageLoaded(generation: generation, await fetch(query, page))
            case .cancel:
                return nil
            }
        }
        host = MachineHost(
            machine: DirectorySearchMachine<Item>(), initial: .idle(generation: 0), interpreter: interpreter,
            instance: "\(source)", scope: scope, tracer: tracer)
    }

    /// Searches for `term` (as the member types): returns at once; ``results`` shows the answer.
    public func update(term: String) {
        host.post(.queryChanged(query(term)))
    }

    /// Searches for `term` and returns its first page of results once they are there (at once
    /// when `term` is already shown).
    ///
    /// - Throws: the failure of the search; ``/SymorvaMachines/DirectoryError/accountEnded``
    ///   when the search stopped (its account signed out) first.
    @discardableResult
    public func search(_ term: String = "") async throws(DirectoryError) -> DirectoryResults<Item> {
        let query = query(term)
        let outcome = await host.send(.queryChanged(query)) { state in Self.answer(state, for: query) }
        guard let outcome else { throw .accountEnded }
        return try outcome.get()
    }

    /// Fetches the next page and returns every result so far; the results unchanged when there
    /// is no next page or no search yet.
    @discardableResult
    public func loadMore() async throws(DirectoryError) -> DirectoryResults<Item>? {
        let outcome = await host.send(
            .moreRequested,
            ignored: { state in .some(state.results.map { .success($0) }) },
            until: { state -> Result<DirectoryResults<Item>, DirectoryError>?? in
                guard case .loaded(let results, _) = state else { return nil }
                if let failure = results.lastFailure { return .some(.failure(failure)) }
                return .some(.success(results))
            })
        guard let outcome else { throw .accountEnded }
        return try outcome?.get()
    }

    /// Searches the current query again from its first page.
    public func refresh() { host.post(.refreshRequested) }

    /// Forgets the search; its request in flight is cancelled.
    public func clear() { host.post(.cleared) }

    private func query(_ term: String) -> DirectoryQuery {
        DirectoryQuery(source: source, term: term, pageSize: pageSize)
    }

    private static func answer(
        _ state: DirectorySearchMachine<Item>.State, for query: DirectoryQuery
    ) -> Result<DirectoryResults<Item>, DirectoryError>? {
        switch state {
        case .loaded(let results, _) where results.query == query: .success(results)
        case .loadingMore(let results, _) where results.query == query: .success(results)
        case .failed(let failed, let error, _) where failed == query: .failure(error)
        default: nil
        }
    }
}

/// One request per key: directory pages fetched by several searches at once.
struct PageKey: Hashable, Sendable {
    var query: DirectoryQuery
    var page: DirectoryPageToken?
    var access: String
}
