import Foundation
import SymorvaChatStore
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaFeatureKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import Testing

@testable import SymorvaE2EE

/// MSC4153's strict policy (`crossSignedOnly`, the default) on the receiving side: a message from
/// a device its owner did not cross-sign is refused with a typed reason, not shown; the same
/// message from the same device, cross-signed, is shown. The permissive policies show it, marked.
@Suite("Messages from devices not cross-signed under the room key policy")
struct StrictSenderTests {
    let alice = UserID("@alice:example.org")
    let bob = UserID("@bob:example.org")
    let driver = OlmCryptoDriver()
    let roomID = RoomID("!room:example.org")

    /// Bob's device, its Megolm session, and one event of his encrypted with it.
    struct BobsMessage {
        var deviceKeys: JSONValue
        var identityKeys: IdentityKeys
        var sessionID: String
        /// The session's key before the message (index 0), as Bob's `m.room_key` carries it.
        var sessionKey: Secret<String>
        var content: [UInt8]
        /// A second message of the same session (index 1).
        var next: [UInt8]
    }

    func bobsMessage() async throws -> BobsMessage {
        let database = try await SQLiteDatabase.open(path: ":memory:", migrations: ChatSchema.migrations)
        let store = try await CryptoStore.migrating(on: database, userID: bob, key: try SecretBox.generateKey())
        let engine = CryptoEngine(driver: driver, store: store, userID: bob, deviceID: "BOBPHONE")
        _ = try await engine.load()
        let upload = try JSONValue(
            parsing: try #require(try await engine.prepareUpload(KeyUploadPlan(deviceKeys: true)).body))
        guard case .object(let top) = upload, let deviceKeys = top["device_keys"] else {
            throw TestFailure("no device keys")
        }
        let keys = try #require(await engine.identityKeys)
        let session = try driver.newOutboundGroupSession()
        let sessionKey = try session.sessionKey()
        let plaintext = try JSONValue.object([
            "type": .string("m.room.message"), "room_id": .string(roomID.rawValue),
            "content": .object(["msgtype": .string("m.text"), "body": .string("hello")]),
        ]).canonicalEncoding()
        func content() throws -> [UInt8] {
            try JSONValue.object([
                "algorithm": .string("m.megolm.v1.aes-sha2"),
                "ciphertext": .string(try session.encrypt(Secret(plaintext))),
                "device_id": .string("BOBPHONE"), "sender_key": .string(keys.curve25519),
                "session_id": .string(session.sessionID),
            ]).canonicalEncoding()
        }
        let first = try content()
        return BobsMessage(
            deviceKeys: deviceKeys, identityKeys: keys, sessionID: session.sessionID, sessionKey: sessionKey,
            content: first, next: try content())
    }

    /// Alice's crypto under `policy`, whose server answers `keys/query` for Bob with `answer`,
    /// holding Bob's session.
    func alicesCrypto(
        policy: SymorvaConfiguration.RoomKeyPolicy?, answer: String, message: BobsMessage,
        answers: Lock<String>? = nil, queries: Lock<Int>? = nil
    ) async throws -> AccountCrypto {
        let transport = ScriptedHTTPTransport()
        transport.on("POST", "/_matrix/client/v3/keys/query") { request in
            let asksForBob = String(decoding: request.body, as: UTF8.self).contains("@bob:")
            if asksForBob { queries?.withLock { $0 += 1 } }
            return .json(200, answers?.withLock { $0 } ?? answer)
        }
        transport.on("POST", "/_matrix/client/v3/keys/upload") { _ in
            .json(200, #"{"one_time_key_counts": {"signed_curve25519": 50}}"#)
        }
        let database = try await SQLiteDatabase.open(path: ":memory:", migrations: ChatSchema.migrations)
        try await database.migrate(feature: CryptoStore.feature, CryptoStore.migrations)
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL("https://matrix.example.org")!, userID: alice, accessToken: Secret("token"),
            transport: transport)
        let crypto: AccountCrypto
        if let policy {
            crypto = try await AccountCrypto(
                userID: alice, deviceID: DeviceID("ALICEPHONE"), database: database,
                secretsKey: try SecretBox.generateKey(), requester: requester,
                scope: AccountScope(label: alice.rawValue), clock: ManualClock(), wallClock: SystemWallClock(),
                tracer: Tracer(), logCenter: LogCenter(threshold: .trace), roomKeyPolicy: policy)
        } else {
            // The default.
            crypto = try await AccountCrypto(
                userID: alice, deviceID: DeviceID("ALICEPHONE"), database: database,
                secretsKey: try SecretBox.generateKey(), requester: requester,
                scope: AccountScope(label: alice.rawValue), clock: ManualClock(), wallClock: SystemWallClock(),
                tracer: Tracer(), logCenter: LogCenter(threshold: .trace))
        }
        await crypto.start()
        try await crypto.state.wait {
            if case .ready = $0 { return true }
            return false
        }
        let pickleKey = try #require(await crypto.engine.pickleKey)
        try await crypto.store.saveInboundSession(
            CryptoStore.InboundSessionRow(
                roomID: roomID.rawValue, sessionID: message.sessionID,
                senderKey: message.identityKeys.curve25519, signingKey: message.identityKeys.ed25519, forwarded: false,
                pickle: try driver.inboundGroupSession(sessionKey: message.sessionKey).pickle(key: pickleKey)))
        return crypto
    }

    func answer(devices: [String: JSONValue], identity: CrossSigningKeys?) throws -> String {
        var top: [String: JSONValue] = ["device_keys": .object([bob.rawValue: .object(devices)])]
        if let identity {
            let body = try identity.uploadBody()
            top["master_keys"] = .object([bob.rawValue: body["master_key"]!])
            top["self_signing_keys"] = .object([bob.rawValue: body["self_signing_key"]!])
        }
        return String(decoding: try JSONValue.object(top).canonicalEncoding(), as: UTF8.self)
    }

    @Test(
        "By default a message from a device not cross-signed is refused as senderNotCrossSigned; cross-signed, it is shown"
    )
    func strictByDefault() async throws {
        let message = try await bobsMessage()
        // Bob has no identity: his device is not cross-signed.
        let plain = try answer(devices: ["BOBPHONE": message.deviceKeys], identity: nil)
        let strict = try await alicesCrypto(policy: nil, answer: plain, message: message)
        #expect(await strict.engine.roomKeyPolicy == .crossSignedOnly, "the default")
        guard
            case .failure(let refusal)? = await strict.decrypt(
                content: message.content, roomID: roomID, eventID: EventID("$one"), sender: bob)
        else {
            Issue.record("not refused")
            return
        }
        #expect(refusal == .senderNotCrossSigned)

        // Bob with an identity that signed his device: the same message is shown.
        let bobKeys = try CrossSigningKeys(newFor: bob, driver: driver)
        let signed = try answer(
            devices: ["BOBPHONE": try bobKeys.signDevice(message.deviceKeys)], identity: bobKeys)
        let strictSigned = try await alicesCrypto(policy: nil, answer: signed, message: message)
        guard
            case .success(let decrypted)? = await strictSigned.decrypt(
                content: message.content, roomID: roomID, eventID: EventID("$one"), sender: bob)
        else {
            Issue.record("not decrypted")
            return
        }
        #expect(decrypted.trust == .crossSigned)
        #expect(decrypted.deviceID == "BOBPHONE")
    }

    @Test(
        "Before a message from a device listed not cross-signed is refused, its sender is asked about again (once a minute): cross-signed since, it is shown"
    )
    func unverifiedSenderAskedAgain() async throws {
        let message = try await bobsMessage()
        let plain = try answer(devices: ["BOBPHONE": message.deviceKeys], identity: nil)
        let bobKeys = try CrossSigningKeys(newFor: bob, driver: driver)
        let signed = try answer(
            devices: ["BOBPHONE": try bobKeys.signDevice(message.deviceKeys)], identity: bobKeys)
        let answers = Lock(plain)
        let queries = Lock(0)
        let crypto = try await alicesCrypto(
            policy: nil, answer: plain, message: message, answers: answers, queries: queries)
        guard
            case .failure(.senderNotCrossSigned)? = await crypto.decrypt(
                content: message.content, roomID: roomID, eventID: EventID("$one"), sender: bob)
        else {
            Issue.record("the first message was not refused")
            return
        }
        let afterFirst = queries.withLock { $0 }
        // Bob cross-signs his device; Alice has not heard (no device-list change synced yet).
        answers.withLock { $0 = signed }
        guard
            case .success(let decrypted)? = await crypto.decrypt(
                content: message.next, roomID: roomID, eventID: EventID("$two"), sender: bob)
        else {
            Issue.record("the second message was not shown")
            return
        }
        #expect(decrypted.trust == .crossSigned)
        #expect(queries.withLock { $0 } == afterFirst + 1, "asked about Bob once more")
    }

    @Test("The permissive policies show a message from a device not cross-signed, with its trust to mark it")
    func permissiveShowsMarked() async throws {
        let message = try await bobsMessage()
        let plain = try answer(devices: ["BOBPHONE": message.deviceKeys], identity: nil)
        for policy in [SymorvaConfiguration.RoomKeyPolicy.crossSignedWhenAvailable, .allDevices] {
            let crypto = try await alicesCrypto(policy: policy, answer: plain, message: message)
            guard
                case .success(let decrypted)? = await crypto.decrypt(
                    content: message.content, roomID: roomID, eventID: EventID("$one"), sender: bob)
            else {
                Issue.record("not decrypted under \(policy)")
                continue
            }
            #expect(decrypted.trust == .unverified)
        }
    }

    @Test(
        "The refusal is not final: once the sender's devices are queried again (a device-list change) and the device is cross-signed, the same event decrypts; each query tells who it answered for"
    )
    func refusalIsNotFinal() async throws {
        let message = try await bobsMessage()
        let plain = try answer(devices: ["BOBPHONE": message.deviceKeys], identity: nil)
        let bobKeys = try CrossSigningKeys(newFor: bob, driver: driver)
        let signed = try answer(
            devices: ["BOBPHONE": try bobKeys.signDevice(message.deviceKeys)], identity: bobKeys)
        let answers = Lock(plain)
        let crypto = try await alicesCrypto(policy: nil, answer: plain, message: message, answers: answers)
        let queried = Lock<[UserID]>([])
        crypto.onDevicesQueried { users in queried.withLock { $0 += users } }
        guard
            case .failure(.senderNotCrossSigned)? = await crypto.decrypt(
                content: message.content, roomID: roomID, eventID: EventID("$one"), sender: bob)
        else {
            Issue.record("not refused")
            return
        }
        #expect(queried.withLock { $0.contains(bob) }, "chat hears of the query that preceded the refusal")
        queried.withLock { $0 = [] }
        // Bob cross-signs his device; its device-list change syncs.
        answers.withLock { $0 = signed }
        try await crypto.store.markOutdated(bob)
        guard
            case .success(let decrypted)? = await crypto.decrypt(
                content: message.content, roomID: roomID, eventID: EventID("$one"), sender: bob)
        else {
            Issue.record("the refused event was not decrypted again")
            return
        }
        #expect(decrypted.trust == .crossSigned)
        #expect(queried.withLock { $0 } == [bob])
    }
}
