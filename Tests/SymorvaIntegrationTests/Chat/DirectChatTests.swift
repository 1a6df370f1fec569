import Foundation
import SymorvaChat
import SymorvaKit
import SymorvaMachines
import SymorvaTransport
import Testing

/// Direct chats through `m.direct` against Synapse, with two SymorvaKit accounts.
@Suite("Direct chats (m.direct) against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct DirectChatTests {
    let transport = CurlTransport()

    @Test("A direct room created for Bob is in m.direct under Bob; marking another keeps the first")
    func direct() async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("dm-a", transport: transport)
            let bobAccount = try await ChatTestAccount.register("dm-b", transport: transport)
            let alice = try await aliceAccount.makeClient(in: run, transport: transport)
            try await alice.startAndSync()
            let direct = try await alice.createRoom(invitees: [bobAccount.userID], isDirect: true)
            let other = try await alice.createRoom(name: "Later direct", invitees: [bobAccount.userID])
            try await alice.markDirect(other, with: [bobAccount.userID])
            // m.direct arrives with a sync.
            let deadline = ContinuousClock.now + .seconds(60)
            var chats = try await alice.directChats()
            while chats[bobAccount.userID]?.count != 2, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                chats = try await alice.directChats()
            }
            #expect(chats == [bobAccount.userID: [direct, other]])
            #expect(alice.conversations.value[direct]?.isDirect == true)
        }
    }

    @Test("Bob's invite to Alice's direct room is listed as direct; joining it puts it in Bob's m.direct under Alice")
    func joinedInviteBecomesDirect() async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("dmj-a", transport: transport)
            let bobAccount = try await ChatTestAccount.register("dmj-b", transport: transport)
            let alice = try await aliceAccount.makeClient(in: run, transport: transport)
            let bob = try await bobAccount.makeClient(in: run, transport: transport)
            try await alice.startAndSync()
            try await bob.startAndSync()
            let direct = try await alice.createRoom(invitees: [bobAccount.userID], isDirect: true)
            let group = try await alice.createRoom(name: "Not direct", invitees: [bobAccount.userID])
            try await bob.waitForConversation(direct, .invited)
            try await bob.waitForConversation(group, .invited)
            #expect(bob.conversations.value[direct]?.isDirect == true)
            #expect(bob.conversations.value[group]?.isDirect == false)

            _ = try await bob.join(roomIDOrAlias: direct.rawValue)
            _ = try await bob.join(roomIDOrAlias: group.rawValue)
            // m.direct (written by the join) arrives with a sync; the row stays direct.
            let list = try await bob.conversations.wait(timeout: .seconds(60)) { list in
                list[direct]?.membership == .joined && list[direct]?.isDirect == true
                    && list[group]?.membership == .joined
            }
            #expect(list[group]?.isDirect == false)
            #expect(try await bob.directChats() == [aliceAccount.userID: [direct]])
        }
    }
}
