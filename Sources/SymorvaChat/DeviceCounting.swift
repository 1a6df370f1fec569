import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix
import SymorvaStore

// Unread counts computed on the device (issue 27). The homeserver cannot read an encrypted
// message, so the counts it sends for an encrypted room only say that events arrived (its
// `.m.rule.encrypted` rule): no mention there is ever a highlight. The device evaluates the
// account's push rules (`m.push_rules`, the same rules the server uses) on what it can read:
// the plaintext events of encrypted rooms after each committed sync, and encrypted events once
// decrypted. The store keeps a row per event that notifies and recomputes the room's counts
// after the account's read receipts (per thread); the conversation list shows them for
// encrypted rooms, the server's for the others.

extension AccountChat {
    /// Events one evaluation pass reads.
    static let pushEvaluationPassSize = 2_000

    /// Whether the device also counts unencrypted rooms (the server's counts stay the ones
    /// shown there): tests compare the two.
    package func countOnDeviceInEveryRoom(_ everyRoom: Bool) {
        countsInEveryRoom.withLock { $0 = everyRoom }
    }

    /// The device's counts for a room, in total and per thread.
    ///
    /// - Throws: `.store` when they cannot be read.
    package func deviceCounts(roomID: RoomID) async throws(ChatError) -> DeviceCounts {
        do { return try await store.deviceCounts(roomID: roomID, ownUserID: userID.rawValue) } catch {
            throw .store(error)
        }
    }

    /// The events that notify in a room (diagnosis), with whether each highlights.
    package func notifyingEvents(roomID: RoomID) async throws(ChatError) -> [(eventID: EventID, highlight: Bool)] {
        do { return try await store.notifyingEvents(roomID: roomID).map { (EventID($0.eventID), $0.highlight) } } catch
        {
            throw .store(error)
        }
    }

    /// Whether the store holds `eventID` (tests wait for a sync to bring it).
    package func hasStored(_ eventID: EventID) async throws(ChatError) -> Bool {
        do { return try await store.sender(of: eventID) != nil } catch { throw .store(error) }
    }

    /// Events asked for per `/messages` page when a gap hides counted events.
    static let countedGapPageSize = 50
    /// The most pages one such gap is filled with (a reconnection after a long time may have
    /// left out more: those stay a gap, and are not counted).
    static let countedGapPages = 4

    /// How many rooms' gaps are filled at once: after a long time away many rooms come back
    /// with one, and one room after another would hold the commit (and the list) for a round
    /// trip per page of each.
    static let countedGapRoomsAtOnce = 6
    /// The most rooms one batch fills, the most recently active first (the conversation list's
    /// order: the rooms a member looks at first). A batch after a long time away can leave
    /// events out of every room: the rest keep their gap, and its events are not counted, as in
    /// a gap longer than the pages.
    static let countedGapRoomsPerBatch = 50

    /// Fills the gaps this batch opened in rooms whose counts are the device's
    /// (``ChatStore/gapsHidingCountedEvents(_:everyRoom:)``) before the batch's
    /// events are counted: a limited timeline left events out (sliding sync's list sends one
    /// event per room, so a second message arriving between two responses is left out), and
    /// the device counts only what it stores. Each gap is filled from the server like a
    /// timeline's pagination (the same requests, joined with a concurrent one), at most
    /// ``countedGapPages`` pages, ``countedGapRoomsAtOnce`` rooms at a time and
    /// ``countedGapRoomsPerBatch`` rooms in all; the events written
    /// go to the room's changes ahead of the batch's own, and the room's gap token becomes what
    /// is left of the gap (`nil` when it is closed). A failed page leaves the rest of the gap
    /// as it is.
    func fillCountedGaps(_ changes: inout SyncChanges) async {
        let everyRoom = countsInEveryRoom.withLock { $0 }
        var opened: [RoomID: (index: Int, token: PaginationToken)] = [:]
        var asked: [(roomID: RoomID, token: PaginationToken)] = []
        for index in changes.rooms.indices {
            guard let token = changes.rooms[index].gapToken else { continue }
            let roomID = changes.rooms[index].roomID
            opened[roomID] = (index, token)
            asked.append((roomID, token))
        }
        guard !asked.isEmpty else { return }
        let hiding: [RoomID]
        do throws(ChatStoreError) {
            hiding = try await store.gapsHidingCountedEvents(asked, everyRoom: everyRoom)
        } catch {
            logger.error("gaps of counted rooms not read error=\(error)")
            return
        }
        let gaps = hiding.prefix(Self.countedGapRoomsPerBatch).compactMap { roomID in
            opened[roomID].map { ($0.index, roomID, $0.token) }
        }
        guard !gaps.isEmpty else { return }
        let filled = await withTaskGroup(of: (Int, FilledGap).self) { group in
            var results: [(Int, FilledGap)] = []
            var pending = gaps[...]
            func startNext() {
                guard let (index, roomID, token) = pending.popFirst() else { return }
                group.addTask { (index, await self.fillCountedGap(roomID: roomID, token: token)) }
            }
            for _ in 0..<Self.countedGapRoomsAtOnce { startNext() }
            for await result in group {
                results.append(result)
                startNext()
            }
            return results
        }
        for (index, gap) in filled {
            changes.rooms[index].gapToken = gap.remaining
            changes.rooms[index].itemEventIDs = gap.items + changes.rooms[index].itemEventIDs
            changes.rooms[index].threadReplies = gap.threadReplies + changes.rooms[index].threadReplies
        }
    }

