import Foundation
import SymorvaChatStore
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import Testing

@testable import SymorvaE2EE

/// Whether a decrypted event's device is known must not depend on whether the machine's own
/// query of a new member answered first.
@Suite("The sending device of a decrypted event")
struct SendingDeviceTests {
    let alice = UserID("@alice:example.org")
    let bob = UserID("@bob:example.org")
    let driver = OlmCryptoDriver()
    let roomID = RoomID("!room:example.org")

    /// A wall clock the test moves.
    final class MovingClock: WallClock, Sendable {
        let milliseconds = Lock<Int64>(1_000_000)
        var now: Timestamp { Timestamp(millisecondsSince1970: milliseconds.withLock { $0 }) }
        func advance(_ delta: Int64) { milliseconds.withLock { $0 += delta } }
    }

    @Test(
        "A sender not tracked yet is queried (by the machine's one keys/query) before the event is decrypted; while the query fails the event waits without a query each, and the machine's retry names the device"
    )
    func senderQueriedFirst() async throws {
        // Bob: a device with signed keys, and a Megolm session of his.
        let bobDatabase = try await SQLiteDatabase.open(path: ":memory:", migrations: ChatSchema.migrations)
        let bobStore = try await CryptoStore.migrating(on: bobDatabase, userID: bob, key: try SecretBox.generateKey())
        let bobEngine = CryptoEngine(driver: driver, store: bobStore, userID: bob, deviceID: "BOBPHONE")
        _ = try await bobEngine.load()
        let upload = try JSONValue(
            parsing: try #require(try await bobEngine.prepareUpload(KeyUploadPlan(deviceKeys: true)).body))
        guard case .object(let top) = upload, let deviceKeys = top["device_keys"] else {
            Issue.record("no device keys")
            return
        }
        let bobKeys = try #require(await bobEngine.identityKeys)
        let answer = String(
            decoding: try JSONValue.object([
                "device_keys": .object([bob.rawValue: .object(["BOBPHONE": deviceKeys])])
            ]).canonicalEncoding(), as: UTF8.self)

        let wallClock = MovingClock()
        // The homeserver answers keys/query with 502 until told otherwise.
        let healthy = Lock(false)
        let transport = ScriptedHTTPTransport()
        transport.on("POST", "/_matrix/client/v3/keys/query") { _ in
            healthy.withLock { $0 } ? .json(200, answer) : .json(502, #"{"errcode": "M_UNKNOWN"}"#)
        }
        transport.on("POST", "/_matrix/client/v3/keys/upload") { _ in
            .json(200, #"{"one_time_key_counts": {"signed_curve25519": 50}}"#)
        }
        let clock = ManualClock()
        let database = try await SQLiteDatabase.open(path: ":memory:", migrations: ChatSchema.migrations)
        try await database.migrate(feature: CryptoStore.feature, CryptoStore.migrations)
        let crypto = try await AccountCrypto(
            userID: alice, deviceID: DeviceID("ALICEPHONE"), database: database,
            secretsKey: try SecretBox.generateKey(),
            requester: FixedTokenMatrixRequester(
                homeserverURL: HomeserverURL("https://matrix.example.org")!, userID: alice,
                accessToken: Secret("token"), transport: transport),
            scope: AccountScope(label: alice.rawValue), clock: clock, wallClock: wallClock,
            tracer: Tracer(), logCenter: LogCenter(threshold: .trace),
            // The trust of a device not cross-signed is returned (the strict default refuses the
            // event: StrictSenderTests).
            roomKeyPolicy: .crossSignedWhenAvailable)
        await crypto.start()
        try await crypto.state.wait {
            if case .ready = $0 { return true }
            return false
        }

        // Alice holds Bob's session (as an m.room_key from his device would have left it).
        let session = try driver.newOutboundGroupSession()
        let pickleKey = try #require(await crypto.engine.pickleKey)
        try await crypto.store.saveInboundSession(
            CryptoStore.InboundSessionRow(
                roomID: roomID.rawValue, sessionID: session.sessionID, senderKey: bobKeys.curve25519,
                signingKey: bobKeys.ed25519, forwarded: false,
                pickle: try driver.inboundGroupSession(sessionKey: try session.sessionKey()).pickle(key: pickleKey)))
        let plaintext = try JSONValue.object([
            "type": .string("m.room.message"), "room_id": .string(roomID.rawValue),
            "content": .object(["msgtype": .string("m.text"), "body": .string("hello")]),
        ]).canonicalEncoding()
        let content = try JSONValue.object([
            "algorithm": .string("m.megolm.v1.aes-sha2"), "ciphertext": .string(try session.encrypt(Secret(plaintext))),
            "device_id": .string("BOBPHONE"), "sender_key": .string(bobKeys.curve25519),
            "session_id": .string(session.sessionID),
        ]).canonicalEncoding()

        // The query fails: the event is not decrypted for good with an unknown device.
        let retries = Lock(0)
        crypto.onRoomKeysStored { retries.withLock { $0 += 1 } }
        let eventID = EventID("$event")
        #expect(await crypto.decrypt(content: content, roomID: roomID, eventID: eventID, sender: bob) == nil)
        #expect(transport.count("POST", "/_matrix/client/v3/keys/query") == 1)
        #expect(retries.withLock { $0 } == 0)
        // More of his events moments later wait too, without a query each.
        wallClock.advance(CryptoEngine.senderQueryRetryMilliseconds - 1)
        #expect(await crypto.decrypt(content: content, roomID: roomID, eventID: eventID, sender: bob) == nil)
        #expect(transport.count("POST", "/_matrix/client/v3/keys/query") == 1)

        // The machine backs off and queries again when its timer fires: that query names Bob's
        // device and asks chat to decrypt again.
        healthy.withLock { $0 = true }
        try await clock.waitForSleepers(count: 1)
        await clock.advance(by: .seconds(600))
        try await crypto.state.wait {
            if case .ready(let work) = $0 { return work.querying == nil && work.outdated.isEmpty }
            return false
        }
        #expect(retries.withLock { $0 } == 1, "the query that answered asks chat to decrypt again")
        guard
            case .success(let decrypted)? = await crypto.decrypt(
                content: content, roomID: roomID, eventID: eventID, sender: bob)
        else {
            Issue.record("not decrypted")
            return
        }
        #expect(decrypted.deviceID == "BOBPHONE")
        #expect(decrypted.isKnown)
        #expect(decrypted.trust == .unverified, "Bob has no cross-signing identity: not cross-signed")
        #expect(transport.count("POST", "/_matrix/client/v3/keys/query") == 2)

        // Known now: the next event of his is not queried again.
        _ = await crypto.decrypt(content: content, roomID: roomID, eventID: eventID, sender: bob)
        #expect(transport.count("POST", "/_matrix/client/v3/keys/query") == 2)
    }
}
