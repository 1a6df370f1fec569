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
        }
    }
}
