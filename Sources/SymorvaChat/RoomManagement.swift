import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix

/// Who may join a room (`m.room.join_rules`).
public enum JoinRule: Sendable, Hashable {
    /// Anyone.
    case `public`
    /// By invitation only.
    case invite
    /// Anyone may ask (knock); a moderator lets them in by inviting them.
    case knock
    /// Members of any of these rooms (spaces, usually) may join.
    case restricted(allowedRooms: [RoomID])
    /// Members of these rooms may join, anyone else may knock.
    case knockRestricted(allowedRooms: [RoomID])

    /// The `m.room.join_rules` content.
    var content: String {
        var body = JSONObjectWriter()
        switch self {
        case .public: body.string("join_rule", "public")
        case .invite: body.string("join_rule", "invite")
        case .knock: body.string("join_rule", "knock")
        case .restricted(let rooms):
            body.string("join_rule", "restricted")
            body.raw("allow", Self.allow(rooms))
        case .knockRestricted(let rooms):
            body.string("join_rule", "knock_restricted")
            body.raw("allow", Self.allow(rooms))
        }
        return String(decoding: body.bytes, as: UTF8.self)
    }

    /// The `allow` list: membership of each room.
    private static func allow(_ rooms: [RoomID]) -> String {
        var bytes = Array("[".utf8)
        for (index, room) in rooms.enumerated() {
            bytes += Array(((index == 0 ? "" : ",") + #"{"type":"m.room_membership","room_id":"#).utf8)
            JSONObjectWriter.appendQuoted(room.rawValue, to: &bytes)
            bytes += Array("}".utf8)
        }
        return String(decoding: bytes + Array("]".utf8), as: UTF8.self)
    }
}

/// Who may read a room's history (`m.room.history_visibility`).
public enum HistoryVisibility: String, Sendable, Hashable, CaseIterable {
    /// Anyone, members or not.
    case worldReadable = "world_readable"
    /// Members, all of the history.
    case shared
    /// Members, from their invitation on.
    case invited
    /// Members, from their join on.
    case joined
}

// Room settings and knocking. None is optimistic: each change checks the account's power level
// first (typed `.insufficientPowerLevel`) and waits for the server.
extension AccountChat {
    /// Sets who may join the room.
    ///
    /// - Throws: `.insufficientPowerLevel`; `.invalidArgument("allowedRooms")` for a
    ///   restricted rule without rooms; the server's refusal (`M_UNSUPPORTED_ROOM_VERSION`…).
    public func setJoinRule(_ rule: JoinRule, roomID: RoomID) async throws(ChatError) {
        switch rule {
        case .restricted(let rooms), .knockRestricted(let rooms):
            guard !rooms.isEmpty, rooms.allSatisfy({ $0.rawValue.hasPrefix("!") }) else {
                throw .invalidArgument(name: "allowedRooms")
            }
        default: break
        }
        try await setState("m.room.join_rules", content: rule.content, roomID: roomID)
    }

    /// Sets who may read the room's history from now on.
    ///
    /// - Throws: `.insufficientPowerLevel`; the server's refusal.
    public func setHistoryVisibility(_ visibility: HistoryVisibility, roomID: RoomID) async throws(ChatError) {
        var body = JSONObjectWriter()
        body.string("history_visibility", visibility.rawValue)
        try await setState(
            "m.room.history_visibility", content: String(decoding: body.bytes, as: UTF8.self), roomID: roomID)
    }

    /// Sets `user`'s power level in the room (the room's current `m.room.power_levels` is read
    /// from the server and changed in that one place, everything else kept).
    ///
    /// - Throws: `.insufficientPowerLevel` unless the account may change power levels, outranks
    ///   `user` (or is `user`, lowering itself) and would not grant more than its own level;
    ///   `.invalidArgument("level")`; the server's refusal.
    public func setPowerLevel(_ level: Int, for user: UserID, roomID: RoomID) async throws(ChatError) {
        guard (-9_007_199_254_740_991...9_007_199_254_740_991).contains(level) else {
            throw .invalidArgument(name: "level")
        }
        let body = try await perform(ChatAPI.state(roomID: roomID, type: "m.room.power_levels")).body
        guard case .object(var levels)? = try? JSONValue(parsing: body) else { throw .unexpectedResponse }
        let creators = try await privilegedCreators(roomID: roomID)
        var users: [String: JSONValue] = [:]
        if case .object(let listed)? = levels["users"] { users = listed }
        let usersDefault = levels["users_default"]?.integerValue ?? 0
        func current(_ id: String) -> Int {
            creators.contains(id) ? Int.max : users[id]?.integerValue ?? usersDefault
        }
        let own = current(userID.rawValue)
        var eventLevels: [String: JSONValue] = [:]
        if case .object(let events)? = levels["events"] { eventLevels = events }
        let required = eventLevels["m.room.power_levels"]?.integerValue ?? levels["state_default"]?.integerValue ?? 50
        guard own >= required else { throw .insufficientPowerLevel(required: required, actual: own) }
        guard !creators.contains(user.rawValue) else { throw .invalidArgument(name: "user") }
        let theirs = current(user.rawValue)
        if user != userID {
            guard own > theirs else {
                throw .insufficientPowerLevel(required: theirs == Int.max ? theirs : theirs + 1, actual: own)
            }
        }
        guard level <= own else { throw .insufficientPowerLevel(required: level, actual: own) }
        users[user.rawValue] = .number(Double(level))
        levels["users"] = .object(users)
        guard let content = try? JSONValue.object(levels).canonicalEncoding() else { throw .unexpectedResponse }
        _ = try await perform(
            ChatAPI.setState(
                roomID: roomID, type: "m.room.power_levels", content: String(decoding: content, as: UTF8.self)))
    }

    /// Asks to join a room whose join rule is `knock` (or `knock_restricted`); a moderator
    /// answers by inviting (``acceptKnock(from:roomID:)``) or removing (``denyKnock(from:roomID:reason:)``).
    /// The room shows in the list as knocked once synced.
    ///
    /// - Throws: the server's refusal (`M_FORBIDDEN` when the room does not take knocks).
    public func knock(_ roomIDOrAlias: String, reason: String? = nil, via servers: [String] = [])
        async throws(ChatError)
        -> RoomID
    {
        guard roomIDOrAlias.hasPrefix("!") || roomIDOrAlias.hasPrefix("#") else {
            throw .invalidArgument(name: "roomIDOrAlias")
        }
        var body = JSONObjectWriter()
        if let reason { body.string("reason", reason) }
        let response = try await perform(
            MatrixEndpoint(
                method: .post, path: "\(AuthAPI.clientPrefix)/knock/\(percentEncoded(roomIDOrAlias))",
                query: servers.map { .init(name: "server_name", value: $0) }, body: body.bytes, requiresAuth: true))
        guard let roomID = RawJSON.string("room_id", in: response.body) else { throw .unexpectedResponse }
        return RoomID(roomID)
    }

    /// The users knocking on a room, from its synced state.
    public func knocks(roomID: RoomID) async throws(ChatError) -> [UserID] {
        do {
            return try await store.members(roomID: roomID, membership: "knock").compactMap(UserID.init)
        } catch {
            throw .store(error)
        }
    }

    /// Lets a knocking user in: invites them (checks the power to invite).
    public func acceptKnock(from user: UserID, roomID: RoomID) async throws(ChatError) {
        try await invite(user, to: roomID)
    }

    /// Turns a knock down: removes the knocking user (checks the power to kick).
    public func denyKnock(from user: UserID, roomID: RoomID, reason: String? = nil) async throws(ChatError) {
        try await kick(user, from: roomID, reason: reason)
    }

    /// Sends the state event `type` with `content` after checking the power to send it.
    func setState(_ type: String, content: String, roomID: RoomID) async throws(ChatError) {
        try await checkStatePower(type, roomID: roomID)
        _ = try await perform(ChatAPI.setState(roomID: roomID, type: type, content: content))
    }
}
