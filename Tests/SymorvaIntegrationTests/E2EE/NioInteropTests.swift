import Foundation
import SymorvaChat
import SymorvaE2EE
import SymorvaKit
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// A SymorvaKit client and a matrix-nio client (its own crypto: vodozemac) in one encrypted
/// room on the real Synapse, each reading what the other sends.
@Suite(
    "Interoperability with matrix-nio", .requires(NioPeer.isAvailable, "needs Scripts/dev-server (with the nio venv)"),
    .shutsDownCommunities, .serialized)
struct NioInteropTests {
    @Test("SymorvaKit sends before nio joins; the room key is shared with nio's device after the first message")
    func keySharedAfterFirstMessage() async throws {
        let fixture = CommunityFixture(configuration: DevEnvironment.current!.permissiveConfiguration)
        let alice = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let crypto = try await fixture.readyCrypto()
        let (peer, nioUser, nio) = try await NioPeer.onNewAccount("nio")

        let chat = fixture.community.chat
        let roomID = try await chat.createRoom(name: "Interop", isEncrypted: true)
        let room = try await chat.conversation(id: roomID)
        let stop = room.observe()
        defer { stop() }
        // Alone in the room: the first message's key goes to nobody else.
        let first = try await room.send(.text("before nio joined")).sentEventID()

        try await chat.invite(nioUser, to: roomID)
        try await peer.waitForInvite(roomID)
        try await peer.join(roomID)
        try await crypto.waitForDevice(nio.deviceID, of: nioUser)
        _ = try await room.waitForTimeline { _ in true }
        let second = try await room.send(.text("after nio joined")).sentEventID()

        // nio reads the second message; the first stays undecryptable for it: the same Megolm
        // session, shared with nio's device only from the second message's index on.
        let firstID = first.rawValue
        let secondID = second.rawValue
        let seen = try await peer.waitForMessages(in: roomID) { decrypted, undecrypted in
            let readSecond = decrypted.contains { $0.eventID == secondID }
            let sawFirst = undecrypted.contains { $0.eventID == firstID }
            return readSecond && sawFirst
        }
        let read = try #require(seen.decrypted.first { $0.eventID == second.rawValue })
        #expect(read.body == "after nio joined")
        #expect(read.sender == alice.userID.rawValue)
        let unread = try #require(seen.undecrypted.first { $0.eventID == first.rawValue })
        #expect(unread.sessionID != nil && unread.sessionID == read.sessionID)
        #expect(!seen.decrypted.contains { $0.eventID == first.rawValue })

        // nio answers in the room; SymorvaKit decrypts it and knows nio's device.
        let answer = try await peer.send("nio answers", to: roomID)
        let items = try await room.waitForTimeline { $0.texts.contains("nio answers") }
        let item = try #require(items.first { $0.text == "nio answers" })
        #expect(item.eventID?.rawValue == answer)
        #expect(item.sender == nioUser)
        #expect(item.encryption?.senderDeviceID == nio.deviceID)
        #expect(item.encryption?.senderKey == nio.curve25519)
        #expect(item.encryption?.isDeviceKnown == true)
        // Canary: none of the room's plaintexts reach SymorvaKit's logs or traces.
        let traces = fixture.trace.records.map(\.description).joined(separator: "\n")
        for canary in ["before nio joined", "after nio joined", "nio answers"] {
            #expect(!fixture.logs.text.contains(canary))
            #expect(!traces.contains(canary))
        }
        try await peer.quit()
    }

