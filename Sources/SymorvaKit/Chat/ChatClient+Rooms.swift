import Foundation
import SymorvaMachines
import SymorvaRuntime
import SymorvaTransport

// Room operations. None is optimistic: membership and permissions wait for the server.

extension ChatClient {
    /// Creates a room and returns its ID once the server has it and (while syncing) the list
    /// shows it.
    ///
    /// - Parameters:
    ///   - isDirect: a one-to-one chat (`trusted_private_chat`, `is_direct`).
    ///   - isEncrypted: turn on `m.room.encryption` (messages need the E2EE work to be sent).
    public func createRoom(
        name: String? = nil, topic: String? = nil, invitees: [UserID] = [], isDirect: Bool = false,
        isEncrypted: Bool = false
    ) async throws(ChatError) -> RoomID {
        let response = try await perform(
            ChatAPI.createRoom(
                name: name, topic: topic, invitees: invitees, isDirect: isDirect, isEncrypted: isEncrypted))
        guard let roomID = RawJSON.string("room_id", in: response.body) else { throw .unexpectedResponse }
        await waitUntilListed(RoomID(roomID), as: .joined)
        return RoomID(roomID)
    }

    /// Joins a room by ID or alias (`#room:server`) and returns its ID once the list shows it
    /// (while syncing).
    public func join(roomIDOrAlias: String) async throws(ChatError) -> RoomID {
        guard roomIDOrAlias.hasPrefix("!") || roomIDOrAlias.hasPrefix("#") else {
            throw .invalidArgument(name: "roomIDOrAlias")
        }
        let response = try await perform(ChatAPI.join(roomIDOrAlias))
        guard let roomID = RawJSON.string("room_id", in: response.body) else { throw .unexpectedResponse }
        await waitUntilListed(RoomID(roomID), as: .joined)
        return RoomID(roomID)
    }

    /// Leaves a room (or declines an invite). Waits for the server.
    public func leave(_ roomID: RoomID) async throws(ChatError) {
        _ = try await perform(ChatAPI.leave(roomID: roomID))
    }

    /// Invites `userID`, after checking the member's power level for `invite`.
    public func invite(_ userID: UserID, to roomID: RoomID) async throws(ChatError) {
        try await checkPower(.invite, roomID: roomID, target: nil)
        _ = try await perform(ChatAPI.membership(.invite, roomID: roomID, userID: userID, reason: nil))
    }

    /// Removes `userID` from the room, after checking power levels (the member needs `kick`
    /// and a higher level than the target). Waits for the server.
    public func kick(_ userID: UserID, from roomID: RoomID, reason: String? = nil) async throws(ChatError) {
        try await checkPower(.kick, roomID: roomID, target: userID)
        _ = try await perform(ChatAPI.membership(.kick, roomID: roomID, userID: userID, reason: reason))
    }

    /// Bans `userID` from the room, after checking power levels (the member needs `ban` and a
    /// higher level than the target). Waits for the server.
    public func ban(_ userID: UserID, from roomID: RoomID, reason: String? = nil) async throws(ChatError) {
        try await checkPower(.ban, roomID: roomID, target: userID)
        _ = try await perform(ChatAPI.membership(.ban, roomID: roomID, userID: userID, reason: reason))
    }

    // MARK: Helpers

    func perform(_ endpoint: MatrixEndpoint) async throws(ChatError) -> HTTPResponse {
        do {
            return try await requester.send(endpoint)
        } catch {
            if RequestFailure.isTokenProblem(error) { sendQueueTokenRejected() }
            throw ChatError(error)
        }
    }

    /// Waits until the list shows `roomID` with `membership`; returns at once when the sync loop
    /// is not running (the room appears with its next sync). Cancellable.
    func waitUntilListed(_ roomID: RoomID, as membership: ConversationMembership) async {
        let sync = syncState
        @Sendable func syncIsRunning() -> Bool {
            switch sync.value {
            case .stopped, .failed: false
            default: true
            }
        }
        guard syncIsRunning() else { return }
        _ = await conversations.first { list in list[roomID]?.membership == membership || !syncIsRunning() }
    }

    /// Throws `.insufficientPowerLevel` when the member may not perform `action` (on `target`),
    /// by the room's `m.room.power_levels` (stored, else fetched).
    func checkPower(_ action: ChatAPI.MembershipAction, roomID: RoomID, target: UserID?) async throws(ChatError) {
        var content = (try? await store.stateContent(roomID: roomID, type: "m.room.power_levels")) ?? nil
        if content == nil {
            content = try await perform(ChatAPI.state(roomID: roomID, type: "m.room.power_levels")).body
        }
        guard let content, let levels = PowerLevels.read(content) else { return }
        let own = levels.level(of: userID.rawValue)
        let required: Int
        switch action {
        case .invite: required = levels.invite ?? 0
        case .kick: required = levels.kick ?? 50
        case .ban: required = levels.ban ?? 50
        }
        guard own >= required else { throw .insufficientPowerLevel(required: required, actual: own) }
        if let target, target != userID {
            let theirs = levels.level(of: target.rawValue)
            guard own > theirs else { throw .insufficientPowerLevel(required: theirs + 1, actual: own) }
        }
    }
}

/// The parts of `m.room.power_levels` that membership actions need.
struct PowerLevels: Decodable {
    var users: [String: Int]?
    var usersDefault: Int?
    var invite: Int?
    var kick: Int?
    var ban: Int?
    var redact: Int?

    enum CodingKeys: String, CodingKey {
        case users, invite, kick, ban, redact
        case usersDefault = "users_default"
    }

    func level(of userID: String) -> Int { users?[userID] ?? usersDefault ?? 0 }

    static func read(_ bytes: [UInt8]) -> PowerLevels? {
        try? JSONDecoder().decode(PowerLevels.self, from: Data(bytes))
    }
}
