import SymorvaMachines
import SymorvaMatrix

// One's own profile and a room's name, topic and avatar: they wait for the server. Room changes
// check the member's power level for the state event first (`events`, else `state_default`),
// as kicks and bans do.

extension AccountChat {
    /// Sets the account's display name (`PUT /profile/{userId}/displayname`).
    ///
    /// - Throws: `.invalidArgument` for an empty name; the server's refusal.
    public func setDisplayName(_ name: String) async throws(ChatError) {
        guard !name.isEmpty else { throw .invalidArgument(name: "name") }
        _ = try await perform(ProfileAPI.setDisplayName(userID: userID, name))
    }

    /// Uploads the image at `path` and makes it the account's avatar
    /// (`PUT /profile/{userId}/avatar_url`); returns its URI.
    ///
    /// - Throws: `.media` when the upload fails; the server's refusal.
    @discardableResult
    public func setAvatar(fileAt path: String, contentType: String) async throws(ChatError) -> MediaURI {
        try ensureCurrent()
        let uri = try await upload(path, contentType: contentType)
        _ = try await perform(ProfileAPI.setAvatarURL(userID: userID, uri))
        return uri
    }

    /// Renames the room (`m.room.name`), after checking the member's power level for it.
    public func setRoomName(_ name: String, in roomID: RoomID) async throws(ChatError) {
        try await setRoomState("m.room.name", key: "name", value: name, in: roomID)
    }

    /// Sets the room's topic (`m.room.topic`), after checking the member's power level for it.
    public func setRoomTopic(_ topic: String, in roomID: RoomID) async throws(ChatError) {
        try await setRoomState("m.room.topic", key: "topic", value: topic, in: roomID)
    }

    /// Uploads the image at `path` and makes it the room's avatar (`m.room.avatar`), after
    /// checking the member's power level for it (before anything is uploaded); returns its URI.
    @discardableResult
    public func setRoomAvatar(fileAt path: String, contentType: String, in roomID: RoomID) async throws(ChatError)
        -> MediaURI
    {
        try await checkStatePower("m.room.avatar", roomID: roomID)
        let uri = try await upload(path, contentType: contentType)
        var content = JSONObjectWriter()
        content.string("url", uri.uriString)
        _ = try await perform(ChatAPI.setState(roomID: roomID, type: "m.room.avatar", content: content.text))
        return uri
    }

    private func setRoomState(_ type: String, key: String, value: String, in roomID: RoomID) async throws(ChatError) {
        try await checkStatePower(type, roomID: roomID)
        var content = JSONObjectWriter()
        content.string(key, value)
        _ = try await perform(ChatAPI.setState(roomID: roomID, type: type, content: content.text))
    }

    private func upload(_ path: String, contentType: String) async throws(ChatError) -> MediaURI {
        do {
            return try await media.upload(fileAt: path, contentType: contentType)
        } catch {
            throw .media(error)
        }
    }

    /// Throws `.insufficientPowerLevel` when the member may not send the state event `type`, by
    /// the room's `m.room.power_levels` (stored, else fetched): `events[type]`, else
    /// `state_default` (50 when absent).
    func checkStatePower(_ type: String, roomID: RoomID) async throws(ChatError) {
        try ensureCurrent()
        var content = (try? await store.stateContent(roomID: roomID, type: "m.room.power_levels")) ?? nil
        if content == nil {
            content = try await perform(ChatAPI.state(roomID: roomID, type: "m.room.power_levels")).body
        }
        guard let content, let levels = PowerLevels.read(content) else { return }
        if await isUnlimitedCreator(of: roomID) { return }
        let own = levels.level(of: userID.rawValue)
        let required = levels.events?[type] ?? levels.stateDefault ?? 50
        guard own >= required else { throw .insufficientPowerLevel(required: required, actual: own) }
    }
}

extension AccountChat {
    /// Whether the member is a creator of a room whose version gives creators unlimited power
    /// (room version 12 and later: the `m.room.create` sender and its `additional_creators`,
    /// who are not listed in `m.room.power_levels`). From the stored state; `false` when it is
    /// not there.
    func isUnlimitedCreator(of roomID: RoomID) async -> Bool {
        guard let content = (try? await store.stateContent(roomID: roomID, type: "m.room.create")) ?? nil,
            let create = WireJSON.decodeIfValid(CreateContent.self, from: content),
            let version = Int(create.roomVersion ?? "1"), version >= 12
        else { return false }
        let sender = (try? await store.stateSender(roomID: roomID, type: "m.room.create")) ?? nil
        return sender == userID.rawValue || (create.additionalCreators ?? []).contains(userID.rawValue)
    }
}

/// The parts of `m.room.create` that power needs.
private struct CreateContent: Decodable {
    var roomVersion: String?
    var additionalCreators: [String]?
    enum CodingKeys: String, CodingKey {
        case roomVersion = "room_version"
        case additionalCreators = "additional_creators"
    }
}

extension ChatClient {
    /// Sets the active account's display name.
    ///
    /// - Throws: `.notSignedIn` when nobody is signed in; `.invalidArgument`; the server's refusal.
    public func setDisplayName(_ name: String) async throws(ChatError) {
        try await activeChat().setDisplayName(name)
    }

    /// Uploads the image at `path` and makes it the active account's avatar; returns its URI.
    @discardableResult
    public func setAvatar(fileAt path: String, contentType: String) async throws(ChatError) -> MediaURI {
        try await activeChat().setAvatar(fileAt: path, contentType: contentType)
    }

    /// Renames the room, after checking the power level for it.
    public func setRoomName(_ name: String, in roomID: RoomID) async throws(ChatError) {
        try await activeChat().setRoomName(name, in: roomID)
    }

    /// Sets the room's topic, after checking the power level for it.
    public func setRoomTopic(_ topic: String, in roomID: RoomID) async throws(ChatError) {
        try await activeChat().setRoomTopic(topic, in: roomID)
    }

    /// Uploads the image at `path` and makes it the room's avatar, after checking the power
    /// level for it; returns its URI.
    @discardableResult
    public func setRoomAvatar(fileAt path: String, contentType: String, in roomID: RoomID) async throws(ChatError)
        -> MediaURI
    {
        try await activeChat().setRoomAvatar(fileAt: path, contentType: contentType, in: roomID)
    }
}

extension Conversation {
    /// The media client of the conversation's account: downloads of the conversation's images
    /// and files (``MediaInfo/source``), thumbnails, the cache.
    public var media: MediaClient { client.media }
}
