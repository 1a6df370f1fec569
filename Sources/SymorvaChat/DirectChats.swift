import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix

// Direct chats (`m.direct`, global account data: each user ID with the rooms that are direct
// chats with them).

extension AccountChat {
    /// The account's direct chats by the other member, from the synced `m.direct`.
    ///
    /// - Throws: `.store` when the store cannot be read.
    public func directChats() async throws(ChatError) -> [UserID: [RoomID]] {
        let bytes: [UInt8]?
        do { bytes = try await store.globalAccountData("m.direct") } catch { throw .store(error) }
        guard let bytes, case .object(let users)? = try? JSONValue(parsing: bytes) else { return [:] }
        var chats: [UserID: [RoomID]] = [:]
        for (user, rooms) in users {
            guard let userID = UserID(user), case .array(let list) = rooms else { continue }
            chats[userID] = list.compactMap { if case .string(let room) = $0 { RoomID(room) } else { nil } }
        }
        return chats
    }

    /// Records `roomID` as a direct chat with `users` in `m.direct` (the server's content, with
    /// the room added under each; other entries kept). ``createRoom(name:topic:invitees:isDirect:isEncrypted:)``
    /// does it for a direct room it creates.
    ///
    /// - Throws: the server's refusal.
    public func markDirect(_ roomID: RoomID, with users: [UserID]) async throws(ChatError) {
        try ensureCurrent()
        var content: [String: JSONValue] = [:]
        do throws(MatrixRequestError) {
            let response = try await requester.send(ChatAPI.accountData("m.direct", userID: userID))
            if case .object(let fields)? = try? JSONValue(parsing: response.body) { content = fields }
        } catch {
            guard case .matrix(let matrix) = error, matrix.status == 404 else {
                throw ChatError(error, now: wallClock.now)
            }
        }
        for user in users {
            var rooms: [JSONValue] = []
            if case .array(let listed)? = content[user.rawValue] { rooms = listed }
            if !rooms.contains(.string(roomID.rawValue)) { rooms.append(.string(roomID.rawValue)) }
            content[user.rawValue] = .array(rooms)
        }
        guard let body = try? JSONValue.object(content).canonicalEncoding() else { throw .unexpectedResponse }
        _ = try await perform(ChatAPI.accountData("m.direct", userID: userID, content: body))
    }

    /// The inviter of a stored invite to a direct chat of ours, if it is one.
    func directInviter(of roomID: RoomID) async -> UserID? {
        do { return try await store.directInviter(roomID: roomID, userID: userID) } catch {
            logger.info("invite not read error=\(error)")
            return nil
        }
    }
}
