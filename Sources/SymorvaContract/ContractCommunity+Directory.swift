import SymorvaKit
import SymorvaMatrix

extension ContractCommunity {
    /// `directory.*`: one member's entry, the member's own profile refreshed, roles (admins), and
    /// searches of the members and of the homeserver's users; `contract.moduleDisabled` when the
    /// manifest disables the directory. `publicRooms.*`: the room directory (searches, aliases,
    /// joining, publishing). `search.*` and the path `search.results` drive any search handle.
    var directoryMethods: ContractMethods {
        let directory = community.directory
        let publicRooms = community.publicRooms
        var methods = ContractMethods()
        methods.asynchronous["directory.searchMembers"] = { [weak self] call in
            let directory = try Self.required(directory, "directory")
            let role = try call.params.optionalString("role")
            let pageSize = try call.params.optionalInt("pageSize", in: 1...100) ?? 20
            let search = try await mapping("directory") { try directory.members(role: role, pageSize: pageSize) }
            return Self.search(ContractSearch(search, encode: Self.member), call, account: self?.activeUserID)
        }
        methods.asynchronous["directory.searchUsers"] = { [weak self] call in
            let directory = try Self.required(directory, "directory")
            let pageSize = try call.params.optionalInt("pageSize", in: 1...100) ?? 20
            let search = try await mapping("directory") { try directory.users(pageSize: pageSize) }
            return Self.search(ContractSearch(search, encode: Self.user), call, account: self?.activeUserID)
        }
        methods.asynchronous["publicRooms.search"] = { [weak self] call in
            let server = try call.params.optionalString("server")
            let pageSize = try call.params.optionalInt("pageSize", in: 1...100) ?? 20
            let search = publicRooms.search(server: server, pageSize: pageSize)
            return Self.search(ContractSearch(search, encode: Self.publicRoom), call, account: self?.activeUserID)
        }
        methods.asynchronous["publicRooms.resolve"] = { call in
            let alias = try call.params.string("alias")
            let roomID = try await mapping("directory") { try await publicRooms.resolve(alias: alias) }
            return .object(["roomID": .string(roomID.rawValue)])
        }
        methods.asynchronous["publicRooms.join"] = { call in
            let room = try call.params.string("roomIDOrAlias")
            let roomID = try await mapping("directory") { try await publicRooms.join(roomIDOrAlias: room) }
            return .object(["roomID": .string(roomID.rawValue)])
        }
        methods.asynchronous["publicRooms.isPublished"] = { call in
            let roomID = try call.params.roomID("roomID")
            let published = try await mapping("directory") { try await publicRooms.isPublished(roomID) }
            return .object(["published": .bool(published)])
        }
        methods.asynchronous["publicRooms.setPublished"] = { call in
            let roomID = try call.params.roomID("roomID")
            guard let published = try call.params.optionalBool("published") else {
                throw ContractError.invalidParams("published", "a boolean")
            }
            try await mapping("directory") { try await publicRooms.setPublished(published, roomID: roomID) }
            return .object([:])
        }
        methods.asynchronous["search.run"] = { call in
            let search = try Self.searchHandle(call)
            return try await search.run(try call.params.optionalString("term") ?? "")
        }
        methods.asynchronous["search.loadMore"] = { call in try await Self.searchHandle(call).loadMore() }
        methods.asynchronous["search.update"] = { call in
            let search = try Self.searchHandle(call)
            search.update(try call.params.string("term"))
            return .object([:])
        }
        methods.asynchronous["search.refresh"] = { call in
            try Self.searchHandle(call).refresh()
            return .object([:])
        }
        methods.asynchronous["search.clear"] = { call in
            try Self.searchHandle(call).clear()
            return .object([:])
        }
        methods.subscriptions["search.results"] = { call in try Self.searchHandle(call).results }
        methods.asynchronous["directory.member"] = { call in
            let directory = try Self.required(directory, "directory")
            let userID = try call.params.userID("userID")
            return Self.member(try await mapping("directory") { try await directory.member(userID) })
        }
        methods.asynchronous["directory.refreshOwnProfile"] = { _ in
            let directory = try Self.required(directory, "directory")
            return Self.member(try await mapping("directory") { try await directory.refreshOwnProfile() })
        }
        methods.asynchronous["directory.assignRole"] = { call in
            let directory = try Self.required(directory, "directory")
            let role = try call.params.string("role")
            let userID = try call.params.userID("userID")
            let changed = try await mapping("directory") { try await directory.assignRole(role, to: userID) }
            return .object(["changed": .bool(changed)])
        }
        methods.asynchronous["directory.removeRole"] = { call in
            let directory = try Self.required(directory, "directory")
            let role = try call.params.string("role")
            let userID = try call.params.userID("userID")
            let changed = try await mapping("directory") { try await directory.removeRole(role, from: userID) }
            return .object(["changed": .bool(changed)])
        }
        return methods
    }

