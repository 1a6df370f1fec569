import SymorvaChatStore
import SymorvaMachines

// The conversation list filtered to a space (issue 27): the rooms a space links to, through its
// sub-spaces too, and the rooms that name it as their parent, from the store (no request).

extension AccountChat {
    /// The rooms of `spaceID` as the store knows them: its `m.space.child` links, those of its
    /// sub-spaces (any depth, each space once), and the rooms whose `m.space.parent` names one
    /// of them. The spaces themselves are included.
    ///
    /// - Throws: `.store` when the store cannot be read.
    public func roomsInSpace(_ spaceID: RoomID) async throws(ChatError) -> Set<RoomID> {
        var rooms: Set<RoomID> = [spaceID]
        var pending = [spaceID]
        do throws(ChatStoreError) {
            while let space = pending.popLast() {
                let linked = try await store.spaceChildren(of: space).map(\.roomID)
                for room in linked + (try await store.roomsClaiming(parent: space)) where !rooms.contains(room) {
                    rooms.insert(room)
                    pending.append(room)  // a sub-space's rooms belong too; a room has no children
                }
            }
        } catch {
            throw .store(error)
        }
        return rooms
    }

    /// The conversation list with only the rooms of `spaceID` (``roomsInSpace(_:)``), in the
    /// list's order.
    ///
    /// - Throws: `.store` when the store cannot be read.
    public func conversations(inSpace spaceID: RoomID) async throws(ChatError) -> ConversationList {
        conversations.value.restricted(to: try await roomsInSpace(spaceID))
    }
}

extension ChatClient {
    /// The active account's conversation list filtered to a space. See
    /// ``AccountChat/conversations(inSpace:)``.
    public func conversations(inSpace spaceID: RoomID) async throws(ChatError) -> ConversationList {
        try await withActive { chat async throws(ChatError) in try await chat.conversations(inSpace: spaceID) }
    }
}

extension ConversationList {
    /// The list with only the rows of `rooms`, in the same order.
    public func restricted(to rooms: Set<RoomID>) -> ConversationList {
        var list = self
        list.items = items.filter { rooms.contains($0.id) }
        return list
    }
}
