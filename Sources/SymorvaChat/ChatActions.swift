import Foundation
import SymorvaChatStore
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix

// Room operations. None is optimistic: membership and permissions wait for the server.

extension AccountChat {
    /// Creates a room and returns its ID once the server has it and (while syncing) the list
    /// shows it.
    ///
    /// - Parameters:
    ///   - isDirect: a one-to-one chat (`trusted_private_chat`, `is_direct`), recorded in
    ///     `m.direct` under each invitee (``markDirect(_:with:)``).
    ///   - isEncrypted: turn on end-to-end encryption (`m.room.encryption`, Megolm); `nil`
    ///     follows the manifest's `encryption.defaultEnabled` (``ChatOptions/encryptsNewRooms``).
    public func createRoom(
        name: String? = nil, topic: String? = nil, invitees: [UserID] = [], isDirect: Bool = false,
        isEncrypted: Bool? = nil
    ) async throws(ChatError) -> RoomID {
        let isEncrypted = isEncrypted ?? options.encryptsNewRooms
        let response = try await perform(
            ChatAPI.createRoom(
                name: name, topic: topic, invitees: invitees, isDirect: isDirect, isEncrypted: isEncrypted))
        guard let roomID = RawJSON.string("room_id", in: response.body) else { throw .unexpectedResponse }
        // Known encrypted from now on, before its `m.room.encryption` has synced: a message sent
        // right away must never leave in plaintext.
        if isEncrypted { await markEncrypted(RoomID(roomID)) }
        // A direct chat is one in `m.direct` too, which other clients read.
        if isDirect, !invitees.isEmpty { try await markDirect(RoomID(roomID), with: invitees) }
        await waitUntilListed(RoomID(roomID), as: .joined)
        // In an encrypted room, a message sent right after this returns must share its key with
        // every invitee's devices, so the invites must be in the room's synced state first.
        if isEncrypted { await waitUntilSynced(members: invitees, in: RoomID(roomID)) }
        return RoomID(roomID)
    }

    /// Joins a room by ID or alias (`#room:server`) and returns its ID once the list shows it
    /// (while syncing). Joining an invite to a direct chat (`is_direct`) records the room in
    /// `m.direct` under the inviter, as other clients expect; a failure to record it is logged
    /// and does not undo the join.
    public func join(roomIDOrAlias: String) async throws(ChatError) -> RoomID {
        guard roomIDOrAlias.hasPrefix("!") || roomIDOrAlias.hasPrefix("#") else {
            throw .invalidArgument(name: "roomIDOrAlias")
        }
        // An invite to a direct chat: once joined, the room is one of the account's `m.direct`.
        let inviter = roomIDOrAlias.hasPrefix("!") ? await directInviter(of: RoomID(roomIDOrAlias)) : nil
        let response = try await perform(ChatAPI.join(roomIDOrAlias))
        guard let roomID = RawJSON.string("room_id", in: response.body) else { throw .unexpectedResponse }
        if let inviter {
            // The join stands whatever happens to the bookkeeping; `markDirect` can add it later.
            do throws(ChatError) { try await markDirect(RoomID(roomID), with: [inviter]) } catch {
                logger.notice("joined direct chat not recorded in m.direct error=\(error)")
            }
        }
        await waitUntilListed(RoomID(roomID), as: .joined)
        await joinedHere(RoomID(roomID))
        return RoomID(roomID)
    }

    /// Leaves a room (or declines an invite). Waits for the server.
    public func leave(_ roomID: RoomID) async throws(ChatError) {
        _ = try await perform(ChatAPI.leave(roomID: roomID))
    }

