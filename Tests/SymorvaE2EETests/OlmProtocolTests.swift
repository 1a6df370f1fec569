import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import Testing

@testable import SymorvaE2EE

/// Olm sessions and the account under replays, store failures and key queries that a server
/// could not fully answer.
@Suite("Olm sessions, replays and device queries")
struct OlmProtocolTests {
    let fixture = EngineFixture()

    /// The stored Olm sessions of `device` with the device whose Curve25519 key is `peer`.
    func sessions(of device: EngineFixture.Device, with peer: String) async throws -> [[UInt8]] {
        try await device.store.olmSessions(senderKey: peer).map(\.pickle)
    }

    /// A room key from `sender` to `recipient` over their Olm session, as a to-device content.
    func roomKey(from sender: EngineFixture.Device, to recipient: EngineFixture.Device, room: String) async throws
        -> JSONValue
    {
        let session = try fixture.driver.newOutboundGroupSession()
        let device = try await recipient.listed()
        let shared = try await sender.engine.roomKeyMessages(
            roomID: room, sessionID: session.sessionID, key: try session.sessionKey(), for: [device],
            nowMilliseconds: 0)
        return try #require(shared.messages[device.userID.rawValue]?[device.deviceID])
    }

    @Test(
        "A replayed pre-key message (on the kept fallback key) does not start its session again over the advanced one")
    func replayedPreKeyMessage() async throws {
        let bob = try await fixture.device("@bob:example.org", "BOB")
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        try await fixture.introduce(alice, bob)
        try await fixture.connect(bob, to: alice, fallback: true)
        let first = try await roomKey(from: bob, to: alice, room: "!one:x")
        try await fixture.deliver(sender: bob.userID, content: first, to: alice)
        _ = try await alice.engine.processToDevice(nowMilliseconds: 0)
        // Alice answers over the session, which moves her ratchet on.
        try await fixture.deliver(
            sender: alice.userID, content: try await roomKey(from: alice, to: bob, room: "!two:x"), to: bob)
        _ = try await bob.engine.processToDevice(nowMilliseconds: 0)
        let bobCurve = try await bob.keys().curve25519
        let advanced = try await sessions(of: alice, with: bobCurve)
        #expect(advanced.count == 1)

        // Someone replays Bob's first message: it must change nothing.
        try await fixture.deliver(sender: bob.userID, content: first, to: alice)
        #expect(try await alice.engine.processToDevice(nowMilliseconds: 0).processed == 1)
        #expect(try await sessions(of: alice, with: bobCurve) == advanced)

        // The session still works both ways.
        try await fixture.deliver(
            sender: bob.userID, content: try await roomKey(from: bob, to: alice, room: "!three:x"), to: alice)
        try await fixture.deliver(
            sender: alice.userID, content: try await roomKey(from: alice, to: bob, room: "!four:x"), to: bob)
        _ = try await alice.engine.processToDevice(nowMilliseconds: 0)
        _ = try await bob.engine.processToDevice(nowMilliseconds: 0)
        let aliceRooms = try await alice.database.run { db throws(StoreError) in
            try db.queryAll("SELECT room_id FROM e2ee_inbound_group_sessions ORDER BY room_id") { $0.string(0) }
        }
        #expect(aliceRooms.contains("!three:x"))
        let bobRooms = try await bob.database.run { db throws(StoreError) in
            try db.queryAll("SELECT room_id FROM e2ee_inbound_group_sessions ORDER BY room_id") { $0.string(0) }
        }
        #expect(bobRooms.contains("!four:x"))
    }

    @Test("A store failure while applying a pre-key message keeps the event and its one-time key: it is read later")
    func storeFailureKeepsPreKeyMessage() async throws {
        let bob = try await fixture.device("@bob:example.org", "BOB")
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        try await fixture.introduce(alice, bob)
        try await fixture.connect(bob, to: alice)
        try await fixture.deliver(
            sender: bob.userID, content: try await roomKey(from: bob, to: alice, room: "!r:x"), to: alice)

        // The disk refuses the write once.
        try await alice.database.run { db throws(StoreError) in
            try db.execute(
                "CREATE TEMP TRIGGER refuse BEFORE INSERT ON e2ee_olm_sessions BEGIN SELECT RAISE(ABORT, 'full'); END")
        }
        await #expect(throws: CryptoStoreError.self) { _ = try await alice.engine.processToDevice(nowMilliseconds: 0) }
        try await alice.database.run { db throws(StoreError) in try db.execute("DROP TRIGGER refuse") }

        #expect(try await alice.engine.processToDevice(nowMilliseconds: 0).processed == 1)
        let stored = try await alice.database.run { db throws(StoreError) in
            try db.queryOne("SELECT COUNT(*) FROM e2ee_inbound_group_sessions WHERE room_id = '!r:x'") { $0.int(0) }
        }
        #expect(stored == 1)
    }

