import Foundation
import SymorvaChat
import SymorvaKit
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// Threads between a SymorvaKit client and matrix-nio (its own crypto) in one encrypted room on
/// the real Synapse: each reads the other's thread replies, relation and fallback included.
@Suite(
    "Threads with matrix-nio", .requires(NioPeer.isAvailable, "needs Scripts/dev-server (with the nio venv)"),
    .shutsDownCommunities, .serialized)
struct NioThreadTests {
    @Test("nio reads SymorvaKit's thread reply as m.thread with the fallback; SymorvaKit's thread shows nio's reply")
    func threadWithNio() async throws {
        let fixture = CommunityFixture(configuration: DevEnvironment.current!.permissiveConfiguration)
        _ = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let crypto = try await fixture.readyCrypto()
        let (peer, nioUser, nio) = try await NioPeer.onNewAccount("nio")

        let chat = fixture.community.chat
        let roomID = try await chat.createRoom(name: "Threads with nio", invitees: [nioUser], isEncrypted: true)
        try await peer.waitForInvite(roomID)
        try await peer.join(roomID)
        try await crypto.waitForDevice(nio.deviceID, of: nioUser)
        let room = try await chat.conversation(id: roomID)
        let stop = room.observe()
        defer { stop() }
        let root = try await room.send(.text("a root for nio")).sentEventID()
        let reply = try await room.send(.text("SymorvaKit in the thread"), inThread: root).sentEventID()

        let seen = try await peer.waitForMessages(in: roomID) { decrypted, _ in
            decrypted.contains { $0.eventID == reply.rawValue }
        }
        let read = try #require(seen.decrypted.first { $0.eventID == reply.rawValue })
        #expect(read.body == "SymorvaKit in the thread")
        #expect(read.relType == "m.thread")
        #expect(read.relatesTo == root.rawValue)
        #expect(read.inReplyTo == root.rawValue)

        // nio replies in the thread, to SymorvaKit's reply.
        let answer = try await peer.send(
            "nio in the thread", to: roomID, inThread: root.rawValue, replyingTo: reply.rawValue)
        let thread = room.thread(root)
        let stopThread = thread.timeline.subscribe { _ in }
        defer { stopThread() }
        let rows = try await thread.timeline.wait(timeout: .seconds(60)) { rows in
            Array(rows.dropFirst()).texts == ["SymorvaKit in the thread", "nio in the thread"]
        }
        let nioRow = try #require(rows.last)
        #expect(nioRow.eventID?.rawValue == answer)
        #expect(nioRow.threadRootID == root)
        #expect(nioRow.inReplyTo == reply)
        #expect(nioRow.encryption?.senderDeviceID == nio.deviceID)
        // The main timeline keeps the root with its summary and neither reply.
        let main = try await room.waitForTimeline { rows in
            rows.first { $0.eventID == root }?.thread?.replyCount == 2
        }
        #expect(!main.texts.contains("nio in the thread"))
        // The server's thread list agrees.
        let list = try await room.loadThreads()
        #expect(list.map(\.rootEventID) == [root])
        #expect(list.first?.replyCount == 2)
        #expect(list.first?.latestReplySender == nioUser)
        try await peer.quit()
    }
}
