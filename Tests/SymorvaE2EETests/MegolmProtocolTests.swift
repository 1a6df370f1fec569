import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import Testing

@testable import SymorvaE2EE

/// Megolm sessions as received: who may send with them, and which key of a session is kept.
@Suite("Megolm sessions: owners, replays and better keys")
struct MegolmProtocolTests {
    let fixture = EngineFixture()
    let roomID = "!room:example.org"

    /// Bob's Megolm session and the first `count` event contents he encrypted with it.
    func bobsMessages(_ session: any OutboundGroupSession, count: Int) throws -> [[UInt8]] {
        try (0..<count).map { index in
            let plaintext = try JSONValue.object([
                "type": .string("m.room.message"), "room_id": .string(roomID),
                "content": .object(["msgtype": .string("m.text"), "body": .string("message \(index)")]),
            ]).canonicalEncoding()
            return try JSONValue.object([
                "algorithm": .string("m.megolm.v1.aes-sha2"),
                "ciphertext": .string(try session.encrypt(Secret(plaintext))),
                "session_id": .string(session.sessionID), "sender_key": .string("unused"),
                "device_id": .string("BOB"),
            ]).canonicalEncoding()
        }
    }

    /// Shares `key` of Bob's `session` with `recipient` as an `m.room_key` over Olm.
    func shareRoomKey(
        from bob: EngineFixture.Device, to recipient: EngineFixture.Device, session: any OutboundGroupSession,
        key: Secret<String>
    ) async throws {
        let device = try await recipient.listed()
        let shared = try await bob.engine.roomKeyMessages(
            roomID: roomID, sessionID: session.sessionID, key: key, for: [device], nowMilliseconds: 0)
        try await fixture.deliver(
            sender: bob.userID, content: try #require(shared.messages[device.userID.rawValue]?[device.deviceID]),
            to: recipient)
        _ = try await recipient.engine.processToDevice(nowMilliseconds: 0)
    }

    @Test("Someone else's ciphertext reposted by another member is refused without taking the real event's index")
    func repostedCiphertext() async throws {
        let bob = try await fixture.device("@bob:example.org", "BOB")
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        try await fixture.introduce(alice, bob)
        try await fixture.connect(bob, to: alice)
        let session = try fixture.driver.newOutboundGroupSession()
        try await shareRoomKey(from: bob, to: alice, session: session, key: try session.sessionKey())
        let content = try bobsMessages(session, count: 1)[0]

        // Mallory's copy is seen first (a later event can reach a device first, from history).
        let mallory: UserID = "@mallory:example.org"
        let copy = try await alice.engine.decryptRoomEvent(
            roomID: roomID, eventID: "$copy", sender: mallory, content: content)
        guard case .failure(.mismatched)? = copy else {
            Issue.record("the reposted copy was not refused: \(String(describing: copy))")
            return
        }
        let real = try await alice.engine.decryptRoomEvent(
            roomID: roomID, eventID: "$real", sender: bob.userID, content: content)
        guard case .success? = real else {
            Issue.record("Bob's own event was refused: \(String(describing: real))")
            return
        }
    }