    @Test("nio creates the encrypted room and sends first; SymorvaKit reads it, answers, and nio reads the answer")
    func nioSendsFirst() async throws {
        let fixture = CommunityFixture(configuration: DevEnvironment.current!.permissiveConfiguration)
        let alice = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let crypto = try await fixture.readyCrypto()
        let (peer, _, nio) = try await NioPeer.onNewAccount("nio")

        let roomID = try await peer.createRoom(name: "From nio", invite: [alice.userID])
        let chat = fixture.community.chat
        try await chat.waitForConversation(roomID, .invited)
        _ = try await chat.join(roomIDOrAlias: roomID.rawValue)
        try await chat.waitForConversation(roomID)
        try await peer.waitForMember(alice.userID, in: roomID)
        // nio shares its room key with the device it finds for Alice: wait until it knows it.
        let deadline = ContinuousClock.now + .seconds(60)
        while try await !peer.deviceIDs(of: alice.userID).contains(crypto.deviceID.rawValue) {
            guard ContinuousClock.now < deadline else { throw IntegrationFailure("nio never saw Alice's device") }
            try await Task.sleep(for: .milliseconds(200))
        }

        let first = try await peer.send("nio speaks first", to: roomID)
        let room = try await chat.conversation(id: roomID)
        let stop = room.observe()
        defer { stop() }
        let items = try await room.waitForTimeline { $0.texts.contains("nio speaks first") }
        let item = try #require(items.first { $0.text == "nio speaks first" })
        #expect(item.eventID?.rawValue == first)
        #expect(item.encryption?.senderDeviceID == nio.deviceID)
        #expect(item.encryption?.isDeviceKnown == true)
        // matrix-nio has no cross-signing: its device is not cross-signed, and the row says so.
        #expect(item.encryption?.senderTrust == .notCrossSigned)
        #expect(item.encryption?.isFromDeviceNotCrossSigned == true)

        // SymorvaKit answers over the Olm session nio started (no one-time key claimed) and a
        // Megolm session of its own.
        let reply = try await room.send(.text("SymorvaKit answers")).sentEventID()
        let seen = try await peer.waitForMessages(in: roomID) { decrypted, _ in
            decrypted.contains { $0.eventID == reply.rawValue }
        }
        #expect(seen.decrypted.first { $0.eventID == reply.rawValue }?.body == "SymorvaKit answers")
        #expect(seen.decrypted.first { $0.eventID == reply.rawValue }?.sender == alice.userID.rawValue)

        // And a second round on the same sessions both ways.
        let again = try await peer.send("nio again", to: roomID)
        let later = try await room.waitForTimeline { $0.texts.contains("nio again") }
        #expect(later.first { $0.text == "nio again" }?.eventID?.rawValue == again)
        let second = try await room.send(.text("SymorvaKit again")).sentEventID()
        let final = try await peer.waitForMessages(in: roomID) { decrypted, _ in
            decrypted.contains { $0.eventID == second.rawValue }
        }
        #expect(final.undecrypted.isEmpty, "nio decrypted every message")
        try await peer.quit()
    }

    @Test(
        "nio leaves: SymorvaKit rotates its session; nio rejoins and gets the new key over the same Olm session, reading on but not what was sent while it was away"
    )
    func rotationOnLeave() async throws {
        let fixture = CommunityFixture(configuration: DevEnvironment.current!.permissiveConfiguration)
        _ = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let crypto = try await fixture.readyCrypto()
        let (peer, nioUser, nio) = try await NioPeer.onNewAccount("nio")

        let chat = fixture.community.chat
        let roomID = try await chat.createRoom(name: "Rotation", invitees: [nioUser], isEncrypted: true)
        try await peer.waitForInvite(roomID)
        try await peer.join(roomID)
        let room = try await chat.conversation(id: roomID)
        let stop = room.observe()
        defer { stop() }
        try await crypto.waitForDevice(nio.deviceID, of: nioUser)
        let before = try await room.send(.text("while nio is here")).sentEventID()
        let beforeID = before.rawValue
        try await peer.waitForMessages(in: roomID) { decrypted, _ in decrypted.contains { $0.eventID == beforeID } }

        try await peer.leave(roomID)
        try await room.waitForTimeline { items in
            items.contains {
                if case .membership(nioUser, .leave, _) = $0.content { return true }
                return false
            }
        }
        let away = try await room.send(.text("while nio is away")).sentEventID()

        try await chat.invite(nioUser, to: roomID)
        try await peer.waitForInvite(roomID)
        try await peer.join(roomID)
        try await room.waitForTimeline { items in
            items.contains {
                if case .membership(nioUser, .join, _) = $0.content { return $0.eventID != nil }
                return false
            }
        }
        let back = try await room.send(.text("nio is back")).sentEventID()
        let awayID = away.rawValue
        let backID = back.rawValue
        let seen = try await peer.waitForMessages(in: roomID) { decrypted, _ in
            decrypted.contains { $0.eventID == backID }
        }
        let first = try #require(seen.decrypted.first { $0.eventID == beforeID })
        let last = try #require(seen.decrypted.first { $0.eventID == backID })
        #expect(last.body == "nio is back")
        #expect(first.sessionID != last.sessionID, "the session rotated when nio left")
        #expect(!seen.decrypted.contains { $0.eventID == awayID }, "nio never reads what was sent while it was away")
        if let missed = seen.undecrypted.first(where: { $0.eventID == awayID }) {
            #expect(missed.sessionID == last.sessionID, "the new session, shared with nio only from a later index")
        }
        try await peer.quit()
    }

