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