    @Test(
        "A batch decrypts without recording, then records its indexes in one transaction: the same index again in the batch is a replay, the same event again is not"
    )
    func batchRecordsIndexesOnce() async throws {
        let bob = try await fixture.device("@bob:example.org", "BOB")
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        try await fixture.introduce(alice, bob)
        try await fixture.connect(bob, to: alice)
        let session = try fixture.driver.newOutboundGroupSession()
        try await shareRoomKey(from: bob, to: alice, session: session, key: try session.sessionKey())
        let contents = try bobsMessages(session, count: 2)
        // Index 0, index 1, and index 0 again under another event ID (a replay).
        let batch = [contents[0], contents[1], contents[0]].map { (roomID: roomID, sender: bob.userID, content: $0) }
        let decrypted = try await alice.engine.decryptRoomEventsUnrecorded(batch).map { result in
            guard case .success(.success(let decryption)?) = result else {
                throw TestFailure("not decrypted: \(result)")
            }
            return decryption
        }
        #expect(decrypted.map(\.messageIndex) == [0, 1, 0])
        let accepted = try await alice.store.recordMessageIndexes(
            zip(decrypted, ["$a", "$b", "$replay"]).map {
                (sessionID: $0.sessionID, index: $0.messageIndex, eventID: $1)
            })
        #expect(accepted == [true, true, false])
        // A later pass that meets the first event again (its outcome was not stored) is not a replay.
        #expect(
            try await alice.store.recordMessageIndexes([
                (sessionID: session.sessionID, index: 0, eventID: "$a"),
                (sessionID: session.sessionID, index: 0, eventID: "$other"),
            ]) == [true, false])
    }

    @Test("A forwarded key is replaced by the sender's own key from an earlier index, never by another device's")
    func betterKeyReplacesForwarded() async throws {
        let bob = try await fixture.device("@bob:example.org", "BOB")
        let laptop = try await fixture.device("@alice:example.org", "LAPTOP")
        try await fixture.introduce(laptop, bob)
        try await fixture.connect(bob, to: laptop)
        let session = try fixture.driver.newOutboundGroupSession()
        let firstKey = try session.sessionKey()
        let contents = try bobsMessages(session, count: 4)
        let bobCurve = try await bob.keys().curve25519
        let bobEd = try await bob.keys().ed25519
        let pickleKey = try #require(await laptop.engine.pickleKey)

        // A sibling forwarded the session from index 3 (it joined late).
        let fromThree = try fixture.driver.inboundGroupSession(sessionKey: firstKey).export(from: 3)
        let forwarded = try fixture.driver.inboundGroupSession(exportedKey: fromThree)
        try await laptop.store.saveInboundSession(
            CryptoStore.InboundSessionRow(
                roomID: roomID, sessionID: session.sessionID, senderKey: bobCurve, signingKey: bobEd,
                forwarded: true, pickle: try forwarded.pickle(key: pickleKey), firstKnownIndex: 3))
        let early = try await laptop.engine.decryptRoomEvent(
            roomID: roomID, eventID: "$1", sender: bob.userID, content: contents[1])
        #expect(early == nil, "index 1 is before the forwarded key")

        // Someone else's device offering the same session from index 0 changes nothing.
        let other = try fixture.driver.inboundGroupSession(sessionKey: firstKey)
        try await laptop.store.saveInboundSession(
            CryptoStore.InboundSessionRow(
                roomID: roomID, sessionID: session.sessionID, senderKey: "SOMEONE_ELSE", signingKey: "ed",
                forwarded: false, pickle: try other.pickle(key: pickleKey), firstKnownIndex: 0))
        #expect(
            try await laptop.store.inboundSession(roomID: roomID, sessionID: session.sessionID)?.senderKey == bobCurve)

        // Bob's own m.room_key from index 0 replaces it; the event now decrypts.
        try await shareRoomKey(from: bob, to: laptop, session: session, key: firstKey)
        let stored = try #require(try await laptop.store.inboundSession(roomID: roomID, sessionID: session.sessionID))
        #expect(!stored.forwarded)
        #expect(stored.firstKnownIndex == 0)
        #expect(stored.senderUser == bob.userID)
        let now = try await laptop.engine.decryptRoomEvent(
            roomID: roomID, eventID: "$1", sender: bob.userID, content: contents[1])
        guard case .success? = now else {
            Issue.record("the better key did not decrypt index 1: \(String(describing: now))")
            return
        }
    }

    @Test(
        "A relation travels in the clear: moved out of what is encrypted on send, and put back into the decrypted content"
    )
    func relationInTheClear() async throws {
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        let outbound = try await alice.engine.outboundSession(
            roomID: roomID, choice: .new, nowMilliseconds: 0)
        let edit =
            #"{"msgtype":"m.text","body":"* hi","m.new_content":{"msgtype":"m.text","body":"hi"},"m.relates_to":{"rel_type":"m.replace","event_id":"$original"}}"#
        let encrypted = try await alice.engine.megolmEncrypt(
            roomID: roomID, sessionID: outbound.sessionID, eventType: "m.room.message", content: Array(edit.utf8))
        guard case .object(let outer) = try JSONValue(parsing: encrypted),
            case .string(let ciphertext)? = outer["ciphertext"]
        else { throw TestFailure("not an encrypted content") }
        let relation = JSONValue.object(["rel_type": .string("m.replace"), "event_id": .string("$original")])
        #expect(outer["m.relates_to"] == relation)
        // What is encrypted no longer holds it.
        let inbound = try fixture.driver.inboundGroupSession(sessionKey: outbound.key)
        let payload = try JSONValue(parsing: try inbound.decrypt(ciphertext).plaintext.exposedValue)
        guard case .object(let members) = payload, case .object(let inner)? = members["content"] else {
            throw TestFailure("no content in the payload")
        }
        #expect(inner["m.relates_to"] == nil)
        // Decrypted, the event has its relation again.
        let decrypted = try await alice.engine.decryptRoomEvent(
            roomID: roomID, eventID: "$edit", sender: alice.userID, content: encrypted)
        guard case .success(let event)? = decrypted, case .object(let content) = try JSONValue(parsing: event.content)
        else { throw TestFailure("not decrypted: \(String(describing: decrypted))") }
        #expect(content["m.relates_to"] == relation)
        #expect(content["m.new_content"] != nil)
    }

    @Test("An event met before the account is loaded waits (like a missing key) instead of being refused for good")
    func decryptBeforeLoad() async throws {
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        let session = try fixture.driver.newOutboundGroupSession()
        let content = try bobsMessages(session, count: 1)[0]
        // A second engine over the same store, not loaded yet (a start whose first sync came first).
        let starting = CryptoEngine(driver: fixture.driver, store: alice.store, userID: alice.userID, deviceID: "ALICE")
        let result = try await starting.decryptRoomEvent(
            roomID: roomID, eventID: "$early", sender: "@bob:example.org", content: content)
        #expect(result == nil, "refused: \(String(describing: result))")
    }
}
