import SymorvaMachines

/// The spaces endpoints: a space's hierarchy (paged), creating a space, linking a room to it,
/// and joining a room of a space through the servers its link names.
package enum SpacesAPI {
    /// `GET /_matrix/client/v1/rooms/{roomId}/hierarchy`: one page of the space's rooms, depth
    /// first, the space itself first on the first page.
    package static func hierarchy(
        spaceID: RoomID, from token: String?, limit: Int, maxDepth: Int?, suggestedOnly: Bool
    ) -> MatrixEndpoint {
        var query = [MatrixEndpoint.QueryItem(name: "limit", value: String(limit))]
        if let token { query.append(.init(name: "from", value: token)) }
        if let maxDepth { query.append(.init(name: "max_depth", value: String(maxDepth))) }
        if suggestedOnly { query.append(.init(name: "suggested_only", value: "true")) }
        return MatrixEndpoint(
            method: .get, path: "/_matrix/client/v1/rooms/\(percentEncoded(spaceID.rawValue))/hierarchy", query: query,
            requiresAuth: true)
    }

    /// `POST /createRoom` for a space (`creation_content.type` `m.space`): public spaces can be
    /// joined by anyone, private ones by invitation; only moderators post in the space itself.
    package static func createSpace(name: String, topic: String?, isPublic: Bool) -> MatrixEndpoint {
        var body = JSONObjectWriter()
        body.string("preset", isPublic ? "public_chat" : "private_chat")
        body.string("name", name)
        if let topic { body.string("topic", topic) }
        body.raw("creation_content", #"{"type":"m.space"}"#)
        body.raw("power_level_content_override", #"{"events_default":100}"#)
        return MatrixEndpoint(
            method: .post, path: "\(AuthAPI.clientPrefix)/createRoom", body: body.bytes, requiresAuth: true)
    }

    /// The `m.space.child` content that links a room into a space (`via`: servers to join
    /// through), or the empty content that unlinks it.
    package static func childContent(via servers: [String], suggested: Bool) -> String {
        var body = JSONObjectWriter()
        if !servers.isEmpty {
            body.strings("via", servers)
            if suggested { body.bool("suggested", true) }
        }
        return String(decoding: body.bytes, as: UTF8.self)
    }

    /// The `m.space.parent` content a room names its space with.
    package static func parentContent(via servers: [String]) -> String {
        var body = JSONObjectWriter()
        body.strings("via", servers)
        body.bool("canonical", true)
        return String(decoding: body.bytes, as: UTF8.self)
    }

    /// `POST /join/{roomId}?server_name=…`: a join through the servers a space's link names (a
    /// room the server does not know of yet, or one with `restricted` join rules).
    package static func join(roomID: RoomID, via servers: [String]) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .post, path: "\(AuthAPI.clientPrefix)/join/\(percentEncoded(roomID.rawValue))",
            query: servers.map { .init(name: "server_name", value: $0) }, body: Array("{}".utf8), requiresAuth: true)
    }
}

/// A page of `GET /hierarchy`.
package struct SpaceHierarchyResponse: Decodable, Sendable {
    /// The rooms of the page.
    package var rooms: [Room]
    /// The token of the next page; absent on the last.
    package var nextBatch: String?

    enum CodingKeys: String, CodingKey {
        case rooms
        case nextBatch = "next_batch"
    }

    /// One room of the hierarchy as the server summarises it.
    package struct Room: Decodable, Sendable {
        package var roomID: String
        package var name: String?
        package var topic: String?
        package var canonicalAlias: String?
        package var avatarURL: String?
        package var joinedMembers: Int
        package var worldReadable: Bool
        package var guestCanJoin: Bool
        package var joinRule: String?
        package var roomType: String?
        package var childrenState: [ChildState]

        enum CodingKeys: String, CodingKey {
            case roomID = "room_id"
            case name, topic
            case canonicalAlias = "canonical_alias"
            case avatarURL = "avatar_url"
            case joinedMembers = "num_joined_members"
            case worldReadable = "world_readable"
            case guestCanJoin = "guest_can_join"
            case joinRule = "join_rule"
            case roomType = "room_type"
            case childrenState = "children_state"
        }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            roomID = try container.decode(String.self, forKey: .roomID)
            name = try container.decodeIfPresent(String.self, forKey: .name)
            topic = try container.decodeIfPresent(String.self, forKey: .topic)
            canonicalAlias = try container.decodeIfPresent(String.self, forKey: .canonicalAlias)
            avatarURL = try container.decodeIfPresent(String.self, forKey: .avatarURL)
            joinedMembers = try container.decodeIfPresent(Int.self, forKey: .joinedMembers) ?? 0
            worldReadable = try container.decodeIfPresent(Bool.self, forKey: .worldReadable) ?? false
            guestCanJoin = try container.decodeIfPresent(Bool.self, forKey: .guestCanJoin) ?? false
            joinRule = try container.decodeIfPresent(String.self, forKey: .joinRule)
            roomType = try container.decodeIfPresent(String.self, forKey: .roomType)
            childrenState = try container.decodeIfPresent([ChildState].self, forKey: .childrenState) ?? []
        }
    }

    /// A stripped `m.space.child` event: the child's room ID (its state key) and the servers
    /// to join it through.
    package struct ChildState: Decodable, Sendable {
        package var stateKey: String
        package var via: [String]
        package var suggested: Bool
        package var order: String?

        enum CodingKeys: String, CodingKey {
            case stateKey = "state_key"
            case content
        }

        struct Content: Decodable {
            var via: [String]?
            var suggested: Bool?
            var order: String?
        }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            stateKey = try container.decode(String.self, forKey: .stateKey)
            // A malformed content is an unlinked child, not a failed page.
            let content = (try? container.decodeIfPresent(Content.self, forKey: .content)) ?? nil
            via = content?.via ?? []
            suggested = content?.suggested ?? false
            order = content?.order
        }
    }
}