    @Test("Only the most recently used Olm sessions with one device are kept")
    func olmSessionsPruned() async throws {
        let bob = try await fixture.device("@bob:example.org", "BOB")
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        try await fixture.introduce(alice, bob)
        for _ in 0..<(CryptoStore.olmSessionsPerDevice + 4) { try await fixture.connect(bob, to: alice) }
        let aliceCurve = try await alice.keys().curve25519
        #expect(try await sessions(of: bob, with: aliceCurve).count == CryptoStore.olmSessionsPerDevice)
        // The newest one is among them: a message over it reaches Alice.
        try await fixture.deliver(
            sender: bob.userID, content: try await roomKey(from: bob, to: alice, room: "!r:x"), to: alice)
        _ = try await alice.engine.processToDevice(nowMilliseconds: 0)
        let rooms = try await alice.database.run { db throws(StoreError) in
            try db.queryAll("SELECT room_id FROM e2ee_inbound_group_sessions") { $0.string(0) }
        }
        #expect(rooms == ["!r:x"])
    }

    @Test(
        "A keys/query whose answer names a user's server in failures leaves that user outdated with the devices they had"
    )
    func queryFailuresKeepDevices() async throws {
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        let carol = try await fixture.device("@carol:remote.example", "CAROL")
        let dave = try await fixture.device("@dave:example.org", "DAVE")
        try await fixture.introduce(alice, carol)
        try await fixture.introduce(alice, dave)
        let carolID = carol.userID
        let daveID = dave.userID
        _ = try await alice.store.track([carolID, daveID])
        try await alice.database.run { db throws(StoreError) in
            try db.execute("UPDATE e2ee_tracked_users SET outdated = 1")
        }

        // The server answers for Dave (who now has no device) but could not reach Carol's server.
        let answer = #"{"device_keys": {"@dave:example.org": {}}, "failures": {"remote.example": {"status": 503}}}"#
        let transport = ScriptedHTTPTransport()
        transport.on("POST", "/_matrix/client/v3/keys/query") { _ in .json(200, answer) }
        let interpreter = CryptoInterpreter(
            engine: alice.engine,
            requester: FixedTokenMatrixRequester(
                homeserverURL: HomeserverURL("https://example.org")!, userID: alice.userID,
                accessToken: Secret("token"), transport: transport),
            wallClock: SystemWallClock(), logger: Logger(category: "test", center: LogCenter(threshold: .trace)))
        let report = try await interpreter.query([carolID, daveID]).get()
        #expect(report.users == [daveID])
        #expect(report.unanswered == [carolID])
        #expect(try await alice.store.devices(of: carolID).map(\.deviceID) == ["CAROL"])
        #expect(try await alice.store.isOutdated(carolID))
        #expect(try await alice.store.devices(of: daveID).isEmpty)
        #expect(!(try await alice.store.isOutdated(daveID)))
    }

    @Test("A replaced fallback key still starts sessions for an hour after the new one is published, then is forgotten")
    func oldFallbackKeyForgotten() async throws {
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        let bob = try await fixture.device("@bob:example.org", "BOB")
        let carol = try await fixture.device("@carol:example.org", "CAROL")
        try await fixture.introduce(alice, bob)
        try await fixture.introduce(alice, carol)
        // Bob and Carol both claimed Alice's first fallback key; then she replaces it at t = 10 s.
        let first = try await fixture.claimKey(of: alice, fallback: true, nowMilliseconds: 0)
        let aliceDevice = try await alice.listed()
        #expect(try await bob.engine.createSessions([(aliceDevice, first)], nowMilliseconds: 0) == 1)
        #expect(try await carol.engine.createSessions([(aliceDevice, first)], nowMilliseconds: 0) == 1)
        _ = try await fixture.claimKey(of: alice, fallback: true, nowMilliseconds: 10_000)

        // Half an hour later Bob's pre-key message on the old key is read.
        try await fixture.deliver(
            sender: bob.userID, content: try await roomKey(from: bob, to: alice, room: "!bob:x"), to: alice)
        _ = try await alice.engine.processToDevice(nowMilliseconds: 1_800_000)
        // An hour after the new key was published the old one is forgotten: Carol's is not read.
        _ = try await alice.engine.processToDevice(nowMilliseconds: 3_610_000)
        try await fixture.deliver(
            sender: carol.userID, content: try await roomKey(from: carol, to: alice, room: "!carol:x"), to: alice)
        _ = try await alice.engine.processToDevice(nowMilliseconds: 3_620_000)
        let rooms = try await alice.database.run { db throws(StoreError) in
            try db.queryAll("SELECT room_id FROM e2ee_inbound_group_sessions ORDER BY room_id") { $0.string(0) }
        }
        #expect(rooms == ["!bob:x"])
    }

