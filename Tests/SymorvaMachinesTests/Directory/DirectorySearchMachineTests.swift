import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

typealias SearchMachine = DirectorySearchMachine<PublicRoom>
private typealias Machine = SearchMachine

enum SearchFixture {
    static let general = DirectoryQuery(source: .publicRooms(server: nil), term: "general")
    static let random = DirectoryQuery(source: .publicRooms(server: nil), term: "random")
    static let roomA = PublicRoom(roomID: RoomID("!a:localhost"), name: "General")
    static let roomB = PublicRoom(roomID: RoomID("!b:localhost"), name: "General 2")
    static let next = DirectoryPageToken("next-1")
    static let firstPage = DirectoryPage(items: [roomA], nextPage: next, totalEstimate: 2)
    static let lastPage = DirectoryPage(items: [roomB], nextPage: nil, totalEstimate: 2)
    static let loaded = DirectoryResults(query: general, first: firstPage)
    static let complete = DirectoryResults(query: general, first: DirectoryPage<PublicRoom>(items: [roomA]))

    static let sampleStates: [SearchMachine.State] = [
        .idle(generation: 0), .idle(generation: 3),
        .searching(general, generation: 1),
        .loaded(loaded, generation: 1), .loaded(complete, generation: 1),
        .loadingMore(loaded, generation: 1),
        .failed(general, .transport(.timeout), generation: 1),
    ]

    static let sampleEvents: [SearchMachine.Event] = [
        .queryChanged(general), .queryChanged(random),
        .pageLoaded(generation: 1, .success(firstPage)),
        .pageLoaded(generation: 1, .failure(.server(code: "M_UNKNOWN", status: 500))),
        .pageLoaded(generation: 0, .success(lastPage)), .pageLoaded(generation: 1, .success(lastPage)),
        .moreRequested, .refreshRequested, .cleared,
    ]
}

@Suite("DirectorySearch machine")
struct DirectorySearchMachineTests {
    @Test("A query is searched once: the same query again starts no second request")
    func oneRequestPerQuery() throws {
        let store = MachineTestStore(Machine(), initial: .idle(generation: 0))
        try store.send(
            .queryChanged(SearchFixture.general), expecting: .searching(SearchFixture.general, generation: 1),
            effects: [.fetchPage(SearchFixture.general, page: nil, generation: 1)])
        try store.send(
            .queryChanged(DirectoryQuery(source: .publicRooms(server: nil), term: "  general ")), stayingWith: [])
        try store.send(
            .pageLoaded(generation: 1, .success(SearchFixture.firstPage)),
            expecting: .loaded(SearchFixture.loaded, generation: 1))
        try store.send(.queryChanged(SearchFixture.general), stayingWith: [])
    }

    @Test("An older query's page is dropped, not shown")
    func staleResultsDropped() throws {
        let store = MachineTestStore(Machine(), initial: .searching(SearchFixture.general, generation: 1))
        try store.send(
            .queryChanged(SearchFixture.random), expecting: .searching(SearchFixture.random, generation: 2),
            effects: [.fetchPage(SearchFixture.random, page: nil, generation: 2)])
        try store.send(.pageLoaded(generation: 1, .success(SearchFixture.firstPage)), stayingWith: [])
        let randomPage = DirectoryPage(items: [SearchFixture.roomB])
        try store.send(
            .pageLoaded(generation: 2, .success(randomPage)),
            expecting: .loaded(DirectoryResults(query: SearchFixture.random, first: randomPage), generation: 2))
    }

    @Test("The next page is appended with its token; the last page ends paging")
    func paging() throws {
        let store = MachineTestStore(Machine(), initial: .loaded(SearchFixture.loaded, generation: 1))
        try store.send(
            .moreRequested, expecting: .loadingMore(SearchFixture.loaded, generation: 1),
            effects: [.fetchPage(SearchFixture.general, page: SearchFixture.next, generation: 1)])
        try store.assertIgnored(.moreRequested)
        let both = SearchFixture.loaded.appending(SearchFixture.lastPage)
        try store.send(
            .pageLoaded(generation: 1, .success(SearchFixture.lastPage)), expecting: .loaded(both, generation: 1))
        #expect(both.items == [SearchFixture.roomA, SearchFixture.roomB])
        #expect(both.pageCount == 2 && !both.hasMore && both.totalEstimate == 2)
        try store.send(.moreRequested, stayingWith: [])
    }

    @Test("A failed next page keeps the pages shown and says why")
    func failedMore() throws {
        let store = MachineTestStore(Machine(), initial: .loadingMore(SearchFixture.loaded, generation: 1))
        var kept = SearchFixture.loaded
        kept.lastFailure = .transport(.timeout)
        try store.send(
            .pageLoaded(generation: 1, .failure(.transport(.timeout))), expecting: .loaded(kept, generation: 1))
        try store.send(
            .moreRequested, expecting: .loadingMore(kept, generation: 1),
            effects: [.fetchPage(SearchFixture.general, page: SearchFixture.next, generation: 1)])
    }

    @Test("A failed search is retried by the same query or a refresh")
    func retry() throws {
        let store = MachineTestStore(Machine(), initial: .searching(SearchFixture.general, generation: 1))
        try store.send(
            .pageLoaded(generation: 1, .failure(.rateLimited(retryAfter: .seconds(1)))),
            expecting: .failed(SearchFixture.general, .rateLimited(retryAfter: .seconds(1)), generation: 1))
        try store.send(
            .queryChanged(SearchFixture.general), expecting: .searching(SearchFixture.general, generation: 2),
            effects: [.fetchPage(SearchFixture.general, page: nil, generation: 2)])
        try store.send(
            .pageLoaded(generation: 2, .failure(.malformedResponse)),
            expecting: .failed(SearchFixture.general, .malformedResponse, generation: 2))
        try store.send(
            .refreshRequested, expecting: .searching(SearchFixture.general, generation: 3),
            effects: [.fetchPage(SearchFixture.general, page: nil, generation: 3)])
    }

    @Test("Clearing cancels the request in flight and moves to a new generation")
    func clearing() throws {
        let store = MachineTestStore(Machine(), initial: .searching(SearchFixture.general, generation: 1))
        try store.send(.cleared, expecting: .idle(generation: 2), effects: [.cancel(Machine.Keys.fetch)])
        try store.assertIgnored([
            .cleared, .moreRequested, .refreshRequested, .pageLoaded(generation: 1, .success(SearchFixture.firstPage)),
        ])
        try store.send(
            .queryChanged(SearchFixture.general), expecting: .searching(SearchFixture.general, generation: 3),
            effects: [.fetchPage(SearchFixture.general, page: nil, generation: 3)])
    }

    @Test("Queries never print the member's search term")
    func redaction() {
        let query = DirectoryQuery(source: .members(role: nil), term: "canary-secret-term")
        #expect(!String(describing: query).contains("canary"))
        #expect(!String(describing: Machine.Event.queryChanged(query)).contains("canary"))
        #expect(!String(describing: Machine.Effect.fetchPage(query, page: nil, generation: 1)).contains("canary"))
        #expect(!String(describing: PublicRoom(roomID: RoomID("!r:x"), name: "canary-name")).contains("canary"))
    }

    @Test("Page sizes are clamped and terms trimmed")
    func queryNormalisation() {
        #expect(DirectoryQuery(source: .users, term: "\t bob \n", pageSize: 0).pageSize == 1)
        #expect(DirectoryQuery(source: .users, term: "\t bob \n", pageSize: 500).pageSize == 100)
        #expect(DirectoryQuery(source: .users, term: "\t bob \n").term == "bob")
    }
}
