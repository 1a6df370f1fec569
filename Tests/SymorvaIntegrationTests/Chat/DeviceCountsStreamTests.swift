import Foundation
import SymorvaChat
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import Testing

/// The counts computed on the device against their oracle, Synapse, with two SymorvaKit
/// accounts. Alice (the counted account) creates an unencrypted and an encrypted room and
/// invites Bob; a seeded random stream of steps runs in both rooms alike: Bob's messages with
/// Alice's localpart, display name, a keyword of hers, `@room` (refused as a mention while Bob
/// is at power 0, then allowed once raised), `m.mentions` of Alice or of nobody, notices,
/// replies, edits and reactions; Alice's own messages; Alice's read receipts. At every
/// checkpoint the device's counts of the unencrypted room equal Synapse's `notification_count`
/// and `highlight_count`, and the encrypted room's device counts equal them too.
///
/// Steps: `SYMORVA_COUNT_STREAM_STEPS` (default 400: each step is sent to both rooms and waits
/// for the server, ≈ 2 events a step; 10,000 events take ≈ 15 minutes on the shared machine);
/// the seed: `SYMORVA_COUNT_STREAM_SEED` (random by default, named by a failure).
@Suite(
    "Unread counts computed on the device agree with Synapse's",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"), .shutsDownCommunities)
struct DeviceCountsStreamTests {
    static var steps: Int {
        ProcessInfo.processInfo.environment["SYMORVA_COUNT_STREAM_STEPS"].flatMap(Int.init) ?? 400
    }

    /// `SYMORVA_COUNT_STREAM_SEED`: the stream of a failed run again (its timing is not).
    static var seed: UInt64? {
        ProcessInfo.processInfo.environment["SYMORVA_COUNT_STREAM_SEED"].flatMap(UInt64.init)
    }

    @Test("A seeded random stream: device counts = Synapse's in the plain room, and the same in the encrypted room")
    func randomStream() async throws {
        // The default sync (sliding sync on the pinned Synapse). In stop 24 the encrypted room's
        // device counts fell short here: Bob's list knew only his own membership, so his first
        // room key reached nobody else (fixed by reading /members before a room's first share).
        let configuration = DevEnvironment.current!.configuration
        let aliceFixture = CommunityFixture(configuration: configuration)
        let bobFixture = CommunityFixture(configuration: configuration)
        let alice = try await aliceFixture.community.session.register(
            username: DevEnvironment.uniqueUsername("cnt-a"), password: testPassword)
        let bob = try await bobFixture.community.session.register(
            username: DevEnvironment.uniqueUsername("cnt-b"), password: testPassword)
        _ = try await aliceFixture.readyCrypto()
        _ = try await bobFixture.readyCrypto()
        let aliceChat = try #require(aliceFixture.community.module(AccountChat.self))
        aliceChat.countOnDeviceInEveryRoom(true)
        let displayName = "Alice Counter"
        try await aliceFixture.community.chat.setDisplayName(displayName)
        // A keyword of Alice's (a content rule): the device reads her rules from account data.
        let requester = try #require(aliceFixture.community.requester)
        let keyword = try await requester.send(
            MatrixEndpoint(
                method: .put, path: "/_matrix/client/v3/pushrules/global/content/deploy",
                body: Array(#"{"pattern": "deploy", "actions": ["notify", {"set_tweak": "highlight"}]}"#.utf8),
                requiresAuth: true))
        #expect(keyword.isSuccess)

        let plain = try await aliceFixture.community.chat.createRoom(
            name: "Counted", invitees: [bob.userID], isEncrypted: false)
        let sealed = try await aliceFixture.community.chat.createRoom(
            name: "Counted sealed", invitees: [bob.userID], isEncrypted: true)
        for room in [plain, sealed] {
            try await bobFixture.community.chat.waitForConversation(room, .invited)
            _ = try await bobFixture.community.chat.join(roomIDOrAlias: room.rawValue)
            try await aliceFixture.community.chat.waitForConversation(room)
        }
        let rooms = [plain, sealed]
        var bobRooms: [Conversation] = []
        var aliceRooms: [Conversation] = []
        for room in rooms {
            bobRooms.append(try await bobFixture.community.chat.conversation(id: room))
            aliceRooms.append(try await aliceFixture.community.chat.conversation(id: room))
        }

        let localpart = String(alice.userID.rawValue.dropFirst().prefix { $0 != ":" })
        let words = [
            "hello", localpart, localpart.uppercased(), displayName, "@room", "room", "m\(localpart)", "deploy",
            "deployment", "@roommate", "(\(localpart))", "see you",
        ]
        let seed = Self.seed ?? UInt64.random(in: 1...UInt64.max)
        var random = SeededGenerator(seed: seed)
        var bobMessages: [[EventID]] = [[], []]
        var lastEvents: [EventID?] = [nil, nil]
        var bobIsModerator = false
        var events = 0
        var highlightsSeen = 0
        var stepOf: [EventID: String] = [:]
        var eventOf: [[String: EventID]] = [[:], [:]]
        let steps = Self.steps
        for step in 1...steps {
            if step == steps / 2 {
                try await aliceChat.setPowerLevel(100, for: bob.userID, roomID: plain)
                try await aliceChat.setPowerLevel(100, for: bob.userID, roomID: sealed)
                bobIsModerator = true
            }
            let body = (0..<random.below(3) + 1).map { _ in random.pick(words) }.joined(separator: " ")
            let kind = random.below(20)
            let mentionKind = random.below(3)
            for index in rooms.indices {
                let bobRoom = bobRooms[index]
                var sent: EventID?
                switch kind {
                case 0: sent = try await bobRoom.send(.notice(body)).sentEventID()
                case 1, 2:
                    if let target = bobMessages[index].last {
                        sent = try await bobRoom.edit(target, newText: body).sentEventID()
                    }
                case 3:
                    if let target = lastEvents[index] {
                        try await bobRoom.react(to: target, key: "👍\(step)")
                    }
                case 4:
                    if let target = lastEvents[index] {
                        sent = try await bobRoom.send(.text(body), replyingTo: target).sentEventID()
                    }
                case 5, 6:
                    let mentions: Mentions
                    switch mentionKind {
                    case 0: mentions = Mentions(userIDs: [alice.userID])
                    case 1: mentions = Mentions()
                    default: mentions = Mentions(room: true)
                    }
                    if mentions.room && !bobIsModerator {
                        await #expect(throws: ChatError.insufficientPowerLevel(required: 50, actual: 0)) {
                            _ = try await bobRoom.send(.text(body), mentioning: mentions)
                        }
                    } else {
                        sent = try await bobRoom.send(.text(body), mentioning: mentions).sentEventID()
                    }
                case 7:
                    sent = try await aliceRooms[index].send(.text(body)).sentEventID()
                case 8:
                    if let target = lastEvents[index] { try await aliceRooms[index].markRead(upTo: target) }
                default:
                    sent = try await bobRoom.send(.text(body)).sentEventID()
                    if let sent { bobMessages[index].append(sent) }
                }
                if let sent {
                    lastEvents[index] = sent
                    events += 1
                    stepOf[sent] = "step \(step) kind \(kind)"
                    eventOf[index]["step \(step) kind \(kind)"] = sent
                }
            }
            if step % 25 == 0 || step == steps {
                let counts = try await checkpoint(
                    aliceChat, requester: requester, rooms: rooms, lastEvents: lastEvents, seed: seed, step: step,
                    stepOf: stepOf, eventOf: eventOf)
                highlightsSeen = max(highlightsSeen, counts.highlights)
            }
        }
        #expect(events > steps, "seed \(seed): \(events) events were sent")
        #expect(highlightsSeen > 0, "seed \(seed): the stream highlighted")
    }

    /// Synapse's counts of `room` for the account, from a v2 `/sync` filtered to the room
    /// (sliding sync's are zeros, and the list shows the device's own counts there). `attempt`
    /// varies the filter: Synapse answers an identical initial sync from its cache for a while.
    static func synapseCounts(_ requester: any MatrixRequester, room: RoomID, attempt: Int) async throws -> (
        notifications: Int, highlights: Int
    ) {
        let filter =
            #"{"room":{"rooms":["\#(room.rawValue)"],"timeline":{"limit":1},"state":{"lazy_load_members":true},"account_data":{"not_types":["x.attempt.\#(attempt)"]}},"presence":{"not_types":["*"]}}"#
        let joined = try await joinedRooms(ofSyncFilteredBy: filter, requester: requester)
        let counts = (joined[room.rawValue] as? [String: Any])?["unread_notifications"] as? [String: Any]
        return (counts?["notification_count"] as? Int ?? 0, counts?["highlight_count"] as? Int ?? 0)
    }

    /// Waits until Alice's device has the last events and its counts settle, then compares:
    /// the plain room's device counts with Synapse's (a v2 `/sync`), the sealed room's with the
    /// plain room's.
    func checkpoint(
        _ chat: AccountChat, requester: any MatrixRequester, rooms: [RoomID], lastEvents: [EventID?], seed: UInt64,
        step: Int, stepOf: [EventID: String], eventOf: [[String: EventID]]
    ) async throws -> DeviceCounts {
        let deadline = ContinuousClock.now + .seconds(60)
        var server = (notifications: -1, highlights: -1)
        var plainCounts = try await chat.deviceCounts(roomID: rooms[0])
        var sealedCounts = plainCounts
        var attempt = 0
        while ContinuousClock.now < deadline {
            var stored = true
            for event in lastEvents.compactMap({ $0 }) where !(try await chat.hasStored(event)) { stored = false }
            plainCounts = try await chat.deviceCounts(roomID: rooms[0])
            sealedCounts = try await chat.deviceCounts(roomID: rooms[1])
            // The list shows the device's counts (recomputed after the sync that moved a
            // receipt, a moment after the store has the receipt).
            let shown = rooms.map { chat.conversations.value[$0] }
            if stored, sealedCounts.notifications == plainCounts.notifications,
                sealedCounts.highlights == plainCounts.highlights,
                shown[0]?.unreadCount == plainCounts.notifications, shown[0]?.highlightCount == plainCounts.highlights,
                shown[1]?.unreadCount == sealedCounts.notifications, shown[1]?.highlightCount == sealedCounts.highlights
            {
                attempt += 1
                server = try await Self.synapseCounts(
                    requester, room: rooms[0], attempt: step * 10_000 + attempt)
                if server == (plainCounts.notifications, plainCounts.highlights) { return plainCounts }
                try await Task.sleep(for: .milliseconds(250))
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        // Which steps the two rooms counted differently.
        let counted = try await rooms.asyncMap { room in
            try await chat.notifyingEvents(roomID: room).map {
                "\(stepOf[$0.eventID] ?? $0.eventID.rawValue)\($0.highlight ? " highlight" : "")"
            }
        }
        let plainOnly = Set(counted[0]).subtracting(counted[1]).sorted()
        let sealedOnly = Set(counted[1]).subtracting(counted[0]).sorted()
        // Whether the device holds the other room's event of each step counted in one room only
        // (an event the device never stored cannot be counted).
        var twins: [String] = []
        for (label, other) in plainOnly.map({ ($0, 1) }) + sealedOnly.map({ ($0, 0) }) {
            let step = label.replacingOccurrences(of: " highlight", with: "")
            guard let twin = eventOf[other][step] else { continue }
            twins.append(
                "\(step) in the \(other == 0 ? "plain" : "encrypted") room stored: \(try await chat.hasStored(twin))")
        }
        Issue.record("plain only: \(plainOnly), encrypted only: \(sealedOnly); \(twins)")
        Issue.record(
            "seed \(seed), step \(step): Synapse \(server), the list's rows \(rooms.map { room in String(describing: chat.conversations.value[room].map { ($0.unreadCount, $0.highlightCount) }) }), the device \(plainCounts.notifications)/\(plainCounts.highlights) (plain), \(sealedCounts.notifications)/\(sealedCounts.highlights) (encrypted)"
        )
        return plainCounts
    }
}

extension Array {  // (this file only)
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
