import Foundation
import SymorvaChat
import SymorvaKit
import SymorvaMachines
import SymorvaTransport
import Testing

/// Typing notifications, the fully-read marker and private receipts, between two SymorvaKit
/// accounts on the real Synapse.
@Suite(
    "Typing, read markers and private receipts against Synapse",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct ConversationMarkersTests {
    let transport = CurlTransport()

    func makePair(_ run: ChatTestRun, bobOptions: ChatOptions = .testing) async throws -> (
        alice: AccountChat, bob: AccountChat, roomID: RoomID
    ) {
        let aliceAccount = try await ChatTestAccount.register("mk-a", transport: transport)
        let bobAccount = try await ChatTestAccount.register("mk-b", transport: transport)
        let alice = try await aliceAccount.makeClient(in: run, transport: transport)
        let bob = try await bobAccount.makeClient(in: run, transport: transport, options: bobOptions)
        try await alice.startAndSync()
        try await bob.startAndSync()
        let roomID = try await alice.createRoom(name: "Markers", invitees: [bobAccount.userID])
        try await bob.waitForConversation(roomID, .invited)
        _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
        try await alice.waitForConversation(roomID)
        return (alice, bob, roomID)
    }

    @Test("Typing on shows the member typing in the other's conversation; off clears it")
    func typing() async throws {
        try await withChatTestRun { run in
            let (alice, bob, roomID) = try await makePair(run)
            let bobRoom = try await bob.conversation(id: roomID)
            let aliceRoom = try await alice.conversation(id: roomID)
            try await aliceRoom.setTyping(true)
            try await bobRoom.typing.wait(timeout: .seconds(60)) { $0 == [alice.userID] }
            // Alice's own conversation never lists her.
            try await aliceRoom.setTyping(false)
            try await bobRoom.typing.wait(timeout: .seconds(60)) { $0.isEmpty }
            #expect(aliceRoom.typing.value.isEmpty)
        }
    }

    @Test("read sets the fully-read marker and the receipt: the server's count drops to zero")
    func fullyRead() async throws {
        try await withChatTestRun { run in
            let (alice, bob, roomID) = try await makePair(run)
            let bobRoom = try await bob.conversation(id: roomID)
            let sent = try await alice.conversation(id: roomID).send(.text("read me"))
            try await sent.waitUntilSent()
            let eventID = try #require(sent.eventIDs.last)
            try await bob.conversations.wait(timeout: .seconds(60)) { $0[roomID]?.unreadCount == 1 }
            #expect(try await bobRoom.fullyReadEventID() != eventID)
            try await bobRoom.markRead(upTo: eventID)
            try await bob.conversations.wait(timeout: .seconds(60)) { $0[roomID]?.unreadCount == 0 }
            let deadline = ContinuousClock.now + .seconds(60)
            while try await bobRoom.fullyReadEventID() != eventID, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(try await bobRoom.fullyReadEventID() == eventID)
        }
    }

    @Test("A private receipt reads the room for its sender but is not shown to the others")
    func privateReceipt() async throws {
        try await withChatTestRun { run in
            var options = ChatOptions.testing
            options.sendsPrivateReceipts = true
            let (alice, bob, roomID) = try await makePair(run, bobOptions: options)
            let aliceRoom = try await alice.conversation(id: roomID)
            let stop = aliceRoom.observe()
            defer { stop() }
            let sent = try await aliceRoom.send(.text("seen privately"))
            try await sent.waitUntilSent()
            let eventID = try #require(sent.eventIDs.last)
            try await bob.conversations.wait(timeout: .seconds(60)) { $0[roomID]?.unreadCount == 1 }
            try await bob.conversation(id: roomID).markRead(upTo: eventID)
            try await bob.conversations.wait(timeout: .seconds(60)) { $0[roomID]?.unreadCount == 0 }
            // Bob answers after reading: once Alice has his answer she has any receipt he sent before it.
            try await bob.conversation(id: roomID).send(.text("after")).waitUntilSent()
            let items = try await aliceRoom.waitForTimeline { $0.texts.contains("after") }
            #expect(items.first { $0.eventID == eventID }?.readBy.contains(bob.userID) == false)
        }
    }
}
