import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// Message bodies, room names and topics, display names and reaction keys are user content:
/// a real two-account chat with every log at `.trace` and every trace record logged must not
/// show one of them anywhere.
@Suite("Chat log canary against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct ChatLogCanaryTests {
    /// One canary per kind of user content, unique to the run.
    struct Canaries {
        let tag = UUID().uuidString.prefix(8)
        var body: String { "canary-body-\(tag)" }
        var reply: String { "canary-reply-\(tag)" }
        var edit: String { "canary-edit-\(tag)" }
        var roomName: String { "canary-room-\(tag)" }
        var topic: String { "canary-topic-\(tag)" }
        var renamed: String { "canary-renamed-\(tag)" }
        var newTopic: String { "canary-new-topic-\(tag)" }
        var displayName: String { "canary-name-\(tag)" }
        var reactionKey: String { "canary-key-\(tag)" }
        var all: [String] { [body, reply, edit, roomName, topic, renamed, newTopic, displayName, reactionKey] }
    }

    @Test("Send, reply, edit, react, redact and rename: no body, name, topic or key reaches a log or a trace")
    func noUserContentInLogs() async throws {
        try await withChatTestRun { run in
            let canaries = Canaries()
            // Chat's own loggers write to the shared center; the communities' to their own.
            let shared = SharedLogCapture()
            defer { shared.finish() }
            let alice = CommunityFixture()
            let bob = CommunityFixture()
            run.atEnd { await alice.community.shutdown() }
            run.atEnd { await bob.community.shutdown() }
            let aliceAccount = try await alice.community.session.register(
                username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
            let bobAccount = try await bob.community.session.register(
                username: DevEnvironment.uniqueUsername("bob"), password: testPassword)
            let aliceChat = alice.community.chat
            let bobChat = bob.community.chat
            let aliceRequester = try #require(alice.community.requester)
            try await Self.setDisplayName(canaries.displayName, of: aliceAccount.userID, with: aliceRequester)

            let roomID = try await aliceChat.createRoom(
                name: canaries.roomName, topic: canaries.topic, invitees: [bobAccount.userID])
            try await bobChat.waitForConversation(roomID, .invited)
            _ = try await bobChat.join(roomIDOrAlias: roomID.rawValue)
            let aliceRoom = try await aliceChat.conversation(id: roomID)
            let bobRoom = try await bobChat.conversation(id: roomID)
            let stopAlice = aliceRoom.observe()
            let stopBob = bobRoom.observe()
            defer {
                stopAlice()
                stopBob()
            }

            let sent = try await aliceRoom.send(.text(canaries.body))
            try await sent.waitUntilSent()
            let messageID = try #require(sent.eventIDs.last)
            try await bobRoom.waitForTimeline { $0.texts.contains(canaries.body) }
            let reply = try await bobRoom.send(.text(canaries.reply), replyingTo: messageID)
            try await reply.waitUntilSent()
            let replyID = try #require(reply.eventIDs.last)
            try await bobRoom.react(to: messageID, key: canaries.reactionKey)
            _ = try await aliceRoom.edit(messageID, newText: canaries.edit)
            try await bobRoom.waitForTimeline { items in
                items.contains { $0.eventID == messageID && $0.text == canaries.edit && !$0.reactions.isEmpty }
            }
            try await aliceRoom.redact(replyID)
            try await bobRoom.waitForTimeline { items in
                items.contains { $0.eventID == replyID && $0.content == .redacted }
            }
            try await Self.setState("m.room.name", "name", canaries.renamed, in: roomID, with: aliceRequester)
            try await Self.setState("m.room.topic", "topic", canaries.newTopic, in: roomID, with: aliceRequester)
            try await bobChat.conversations.observable.wait(timeout: .seconds(60)) { list in
                list[roomID]?.name == canaries.renamed && list[roomID]?.topic == canaries.newTopic
            }

            let logs = [shared.text, alice.logs.text, bob.logs.text].joined(separator: "\n")
            let traces = (alice.trace.records + bob.trace.records).map(\.description).joined(separator: "\n")
            // The exchange was logged and traced, room by room: the canaries had every chance to appear.
            #expect(logs.contains(roomID.rawValue))
            for machine in ["SendQueue[", "Timeline[", "Sync["] {
                #expect(logs.contains(machine), "no \(machine) lines in the log")
                #expect(traces.contains(machine), "no \(machine) records in the trace")
            }
            let leaks = { (text: String) in
                text.split(separator: "\n").filter { line in canaries.all.contains { line.contains($0) } }
            }
            #expect(leaks(logs).isEmpty, "user content in the log:\n\(leaks(logs).joined(separator: "\n"))")
            #expect(leaks(traces).isEmpty, "user content in the trace:\n\(leaks(traces).joined(separator: "\n"))")
        }
    }

    /// `PUT /profile/{userId}/displayname`.
    static func setDisplayName(_ name: String, of userID: UserID, with requester: any MatrixRequester) async throws {
        let body = Array(try JSONSerialization.data(withJSONObject: ["displayname": name]))
        let user = userID.rawValue.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        _ = try await requester.send(
            MatrixEndpoint(
                method: .put, path: "/_matrix/client/v3/profile/\(user)/displayname", body: body,
                requiresAuth: true))
    }

    /// `PUT /rooms/{roomId}/state/{type}` with one string field: renames the room, sets its topic.
    static func setState(
        _ type: String, _ field: String, _ value: String, in roomID: RoomID, with requester: any MatrixRequester
    ) async throws {
        let body = Array(try JSONSerialization.data(withJSONObject: [field: value]))
        let room = roomID.rawValue.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        _ = try await requester.send(
            MatrixEndpoint(
                method: .put, path: "/_matrix/client/v3/rooms/\(room)/state/\(type)/", body: body,
                requiresAuth: true))
    }
}