    /// Invites `userID`, after checking the member's power level for `invite`.
    /// In an encrypted room it returns once the invite is in the room's synced state (while
    /// syncing), so that a message sent next shares its key with the invitee's devices.
    public func invite(_ userID: UserID, to roomID: RoomID) async throws(ChatError) {
        try await checkPower(.invite, roomID: roomID, target: nil)
        _ = try await perform(ChatAPI.membership(.invite, roomID: roomID, userID: userID, reason: nil))
        let knowledge = try? await store.encryptionKnowledge(roomID: roomID)
        if knowledge?.isEncrypted == true || encryptedRooms.withLock({ $0.contains(roomID) }) {
            await waitUntilSynced(members: [userID], in: roomID)
        }
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
        try ensureCurrent()
        do {
            return try await requester.send(endpoint)
        } catch {
            if RequestFailure.isTokenProblem(error) { sendQueueTokenRejected() }
            throw ChatError(error, now: wallClock.now)
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
        _ = await conversations.first { list in
            list[roomID]?.membership == membership || !syncIsRunning() ? () : nil
        }
    }

    /// Waits until the room's synced state has a membership event for each of `members`; returns
    /// at once when the sync loop is not running, and after 30 seconds of syncs without them (the
    /// server may have refused an invite). Cancellable.
    func waitUntilSynced(members: [UserID], in roomID: RoomID) async {
        guard !members.isEmpty else { return }
        let sync = syncState
        let deadline = ContinuousClock.now + .seconds(30)
        while !Task.isCancelled, ContinuousClock.now < deadline {
            switch sync.value {
            case .stopped, .failed: return
            default: break
            }
            let seen = commits.value
            if (try? await store.hasMembershipEvents(roomID: roomID, users: members.map(\.rawValue))) == true { return }
            // The next commit, or a second (to look at the sync loop and the deadline again).
            let commits = self.commits.observable
            let scope = self.scope
            let next = await withTaskGroup(of: Bool?.self) { group in
                group.addTask { await commits.first(scope: scope) { $0 != seen ? true : nil } }
                group.addTask {
                    try? await Task.sleep(for: .seconds(1))
                    return false
                }
                let first = await group.next() ?? nil
                group.cancelAll()
                return first
            }
            if next == nil { return }
        }
    }

    /// Throws `.insufficientPowerLevel` when the member may not perform `action` (on `target`),
    /// by the room's `m.room.power_levels` (stored, else fetched; a refusal by the stored levels is
    /// confirmed with the server's, which a recent change may not have synced from yet).
    func checkPower(_ action: ChatAPI.MembershipAction, roomID: RoomID, target: UserID?) async throws(ChatError) {
        do {
            try await checkPower(action, roomID: roomID, target: target, fresh: false)
        } catch .insufficientPowerLevel {
            try await checkPower(action, roomID: roomID, target: target, fresh: true)
        }
    }

    private func checkPower(_ action: ChatAPI.MembershipAction, roomID: RoomID, target: UserID?, fresh: Bool)
        async throws(ChatError)
    {
        guard let (content, own) = try await ownPowerLevel(roomID: roomID, fresh: fresh),
            let levels = PowerLevels.read(content)
        else { return }
        let required: Int
        switch action {
        case .invite: required = levels.invite ?? 0
        case .kick: required = levels.kick ?? 50
        case .ban: required = levels.ban ?? 50
        }
        guard own >= required else { throw .insufficientPowerLevel(required: required, actual: own) }
        if let target, target != userID {
            let creators = try await privilegedCreators(roomID: roomID)
            let theirs = creators.contains(target.rawValue) ? Int.max : levels.level(of: target.rawValue)
            guard own > theirs else {
                throw .insufficientPowerLevel(required: theirs == Int.max ? theirs : theirs + 1, actual: own)
            }
        }
    }
}

/// The parts of `m.room.power_levels` that membership actions and state changes need.
struct PowerLevels: Decodable {
    var users: [String: Int]?
    var usersDefault: Int?
    var invite: Int?
    var kick: Int?
    var ban: Int?
    var redact: Int?
    var events: [String: Int]?
    var stateDefault: Int?

    enum CodingKeys: String, CodingKey {
        case users, invite, kick, ban, redact, events
        case usersDefault = "users_default"
        case stateDefault = "state_default"
    }

    func level(of userID: String) -> Int { users?[userID] ?? usersDefault ?? 0 }

    /// The level needed to send the state event `type` (`events[type]`, else `state_default`,
    /// else 50).
    func stateLevel(_ type: String) -> Int { events?[type] ?? stateDefault ?? 50 }