    /// What filling one gap wrote, oldest first, and what is left of the gap.
    struct FilledGap: Sendable {
        var items: [EventID] = []
        /// The thread replies written, with their roots: the threads observed see them arrive,
        /// as the batch's own.
        var threadReplies: [(root: EventID, reply: EventID)] = []
        var remaining: PaginationToken?
    }

    /// Fills one room's gap `token`.
    private func fillCountedGap(roomID: RoomID, token: PaginationToken) async -> FilledGap {
        var filled = FilledGap(remaining: token)
        var pages = 0
        while let current = filled.remaining, pages < Self.countedGapPages {
            pages += 1
            let fetched: TimelineInterpreter.FetchedPage
            do {
                fetched = try await messageLoads.value(for: "messages|\(roomID.rawValue)|\(current.rawValue)") {
                    () async throws(TimelineError) -> TimelineInterpreter.FetchedPage in
                    try await TimelineInterpreter.fetch(
                        roomID: roomID, token: current, count: Self.countedGapPageSize, client: self)
                }
            } catch {
                logger.warning("gap of a counted room not filled error=\(error)")
                break
            }
            filled.items = fetched.page.eventIDs + filled.items
            filled.threadReplies = fetched.threadReplies + filled.threadReplies
            if case .gap(let next) = fetched.page.before { filled.remaining = next } else { filled.remaining = nil }
        }
        logger.info(
            "gap of a counted room filled items=\(filled.items.count) replies=\(filled.threadReplies.count) pages=\(pages) closed=\(filled.remaining == nil)"
        )
        return filled
    }

    /// Evaluates the plaintext events stored since the last pass and recomputes the counts
    /// (receipts may have moved). Runs after each committed sync, before the list is read.
    func countStoredEvents() async {
        let everyRoom = countsInEveryRoom.withLock { $0 }
        do throws(ChatStoreError) {
            var isFirst = true
            while true {
                let (events, through) = try await store.pushCandidates(
                    ownUserID: userID.rawValue, everyRoom: everyRoom, limit: Self.pushEvaluationPassSize)
                guard let through else {
                    // Nothing new: read receipts may still have moved.
                    if isFirst { try await store.recomputeDeviceCounts(ownUserID: userID.rawValue) }
                    return
                }
                isFirst = false
                let actions = try await evaluate(events)
                try await store.recordPushActions(actions, evaluatedThrough: through, ownUserID: userID.rawValue)
            }
        } catch {
            logger.error("device counts not updated error=\(error)")
        }
    }

    /// Evaluates decrypted events (their sealed plaintext opened in memory only).
    func countDecrypted(_ outcomes: [(event: UndecryptedEvent, outcome: DecryptionOutcome)]) async {
        guard let decryptor else { return }
        var plain: [(nid: Int64, type: String, content: [UInt8])] = []
        for (event, outcome) in outcomes {
            guard case .decrypted(let type, let sealed, _, _, _, _) = outcome,
                let content = decryptor.open(sealed, eventID: EventID(event.eventID))
            else { continue }
            plain.append((event.eventNID, type, content))
        }
        guard !plain.isEmpty else { return }
        do throws(ChatStoreError) {
            let stored = try await store.pushCandidates(eventNIDs: plain.map(\.nid), ownUserID: userID.rawValue)
            var candidates: [PushCandidate] = []
            for event in plain {
                guard let row = stored[event.nid] else { continue }
                candidates.append(
                    PushCandidate(
                        eventNID: event.nid, roomNID: row.roomNID, type: event.type, sender: row.sender,
                        stateKey: row.stateKey, content: Self.withRelation(event.content, row.relation)))
            }
            let actions = try await evaluate(candidates)
            try await store.recordPushActions(actions, evaluatedThrough: nil, ownUserID: userID.rawValue)
        } catch {
            logger.error("device counts of decrypted events not updated error=\(error)")
        }
    }

