import Foundation
import SymorvaDirectory
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices
import SymorvaTesting
import Testing

struct FixedOpenIDSource: OpenIDTokenSource {
    func requestOpenIDToken() async throws(ServicesError) -> OpenIDToken {
        OpenIDToken(accessToken: Secret("openid-token"), matrixServerName: "localhost", expiresIn: 3600)
    }
}

enum MemberFixtures {
    static let alice = UserID("@alice:localhost")
    static let members = "/_symorva/v1/directory/members"

    static func account(
        _ transport: ScriptedHTTPTransport, scope: AccountScope = AccountScope(label: "alice"), enabled: Bool = true
    ) -> AccountDirectory {
        let services = CommunityServicesClient(
            baseURL: URL(string: "http://127.0.0.1:9")!, transport: transport, tokenSource: FixedOpenIDSource())
        let requester = FixedTokenMatrixRequester(
            homeserverURL: DirectoryFixtures.homeserver, userID: alice, accessToken: Secret("matrix-token"),
            transport: transport)
        return AccountDirectory(
            userID: alice, requester: requester, services: services, scope: scope, isMemberDirectoryEnabled: enabled)
    }
}

@Suite("Member directory")
struct MemberDirectoryTests {
    @Test("Members are searched by term and role, paged with the services' token")
    func search() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on("GET", MemberFixtures.members) { request in
            request.url.query?.contains("from=") == true
                ? .json(
                    200,
                    #"{"members": [{"user_id": "@bob:localhost", "display_name": "Bob", "avatar_url": null, "roles": ["steward"]}], "next_from": null, "total": 2}"#
                )
                : .json(
                    200,
                    #"{"members": [{"user_id": "@alice:localhost", "display_name": "Alice", "avatar_url": "mxc://localhost/a", "roles": []}], "next_from": "m1.x", "total": 2}"#
                )
        }
        let directory = DirectoryClient(following: MemberFixtures.account(transport))
        let search = try directory.members(role: "steward", pageSize: 1)
        let first = try await search.search("  a ")
        #expect(first.items.map(\.userID) == [MemberFixtures.alice] && first.totalEstimate == 2)
        let query = try #require(transport.requests("GET", MemberFixtures.members).first?.url.query)
        #expect(query.contains("q=a") && query.contains("role=steward") && query.contains("limit=1"))
        let all = try #require(try await search.loadMore())
        #expect(all.items.map(\.roles) == [[], ["steward"]])
        #expect(transport.requests("GET", MemberFixtures.members).last?.url.query?.contains("from=m1.x") == true)
    }

    @Test("The same query from two searches at once makes one request")
    func oneRequestPerKey() async throws {
        let gate = TestGate()
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on(
            "GET", MemberFixtures.members,
            ScriptedHTTPTransport.held(by: gate) { _ in .json(200, #"{"members": [], "next_from": null, "total": 0}"#) }
        )
        let account = MemberFixtures.account(transport)
        let directory = DirectoryClient(following: account)
        let one = try directory.members()
        let two = try directory.members()
        async let first = one.search("ali")
        async let second = two.search("ali")
        try await gate.waitForWaiters(count: 1)
        // The gate: the second search has joined the first one's request before it is answered.
        try await account.memberPageRequestJoins.wait(until: { $0 >= 1 })
        gate.open()
        _ = try await [first, second]
        #expect(transport.count("GET", MemberFixtures.members) == 1)
    }

    @Test("Roles are checked before anything is sent, and a member's refusal is typed")
    func roles() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on("PUT", pathPrefix: "/_symorva/v1/directory/admin/members/") { _ in
            .json(403, #"{"errcode": "SY_NOT_ADMIN", "error": "not an admin"}"#)
        }
        let directory = DirectoryClient(following: MemberFixtures.account(transport))
        await #expect(throws: DirectoryError.invalidInput("role")) {
            try await directory.assignRole("Bad Role", to: UserID("@bob:localhost"))
        }
        #expect(throws: DirectoryError.invalidInput("role")) { try directory.members(role: "UPPER") }
        #expect(transport.requests.isEmpty)
        await #expect(throws: DirectoryError.forbidden(needed: nil, has: nil)) {
            try await directory.assignRole("steward", to: UserID("@bob:localhost"))
        }
    }

    @Test("Disabled in the manifest, the member directory answers moduleDisabled; the user directory needs a term")
    func disabledAndUsers() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on("POST", "/_matrix/client/v3/user_directory/search") { _ in
            .json(200, #"{"results": [{"user_id": "@bob:localhost", "display_name": "Bob"}], "limited": false}"#)
        }
        let directory = DirectoryClient(following: MemberFixtures.account(transport, enabled: false))
        await #expect(throws: DirectoryError.moduleDisabled) { try await directory.members().search() }
        await #expect(throws: DirectoryError.invalidInput("term")) { try await directory.users().search(" ") }
        let users = try await directory.users().search("bob")
        #expect(users.items == [DirectoryUser(userID: UserID("@bob:localhost"), displayName: "Bob")])
        let body = String(decoding: try #require(transport.requests.last).body, as: UTF8.self)
        #expect(body.contains(#""search_term":"bob""#))
    }

    @Test("After the account's scope ends, operations refuse with accountEnded")
    func accountEnded() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        let scope = AccountScope(label: "alice")
        let directory = DirectoryClient(following: MemberFixtures.account(transport, scope: scope))
        scope.end(reason: .signedOut)
        #expect(throws: DirectoryError.accountEnded) { try directory.members() }
        await #expect(throws: DirectoryError.accountEnded) { try await directory.refreshOwnProfile() }
        #expect(transport.requests.isEmpty)
    }

    @Test("Publishing checks the room's power levels first and sends nothing when too low")
    func publishNeedsPower() async throws {
        let transport = ScriptedHTTPTransport()
        let levels = "/_matrix/client/v3/rooms/!r:localhost/state/m.room.power_levels"
        transport.on("GET", pathPrefix: levels) { _ in
            .json(
                200,
                #"{"users": {"@alice:localhost": 10}, "events": {"m.room.canonical_alias": 50}, "state_default": 50}"#)
        }
        transport.on("PUT", "/_matrix/client/v3/directory/list/room/!r:localhost") { _ in .json(200, "{}") }
        let create = "/_matrix/client/v3/rooms/!r:localhost/state/m.room.create"
        transport.on("GET", pathPrefix: create) { _ in
            .json(200, #"{"sender": "@bob:localhost", "type": "m.room.create", "content": {"room_version": "11"}}"#)
        }
        let client = PublicRoomsClient(homeserverURL: DirectoryFixtures.homeserver, transport: transport)
        client.follow(MemberFixtures.account(transport))
        await #expect(throws: DirectoryError.forbidden(needed: 50, has: 10)) {
            try await client.setPublished(true, roomID: RoomID("!r:localhost"))
        }
        #expect(transport.count("PUT", "/_matrix/client/v3/directory/list/room/!r:localhost") == 0)
        transport.on("GET", pathPrefix: levels) { _ in .json(200, #"{"users": {"@alice:localhost": 100}}"#) }
        try await client.setPublished(true, roomID: RoomID("!r:localhost"))
        let put = try #require(transport.requests("PUT", "/_matrix/client/v3/directory/list/room/!r:localhost").first)
        #expect(String(decoding: put.body, as: UTF8.self) == #"{"visibility":"public"}"#)
        #expect(put.bearerToken?.exposedValue == "matrix-token")
    }

    @Test("In a version 12 room its creator may publish whatever the power levels say")
    func creatorOfVersion12() async throws {
        let transport = ScriptedHTTPTransport()
        transport.on("GET", pathPrefix: "/_matrix/client/v3/rooms/!r:localhost/state/m.room.create") { _ in
            .json(200, #"{"sender": "@alice:localhost", "type": "m.room.create", "content": {"room_version": "12"}}"#)
        }
        transport.on("PUT", "/_matrix/client/v3/directory/list/room/!r:localhost") { _ in .json(200, "{}") }
        let client = PublicRoomsClient(homeserverURL: DirectoryFixtures.homeserver, transport: transport)
        client.follow(MemberFixtures.account(transport))
        try await client.setPublished(false, roomID: RoomID("!r:localhost"))
        #expect(transport.count("PUT", "/_matrix/client/v3/directory/list/room/!r:localhost") == 1)
        let query = transport.requests.first?.url.query
        #expect(query == "format=event")
    }
}