    @Test(
        "A nio device signed in to a SymorvaKit account asks for a key it was never sent; the SymorvaKit sibling forwards it and nio decrypts"
    )
    func siblingForwardsToNio() async throws {
        let environment = DevEnvironment.current!
        let username = DevEnvironment.uniqueUsername("carol")
        let fixture = CommunityFixture(configuration: DevEnvironment.current!.permissiveConfiguration)
        let carol = try await fixture.community.session.register(username: username, password: testPassword)
        let crypto = try await fixture.readyCrypto()
        let bob = try await MembershipEncryptionTests.Member.register(
            "bob", configuration: DevEnvironment.current!.permissiveConfiguration)
        let roomID = try await bob.chat.createRoom(name: "Siblings", invitees: [carol.userID], isEncrypted: true)
        try await fixture.community.chat.waitForConversation(roomID, .invited)
        _ = try await fixture.community.chat.join(roomIDOrAlias: roomID.rawValue)
        let bobRoom = try await bob.chat.conversation(id: roomID)
        let stopBob = bobRoom.observe()
        defer { stopBob() }
        try await MembershipEncryptionTests.waitForMembership(.join, of: carol.userID, in: bobRoom)
        try await bob.crypto.waitForDevice(crypto.deviceID.rawValue, of: carol.userID)
        let fromBob = try await bobRoom.send(.text("bob to carol")).sentEventID()
        let room = try await fixture.community.chat.conversation(id: roomID)
        let stop = room.observe()
        defer { stop() }
        try await room.waitForTimeline { $0.texts.contains("bob to carol") }

        // nio signs in as Carol: a device Bob never shared his session with.
        let peer = try NioPeer()
        let nio = try await peer.login(
            user: carol.userID.rawValue, password: testPassword.exposedValue, homeserver: environment.homeserverURL)
        let fromBobID = fromBob.rawValue
        try await peer.waitForMessages(in: roomID) { _, undecrypted in
            undecrypted.contains { $0.eventID == fromBobID }
        }
        // nio takes forwarded keys only from verified devices of its account.
        try await peer.verify(crypto.deviceID.rawValue, of: carol.userID)
        #expect(try await peer.requestKeys(in: roomID) == 1)
        let seen = try await peer.waitForMessages(in: roomID) { decrypted, _ in
            decrypted.contains { $0.eventID == fromBobID }
        }
        #expect(seen.decrypted.first { $0.eventID == fromBobID }?.body == "bob to carol")
        #expect(seen.decrypted.first { $0.eventID == fromBobID }?.sender == bob.userID.rawValue)
        // The SymorvaKit device answered a known device of its own account.
        #expect(try await crypto.devices(of: carol.userID).contains { $0.deviceID == nio.deviceID })
        #expect(fixture.logs.text.contains("room key requests answered=1"))
        #expect(!fixture.logs.text.contains("bob to carol"))
        try await peer.quit()
    }
}