    static func read(_ bytes: [UInt8]) -> PowerLevels? {
        WireJSON.decodeIfValid(PowerLevels.self, from: bytes)
    }
}

// What a member does to a conversation besides sending: reactions and personal flags apply at
// once and roll back visibly if the server refuses; redactions and read receipts wait for the
// server.

extension Conversation {
    /// Reacts to `eventID` with `key`. Shown at once; removed again if the server refuses. Does
    /// nothing when our reaction with `key` is there already, synced or not.
    ///
    /// - Throws: the server's refusal (after the rollback).
    public func react(to eventID: EventID, key: String) async throws(ChatError) {
        try client.ensureCurrent()
        guard !key.isEmpty else { throw .invalidArgument(name: "key") }
        try await reactionLock.withLock { () async throws(ChatError) in
            if try await ownReaction(to: eventID, key: key) != nil { return }
            let change = PendingReaction(target: eventID, key: key, isAdded: true)
            let previous = applyPending(change)
            var relation = JSONObjectWriter()
            relation.string("rel_type", "m.annotation")
            relation.string("event_id", eventID.rawValue)
            relation.string("key", key)
            var content = JSONObjectWriter()
            content.raw("m.relates_to", relation.text)
            let message: MessageContent
            do throws(ChatError) {
                message = try await encryptedIfNeeded(MessageContent(eventType: "m.reaction", json: content.text))
            } catch {
                rollBackPending(change, to: previous)
                throw error
            }
            let response: HTTPResponse
            do throws(MatrixRequestError) {
                response = try await client.requester.send(
                    ChatAPI.send(roomID: id, transactionID: client.makeTransactionID(), content: message))
            } catch {
                rollBackPending(change, to: previous)
                throw ChatError(error, now: client.wallClock.now)
            }
            // The pending reaction stays until sync stores the real one (no flicker); its event
            // is what an unreact before then redacts.
            if let reaction = RawJSON.string("event_id", in: response.body) {
                acceptPending(change, as: EventID(reaction))
            }
        }
    }

    /// Sends one event of `type` with `content` (JSON) now, outside the send queue, encrypted
    /// when the room is (its relation kept in the clear), and returns its event ID: for events
    /// of other modules whose ID is needed at once and that are not the person's messages (a
    /// verification request and its steps). Nothing is stored or retried.
    ///
    /// - Throws: what ``encryptedIfNeeded(_:)`` throws; the server's refusal or `.network`.
    package func sendEvent(type: String, content: [UInt8]) async throws(ChatError) -> EventID {
        try client.ensureCurrent()
        let message = try await encryptedIfNeeded(
            MessageContent(eventType: type, json: String(decoding: content, as: UTF8.self)))
        let response = try await client.perform(
            ChatAPI.send(roomID: id, transactionID: client.makeTransactionID(), content: message))
        guard let eventID = RawJSON.string("event_id", in: response.body) else { throw .unexpectedResponse }
        return EventID(eventID)
    }

    /// `content` as it may leave for this room: encrypted (`m.room.encrypted`, its relation kept
    /// in the clear as the specification asks) when the room is encrypted, so that an event sent
    /// outside the send queue (a reaction) is never plaintext in an encrypted room.
    ///
    /// - Throws: ``ChatError/encryptionUnavailable`` without a crypto module or when the content
    ///   cannot be encrypted; `.network`, `.server`, `.rateLimited` when encrypting needed a
    ///   request that failed; `.store`.
    func encryptedIfNeeded(_ content: MessageContent) async throws(ChatError) -> MessageContent {
        guard try await resolveEncryption() else { return content }
        guard let encryptor = client.encryptor else { throw .encryptionUnavailable }
        let stored: EncryptedRoom?
        do throws(MemberListError) { stored = try await client.roomForEncryption(id) } catch {
            switch error {
            case .request(let request): throw ChatError(request, now: client.wallClock.now)
            case .unreadable: throw .unexpectedResponse
            case .store(let store): throw .store(store)
            }
        }
        guard let room = stored else { throw .unknownConversation(id) }
        do throws(SendError) {
            return try await encryptor.encrypt(content, in: room)
        } catch {
            switch error {
            case .network: throw .network
            case .server(let status): throw .server(status: status, errorCode: "")
            case .rateLimited(let retryAfter): throw .rateLimited(retryAfter: retryAfter)
            case .unknownToken: throw .tokenRejected
            case .permanent: throw .encryptionUnavailable
            }
        }
    }

