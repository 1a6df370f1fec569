import Foundation
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTransport
import Testing

/// Room keys sent to the account's device as Olm-encrypted to-device messages, through the real
/// Synapse: the sync stores them, the crypto machine processes them.
@Suite(
    "Room keys over to-device messages against Synapse",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct CryptoRoomKeyTests {
    let transport = CurlTransport()
    let driver = OlmCryptoDriver()

    @Test(
        "An m.room_key from another device becomes an inbound session; a misaddressed one is dropped; a late key decrypts in place"
    )
    func roomKeyArrives() async throws {
        let fixture = CommunityFixture()
        let alice = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let crypto = try #require(fixture.community.module(AccountCrypto.self))
        try await crypto.state.wait(timeout: .seconds(60)) { state in
            if case .ready(let work) = state { return !work.isUploading }
            return false
        }
        let aliceKeys = try #require(await crypto.identityKeys)

        // Bob: a Matrix account with an Olm account of his own (an independent sender).
        let bobAccount = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername("bob"), in: fixture.environment, transport: transport)
        let bob = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL(fixture.environment.homeserverURL.absoluteString)!,
            userID: UserID(bobAccount.userID)!, accessToken: bobAccount.accessToken, transport: transport)
        let bobOlm = try driver.newAccount()
        let device = crypto.deviceID.rawValue
        // Bob's device publishes its keys, self-signed: a room key is used only from a device
        // that a keys/query lists as the sender's.
        let bobDevice = bobAccount.deviceID
        var bobKeys: [String: JSONValue] = [
            "algorithms": .array([.string("m.olm.v1.curve25519-aes-sha2"), .string("m.megolm.v1.aes-sha2")]),
            "device_id": .string(bobDevice), "user_id": .string(bobAccount.userID),
            "keys": .object([
                "curve25519:\(bobDevice)": .string(bobOlm.identityKeys.curve25519),
                "ed25519:\(bobDevice)": .string(bobOlm.identityKeys.ed25519),
            ]),
        ]
        let signature = bobOlm.sign(try JSONValue.object(bobKeys).canonicalEncoding())
        bobKeys["signatures"] = .object([bobAccount.userID: .object(["ed25519:\(bobDevice)": .string(signature)])])
        _ = try await bob.send(try E2EEAPI.upload(deviceKeys: .object(bobKeys), oneTimeKeys: [:], fallbackKeys: [:]))
        // And cross-signed by an identity of his: under the default strict policy Alice shows
        // messages only from devices their owner cross-signed.
        let bobIdentity = try CrossSigningKeys(newFor: UserID(bobAccount.userID)!, driver: driver)
        _ = try await bob.send(try E2EEAPI.uploadSigningKeys(try bobIdentity.uploadBody()))
        _ = try await bob.send(
            try E2EEAPI.uploadSignatures([
                bobAccount.userID: [bobDevice: try bobIdentity.signDevice(.object(bobKeys))]
            ]))

        func claimKey() async throws -> String {
            let answer = try JSONValue(parsing: try await bob.send(try E2EEAPI.claim([alice.userID: [device]])).body)
            guard case .object(let top) = answer, case .object(let users)? = top["one_time_keys"],
                case .object(let devices)? = users[alice.userID.rawValue],
                case .object(let keys)? = devices[device], case .object(let key)? = keys.values.first,
                case .string(let value)? = key["key"]
            else { throw IntegrationFailure("no one-time key: \(answer)") }
            return value
        }

        func sendRoomKey(
            recipientEd25519: String, roomID: String, transactionID: String,
            key given: (sessionID: String, key: Secret<String>)? = nil
        ) async throws -> String {
            let session = try bobOlm.outboundSession(
                identityKey: aliceKeys.curve25519, oneTimeKey: try await claimKey())
            let fresh = try driver.newOutboundGroupSession()
            let (sessionID, sessionKey) = try given ?? (fresh.sessionID, fresh.sessionKey())
            let plaintext = JSONValue.object([
                "type": .string("m.room_key"),
                "content": .object([
                    "algorithm": .string("m.megolm.v1.aes-sha2"), "room_id": .string(roomID),
                    "session_id": .string(sessionID), "session_key": .string(sessionKey.exposedValue),
                ]),
                "sender": .string(bobAccount.userID), "sender_device": .string(bobDevice),
                "recipient": .string(alice.userID.rawValue),
                "recipient_keys": .object(["ed25519": .string(recipientEd25519)]),
                "keys": .object(["ed25519": .string(bobOlm.identityKeys.ed25519)]),
            ])
            let message = try session.encrypt(Secret(try plaintext.canonicalEncoding()))
            let content = JSONValue.object([
                "algorithm": .string("m.olm.v1.curve25519-aes-sha2"),
                "sender_key": .string(bobOlm.identityKeys.curve25519),
                "ciphertext": .object([
                    aliceKeys.curve25519: .object([
                        "type": .number(Double(message.kind.rawValue)), "body": .string(message.body),
                    ])
                ]),
            ])
            _ = try await bob.send(
                try E2EEAPI.sendToDevice(
                    eventType: "m.room.encrypted", transactionID: TransactionID(transactionID),
                    messages: [alice.userID.rawValue: [device: content]]))
            return sessionID
        }

        // First a key addressed to another device's signing key: dropped. Then a good one.
        let stray = try await sendRoomKey(
            recipientEd25519: bobOlm.identityKeys.ed25519, roomID: "!stray:localhost", transactionID: "k1")
        let good = try await sendRoomKey(
            recipientEd25519: aliceKeys.ed25519, roomID: "!room:localhost", transactionID: "k2")
        let deadline = ContinuousClock.now + .seconds(60)
        var stored: (senderKey: String, signingKey: String, forwarded: Bool)?
        while ContinuousClock.now < deadline {
            stored = try await crypto.roomKey(roomID: RoomID("!room:localhost"), sessionID: good)
            if stored != nil { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let key = try #require(stored, "the room key never arrived")
        #expect(key.senderKey == bobOlm.identityKeys.curve25519)
        #expect(key.signingKey == bobOlm.identityKeys.ed25519)
        #expect(!key.forwarded)
        #expect(try await crypto.roomKey(roomID: RoomID("!stray:localhost"), sessionID: stray) == nil)

        // A message whose key arrives late: unable to decrypt first, then the message, in place.
        let roomID = try await fixture.community.chat.createRoom(
            name: "Late", invitees: [UserID(bobAccount.userID)!], isEncrypted: true)
        _ = try await bob.send(ChatAPI.join(roomID.rawValue))
        let megolm = try driver.newOutboundGroupSession()
        // The key is exported at index 0, before the message is encrypted with it.
        let firstKey = (sessionID: megolm.sessionID, key: try megolm.sessionKey())
        let plaintext = JSONValue.object([
            "type": .string("m.room.message"), "room_id": .string(roomID.rawValue),
            "content": .object(["msgtype": .string("m.text"), "body": .string("late key")]),
        ])
        let ciphertext = try megolm.encrypt(Secret(try plaintext.canonicalEncoding()))
        let encrypted = JSONValue.object([
            "algorithm": .string("m.megolm.v1.aes-sha2"), "ciphertext": .string(ciphertext),
            "device_id": .string(bobDevice), "sender_key": .string(bobOlm.identityKeys.curve25519),
            "session_id": .string(megolm.sessionID),
        ])
        _ = try await bob.send(
            ChatAPI.send(
                roomID: roomID, transactionID: TransactionID("late-1"),
                content: MessageContent(
                    eventType: "m.room.encrypted",
                    json: String(decoding: try encrypted.canonicalEncoding(), as: UTF8.self))))
        let room = try await fixture.community.chat.conversation(id: roomID)
        let stopObserving = room.observe()
        defer { stopObserving() }
        let before = try await room.waitForTimeline { items in
            items.contains { $0.content == .unableToDecrypt(.missingKey) }
        }
        let undecrypted = try #require(before.first { $0.content == .unableToDecrypt(.missingKey) })
        _ = try await sendRoomKey(
            recipientEd25519: aliceKeys.ed25519, roomID: roomID.rawValue, transactionID: "k3", key: firstKey)
        let after = try await room.waitForTimeline { $0.texts.contains("late key") }
        let decrypted = try #require(after.first { $0.text == "late key" })
        #expect(decrypted.id == undecrypted.id, "the same row, decrypted in place")
        #expect(decrypted.encryption?.isDeviceKnown == true, "Bob's device published its keys and was queried")
    }
}