    @Test("A room key from a device not known yet is held until a keys/query lists the device; otherwise it is dropped")
    func roomKeyFromUnknownDeviceHeld() async throws {
        let bob = try await fixture.device("@bob:example.org", "BOB")
        let bobsOther = try await fixture.device("@bob:example.org", "BOB2")
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        // Bob's devices know Alice's; Alice knows none of Bob's yet.
        for device in [bob, bobsOther] {
            _ = try await device.store.storeQueried([alice.userID: [try await alice.listed()]], users: [alice.userID])
            try await fixture.connect(device, to: alice)
        }
        try await fixture.deliver(
            sender: bob.userID, content: try await roomKey(from: bob, to: alice, room: "!one:x"), to: alice)
        let report = try await alice.engine.processToDevice(nowMilliseconds: 0)
        #expect(report.heldForUsers == [bob.userID])
        #expect(try await alice.store.isOutdated(bob.userID), "Bob is queried")
        func stored() async throws -> [String] {
            try await alice.database.run { db throws(StoreError) in
                try db.queryAll("SELECT room_id FROM e2ee_inbound_group_sessions ORDER BY room_id") { $0.string(0) }
            }
        }
        #expect(try await stored().isEmpty, "not used before the device is known")

        // The answer lists BOB: his key is used. A key from BOB2, which the answer does not list, is not.
        try await fixture.deliver(
            sender: bob.userID, content: try await roomKey(from: bobsOther, to: alice, room: "!two:x"), to: alice)
        _ = try await alice.engine.processToDevice(nowMilliseconds: 0)
        _ = try await alice.store.storeQueried([bob.userID: [try await bob.listed()]], users: [bob.userID])
        try await alice.engine.releaseHeldRoomKeys(of: [bob.userID])
        #expect(try await stored() == ["!one:x"])
        #expect(
            try await alice.store.inboundSession(roomID: "!one:x", sessionID: try sessionID(in: alice, room: "!one:x"))?
                .senderUser == bob.userID)
        let held = try await alice.database.run { db throws(StoreError) in
            try db.queryOne("SELECT COUNT(*) FROM e2ee_held_room_keys") { $0.int(0) }
        }
        #expect(held == 0)
    }

    /// The session ID of the one inbound session of `room` on `device`.
    func sessionID(in device: EngineFixture.Device, room: String) async throws -> String {
        try #require(
            try await device.database.run { db throws(StoreError) in
                try db.queryOne("SELECT session_id FROM e2ee_inbound_group_sessions WHERE room_id = ?", [.text(room)]) {
                    $0.string(0)
                }
            })
    }

    /// A wall clock at a fixed time.
    struct FixedClock: WallClock {
        let milliseconds: Int64
        var now: Timestamp { Timestamp(millisecondsSince1970: milliseconds) }
    }

    @Test(
        "A device whose Olm message no session reads gets a new session and an m.dummy over it, once an hour at most; its next message reads"
    )
    func unwedging() async throws {
        let bob = try await fixture.device("@bob:example.org", "BOB")
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        try await fixture.introduce(alice, bob)
        try await fixture.connect(bob, to: alice)
        try await fixture.deliver(
            sender: bob.userID, content: try await roomKey(from: bob, to: alice, room: "!one:x"), to: alice)
        _ = try await alice.engine.processToDevice(nowMilliseconds: 1_000)

        // Alice loses her session with Bob: his next message cannot be read.
        try await alice.database.run { db throws(StoreError) in try db.execute("DELETE FROM e2ee_olm_sessions") }
        try await fixture.deliver(
            sender: bob.userID, content: try await roomKey(from: bob, to: alice, room: "!two:x"), to: alice)
        let report = try await alice.engine.processToDevice(nowMilliseconds: 2_000)
        #expect(report.sessionsWedged)

        // Unwedging: one keys/claim for Bob's device, then an m.dummy over the new session.
        let signed = try await fixture.claimKey(of: bob)
        let claimAnswer = String(
            decoding: try JSONValue.object([
                "one_time_keys": .object([
                    bob.userID.rawValue: .object(["BOB": .object(["signed_curve25519:AAAAAQ": signed])])
                ])
            ]).canonicalEncoding(), as: UTF8.self)
        let sent = RoomKeySharingTests.SentBodies()
        let transport = ScriptedHTTPTransport()
        transport.on("POST", "/_matrix/client/v3/keys/claim") { _ in .json(200, claimAnswer) }
        transport.on("PUT", pathPrefix: "/_matrix/client/v3/sendToDevice/m.room.encrypted/") { request in
            if let body = try? JSONValue(parsing: request.body) { sent.withLock { $0.append(body) } }
            return .json(200, "{}")
        }
        let interpreter = CryptoInterpreter(
            engine: alice.engine,
            requester: FixedTokenMatrixRequester(
                homeserverURL: HomeserverURL("https://example.org")!, userID: alice.userID,
                accessToken: Secret("token"), transport: transport),
            wallClock: FixedClock(milliseconds: 3_000),
            logger: Logger(category: "test", center: LogCenter(threshold: .trace)))
        #expect(try await interpreter.unwedgeSessions().get() == 1)
        let body = try #require(sent.withLock { $0.first })
        guard case .object(let top) = body, case .object(let messages)? = top["messages"],
            case .object(let toBob)? = messages[bob.userID.rawValue], let dummy = toBob["BOB"]
        else { throw TestFailure("no message to Bob: \(body)") }
        try await fixture.deliver(sender: alice.userID, content: dummy, to: bob)
        _ = try await bob.engine.processToDevice(nowMilliseconds: 4_000)

        // Bob's next message goes over the new session, and Alice reads it.
        let session = try fixture.driver.newOutboundGroupSession()
        let shared = try await bob.engine.roomKeyMessages(
            roomID: "!three:x", sessionID: session.sessionID, key: try session.sessionKey(),
            for: [try await alice.listed()], nowMilliseconds: 5_000)
        try await fixture.deliver(
            sender: bob.userID, content: try #require(shared.messages[alice.userID.rawValue]?["ALICE"]), to: alice)
        _ = try await alice.engine.processToDevice(nowMilliseconds: 6_000)
        #expect(try await alice.store.inboundSession(roomID: "!three:x", sessionID: session.sessionID) != nil)

        // Within the hour another unreadable message starts nothing new.
        try await alice.database.run { db throws(StoreError) in try db.execute("DELETE FROM e2ee_olm_sessions") }
        try await fixture.deliver(
            sender: bob.userID, content: try await roomKey(from: bob, to: alice, room: "!four:x"), to: alice)
        #expect(!(try await alice.engine.processToDevice(nowMilliseconds: 7_000).sessionsWedged))
        #expect(!(try await alice.store.hasWedgedDevices()))
    }

    @Test("A device that starts a new Olm session with us gets the rooms' current keys again with their next message")
    func newSessionResharesKeys() async throws {
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        let bob = try await fixture.device("@bob:example.org", "BOB")
        try await fixture.introduce(alice, bob)
        let bobDevice = try await bob.listed()
        let room = "!room:x"
        let outbound = try await alice.engine.outboundSession(roomID: room, choice: .new, nowMilliseconds: 0)
        try await alice.engine.markShared(roomID: room, sessionID: outbound.sessionID, with: [bobDevice])
        let line = CryptoEngine.line(bobDevice)
        #expect(try await alice.store.outboundSession(roomID: room)?.sharedWith == [line])

        // Bob lost what he had and starts a new session with Alice (an m.dummy over it).
        try await fixture.connect(bob, to: alice)
        let dummy = try await bob.engine.olmMessages(
            .object(["type": .string("m.dummy"), "content": .object([:])]), for: [try await alice.listed()],
            nowMilliseconds: 0)
        try await fixture.deliver(
            sender: bob.userID, content: try #require(dummy.messages[alice.userID.rawValue]?["ALICE"]), to: alice)
        _ = try await alice.engine.processToDevice(nowMilliseconds: 0)
        let again = try #require(try await alice.store.outboundSession(roomID: room))
        #expect(again.sessionID == outbound.sessionID, "no rotation")
        #expect(again.sharedWith.isEmpty, "Bob gets the key again")
    }
}
