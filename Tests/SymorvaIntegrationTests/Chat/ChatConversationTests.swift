import Foundation
import SymorvaChat
import SymorvaKit
import SymorvaMachines
import SymorvaTransport
import Testing

@Suite("Chat against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct ChatConversationTests {
    let transport = CurlTransport()

    /// Alice creates a room and invites Bob, who joins; both clients are started and synced,
    /// and stopped when `run` ends.
    func makePair(_ run: ChatTestRun) async throws -> (
        alice: AccountChat, bob: AccountChat, roomID: RoomID, accounts: [ChatTestAccount]
    ) {
        let aliceAccount = try await ChatTestAccount.register("alice", transport: transport)
        let bobAccount = try await ChatTestAccount.register("bob", transport: transport)
        let alice = try await aliceAccount.makeClient(in: run, transport: transport)
        let bob = try await bobAccount.makeClient(in: run, transport: transport)
        try await alice.startAndSync()
        try await bob.startAndSync()
        let roomID = try await alice.createRoom(name: "Garden club", invitees: [bobAccount.userID])
        try await bob.waitForConversation(roomID, .invited)
        _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
        try await alice.waitForConversation(roomID)
        return (alice, bob, roomID, [aliceAccount, bobAccount])
    }

    @Test("Two accounts chat: a message sent by one appears live in the other's observed timeline and list")
    func twoAccountsChat() async throws {
        try await withChatTestRun { run in
            let (alice, bob, roomID, _) = try await makePair(run)
            let bobRoom = try await bob.conversation(id: roomID)
            let stopObserving = bobRoom.observe()
            defer { stopObserving() }
            let aliceRoom = try await alice.conversation(id: roomID)
            let receipt = try await aliceRoom.send(.text("Seed swap on Saturday"))
            try await receipt.waitUntilSent()

            let items = try await bobRoom.waitForTimeline { $0.texts.contains("Seed swap on Saturday") }
            let message = try #require(items.first { $0.text == "Seed swap on Saturday" })
            #expect(message.sender == alice.userID)
            #expect(!message.isOwn)
            #expect(message.eventID == receipt.eventIDs.last)
            let row = try await bob.conversations.wait { $0[roomID]?.lastMessage?.body == "Seed swap on Saturday" }
            #expect(row[roomID]?.name == "Garden club")
            #expect(row[roomID]?.membership == .joined)
        }
    }

    @Test("The conversation list comes from the store before any network on a cold start")
    func listFromStoreOnColdStart() async throws {
        try await withChatTestRun { run in
            let (alice, _, roomID, accounts) = try await makePair(run)
            await alice.stop()
            // A client pointed at a closed port: it can never reach the network.
            let offline = try await accounts[0].makeClient(
                in: run, transport: transport, homeserverURL: HomeserverURL("http://127.0.0.1:9")!)
            try await offline.start()
            #expect(offline.conversations.value[roomID]?.name == "Garden club")
        }
    }

    @Test("Own messages show as local echoes with their send state, then as the synced event once")
    func localEchoBecomesRemoteEcho() async throws {
        try await withChatTestRun { run in
            let (alice, _, roomID, _) = try await makePair(run)
            let room = try await alice.conversation(id: roomID)
            let stopObserving = room.observe()
            defer { stopObserving() }
            let receipt = try await room.send(.text("first"))
            try await receipt.waitUntilSent()
            let items = try await room.waitForTimeline { items in
                items.contains { $0.text == "first" && $0.eventID != nil && $0.sendState == nil }
            }
            #expect(items.filter { $0.text == "first" }.count == 1)
            #expect(items.first { $0.text == "first" }?.isOwn == true)
        }
    }
}
