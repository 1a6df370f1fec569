import Foundation
import SymorvaChat
import SymorvaKit
import SymorvaMachines
import SymorvaTransport
import Testing

/// Ignoring a user against the real Synapse, with SymorvaKit accounts: what they sent before is
/// hidden, what they send after never arrives, their invites are dropped.
@Suite("Ignoring users against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct IgnoreUserTests {
    let transport = CurlTransport()

    @Test("An ignored user's messages are hidden and their invites dropped; another member's still arrive")
    func ignore() async throws {
        try await withChatTestRun { run in
            let accounts = [
                try await ChatTestAccount.register("ig-a", transport: transport),
                try await ChatTestAccount.register("ig-b", transport: transport),
                try await ChatTestAccount.register("ig-c", transport: transport),
            ]
            var clients: [AccountChat] = []
            for account in accounts {
                let client = try await account.makeClient(in: run, transport: transport)
                try await client.startAndSync()
                clients.append(client)
            }
            let (alice, bob, carol) = (clients[0], clients[1], clients[2])
            let roomID = try await alice.createRoom(name: "Ignore", invitees: [bob.userID, carol.userID])
            for member in [bob, carol] {
                try await member.waitForConversation(roomID, .invited)
                _ = try await member.join(roomIDOrAlias: roomID.rawValue)
            }
            let aliceRoom = try await alice.conversation(id: roomID)
            let stop = aliceRoom.observe()
            defer { stop() }
            try await bob.conversation(id: roomID).send(.text("before")).waitUntilSent()
            try await aliceRoom.waitForTimeline { $0.texts.contains("before") }

            try await alice.ignore(bob.userID)
            #expect(alice.ignoredUsers == [bob.userID])
            try await aliceRoom.waitForTimeline { !$0.texts.contains("before") }
            await #expect(throws: ChatError.invalidArgument(name: "user")) { try await alice.ignore(alice.userID) }

            // Bob writes and invites; Carol writes and invites after him: once Carol's arrive,
            // Bob's would have too.
            try await bob.conversation(id: roomID).send(.text("while ignored")).waitUntilSent()
            let bobsRoom = try await bob.createRoom(name: "From Bob", invitees: [alice.userID])
            try await carol.conversation(id: roomID).send(.text("from carol")).waitUntilSent()
            let carolsRoom = try await carol.createRoom(name: "From Carol", invitees: [alice.userID])
            let items = try await aliceRoom.waitForTimeline { $0.texts.contains("from carol") }
            #expect(!items.texts.contains("while ignored") && !items.texts.contains("before"))
            let list = try await alice.waitForConversation(carolsRoom, .invited)
            #expect(list.id == carolsRoom)
            #expect(alice.conversations.value[bobsRoom] == nil)

            // Unignored: the next sync is the server's to decide; the stored message shows again.
            try await alice.unignore(bob.userID)
            #expect(alice.ignoredUsers.isEmpty)
            try await aliceRoom.waitForTimeline { $0.texts.contains("before") }
        }
    }
}
