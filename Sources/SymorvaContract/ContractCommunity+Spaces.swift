import SymorvaKit
import SymorvaMatrix

extension ContractCommunity {
    /// Spaces (`chat.*` on the chat client): the joined spaces and the rooms each links to from
    /// the synced state, creating a space and linking or unlinking rooms (power level checked
    /// first), and a space's hierarchy paged from the server as a handle (`hierarchy-N`, the path
    /// `hierarchy.state`, `hierarchy.loadNextPage`) — also the community's own space.
    var spaceMethods: ContractMethods {
        let chat = community.chat
        var methods = ContractMethods()
        methods.asynchronous["chat.joinedSpaces"] = { _ in
            .array(
                try await mapping("chat") { try await chat.joinedSpaces() }.map { space in
                    .object(["id": .string(space.id.rawValue), "name": space.name.map(JSONValue.string)])
                })
        }
        methods.asynchronous["chat.roomsOfSpace"] = { call in
            let spaceID = try call.params.roomID("spaceID")
            return .array(try await mapping("chat") { try await chat.roomsOfSpace(spaceID) }.map(Self.spaceLink))
        }
        methods.asynchronous["chat.createSpace"] = { call in
            let name = try call.params.string("name")
            let topic = try call.params.optionalString("topic")
            let isPublic = try call.params.optionalBool("isPublic") ?? false
            let spaceID = try await mapping("chat") {
                try await chat.createSpace(name: name, topic: topic, isPublic: isPublic)
            }
            return .object(["roomID": .string(spaceID.rawValue)])
        }
        methods.asynchronous["chat.addToSpace"] = { call in
            let roomID = try call.params.roomID("roomID")
            let spaceID = try call.params.roomID("spaceID")
            let via = try call.params.optionalStrings("via")
            let suggested = try call.params.optionalBool("suggested") ?? false
            try await mapping("chat") {
                try await chat.addToSpace(roomID, spaceID: spaceID, via: via, suggested: suggested)
            }
            return .object([:])
        }
        methods.asynchronous["chat.removeFromSpace"] = { call in
            let roomID = try call.params.roomID("roomID")
            let spaceID = try call.params.roomID("spaceID")
            try await mapping("chat") { try await chat.removeFromSpace(roomID, spaceID: spaceID) }
            return .object([:])
        }
        // A room a space links to, through the servers its link names.
        methods.asynchronous["chat.joinVia"] = { call in
            let roomID = try call.params.roomID("roomID")
            guard let via = try call.params.optionalStrings("via"), !via.isEmpty else {
                throw ContractError.invalidParams("via", "a non-empty array of server names")
            }
            let joined = try await mapping("chat") { try await chat.join(roomID, via: via) }
            return .object(["roomID": .string(joined.rawValue)])
        }
        methods.asynchronous["chat.hierarchy"] = { [weak self] call in
            let spaceID = try call.params.roomID("spaceID")
            let pageSize = try call.params.optionalInt("pageSize", in: 1...1_000) ?? 50
            let account = self?.activeUserID
            let hierarchy = try await mapping("chat") { try chat.hierarchy(of: spaceID, pageSize: pageSize) }
            return Self.hierarchy(hierarchy, call.handles.issue(hierarchy, kind: "hierarchy", account: account))
        }
        methods.asynchronous["chat.communityRooms"] = { [weak self] call in
            let pageSize = try call.params.optionalInt("pageSize", in: 1...1_000) ?? 50
            let account = self?.activeUserID
            let hierarchy = try await mapping("chat") { try await chat.communityRooms(pageSize: pageSize) }
            return Self.hierarchy(hierarchy, call.handles.issue(hierarchy, kind: "hierarchy", account: account))
        }
        let hierarchy: @Sendable (ContractCall) throws(ContractError) -> SpaceHierarchy = { call in
            try call.handles.resolve(
                call.params, "hierarchy", kind: "hierarchy", as: SpaceHierarchy.self, domain: "chat")
        }
        methods.asynchronous["hierarchy.loadNextPage"] = { call in
            let target = try hierarchy(call)
            try await mapping("chat") { try await target.loadNextPage() }
            return Self.hierarchyState(target.state.value)
        }
        methods.subscriptions["hierarchy.state"] = { call in
            ContractSource(try hierarchy(call).state, encode: Self.hierarchyState)
        }
        return methods
    }

    static func spaceLink(_ link: SpaceChildLink) -> JSONValue {
        .object([
            "roomID": .string(link.roomID.rawValue), "via": .array(link.via.map { .string($0) }),
            "isSuggested": .bool(link.isSuggested),
        ])
    }

    static func hierarchy(_ hierarchy: SpaceHierarchy, _ handle: String) -> JSONValue {
        .object([
            "hierarchy": .string(handle), "spaceID": .string(hierarchy.spaceID.rawValue),
            "pageSize": .int(hierarchy.pageSize),
        ])
    }

    static func hierarchyState(_ state: SpaceHierarchy.State) -> JSONValue {
        .object([
            "rooms": .array(
                state.rooms.map { room in
                    .object([
                        "id": .string(room.id.rawValue), "name": room.name.map(JSONValue.string),
                        "topic": room.topic.map(JSONValue.string),
                        "canonicalAlias": room.canonicalAlias.map(JSONValue.string),
                        "avatarURL": room.avatarURL.map(JSONValue.string), "joinedMembers": .int(room.joinedMembers),
                        "joinRule": room.joinRule.map(JSONValue.string), "isSpace": .bool(room.isSpace),
                        "isWorldReadable": .bool(room.isWorldReadable),
                        "children": .array(room.children.map(spaceLink)),
                    ])
                }),
            "isComplete": .bool(state.isComplete), "isLoading": .bool(state.isLoading),
            "failure": state.failure.map { ContractError($0, domain: "chat").json },
        ])
    }
}