    /// The plaintext content with the encrypted event's `m.relates_to` (sent in the clear, as
    /// the specification asks) when the plaintext has none: edits, replies and threads are
    /// judged as the sender meant them.
    static func withRelation(_ content: [UInt8], _ relation: [UInt8]?) -> [UInt8] {
        guard let relation,
            content.withUnsafeBytes({ RawJSON.value("m.relates_to", in: $0) }) == nil,
            let close = content.lastIndex(of: UInt8(ascii: "}"))
        else { return content }
        let isEmpty = content[..<close].allSatisfy { $0 == UInt8(ascii: "{") || $0 == 0x20 || $0 == 0x0A || $0 == 0x09 }
        var merged = Array(content[..<close])
        merged += Array((isEmpty ? "\"m.relates_to\":" : ",\"m.relates_to\":").utf8)
        merged += relation
        merged.append(UInt8(ascii: "}"))
        return merged
    }

    /// The account's push rules (the specification's defaults while it has none), parsed once
    /// per version of its `m.push_rules` rather than once per evaluation pass.
    private func pushRules() async throws(ChatStoreError) -> PushRuleSet {
        let content = try await store.pushRulesContent()
        if let cached = parsedPushRules.withLock({ $0 }), cached.content == content { return cached.rules }
        let rules =
            content.flatMap { PushRuleSet(accountData: $0) } ?? .specificationDefaults(for: userID.rawValue)
        parsedPushRules.withLock { $0 = (content, rules) }
        return rules
    }

    /// The events that notify, each with whether it highlights.
    private func evaluate(_ events: [PushCandidate]) async throws(ChatStoreError) -> [(
        eventNID: Int64, highlight: Bool
    )] {
        guard !events.isEmpty else { return [] }
        let evaluator = PushRuleEvaluator(try await pushRules())
        let facts = try await store.pushRoomFacts(Set(events.map(\.roomNID)), ownUserID: userID.rawValue)
        var levels: [Int64: PushLevels] = [:]
        var actions: [(eventNID: Int64, highlight: Bool)] = []
        for event in events {
            guard let room = facts[event.roomNID] else { continue }
            let roomLevels = levels[event.roomNID] ?? PushLevels(room)
            levels[event.roomNID] = roomLevels
            guard let content = try? JSONValue(parsing: event.content) else { continue }
            var fields: [String: JSONValue] = [
                "type": .string(event.type), "sender": .string(event.sender), "content": content,
            ]
            if let stateKey = event.stateKey { fields["state_key"] = .string(stateKey) }
            let context = PushContext(
                userID: userID.rawValue, displayName: room.displayName, memberCount: room.joinedMemberCount,
                senderPowerLevel: roomLevels.level(of: event.sender), notificationLevels: roomLevels.notifications)
            guard let result = evaluator.actions(for: .object(fields), context: context), result.notify else {
                continue
            }
            actions.append((event.eventNID, result.highlight))
        }
        return actions
    }
}

/// A room's power levels as the push rules need them: each sender's level (creators of rooms
/// of version 12 and later outrank everyone) and the `notifications` levels.
struct PushLevels {
    var users: [String: Int] = [:]
    var usersDefault = 0
    var notifications: [String: Int] = [:]
    var creators: Set<String> = []
    /// No power levels event: the creator has 100 (the specification's default).
    var creatorDefault: String?

    init(_ facts: PushRoomFacts) {
        struct Levels: Decodable {
            var users: [String: Int]?
            var usersDefault: Int?
            var notifications: [String: Int]?
            enum CodingKeys: String, CodingKey {
                case users, notifications
                case usersDefault = "users_default"
            }
        }
        struct Create: Decodable {
            var roomVersion: String?
            var additionalCreators: [String]?
            enum CodingKeys: String, CodingKey {
                case roomVersion = "room_version"
                case additionalCreators = "additional_creators"
            }
        }
        if let bytes = facts.powerLevels, let levels = WireJSON.decodeIfValid(Levels.self, from: bytes) {
            users = levels.users ?? [:]
            usersDefault = levels.usersDefault ?? 0
            notifications = levels.notifications ?? [:]
        } else {
            creatorDefault = facts.create?.sender
        }
        if let create = facts.create, let fields = WireJSON.decodeIfValid(Create.self, from: create.content) {
            let version = fields.roomVersion ?? "1"
            if (Int(version).map { $0 >= 12 } ?? false) || version == "org.matrix.hydra.11" {
                creators = Set([create.sender] + (fields.additionalCreators ?? []))
            }
        }
    }

    func level(of sender: String) -> Int {
        if creators.contains(sender) { return Int.max }
        if let creatorDefault { return sender == creatorDefault ? 100 : 0 }
        return users[sender] ?? usersDefault
    }
}
