import Foundation
import SymorvaChat
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// Two SymorvaKit accounts in an encrypted room on the real Synapse.
@Suite(
    "Encrypted rooms against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct EncryptedRoomTests {
    @Test("A reaction in an encrypted room leaves as m.room.encrypted (its relation in the clear); the member sees it")
    func reactionEncrypted() async throws {
        // The default sync (sliding on the pinned Synapse): Bob's list knows only his own
        // membership when he sends right after joining; his first message reaches Alice because
        // the room's members are read before its key is shared.
        let configuration = DevEnvironment.current!.configuration
        let (aliceFixture, bobFixture, roomID) = try await EncryptionStateTests.pair(
            encrypted: true, name: "Sealed reactions", configuration: configuration, bobConfiguration: configuration)
        let bobRoom = try await bobFixture.community.chat.conversation(id: roomID)
        let stopBob = bobRoom.observe()
        defer { stopBob() }
        let receipt = try await bobRoom.send(.text("lunch?"))
        try await receipt.waitUntilSent()
        guard case .sent(let eventID) = receipt.state.value else {
            Issue.record("not sent: \(receipt.state.value)")
            return
        }
        let aliceRoom = try await aliceFixture.community.chat.conversation(id: roomID)
        let stopAlice = aliceRoom.observe()
        defer { stopAlice() }
        _ = try await aliceRoom.waitForTimeline { $0.texts.contains("lunch?") }
        try await aliceRoom.react(to: eventID, key: "🥗")

        // On the server the reaction is ciphertext whose relation stays readable (aggregation).
        let roomPath = roomID.rawValue.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let eventPath = eventID.rawValue.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let raw = try await bobFixture.community.requester!.send(
            MatrixEndpoint(
                method: .get, path: "/_matrix/client/v1/rooms/\(roomPath)/relations/\(eventPath)", requiresAuth: true)
        ).body
        let answer = try #require(try JSONSerialization.jsonObject(with: Data(raw)) as? [String: Any])
        let children = try #require(answer["chunk"] as? [[String: Any]])
        #expect(children.count == 1)
        #expect(children.first?["type"] as? String == "m.room.encrypted")
        let relation = (children.first?["content"] as? [String: Any])?["m.relates_to"] as? [String: Any]
        #expect(relation?["rel_type"] as? String == "m.annotation")
        #expect(relation?["event_id"] as? String == eventID.rawValue)
        // Bob's timeline shows it, decrypted.
        let items = try await bobRoom.waitForTimeline { items in
            items.contains { $0.eventID == eventID && $0.reactions.contains { $0.key == "🥗" } }
        }
        #expect(items.first { $0.eventID == eventID }?.reactions.first?.senders.count == 1)
    }

    @Test(
        "A message sent to an encrypted room leaves as m.room.encrypted; the member's device gets the key and reads it")
    func sendEncrypted() async throws {
        let aliceFixture = CommunityFixture()
        let bobFixture = CommunityFixture()
        _ = try await aliceFixture.community.session.register(
            username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let bob = try await bobFixture.community.session.register(
            username: DevEnvironment.uniqueUsername("bob"), password: testPassword)
        let aliceCrypto = try await aliceFixture.readyCrypto()
        let bobCrypto = try await bobFixture.readyCrypto()

        let roomID = try await aliceFixture.community.chat.createRoom(
            name: "Sealed", invitees: [bob.userID], isEncrypted: true)
        try await bobFixture.community.chat.waitForConversation(roomID, .invited)
        _ = try await bobFixture.community.chat.join(roomIDOrAlias: roomID.rawValue)
        try await aliceFixture.community.chat.waitForConversation(roomID)
        // Alice's device tracks Bob (a member of an encrypted room) and knows his device.
        let alice = aliceFixture.community.chat
        let deadlineForDevices = ContinuousClock.now + .seconds(60)
        while try await aliceCrypto.devices(of: bob.userID).isEmpty, ContinuousClock.now < deadlineForDevices {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(try await aliceCrypto.devices(of: bob.userID).map(\.deviceID) == [bobCrypto.deviceID.rawValue])

        let receipt = try await alice.conversation(id: roomID).send(.text("top secret"))
        try await receipt.waitUntilSent()
        guard case .sent(let eventID) = receipt.state.value else {
            Issue.record("not sent: \(receipt.state.value)")
            return
        }

        // On the server the event is ciphertext only.
        let raw = try await bobFixture.community.requester!.send(
            ChatAPI.event(roomID: roomID, eventID: eventID)
        ).body
        let event = try #require(try JSONSerialization.jsonObject(with: Data(raw)) as? [String: Any])
        #expect(event["type"] as? String == "m.room.encrypted")
        #expect(!String(decoding: raw, as: UTF8.self).contains("top secret"))
        let content = try JSONSerialization.data(withJSONObject: try #require(event["content"]))

        // Bob's device received the room key over Olm and decrypts the event.
        let deadline = ContinuousClock.now + .seconds(60)
        var plaintext: Secret<[UInt8]>?
        while ContinuousClock.now < deadline {
            plaintext = try await bobCrypto.decryptEvent(roomID: roomID, content: Array(content))
            if plaintext != nil { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let decrypted = try #require(plaintext, "Bob never got the room key")
        let payload = try #require(
            try JSONSerialization.jsonObject(with: Data(decrypted.exposedValue)) as? [String: Any])
        #expect(payload["type"] as? String == "m.room.message")
        #expect(payload["room_id"] as? String == roomID.rawValue)
        #expect((payload["content"] as? [String: Any])?["body"] as? String == "top secret")

        // Both timelines show the message decrypted, with the sending device known.
        let bobRoom = try await bobFixture.community.chat.conversation(id: roomID)
        let stopBob = bobRoom.observe()
        defer { stopBob() }
        let bobItems = try await bobRoom.waitForTimeline { $0.texts.contains("top secret") }
        let bobItem = try #require(bobItems.first { $0.text == "top secret" })
        #expect(bobItem.encryption?.isDeviceKnown == true)
        #expect(bobItem.encryption?.senderDeviceID == aliceCrypto.deviceID.rawValue)
        let aliceRoom = try await alice.conversation(id: roomID)
        let stopAlice = aliceRoom.observe()
        defer { stopAlice() }
        let aliceItems = try await aliceRoom.waitForTimeline { items in
            items.contains { $0.text == "top secret" && $0.sendState == nil && $0.encryption != nil }
        }
        #expect(aliceItems.filter { $0.text == "top secret" }.count == 1)

        // Bob answers; Alice reads it.
        // (A canary no schema or stored name can contain: a plain word like "received" is a column name.)
        let answer = "read you \(UUID().uuidString.prefix(8))"
        try await bobRoom.send(.text(answer)).waitUntilSent()
        let reply = try await aliceRoom.waitForTimeline { $0.texts.contains(answer) }
        #expect(reply.first { $0.text == answer }?.encryption?.senderDeviceID == bobCrypto.deviceID.rawValue)

        // Canary: the plaintexts reach neither a log nor a trace, and neither account's database
        // files (WAL included) hold any of them: queued messages and decrypted contents are
        // stored sealed.
        for fixture in [aliceFixture, bobFixture] {
            let logs = fixture.logs.text
            let traces = fixture.trace.records.map(\.description).joined(separator: "\n")
            #expect(logs.contains("Crypto["), "the crypto work was logged")
            for canary in ["top secret", answer] {
                #expect(!logs.contains(canary))
                #expect(!traces.contains(canary))
            }
            // Every file of the accounts' folders, the media cache and attachment copies included.
            let accounts = fixture.data.path + "/accounts"
            let files = FileManager.default.enumerator(atPath: accounts)?.allObjects as? [String] ?? []
            for file in files {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: accounts + "/" + file, isDirectory: &isDirectory),
                    !isDirectory.boolValue
                else { continue }
                let bytes = try Data(contentsOf: URL(fileURLWithPath: accounts + "/" + file))
                for canary in ["top secret", answer] {
                    #expect(bytes.range(of: Data(canary.utf8)) == nil, "plaintext in \(file)")
                }
            }
            #expect(files.contains { $0.hasSuffix(".db") || $0.hasSuffix(".sqlite") }, "the databases were read")
        }
    }
}