extension NioInteropTests {
    @Test(
        "A SymorvaKit device signed in after the key was shared asks its account's nio device, which forwards it; the message decrypts in place"
    )
    func nioForwardsToSymorvaKit() async throws {
        // Carol's first device is nio's (the account is registered without an encryption device).
        let (peer, carol, nio) = try await NioPeer.onNewAccount("carol")
        let bob = try await MembershipEncryptionTests.Member.register(
            "bob", configuration: DevEnvironment.current!.permissiveConfiguration)
        let roomID = try await bob.chat.createRoom(name: "Ask nio", invitees: [carol], isEncrypted: true)
        try await peer.waitForInvite(roomID)
        try await peer.join(roomID)
        let bobRoom = try await bob.chat.conversation(id: roomID)
        let stopBob = bobRoom.observe()
        defer { stopBob() }
        try await MembershipEncryptionTests.waitForMembership(.join, of: carol, in: bobRoom)
        try await bob.crypto.waitForDevice(nio.deviceID, of: carol)
        let fromBob = try await bobRoom.send(.text("bob to carol on nio")).sentEventID()
        let fromBobID = fromBob.rawValue
        try await peer.waitForMessages(in: roomID) { decrypted, _ in decrypted.contains { $0.eventID == fromBobID } }
        let bobSession = try MembershipEncryptionTests.sessionID(
            of: try await bob.encryptedContent(of: fromBob, in: roomID))

        // Carol signs in with SymorvaKit: a device Bob never shared his session with. It asks
        // its account's other devices; nio answers verified devices of its own account only.
        let fixture = CommunityFixture(configuration: DevEnvironment.current!.permissiveConfiguration)
        let username = String(carol.rawValue.dropFirst().prefix { $0 != ":" })
        _ = try await fixture.community.session.signIn(username: username, password: testPassword)
        let crypto = try await fixture.readyCrypto()
        try await peer.verify(crypto.deviceID.rawValue, of: carol)
        try await fixture.community.chat.waitForConversation(roomID)
        let room = try await fixture.community.chat.conversation(id: roomID)
        let stop = room.observe()
        defer { stop() }
        // The message is there, its key missing. nio drops a request of a device it did not know
        // yet, so the first one may be lost: ask again, as a "request the keys again" button does.
        _ = try await room.waitForTimeline { $0.contains { $0.eventID == fromBob } }
        try await room.requestMissingKeys()
        let items = try await room.waitForTimeline { $0.texts.contains("bob to carol on nio") }
        let item = try #require(items.first { $0.eventID == fromBob })
        // The forwarded session is Bob's: the row names Bob's device, not nio's that forwarded it.
        #expect(item.encryption?.senderDeviceID == bob.crypto.deviceID.rawValue)
        let key = try #require(try await crypto.roomKey(roomID: roomID, sessionID: bobSession))
        #expect(key.forwarded, "the key came from nio")
        #expect(key.senderKey == (await bob.crypto.identityKeys)?.curve25519)
        #expect(!fixture.logs.text.contains("bob to carol on nio"))
        try await peer.quit()
    }

    /// A SymorvaKit account and a nio account in one encrypted room, each having read the
    /// other's first message (so both Olm sessions and both Megolm sessions are in place).
    private func talkingRoom(_ fixture: CommunityFixture) async throws -> (
        room: Conversation, roomID: RoomID, peer: NioPeer, nioUser: UserID, nio: NioPeer.Device, crypto: AccountCrypto,
        stop: @Sendable () -> Void
    ) {
        _ = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let crypto = try await fixture.readyCrypto()
        let (peer, nioUser, nio) = try await NioPeer.onNewAccount("nio")
        let chat = fixture.community.chat
        let roomID = try await chat.createRoom(name: "Talk", invitees: [nioUser], isEncrypted: true)
        try await peer.waitForInvite(roomID)
        try await peer.join(roomID)
        let room = try await chat.conversation(id: roomID)
        let stop = room.observe()
        try await crypto.waitForDevice(nio.deviceID, of: nioUser)
        let hello = try await room.send(.text("hello nio")).sentEventID().rawValue
        try await peer.waitForMessages(in: roomID) { decrypted, _ in decrypted.contains { $0.eventID == hello } }
        _ = try await peer.send("hello SymorvaKit", to: roomID)
        _ = try await room.waitForTimeline { $0.texts.contains("hello SymorvaKit") }
        return (room, roomID, peer, nioUser, nio, crypto, stop)
    }

