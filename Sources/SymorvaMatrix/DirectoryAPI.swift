import SymorvaMachines

/// The Matrix client-server endpoints of the directory feature (room directory, aliases, user
/// directory), as pure request builders. Spec v1.11.
package enum DirectoryAPI {
    static let prefix = AuthAPI.clientPrefix

    /// `GET /publicRooms?limit=…&since=…&server=…`: the listing that needs no search term; it
    /// is the one that servers may answer without a token (`allow_public_rooms_without_auth`).
    package static func publicRooms(
        limit: Int, since: String?, server: String?, authenticated: Bool
    ) -> MatrixEndpoint {
        var query: [MatrixEndpoint.QueryItem] = [.init(name: "limit", value: String(max(1, limit)))]
        if let since { query.append(.init(name: "since", value: since)) }
        if let server { query.append(.init(name: "server", value: server)) }
        return MatrixEndpoint(method: .get, path: "\(prefix)/publicRooms", query: query, requiresAuth: authenticated)
    }

    /// `POST /publicRooms` with `filter.generic_search_term`: search needs a token (a guest's
    /// is enough).
    package static func searchPublicRooms(term: String, limit: Int, since: String?, server: String?) -> MatrixEndpoint {
        var body = JSONObjectWriter()
        body.integer("limit", Int64(max(1, limit)))
        if let since { body.string("since", since) }
        var filter = JSONObjectWriter()
        filter.string("generic_search_term", term)
        body.raw("filter", bytes: filter.bytes)
        let query: [MatrixEndpoint.QueryItem] = server.map { [.init(name: "server", value: $0)] } ?? []
        return MatrixEndpoint(
            method: .post, path: "\(prefix)/publicRooms", query: query, body: body.bytes, requiresAuth: true)
    }

    /// `GET /directory/room/{roomAlias}`: the room an alias names (no token needed).
    package static func resolveAlias(_ alias: String) -> MatrixEndpoint {
        MatrixEndpoint(method: .get, path: "\(prefix)/directory/room/\(percentEncoded(alias))", requiresAuth: false)
    }

    /// `GET /directory/list/room/{roomId}`: whether the room is published.
    package static func visibility(roomID: RoomID) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .get, path: "\(prefix)/directory/list/room/\(percentEncoded(roomID.rawValue))", requiresAuth: false)
    }

    /// `PUT /directory/list/room/{roomId}` with `visibility` `public` or `private`.
    package static func setVisibility(roomID: RoomID, published: Bool) -> MatrixEndpoint {
        var body = JSONObjectWriter()
        body.string("visibility", published ? "public" : "private")
        return MatrixEndpoint(
            method: .put, path: "\(prefix)/directory/list/room/\(percentEncoded(roomID.rawValue))", body: body.bytes,
            requiresAuth: true)
    }

    /// `POST /user_directory/search` with `search_term` and `limit`.
    package static func searchUsers(term: String, limit: Int) -> MatrixEndpoint {
        var body = JSONObjectWriter()
        body.string("search_term", term)
        body.integer("limit", Int64(max(1, limit)))
        return MatrixEndpoint(
            method: .post, path: "\(prefix)/user_directory/search", body: body.bytes, requiresAuth: true)
    }

    /// `POST /register?kind=guest`: a guest account, for searching the room directory signed out.
    package static func registerGuest() -> MatrixEndpoint {
        MatrixEndpoint(
            method: .post, path: "\(prefix)/register", query: [.init(name: "kind", value: "guest")],
            body: Array("{}".utf8), requiresAuth: false)
    }

    /// `GET /rooms/{roomId}/state/m.room.create/?format=event`: the creation event with its
    /// sender (the creator), content and room version.
    package static func createEvent(roomID: RoomID) -> MatrixEndpoint {
        var endpoint = ChatAPI.state(roomID: roomID, type: "m.room.create")
        endpoint.query = [.init(name: "format", value: "event")]
        return endpoint
    }

    /// `GET /rooms/{roomId}/state/m.room.power_levels/`.
    package static func powerLevels(roomID: RoomID) -> MatrixEndpoint {
        ChatAPI.state(roomID: roomID, type: "m.room.power_levels")
    }
}

/// The Matrix client-server endpoints of push notifications (pushers, push rules, the event a
/// push names), as pure request builders. Spec v1.11.
package enum PushAPI {
    static let prefix = AuthAPI.clientPrefix

    /// `GET /pushers`.
    package static func pushers() -> MatrixEndpoint {
        MatrixEndpoint(method: .get, path: "\(prefix)/pushers", requiresAuth: true)
    }

    /// `POST /pushers/set` with the pusher as JSON (`kind: null` removes it).
    package static func setPusher(json: [UInt8]) -> MatrixEndpoint {
        MatrixEndpoint(method: .post, path: "\(prefix)/pushers/set", body: json, requiresAuth: true)
    }

    /// `GET /pushrules/`: every rule of the account.
    package static func rules() -> MatrixEndpoint {
        MatrixEndpoint(method: .get, path: "\(prefix)/pushrules/", requiresAuth: true)
    }

    /// `PUT /pushrules/global/content/{ruleId}`: a keyword rule that notifies and highlights.
    package static func addKeyword(_ keyword: String, ruleID: String) -> MatrixEndpoint {
        var body = JSONObjectWriter()
        body.string("pattern", keyword)
        body.raw("actions", #"["notify",{"set_tweak":"highlight"},{"set_tweak":"sound","value":"default"}]"#)
        return MatrixEndpoint(
            method: .put, path: "\(prefix)/pushrules/global/content/\(percentEncoded(ruleID))", body: body.bytes,
            requiresAuth: true)
    }

    /// `DELETE /pushrules/global/{kind}/{ruleId}`.
    package static func deleteRule(kind: String, ruleID: String) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .delete, path: "\(prefix)/pushrules/global/\(percentEncoded(kind))/\(percentEncoded(ruleID))",
            requiresAuth: true)
    }

    /// `PUT /pushrules/global/{kind}/{ruleId}/enabled`.
    package static func setEnabled(_ enabled: Bool, kind: String, ruleID: String) -> MatrixEndpoint {
        var body = JSONObjectWriter()
        body.bool("enabled", enabled)
        return MatrixEndpoint(
            method: .put,
            path: "\(prefix)/pushrules/global/\(percentEncoded(kind))/\(percentEncoded(ruleID))/enabled",
            body: body.bytes, requiresAuth: true)
    }

    /// `GET /rooms/{roomId}/event/{eventId}`: the event a push names.
    package static func event(roomID: RoomID, eventID: EventID) -> MatrixEndpoint {
        ChatAPI.event(roomID: roomID, eventID: eventID)
    }
}