    /// Removes our reaction with `key` from `eventID` — also one that sync has not brought yet.
    /// Hidden at once; shown again if the server refuses.
    public func unreact(to eventID: EventID, key: String) async throws(ChatError) {
        try client.ensureCurrent()
        try await reactionLock.withLock { () async throws(ChatError) in
            guard let reaction = try await ownReaction(to: eventID, key: key) else { return }
            let change = PendingReaction(target: eventID, key: key, isAdded: false, reactionEventID: reaction)
            let previous = applyPending(change)
            do throws(MatrixRequestError) {
                _ = try await client.requester.send(
                    ChatAPI.redact(roomID: id, eventID: reaction, transactionID: client.makeTransactionID()))
            } catch {
                rollBackPending(change, to: previous)
                throw ChatError(error, now: client.wallClock.now)
            }
        }
    }

    /// Our reaction with `key` to `eventID` as it stands now: a pending change decides first (an
    /// addition the server accepted that sync has not stored yet, or a removal on its way), then
    /// the store.
    private func ownReaction(to eventID: EventID, key: String) async throws(ChatError) -> EventID? {
        if let pending = pendingReaction(for: eventID, key: key) {
            return pending.isAdded ? pending.reactionEventID : nil
        }
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
        try client.ensureCurrent()
        do {
            _ = try await client.requester.send(
                ChatAPI.redact(roomID: id, eventID: eventID, transactionID: client.makeTransactionID()))
        } catch {
            throw ChatError(error, now: client.wallClock.now)
        }
    }

    /// Marks the conversation's main timeline read up to `eventID`, or to the newest loaded
    /// event: moves the fully-read marker (`m.fully_read`, through `read_markers`) and sends a
    /// threaded read receipt there with `thread_id` `main` (the client shows threads, so the
    /// main timeline's receipt reads neither thread: each thread has its own,
    /// ``ThreadTimeline/markRead(upTo:)``). The receipt is private (`m.read.private`) when
    /// ``ChatOptions/sendsPrivateReceipts`` is set. An `eventID` that is a thread reply is read
    /// in its thread (`thread_id` its root) and leaves the fully-read marker where it is.
    public func markRead(upTo eventID: EventID? = nil) async throws(ChatError) {
        try client.ensureCurrent()
        var target = eventID
        if target == nil { target = timeline.value.last(where: { $0.eventID != nil })?.eventID }
        guard let target else { return }
        let root: String?
        do throws(ChatStoreError) {
            root = try await client.store.threadRoot(of: target)
        } catch {
            throw .store(error)
        }
        let privately = client.options.sendsPrivateReceipts
        do {
            if root == nil { _ = try await client.requester.send(ChatAPI.readMarkers(roomID: id, fullyRead: target)) }
            _ = try await client.requester.send(
                ThreadsAPI.receipt(roomID: id, eventID: target, threadID: root ?? "main", privately: privately))
        } catch {
            throw ChatError(error, now: client.wallClock.now)
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

extension AccountChat {
    /// Sets a personal flag of a conversation: the list shows it at once; if the server
    /// refuses, the list shows the old value again and the error is thrown.
    public func setFlag(_ flag: ConversationFlag, _ value: Bool, roomID: RoomID) async throws(ChatError) {
        try ensureCurrent()
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
                throw ChatError(error, now: wallClock.now)
            }
        }
        // Mirror the confirmed value until sync brings the same, then drop the overlay.
        try? await store.setFlag(flag, value, roomID: roomID)
        try? await reloadList()
        setOverride(flag, nil, roomID: roomID)
    }
}
