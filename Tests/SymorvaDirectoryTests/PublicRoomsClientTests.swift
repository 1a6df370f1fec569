import Foundation
import SymorvaDirectory
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import Testing

enum DirectoryFixtures {
    static let homeserver = HomeserverURL("http://127.0.0.1:9")!
    static let publicRooms = "/_matrix/client/v3/publicRooms"
    static let register = "/_matrix/client/v3/register"

    static func roomsPage(_ ids: [String], next: String? = nil, total: Int = 2) -> HTTPResponse {
        let chunk = ids.map {
            #"{"room_id": "\#($0)", "name": "Room \#($0)", "num_joined_members": 3, "world_readable": true, "guest_can_join": false, "join_rule": "public"}"#
        }
        let nextJSON = next.map { #", "next_batch": "\#($0)""# } ?? ""
        return .json(
            200, #"{"chunk": [\#(chunk.joined(separator: ","))]\#(nextJSON), "total_room_count_estimate": \#(total)}"#)
    }

    static let guest = #"{"user_id": "@guest1:hs.test", "access_token": "guest-token", "device_id": "G"}"#
}

@Suite("Public rooms client")
struct PublicRoomsClientTests {
    @Test("Signed out, the plain listing goes without a token and is decoded with its estimate and next page")
    func signedOutListing() async throws {
        let transport = ScriptedHTTPTransport()
        transport.on("GET", DirectoryFixtures.publicRooms) { _ in
            .success(DirectoryFixtures.roomsPage(["!a:hs.test"], next: "n1", total: 7))
        }
        let client = PublicRoomsClient(homeserverURL: DirectoryFixtures.homeserver, transport: transport)
        let page = try await client.page(limit: 1)
        #expect(page.items.map(\.roomID) == [RoomID("!a:hs.test")])
        #expect(page.items.first?.joinedMemberCount == 3 && page.items.first?.isWorldReadable == true)
        #expect(page.nextPage == DirectoryPageToken("n1") && page.totalEstimate == 7)
        let request = try #require(transport.requests.first)
        #expect(request.bearerToken == nil)
        #expect(request.url.query?.contains("limit=1") == true)
        _ = try await client.page(since: page.nextPage, limit: 1)
        #expect(transport.requests.last?.url.query?.contains("since=n1") == true)
    }

    @Test("Signed out, a search registers one guest (however many ask at once) and posts the term with its token")
    func signedOutSearchAsGuest() async throws {
        let transport = ScriptedHTTPTransport()
        transport.on("POST", DirectoryFixtures.register) { _ in .json(200, DirectoryFixtures.guest) }
        transport.on("POST", DirectoryFixtures.publicRooms) { _ in
            .success(DirectoryFixtures.roomsPage(["!g:hs.test"], total: 1))
        }
        let client = PublicRoomsClient(homeserverURL: DirectoryFixtures.homeserver, transport: transport)
        async let first = client.page(term: "gov")
        async let second = client.page(term: "governance")
        let pages = try await [first, second]
        #expect(pages.allSatisfy { $0.items.map(\.roomID) == [RoomID("!g:hs.test")] })
        #expect(transport.count("POST", DirectoryFixtures.register) == 1)
        let searches = transport.requests("POST", DirectoryFixtures.publicRooms)
        #expect(searches.count == 2)
        #expect(searches.allSatisfy { $0.bearerToken?.exposedValue == "guest-token" })
        let bodies = searches.map { String(decoding: $0.body, as: UTF8.self) }
        #expect(bodies.contains { $0.contains(#""generic_search_term":"gov""#) })
        #expect(transport.requests("POST", DirectoryFixtures.register).first?.url.query == "kind=guest")
    }

    @Test("A server without guest access makes a signed-out search need a sign-in")
    func noGuests() async {
        let transport = ScriptedHTTPTransport()
        transport.on("POST", DirectoryFixtures.register) { _ in
            .json(403, #"{"errcode": "M_GUEST_ACCESS_FORBIDDEN", "error": "Guest access is disabled"}"#)
        }
        let client = PublicRoomsClient(homeserverURL: DirectoryFixtures.homeserver, transport: transport)
        await #expect(throws: DirectoryError.signInRequired) { try await client.page(term: "gov") }
        #expect(transport.count("POST", DirectoryFixtures.publicRooms) == 0)
    }

    @Test("Equal requests in flight at once share one request")
    func coalesced() async throws {
        let gate = TestGate()
        let transport = ScriptedHTTPTransport()
        transport.on(
            "GET", DirectoryFixtures.publicRooms,
            ScriptedHTTPTransport.held(by: gate) { _ in .success(DirectoryFixtures.roomsPage(["!a:hs.test"])) })
        let client = PublicRoomsClient(homeserverURL: DirectoryFixtures.homeserver, transport: transport)
        async let first = client.page()
        async let second = client.page()
        try await gate.waitForWaiters(count: 1)
        // The gate: the second caller has joined the first one's request before it is answered.
        try await client.pageRequestJoins.wait(until: { $0 >= 1 })
        gate.open()
        let pages = try await [first, second]
        #expect(pages[0] == pages[1])
        #expect(transport.count("GET", DirectoryFixtures.publicRooms) == 1)
    }

    @Test("Malformed input is refused before anything is sent")
    func badInput() async {
        let transport = ScriptedHTTPTransport()
        let client = PublicRoomsClient(homeserverURL: DirectoryFixtures.homeserver, transport: transport)
        await #expect(throws: DirectoryError.invalidInput("alias")) { try await client.resolve(alias: "general") }
        await #expect(throws: DirectoryError.invalidInput("alias")) { try await client.resolve(alias: "#general") }
        await #expect(throws: DirectoryError.invalidInput("server")) { try await client.page(server: "bad server") }
        await #expect(throws: DirectoryError.notSignedIn) { try await client.join(roomIDOrAlias: "!a:hs.test") }
        await #expect(throws: DirectoryError.notSignedIn) {
            try await client.setPublished(true, roomID: RoomID("!a:hs.test"))
        }
        #expect(transport.requests.isEmpty)
    }

    @Test("An alias resolves signed out; an unknown one is not found")
    func aliases() async throws {
        let transport = ScriptedHTTPTransport()
        transport.on("GET", "/_matrix/client/v3/directory/room/#general:hs.test") { _ in
            .json(200, #"{"room_id": "!general:hs.test", "servers": ["hs.test"]}"#)
        }
        let client = PublicRoomsClient(homeserverURL: DirectoryFixtures.homeserver, transport: transport)
        #expect(try await client.resolve(alias: "#general:hs.test") == RoomID("!general:hs.test"))
        await #expect(throws: DirectoryError.notFound) { try await client.resolve(alias: "#nope:hs.test") }
    }

    @Test("A search shows only the latest query: an older query's late page is dropped")
    func staleDropped() async throws {
        let gate = TestGate()
        let transport = ScriptedHTTPTransport()
        transport.on("POST", DirectoryFixtures.register) { _ in .json(200, DirectoryFixtures.guest) }
        transport.on("POST", DirectoryFixtures.publicRooms) { request in
            let body = String(decoding: request.body, as: UTF8.self)
            if body.contains("old") {
                await gate.wait()
                return .success(DirectoryFixtures.roomsPage(["!old:hs.test"]))
            }
            return .success(DirectoryFixtures.roomsPage(["!new:hs.test"]))
        }
        let trace = ObservableTraceRecorder()
        let tracer = Tracer()
        _ = tracer.addSink(trace)
        let client = PublicRoomsClient(
            homeserverURL: DirectoryFixtures.homeserver, transport: transport, tracer: tracer)
        let search = client.search()
        search.update(term: "old")
        try await gate.waitForWaiters(count: 1)
        let results = try await search.search("new")
        #expect(results.items.map(\.roomID) == [RoomID("!new:hs.test")])
        gate.open()
        // The barrier: the old query's page has come back to the search's host and was dropped
        // there (its fetch was replaced by the new query's). Only then is the state read.
        try await trace.wait(for: { $0.event == "pageLoaded" && $0.kind != .transition })
        #expect(search.results.value.results?.items.map(\.roomID) == [RoomID("!new:hs.test")])
        #expect(search.results.value.query?.term == "new")
    }

    @Test("Paging a search appends the next page until the last")
    func searchPaging() async throws {
        let transport = ScriptedHTTPTransport()
        transport.on("GET", DirectoryFixtures.publicRooms) { request in
            request.url.query?.contains("since=n1") == true
                ? .success(DirectoryFixtures.roomsPage(["!b:hs.test"], total: 2))
                : .success(DirectoryFixtures.roomsPage(["!a:hs.test"], next: "n1", total: 2))
        }
        let client = PublicRoomsClient(homeserverURL: DirectoryFixtures.homeserver, transport: transport)
        let search = client.search(pageSize: 1)
        let first = try await search.search()
        #expect(first.hasMore)
        let all = try #require(try await search.loadMore())
        #expect(all.items.map(\.roomID) == [RoomID("!a:hs.test"), RoomID("!b:hs.test")] && !all.hasMore)
        #expect(try await search.loadMore() == all)
        #expect(transport.count("GET", DirectoryFixtures.publicRooms) == 2)
    }
}
