import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import Testing

@testable import SymorvaE2EE

/// Every change to an Olm or Megolm session happens in one critical section from load to
/// durable save: concurrent sends and receives on the same session never lose an update (which
/// would reuse a message key).
@Suite("Session changes are serialised")
struct SessionSerialisationTests {
    let fixture = EngineFixture()
    let roomID = "!room:example.org"

    /// The message indexes of Megolm contents, read with an inbound copy of the session.
    func indexes(of contents: [[UInt8]], key: Secret<String>) throws -> [Int] {
        let inbound = try fixture.driver.inboundGroupSession(sessionKey: key)
        return try contents.map { content in
            guard case .object(let members) = try JSONValue(parsing: content),
                case .string(let ciphertext)? = members["ciphertext"]
            else { throw TestFailure("not a Megolm content") }
            return try inbound.decrypt(ciphertext).messageIndex
        }
    }

    @Test("Concurrent encryptions for one room never use a Megolm message index twice")
    func concurrentMegolmEncryptions() async throws {
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        let outbound = try await alice.engine.outboundSession(
            roomID: roomID, choice: .new, nowMilliseconds: 0)
        let engine = alice.engine
        let room = roomID
        let contents = try await withThrowingTaskGroup(of: [UInt8].self) { group in
            for index in 0..<24 {
                group.addTask {
                    try await engine.megolmEncrypt(
                        roomID: room, sessionID: outbound.sessionID, eventType: "m.room.message",
                        content: Array(#"{"body":"\#(index)"}"#.utf8))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let used = try indexes(of: contents, key: outbound.key)
        #expect(Set(used).count == contents.count, "message indexes used: \(used.sorted())")
        #expect(try await alice.store.outboundSession(roomID: roomID)?.messageCount == contents.count)
    }

    @Test("Concurrent Olm encryptions to one device each advance the session: the device reads them all")
    func concurrentOlmEncryptions() async throws {
        let bob = try await fixture.device("@bob:example.org", "BOB")
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        try await fixture.introduce(alice, bob)
        try await fixture.connect(bob, to: alice)
        let aliceDevice = try await alice.listed()
        let engine = bob.engine
        let sessions = try (0..<12).map { _ in try fixture.driver.newOutboundGroupSession() }
        let keyed = try sessions.map { ($0.sessionID, try $0.sessionKey()) }
        let contents = try await withThrowingTaskGroup(of: JSONValue?.self) { group in
            for (index, (sessionID, key)) in keyed.enumerated() {
                group.addTask {
                    let shared = try await engine.roomKeyMessages(
                        roomID: "!room\(index):example.org", sessionID: sessionID, key: key, for: [aliceDevice],
                        nowMilliseconds: 0)
                    return shared.messages["@alice:example.org"]?["ALICE"]
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for content in contents {
            try await fixture.deliver(sender: bob.userID, content: try #require(content), to: alice)
        }
        _ = try await alice.engine.processToDevice(nowMilliseconds: 0)
        for (index, session) in sessions.enumerated() {
            #expect(
                try await alice.store.inboundSession(roomID: "!room\(index):example.org", sessionID: session.sessionID)
                    != nil, "room key \(index) lost")
        }
    }

    @Test("Receiving on an Olm session while sending on it loses neither the received ratchet nor the sent one")
    func receiveWhileSending() async throws {
        let bob = try await fixture.device("@bob:example.org", "BOB")
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        try await fixture.introduce(alice, bob)
        try await fixture.connect(bob, to: alice)
        let aliceDevice = try await alice.listed()
        let bobDevice = try await bob.listed()

        // Alice reads Bob's first message, so both ends hold the session; then she answers a few times.
        func share(from sender: EngineFixture.Device, to device: CryptoStore.Device, room: String) async throws
            -> JSONValue
        {
            let session = try fixture.driver.newOutboundGroupSession()
            let shared = try await sender.engine.roomKeyMessages(
                roomID: room, sessionID: session.sessionID, key: try session.sessionKey(), for: [device],
                nowMilliseconds: 0)
            return try #require(shared.messages[device.userID.rawValue]?[device.deviceID])
        }
        try await fixture.deliver(
            sender: bob.userID, content: try await share(from: bob, to: aliceDevice, room: "!first:x"), to: alice)
        _ = try await alice.engine.processToDevice(nowMilliseconds: 0)
        for index in 0..<6 {
            try await fixture.deliver(
                sender: alice.userID, content: try await share(from: alice, to: bobDevice, room: "!a\(index):x"),
                to: bob)
        }

        // Bob receives Alice's messages while he sends to her on the same session.
        let engine = bob.engine
        let sent = try await withThrowingTaskGroup(of: JSONValue?.self) { group in
            group.addTask {
                _ = try await engine.processToDevice(nowMilliseconds: 0)
                return nil
            }
            for index in 0..<6 {
                group.addTask {
                    let session = try OlmCryptoDriver().newOutboundGroupSession()
                    let shared = try await engine.roomKeyMessages(
                        roomID: "!b\(index):x", sessionID: session.sessionID, key: try session.sessionKey(),
                        for: [aliceDevice], nowMilliseconds: 0)
                    return shared.messages["@alice:example.org"]?["ALICE"]
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }.compactMap { $0 }
        }
        // Then each side sends once more over what it stored.
        let last = try await share(from: bob, to: aliceDevice, room: "!last:x")
        for content in sent + [last] { try await fixture.deliver(sender: bob.userID, content: content, to: alice) }
        _ = try await alice.engine.processToDevice(nowMilliseconds: 0)
        let stored = try await alice.database.run { db throws(StoreError) in
            try db.queryAll("SELECT room_id FROM e2ee_inbound_group_sessions ORDER BY room_id") { $0.string(0) }
        }
        #expect(stored.filter { $0.hasPrefix("!b") || $0 == "!last:x" }.count == 7, "Bob's keys Alice read: \(stored)")
        #expect(
            try await bob.database.run { db throws(StoreError) in
                try db.queryOne("SELECT COUNT(*) FROM e2ee_inbound_group_sessions WHERE room_id LIKE '!a%'") {
                    $0.int(0)
                }
            } == 6)
    }
}
