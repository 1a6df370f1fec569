import SymorvaMachines
import SymorvaRuntime

// What a member does to a conversation besides sending: reactions and personal flags apply at
// once and roll back visibly if the server refuses; redactions and read receipts wait for the
// server.

extension Conversation {
    /// Reacts to `eventID` with `key`. Shown at once; removed again if the server refuses.
    ///
    /// - Throws: the server's refusal (after the rollback).
    public func react(to eventID: EventID, key: String) async throws(ChatError) {
        guard !key.isEmpty else { throw .invalidArgument(name: "key") }
        let existing = try await ownReaction(to: eventID, key: key)
        guard existing == nil else { return }
        let change = PendingReaction(target: eventID, key: key, isAdded: true)
        addPending(change)
        var relation = JSONObjectWriter()
        relation.string("rel_type", "m.annotation")
        relation.string("event_id", eventID.rawValue)
        relation.string("key", key)
        var content = JSONObjectWriter()
        content.raw("m.relates_to", relation.text)
        let message = MessageContent(eventType: "m.reaction", json: content.text)
        do {
            _ = try await client.requester.send(
                ChatAPI.send(roomID: id, transactionID: makeTransactionID(), content: message))
        } catch {
            removePending(change)
            throw ChatError(error)
        }
        // The pending reaction stays until sync stores the real one (no flicker).
    }

    /// Removes our reaction with `key` from `eventID`. Hidden at once; shown again if the server
    /// refuses.
    public func unreact(to eventID: EventID, key: String) async throws(ChatError) {
        guard let reaction = try await ownReaction(to: eventID, key: key) else { return }
        let change = PendingReaction(target: eventID, key: key, isAdded: false)
        addPending(change)
        do {
            _ = try await client.requester.send(
                ChatAPI.redact(roomID: id, eventID: reaction, transactionID: makeTransactionID()))
        } catch {
            removePending(change)
            throw ChatError(error)
        }
    }

    private func ownReaction(to eventID: EventID, key: String) async throws(ChatError) -> EventID? {
        do {
            return try await client.store.reactionEventID(
                roomID: id, target: eventID, key: key, sender: client.userID.rawValue)
        } catch {
            throw .store(error)
        }
    }

    /// Redacts an event. Destructive: waits for the server; the timeline shows the redaction
    /// when sync brings it.
    public func redact(_ eventID: EventID) async throws(ChatError) {
        do {
            _ = try await client.requester.send(
                ChatAPI.redact(roomID: id, eventID: eventID, transactionID: makeTransactionID()))
        } catch {
            throw ChatError(error)
        }
    }

    /// Sends a read receipt (`m.read`) for `eventID`, or for the newest loaded event.
    public func markRead(upTo eventID: EventID? = nil) async throws(ChatError) {
        var target = eventID
        if target == nil { target = timeline.value.last(where: { $0.eventID != nil })?.eventID }
        guard let target else { return }
        do {
            _ = try await client.requester.send(ChatAPI.readReceipt(roomID: id, eventID: target))
        } catch {
            throw ChatError(error)
        }
    }

    /// Sets a personal flag (favourite, low priority, pinned, muted). Applies at once; rolls
    /// back on failure.
    public func setFlag(_ flag: ConversationFlag, _ value: Bool) async throws(ChatError) {
        try await client.setFlag(flag, value, roomID: id)
    }

    /// Tags the conversation as a favourite, or not. Applies at once; rolls back on failure.
    public func setFavourite(_ isFavourite: Bool) async throws(ChatError) {
        try await client.setFlag(.favourite, isFavourite, roomID: id)
    }

    /// Tags the conversation as low priority, or not. Applies at once; rolls back on failure.
    public func setLowPriority(_ isLowPriority: Bool) async throws(ChatError) {
        try await client.setFlag(.lowPriority, isLowPriority, roomID: id)
    }

    /// Pins the conversation to the top of the list, or not. Applies at once; rolls back on failure.
    public func setPinned(_ isPinned: Bool) async throws(ChatError) {
        try await client.setFlag(.pinned, isPinned, roomID: id)
    }

    /// Mutes notifications from the conversation, or not. Applies at once; rolls back on failure.
    public func setMuted(_ isMuted: Bool) async throws(ChatError) {
        try await client.setFlag(.muted, isMuted, roomID: id)
    }
}

extension ChatClient {
    /// Sets a personal flag of a conversation: the list shows it at once; if the server
    /// refuses, the list shows the old value again and the error is thrown.
    public func setFlag(_ flag: ConversationFlag, _ value: Bool, roomID: RoomID) async throws(ChatError) {
        setOverride(flag, value, roomID: roomID)
        let endpoint: MatrixEndpoint
        if let tag = flag.tag {
            endpoint = ChatAPI.tag(tag, set: value, roomID: roomID, userID: userID)
        } else {
            endpoint = ChatAPI.muteRule(roomID: roomID, muted: value)
        }
        do {
            _ = try await requester.send(endpoint)
        } catch {
            // Deleting what is not there is what we wanted anyway.
            if !value, case .matrix(let matrix) = error, matrix.code == .notFound {
            } else {
                setOverride(flag, nil, roomID: roomID)
                logger.info("personal flag rolled back: \(error)")
                throw ChatError(error)
            }
        }
        // Mirror the confirmed value until sync brings the same, then drop the overlay.
        try? await store.setFlag(flag, value, roomID: roomID)
        try? await reloadList()
        setOverride(flag, nil, roomID: roomID)
    }
}