    @Test("nio edits and replies to a SymorvaKit message: SymorvaKit shows the edit in place and the reply as a reply")
    func nioEditsAndReplies() async throws {
        let fixture = CommunityFixture(configuration: DevEnvironment.current!.permissiveConfiguration)
        let (room, roomID, peer, _, _, _, stop) = try await talkingRoom(fixture)
        defer { stop() }
        let nioMessage = try await peer.send("meet at noon", to: roomID)
        _ = try await room.waitForTimeline { $0.texts.contains("meet at noon") }
        let edit = try await peer.send("meet at one", to: roomID, replacing: nioMessage)
        let reply = try await peer.send("see you there", to: roomID, replyingTo: nioMessage)
        let items = try await room.waitForTimeline { items in
            items.contains { $0.eventID?.rawValue == nioMessage && $0.text == "meet at one" }
                && items.contains { $0.eventID?.rawValue == reply }
        }
        let edited = try #require(items.first { $0.eventID?.rawValue == nioMessage })
        #expect(edited.isEdited)
        #expect(!items.contains { $0.eventID?.rawValue == edit }, "the edit is not a message of its own")
        #expect(!items.contains { $0.text?.hasPrefix("* ") == true })
        #expect(items.first { $0.eventID?.rawValue == reply }?.inReplyTo?.rawValue == nioMessage)
        try await peer.quit()
    }

    @Test("SymorvaKit edits and replies to its message: nio sees the relation in the clear and the new text")
    func symorvaKitEditsAndReplies() async throws {
        let fixture = CommunityFixture(configuration: DevEnvironment.current!.permissiveConfiguration)
        let (room, roomID, peer, _, _, _, stop) = try await talkingRoom(fixture)
        defer { stop() }
        let original = try await room.send(.text("lunch at noon")).sentEventID()
        let edit = try await room.edit(original, newText: "lunch at one").sentEventID()
        let reply = try await room.send(.text("bring the notes"), replyingTo: original).sentEventID()
        let seen = try await peer.waitForMessages(in: roomID) { decrypted, _ in
            decrypted.contains { $0.eventID == edit.rawValue } && decrypted.contains { $0.eventID == reply.rawValue }
        }
        let editSeen = try #require(seen.decrypted.first { $0.eventID == edit.rawValue })
        #expect(editSeen.relType == "m.replace")
        #expect(editSeen.relatesTo == original.rawValue)
        #expect(editSeen.newBody == "lunch at one")
        #expect(seen.decrypted.first { $0.eventID == reply.rawValue }?.inReplyTo == original.rawValue)
        // SymorvaKit itself shows its edit in place too.
        let items = try await room.waitForTimeline { items in
            items.contains { $0.eventID == original && $0.text == "lunch at one" }
        }
        #expect(items.first { $0.eventID == original }?.isEdited == true)
        try await peer.quit()
    }

    @Test(
        "A nio device that lost its Olm session with us unwedges it; SymorvaKit shares its room key again over the new session and nio reads on"
    )
    func nioUnwedges() async throws {
        let fixture = CommunityFixture(configuration: DevEnvironment.current!.permissiveConfiguration)
        let (_, _, peer, nioUser, _, crypto, stop) = try await talkingRoom(fixture)
        defer { stop() }
        let ourKey = try #require(await crypto.identityKeys).curve25519
        #expect(try await peer.forgetSessions(with: ourKey) > 0)

        // A second room: SymorvaKit's new Megolm key goes to nio over the session nio forgot.
        let chat = fixture.community.chat
        let second = try await chat.createRoom(name: "Second", invitees: [nioUser], isEncrypted: true)
        try await peer.waitForInvite(second)
        try await peer.join(second)
        let room = try await chat.conversation(id: second)
        let stopSecond = room.observe()
        defer { stopSecond() }
        let lost = try await room.send(.text("nio cannot read this one")).sentEventID().rawValue
        try await peer.waitForMessages(in: second) { _, undecrypted in undecrypted.contains { $0.eventID == lost } }

        // nio finds the session wedged, starts a new one and tells us over it (m.dummy); a message
        // after that shares the key again over the new session, and nio reads it. Until the dummy
        // has arrived a message may still go over the old session: each is given 10 s.
        var read: String?
        let deadline = ContinuousClock.now + .seconds(60)
        while read == nil, ContinuousClock.now < deadline {
            let next = try await room.send(.text("after unwedging")).sentEventID().rawValue
            if (try? await peer.waitForMessages(in: second, timeout: .seconds(10)) { decrypted, _ in
                decrypted.contains { $0.eventID == next }
            }) != nil {
                read = next
            }
        }
        #expect(read != nil, "nio never read SymorvaKit's room again\n\(peer.stderrTail)")
        try await peer.quit()
    }
}