    /// A new search's handle, with what it reads.
    static func search(_ search: ContractSearch, _ call: ContractCall, account: UserID?) -> JSONValue {
        .object(["search": .string(call.handles.issue(search, kind: "search", account: account))])
    }

    static func searchHandle(_ call: ContractCall) throws(ContractError) -> ContractSearch {
        try call.handles.resolve(call.params, "search", kind: "search", as: ContractSearch.self, domain: "directory")
    }

    static func user(_ user: DirectoryUser) -> JSONValue {
        .object([
            "userID": .string(user.userID.rawValue), "displayName": user.displayName.map(JSONValue.string),
            "avatarURL": user.avatarURL.map(JSONValue.string),
        ])
    }

    static func publicRoom(_ room: PublicRoom) -> JSONValue {
        .object([
            "roomID": .string(room.roomID.rawValue), "name": room.name.map(JSONValue.string),
            "topic": room.topic.map(JSONValue.string), "canonicalAlias": room.canonicalAlias.map(JSONValue.string),
            "avatarURL": room.avatarURL.map(JSONValue.string),
            "joinedMemberCount": .number(Double(room.joinedMemberCount)),
            "isPubliclyJoinable": .bool(room.isPubliclyJoinable), "guestCanJoin": .bool(room.guestCanJoin),
            "isWorldReadable": .bool(room.isWorldReadable),
        ])
    }

    static func member(_ member: DirectoryMember) -> JSONValue {
        .object([
            "userID": .string(member.userID.rawValue), "displayName": member.displayName.map(JSONValue.string),
            "avatarURL": member.avatarURL.map(JSONValue.string), "roles": .array(member.roles.map(JSONValue.string)),
        ])
    }
}

/// A directory search behind a `search-N` handle — of members, users or public rooms — with its
/// items encoded for the protocol: the one handle kind every search method takes.
final class ContractSearch: Sendable {
    let run: @Sendable (String) async throws(ContractError) -> JSONValue
    let loadMore: @Sendable () async throws(ContractError) -> JSONValue
    let update: @Sendable (String) -> Void
    let refresh: @Sendable () -> Void
    let clear: @Sendable () -> Void
    let results: ContractSource
    /// The Swift search, kept alive as long as the handle.
    private let search: any Sendable

    init<Item>(_ search: DirectorySearch<Item>, encode: @escaping @Sendable (Item) -> JSONValue) {
        self.search = search
        run = { term throws(ContractError) in
            Self.results(try await mapping("directory") { try await search.search(term) }, encode)
        }
        loadMore = { () throws(ContractError) in
            guard let results = try await mapping("directory", { try await search.loadMore() }) else { return .null }
            return Self.results(results, encode)
        }
        update = { term in search.update(term: term) }
        refresh = { search.refresh() }
        clear = { search.clear() }
        results = ContractSource(search.results) { state in Self.state(state, encode) }
    }

    /// `{term, items, hasMore, totalEstimate?, pageCount, lastError?}`.
    static func results<Item>(_ results: DirectoryResults<Item>, _ encode: (Item) -> JSONValue) -> JSONValue {
        .object([
            "term": .string(results.query.term), "items": .array(results.items.map(encode)),
            "hasMore": .bool(results.nextPage != nil),
            "totalEstimate": results.totalEstimate.map { .number(Double($0)) },
            "pageCount": .number(Double(results.pageCount)),
            "lastError": results.lastFailure.map { ContractError($0, domain: "directory").json },
        ])
    }

    /// The search machine's state: `{kind: idle|searching|loaded|loadingMore|failed, …}`.
    static func state<Item>(_ state: DirectorySearchState<Item>, _ encode: (Item) -> JSONValue) -> JSONValue {
        switch state {
        case .idle: .object(["kind": "idle"])
        case .searching(let query, _): .object(["kind": "searching", "term": .string(query.term)])
        case .loaded(let found, _): .object(["kind": "loaded", "results": results(found, encode)])
        case .loadingMore(let found, _): .object(["kind": "loadingMore", "results": results(found, encode)])
        case .failed(let query, let failure, _):
            .object([
                "kind": "failed", "term": .string(query.term),
                "error": ContractError(failure, domain: "directory").json,
            ])
        }
    }
}
