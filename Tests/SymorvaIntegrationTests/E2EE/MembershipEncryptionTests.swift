import Foundation
import SymorvaChat
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// Who can read what in an encrypted room as members come, go and add devices: SymorvaKit
/// accounts on the real Synapse.
@Suite(
    "Encrypted rooms as membership changes, against Synapse",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"), .shutsDownCommunities)
struct MembershipEncryptionTests {
    /// A registered account in a community of its own, its crypto ready.
    struct Member {
        let fixture: CommunityFixture
        let userID: UserID
        let crypto: AccountCrypto
        var chat: ChatClient { fixture.community.chat }

        static func register(_ prefix: String, configuration: SymorvaConfiguration? = nil) async throws -> Member {
            let fixture = CommunityFixture(configuration: configuration)
            let account = try await fixture.community.session.register(
                username: DevEnvironment.uniqueUsername(prefix), password: testPassword)
            return Member(fixture: fixture, userID: account.userID, crypto: try await fixture.readyCrypto())
        }

        /// Signs in to `userID`'s account on a new device (a community of its own).
        static func signIn(_ userID: UserID, configuration: SymorvaConfiguration? = nil) async throws -> Member {
            let fixture = CommunityFixture(configuration: configuration)
            let username = String(userID.rawValue.dropFirst().prefix { $0 != ":" })
            _ = try await fixture.community.session.signIn(username: username, password: testPassword)
            return Member(fixture: fixture, userID: userID, crypto: try await fixture.readyCrypto())
        }

        /// The `m.room.encrypted` content of an event, as the server serves it to this member.
        func encryptedContent(of eventID: EventID, in roomID: RoomID) async throws -> [UInt8] {
            let raw = try await fixture.community.requester!.send(ChatAPI.event(roomID: roomID, eventID: eventID)).body
            guard case .object(let event) = try JSONValue(parsing: raw), event["type"] == .string("m.room.encrypted"),
                let content = event["content"]
            else { throw IntegrationFailure("not an encrypted event") }
            return try content.canonicalEncoding()
        }
    }

    static func sessionID(of content: [UInt8]) throws -> String {
        guard case .object(let members) = try JSONValue(parsing: content), case .string(let id)? = members["session_id"]
        else { throw IntegrationFailure("no session_id") }
        return id
    }

    /// Waits until the room's timeline (as `member` sees it) shows `user`'s membership as `membership`.
    static func waitForMembership(
        _ membership: Membership, of user: UserID, in room: Conversation
    ) async throws {
        try await room.waitForTimeline { items in
            items.contains {
                if case .membership(user, membership, _) = $0.content { return $0.eventID != nil }
                return false
            }
        }
    }

    @Test("An invited member's device gets the key of what is sent after the invite, and reads it once joined")
    func invitedMemberReads() async throws {
        let alice = try await Member.register("alice")
        let bob = try await Member.register("bob")
        let roomID = try await alice.chat.createRoom(name: "Invited", invitees: [bob.userID], isEncrypted: true)
        try await bob.chat.waitForConversation(roomID, .invited)
        try await alice.crypto.waitForDevice(bob.crypto.deviceID.rawValue, of: bob.userID)

        // Sent while Bob is invited, not joined: his device is among the members' devices.
        let eventID = try await alice.chat.conversation(id: roomID).send(.text("for the invited")).sentEventID()
        let content = try await alice.encryptedContent(of: eventID, in: roomID)
        let sessionID = try Self.sessionID(of: content)
        let deadline = ContinuousClock.now + .seconds(60)
        while try await bob.crypto.roomKey(roomID: roomID, sessionID: sessionID) == nil {
            guard ContinuousClock.now < deadline else {
                throw IntegrationFailure("the invited device never got the key")
            }
            try await Task.sleep(for: .milliseconds(100))
        }

        _ = try await bob.chat.join(roomIDOrAlias: roomID.rawValue)
        let room = try await bob.chat.conversation(id: roomID)
        let stop = room.observe()
        defer { stop() }
        let items = try await room.waitForTimeline { $0.texts.contains("for the invited") }
        let item = try #require(items.first { $0.text == "for the invited" })
        #expect(item.eventID == eventID)
        #expect(item.encryption?.senderDeviceID == alice.crypto.deviceID.rawValue)
    }

    @Test(
        "With history visibility 'joined', a new member cannot read what was sent before the join, and reads everything after"
    )
    func joinedHistoryVisibility() async throws {
        let alice = try await Member.register("alice")
        let bob = try await Member.register("bob")
        let roomID = try await alice.chat.createRoom(name: "From now on", isEncrypted: true)
        let body = Array(#"{"history_visibility":"joined"}"#.utf8)
        let path = "/_matrix/client/v3/rooms/\(roomID.rawValue)/state/m.room.history_visibility/"
        _ = try await alice.fixture.community.requester!.send(
            MatrixEndpoint(
                method: .put, path: path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)!, body: body,
                requiresAuth: true))
        let aliceRoom = try await alice.chat.conversation(id: roomID)
        let stopAlice = aliceRoom.observe()
        defer { stopAlice() }
        let before = try await aliceRoom.send(.text("before bob")).sentEventID()
        let beforeContent = try await alice.encryptedContent(of: before, in: roomID)

        try await alice.chat.invite(bob.userID, to: roomID)
        try await bob.chat.waitForConversation(roomID, .invited)
        _ = try await bob.chat.join(roomIDOrAlias: roomID.rawValue)
        try await Self.waitForMembership(.join, of: bob.userID, in: aliceRoom)
        let after = try await aliceRoom.send(.text("after bob")).sentEventID()
        let again = try await aliceRoom.send(.text("and again")).sentEventID()

        let room = try await bob.chat.conversation(id: roomID)
        let stop = room.observe()
        defer { stop() }
        let items = try await room.waitForTimeline { $0.texts.contains("after bob") && $0.texts.contains("and again") }
        #expect(items.first { $0.text == "after bob" }?.eventID == after)
        #expect(items.first { $0.text == "and again" }?.eventID == again)
        #expect(!items.contains { $0.eventID == before }, "the server does not show Bob the earlier event")
        // Nor would his keys open it: he holds the same session, from a later index only.
        let sessionID = try Self.sessionID(of: beforeContent)
        #expect(try await bob.crypto.roomKey(roomID: roomID, sessionID: sessionID) != nil)
        #expect(try await bob.crypto.decryptEvent(roomID: roomID, content: beforeContent) == nil)
        await #expect(throws: MatrixRequestError.self) {
            _ = try await bob.fixture.community.requester!.send(ChatAPI.event(roomID: roomID, eventID: before))
        }
    }

    @Test(
        "A member who leaves and rejoins cannot read what was sent while away (the session rotated), and reads what follows"
    )
    func rotationOnLeave() async throws {
        let alice = try await Member.register("alice")
        let bob = try await Member.register("bob")
        let roomID = try await alice.chat.createRoom(name: "Revolving", invitees: [bob.userID], isEncrypted: true)
        try await bob.chat.waitForConversation(roomID, .invited)
        _ = try await bob.chat.join(roomIDOrAlias: roomID.rawValue)
        let aliceRoom = try await alice.chat.conversation(id: roomID)
        let stopAlice = aliceRoom.observe()
        defer { stopAlice() }
        try await Self.waitForMembership(.join, of: bob.userID, in: aliceRoom)
        let first = try await aliceRoom.send(.text("all here")).sentEventID()
        let bobRoom = try await bob.chat.conversation(id: roomID)
        let stopBob = bobRoom.observe()
        try await bobRoom.waitForTimeline { $0.texts.contains("all here") }
        stopBob()

        try await bob.chat.leave(roomID)
        try await Self.waitForMembership(.leave, of: bob.userID, in: aliceRoom)
        let away = try await aliceRoom.send(.text("bob is away")).sentEventID()

        try await alice.chat.invite(bob.userID, to: roomID)
        try await bob.chat.waitForConversation(roomID, .invited)
        _ = try await bob.chat.join(roomIDOrAlias: roomID.rawValue)
        try await Self.waitForMembership(.join, of: bob.userID, in: aliceRoom)
        let back = try await aliceRoom.send(.text("bob is back")).sentEventID()

        let room = try await bob.chat.conversation(id: roomID)
        let stop = room.observe()
        defer { stop() }
        let items = try await room.waitForTimeline { $0.texts.contains("bob is back") }
        #expect(items.first { $0.text == "bob is back" }?.eventID == back)
        #expect(!items.contains { $0.eventID == away && $0.text != nil }, "what was sent while away stays unreadable")

        let firstSession = try Self.sessionID(of: try await alice.encryptedContent(of: first, in: roomID))
        let awayContent = try await alice.encryptedContent(of: away, in: roomID)
        let awaySession = try Self.sessionID(of: awayContent)
        let backSession = try Self.sessionID(of: try await alice.encryptedContent(of: back, in: roomID))
        #expect(awaySession != firstSession, "the session rotated when Bob left")
        #expect(backSession == awaySession, "and was shared with Bob when he came back, from a later index")
        #expect(try await bob.crypto.decryptEvent(roomID: roomID, content: awayContent) == nil)
        if let shown = items.first(where: { $0.eventID == away }) {
            #expect(shown.content == .unableToDecrypt(.missingKey))
        }
    }

    @Test("A second device of the same account reads the room's messages, and both list both devices")
    func secondDevice() async throws {
        let username = DevEnvironment.uniqueUsername("carol")
        let first = CommunityFixture()
        let carol = try await first.community.session.register(username: username, password: testPassword)
        let firstCrypto = try await first.readyCrypto()
        let bob = try await Member.register("bob")
        let roomID = try await bob.chat.createRoom(name: "Two devices", invitees: [carol.userID], isEncrypted: true)
        try await first.community.chat.waitForConversation(roomID, .invited)
        _ = try await first.community.chat.join(roomIDOrAlias: roomID.rawValue)

        let second = CommunityFixture()
        _ = try await second.community.session.signIn(username: username, password: testPassword)
        let secondCrypto = try await second.readyCrypto()
        #expect(firstCrypto.deviceID != secondCrypto.deviceID)
        try await second.community.chat.waitForConversation(roomID)

        // Both devices list both; Bob's device learns of the new one through device_lists.changed.
        let both = Set([firstCrypto.deviceID.rawValue, secondCrypto.deviceID.rawValue])
        try await firstCrypto.waitForDevice(secondCrypto.deviceID.rawValue, of: carol.userID)
        try await secondCrypto.waitForDevice(firstCrypto.deviceID.rawValue, of: carol.userID)
        #expect(Set(try await firstCrypto.ownDevices().map(\.deviceID)) == both)
        #expect(Set(try await secondCrypto.ownDevices().map(\.deviceID)) == both)
        // Under the default strict policy the new device gets room keys once its owner
        // cross-signed it: the first device signs it, as a verification between them ends.
        try await firstCrypto.crossSignOwnDevice(secondCrypto.deviceID.rawValue)
        try await bob.crypto.waitForCrossSigned(secondCrypto.deviceID.rawValue, of: carol.userID)

        let fromBob = try await bob.chat.conversation(id: roomID).send(.text("to both devices")).sentEventID()
        let firstRoom = try await first.community.chat.conversation(id: roomID)
        let secondRoom = try await second.community.chat.conversation(id: roomID)
        let stopFirst = firstRoom.observe()
        let stopSecond = secondRoom.observe()
        defer {
            stopFirst()
            stopSecond()
        }
        for room in [firstRoom, secondRoom] {
            let items = try await room.waitForTimeline { $0.texts.contains("to both devices") }
            #expect(items.first { $0.text == "to both devices" }?.eventID == fromBob)
        }

        // A message from the first device reaches its sibling (and Bob).
        let own = try await firstRoom.send(.text("from my first device")).sentEventID()
        let items = try await secondRoom.waitForTimeline { $0.texts.contains("from my first device") }
        let item = try #require(items.first { $0.text == "from my first device" })
        #expect(item.eventID == own)
        #expect(item.isOwn)
        #expect(item.encryption?.senderDeviceID == firstCrypto.deviceID.rawValue)
        #expect(item.encryption?.isDeviceKnown == true)
    }
}
