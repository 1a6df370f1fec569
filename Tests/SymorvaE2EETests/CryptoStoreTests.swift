import SymorvaChatStore
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import Testing

@testable import SymorvaE2EE

@Suite("The crypto store and engine")
struct CryptoStoreTests {
    let user = UserID("@alice:example.org")
    let driver = OlmCryptoDriver()

    func database() async throws -> SQLiteDatabase {
        try await SQLiteDatabase.open(path: ":memory:", migrations: ChatSchema.migrations)
    }

    func engine(on database: SQLiteDatabase, key: Secret<[UInt8]>) async throws -> CryptoEngine {
        let store = try await CryptoStore.migrating(on: database, userID: user, key: key)
        return CryptoEngine(driver: driver, store: store, userID: user, deviceID: "DEVICE")
    }

    @Test("The store never migrates on its own: e2ee tables the account's migrations did not make are refused, typed")
    func refusesUnmigratedTables() async throws {
        let database = try await database()
        let key = try SecretBox.generateKey()
        await #expect(throws: CryptoStoreError.notMigrated(found: 0, expected: CryptoStore.migrations.count)) {
            _ = try await CryptoStore.open(on: database, userID: user, key: key)
        }
        #expect(try await database.schemaVersion(feature: CryptoStore.feature) == 0, "nothing migrated")
        try await database.migrate(feature: CryptoStore.feature, CryptoStore.migrations)
        _ = try await CryptoStore.open(on: database, userID: user, key: key)
    }

    @Test("A new account is stored with its pickle key sealed, and comes back with the same identity keys")
    func accountRoundTrip() async throws {
        let database = try await database()
        let key = try SecretBox.generateKey()
        let first = try await engine(on: database, key: key)
        let status = try await first.load()
        #expect(!status.deviceKeysPublished)
        #expect(status.outdatedUsers == [user], "the account's own devices are tracked")
        let keys = try #require(await first.identityKeys)

        let second = try await engine(on: database, key: key)
        _ = try await second.load()
        #expect(await second.identityKeys == keys)

        // The pickle key is stored sealed: no 32-byte run of it appears in the clear.
        let stored = try await database.run { db throws(StoreError) in
            try db.queryOne("SELECT sealed_pickle_key FROM e2ee_account") { $0.blob(0) }
        }
        #expect(try #require(stored).count > 32)

        // Another secrets key cannot open it.
        let stranger = try await engine(on: database, key: try SecretBox.generateKey())
        await #expect(throws: CryptoStoreError.self) { _ = try await stranger.load() }
    }

    @Test("An upload redone after a crash carries the same one-time keys, not new ones")
    func uploadIsRepeatable() async throws {
        let database = try await database()
        let key = try SecretBox.generateKey()
        let plan = KeyUploadPlan(deviceKeys: true, newOneTimeKeys: 50, rotateFallbackKey: true)
        let first = try await engine(on: database, key: key)
        _ = try await first.load()
        let sent = try await first.prepareUpload(plan)
        // The process dies before the answer; the next one loads the stored account.
        let second = try await engine(on: database, key: key)
        _ = try await second.load()
        let resent = try await second.prepareUpload(plan)
        #expect(sent.body == resent.body)
        let body = try JSONValue(parsing: try #require(sent.body))
        guard case .object(let top) = body, case .object(let oneTime)? = top["one_time_keys"],
            case .object(let fallback)? = top["fallback_keys"]
        else {
            Issue.record("unexpected upload body")
            return
        }
        #expect(oneTime.count == 50)
        #expect(fallback.count == 1)

        // Once answered, the keys are published and the next plan generates new ones.
        try await second.uploadAnswered(includedDeviceKeys: true, nowMilliseconds: 0)
        let third = try await engine(on: database, key: key)
        #expect(try await third.load().deviceKeysPublished)
        let topUp = try JSONValue(
            parsing: try #require(try await third.prepareUpload(KeyUploadPlan(newOneTimeKeys: 5)).body))
        guard case .object(let next) = topUp, case .object(let fresh)? = next["one_time_keys"] else {
            Issue.record("unexpected top-up body")
            return
        }
        #expect(fresh.count == 5)
        #expect(Set(fresh.keys).isDisjoint(with: oneTime.keys))
        #expect(next["device_keys"] == nil)
    }

    @Test("Uploaded device keys verify as a device; a tampered or mislabelled one does not")
    func deviceKeysVerify() async throws {
        let database = try await database()
        let engine = try await engine(on: database, key: try SecretBox.generateKey())
        _ = try await engine.load()
        let body = try JSONValue(
            parsing: try #require(try await engine.prepareUpload(KeyUploadPlan(deviceKeys: true)).body))
        guard case .object(let top) = body, let deviceKeys = top["device_keys"] else {
            Issue.record("no device keys")
            return
        }
        let device = try #require(DeviceKeys.verify(deviceKeys, user: user, deviceID: "DEVICE", driver: driver))
        #expect(device.ed25519 == (await engine.identityKeys)?.ed25519)
        #expect(DeviceKeys.verify(deviceKeys, user: user, deviceID: "OTHER", driver: driver) == nil)
        guard case .object(var members) = deviceKeys else { return }
        members["algorithms"] = .array([.string("m.olm.v1.curve25519-aes-sha2")])
        #expect(DeviceKeys.verify(.object(members), user: user, deviceID: "DEVICE", driver: driver) == nil)
        // Unsigned data is outside the signature.
        guard case .object(var labelled) = deviceKeys else { return }
        labelled["unsigned"] = .object(["device_display_name": .string("Phone")])
        #expect(
            DeviceKeys.verify(.object(labelled), user: user, deviceID: "DEVICE", driver: driver)?.displayName == "Phone"
        )
    }

    @Test("A known device whose keys change is refused and flagged; its old keys stay")
    func keyChangeRefused() async throws {
        let database = try await database()
        let store = try await CryptoStore.migrating(on: database, userID: user, key: try SecretBox.generateKey())
        let bob = UserID("@bob:example.org")
        _ = try await store.track([bob])
        let original = CryptoStore.Device(
            userID: bob, deviceID: "PHONE", curve25519: "c1", ed25519: "e1", displayName: nil, keyChanged: false)
        #expect(try await store.storeQueried([bob: [original]], users: [bob]) == 0)
        #expect(try await store.outdatedUsers().isEmpty)
        var swapped = original
        swapped.ed25519 = "e2"
        #expect(try await store.storeQueried([bob: [swapped]], users: [bob]) == 1)
        let devices = try await store.devices(of: bob)
        #expect(devices.map(\.ed25519) == ["e1"])
        #expect(devices.map(\.keyChanged) == [true])
        // A device gone from the server is forgotten.
        _ = try await store.storeQueried([bob: []], users: [bob])
        #expect(try await store.devices(of: bob).isEmpty)
    }

    @Test("A kept inbound session decrypts in any order, and the same index for another event is a replay")
    func keptInboundSession() async throws {
        let database = try await database()
        let key = try SecretBox.generateKey()
        let store = try await CryptoStore.migrating(on: database, userID: user, key: key)
        let engine = CryptoEngine(driver: driver, store: store, userID: user, deviceID: "DEVICE")
        _ = try await engine.load()
        let account = try #require(try await store.loadAccount())
        let room = "!room:example.org"
        let outbound = try driver.newOutboundGroupSession()
        let inbound = try driver.inboundGroupSession(sessionKey: try outbound.sessionKey())
        try await store.saveInboundSession(
            CryptoStore.InboundSessionRow(
                roomID: room, sessionID: outbound.sessionID, senderKey: "curve", signingKey: "ed", forwarded: false,
                pickle: try inbound.pickle(key: account.pickleKey)))
        var contents: [[UInt8]] = []
        for index in 0..<5 {
            let plaintext = try JSONValue.object([
                "type": .string("m.room.message"), "content": .object(["body": .string("message \(index)")]),
                "room_id": .string(room),
            ]).canonicalEncoding()
            contents.append(
                try JSONValue.object([
                    "algorithm": .string("m.megolm.v1.aes-sha2"),
                    "ciphertext": .string(try outbound.encrypt(Secret(plaintext))),
                    "session_id": .string(outbound.sessionID),
                ]).canonicalEncoding())
        }
        // Later messages first: the kept session's ratchet has moved on past the earlier ones.
        for index in [3, 4, 0, 2, 1] {
            let result = try await engine.decryptRoomEvent(
                roomID: room, eventID: "$e\(index)", sender: user, content: contents[index])
            guard case .success(let event)? = result else {
                Issue.record("message \(index) not decrypted: \(String(describing: result))")
                return
            }
            #expect(String(decoding: event.content, as: UTF8.self) == #"{"body":"message \#(index)"}"#)
        }
        // The same event again is fine; its index under another event ID is a replay.
        guard
            case .success? = try await engine.decryptRoomEvent(
                roomID: room, eventID: "$e2", sender: user, content: contents[2])
        else {
            Issue.record("the same event was refused")
            return
        }
        guard
            case .failure(.replayed)? = try await engine.decryptRoomEvent(
                roomID: room, eventID: "$other", sender: user, content: contents[2])
        else {
            Issue.record("a replay was accepted")
            return
        }
    }
}
