import Foundation
import SymorvaChat
import SymorvaKit
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// Conversation features with matrix-nio as the other participant on the real Synapse: typing,
/// read receipts, knocking and the space hierarchy, each seen from both sides.
@Suite(
    "Typing, receipts, knocks and spaces with matrix-nio",
    .requires(NioPeer.isAvailable, "needs Scripts/dev-server (with the nio venv)"), .shutsDownCommunities,
    .serialized)
struct NioConversationTests {
    /// A SymorvaKit account and a nio account in a room the SymorvaKit account created (plain, or
    /// encrypted with each side knowing the other's device).
    func pair(_ name: String, encrypted: Bool = false) async throws
        -> (CommunityFixture, UserID, NioPeer, UserID, RoomID)
    {
        let fixture = CommunityFixture(configuration: DevEnvironment.current!.permissiveConfiguration)
        let me = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("conv"), password: testPassword)
        let crypto = encrypted ? try await fixture.readyCrypto() : nil
        let (peer, nioUser, nio) = try await NioPeer.onNewAccount("nioconv")
        let roomID = try await fixture.community.chat.createRoom(
            name: name, invitees: [nioUser], isEncrypted: encrypted)
        try await peer.waitForInvite(roomID)
        try await peer.call("join", ["room_id": .string(roomID.rawValue), "encrypted": .bool(encrypted)])
        try await crypto?.waitForDevice(nio.deviceID, of: nioUser)
        return (fixture, me.userID, peer, nioUser, roomID)
    }

    @Test("Typing both ways: nio sees SymorvaKit type and stop; SymorvaKit's conversation lists nio while it types")
    func typing() async throws {
        let (fixture, me, peer, nioUser, roomID) = try await pair("Typing with nio")
        let room = try await fixture.community.chat.conversation(id: roomID)
        let stop = room.observe()
        defer { stop() }
        try await room.setTyping(true)
        try await peer.call(
            "wait_typing",
            ["room_id": .string(roomID.rawValue), "user_id": .string(me.rawValue), "typing": .bool(true)])
        try await room.setTyping(false)
        try await peer.call(
            "wait_typing",
            ["room_id": .string(roomID.rawValue), "user_id": .string(me.rawValue), "typing": .bool(false)])

        try await peer.call("typing", ["room_id": .string(roomID.rawValue), "typing": .bool(true)])
        try await room.typing.wait(timeout: .seconds(60)) { $0 == [nioUser] }
        try await peer.call("typing", ["room_id": .string(roomID.rawValue), "typing": .bool(false)])
        try await room.typing.wait(timeout: .seconds(60)) { $0.isEmpty }
        try await peer.quit()
    }

    @Test("Read receipts both ways: nio sees SymorvaKit's receipt at the message; SymorvaKit's item is read by nio")
    func receipts() async throws {
        // Encrypted: the nio peer writes only there (its messages are what it can read back).
        let (fixture, me, peer, nioUser, roomID) = try await pair("Receipts with nio", encrypted: true)
        let room = try await fixture.community.chat.conversation(id: roomID)
        let stop = room.observe()
        defer { stop() }
        // nio writes; SymorvaKit reads it and marks it read.
        let nioMessage = EventID(try await peer.send("read me, SymorvaKit", to: roomID))
        _ = try await room.waitForTimeline { $0.contains { $0.eventID == nioMessage } }
        try await room.markRead(upTo: nioMessage)
        // SymorvaKit shows threads: its main timeline's receipt is threaded (`main`).
        try await peer.call(
            "wait_receipt",
            [
                "room_id": .string(roomID.rawValue), "user_id": .string(me.rawValue),
                "event_id": .string(nioMessage.rawValue), "thread_id": .string("main"),
            ])
        // SymorvaKit writes; nio marks it read; the item says who read it.
        let mine = try await room.send(.text("read me, nio")).sentEventID()
        try await peer.waitForMessages(in: roomID) { decrypted, _ in decrypted.contains { $0.eventID == mine.rawValue }
        }
        try await peer.call("read", ["room_id": .string(roomID.rawValue), "event_id": .string(mine.rawValue)])
        let items = try await room.waitForTimeline { items in
            items.first { $0.eventID == mine }?.readBy.contains(nioUser) == true
        }
        #expect(items.first { $0.eventID == mine }?.readBy == [nioUser])
        try await peer.quit()
    }

    @Test("nio knocks on SymorvaKit's knock-only room; SymorvaKit sees the knock, lets nio in, and nio joins")
    func knock() async throws {
        let fixture = CommunityFixture(configuration: DevEnvironment.current!.permissiveConfiguration)
        _ = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("door"), password: testPassword)
        let (peer, nioUser, _) = try await NioPeer.onNewAccount("niodoor")
        let chat = fixture.community.chat
        let roomID = try await chat.createRoom(name: "Knock for nio", invitees: [], isEncrypted: false)
        try await chat.setJoinRule(.knock, roomID: roomID)
        try await peer.call("knock", ["room_id": .string(roomID.rawValue), "reason": .string("let me in")])
        let knocks = try await eventually(timeout: .seconds(60), "nio's knock") {
            let knocks = try await chat.knocks(roomID: roomID)
            return knocks == [nioUser] ? knocks : nil
        }
        #expect(knocks == [nioUser])
        try await chat.acceptKnock(from: nioUser, roomID: roomID)
        try await peer.waitForInvite(roomID)
        try await peer.call("join", ["room_id": .string(roomID.rawValue), "encrypted": .bool(false)])
        let room = try await chat.conversation(id: roomID)
        let stop = room.observe()
        defer { stop() }
        try await MembershipEncryptionTests.waitForMembership(.join, of: nioUser, in: room)
        #expect(try await chat.knocks(roomID: roomID).isEmpty)
        try await peer.quit()
    }

    @Test("nio pages the hierarchy of SymorvaKit's space: the space and every room SymorvaKit added")
    func hierarchy() async throws {
        let fixture = CommunityFixture(configuration: DevEnvironment.current!.permissiveConfiguration)
        _ = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("spacer"), password: testPassword)
        let (peer, nioUser, _) = try await NioPeer.onNewAccount("niospace")
        let chat = fixture.community.chat
        let spaceID = try await chat.createSpace(name: "Space for nio", isPublic: true)
        var children: [RoomID] = []
        for index in 0..<3 {
            let child = try await chat.createRoom(name: "Child \(index)", invitees: [], isEncrypted: false)
            try await chat.setJoinRule(.public, roomID: child)
            try await chat.addToSpace(child, spaceID: spaceID)
            children.append(child)
        }
        try await chat.invite(nioUser, to: spaceID)
        try await peer.waitForInvite(spaceID)
        try await peer.call("join", ["room_id": .string(spaceID.rawValue), "encrypted": .bool(false)])
        let answer = try await peer.call("hierarchy", ["space_id": .string(spaceID.rawValue), "limit": .number(2)])
        guard case .array(let ids)? = answer["room_ids"] else {
            Issue.record("no room_ids: \(answer)")
            return
        }
        let seen = ids.compactMap { if case .string(let id) = $0 { RoomID(id) } else { nil } }
        #expect(seen.first == spaceID)
        #expect(Set(seen) == Set([spaceID] + children))
        try await peer.quit()
    }
}
