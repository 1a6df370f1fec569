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

/// Devices with their own database, store and engine, and the steps that connect them without
/// a network: what one device sends to another is stored as the other's sync would store it.
struct EngineFixture {
    let driver = OlmCryptoDriver()

    /// One device: its database, crypto store and engine.
    struct Device {
        let userID: UserID
        let deviceID: String
        let database: SQLiteDatabase
        let store: CryptoStore
        let engine: CryptoEngine

        /// This device as another device's store lists it after a `keys/query`.
        func listed() async throws -> CryptoStore.Device {
            let keys = try #require(await engine.identityKeys)
            return CryptoStore.Device(
                userID: userID, deviceID: deviceID, curve25519: keys.curve25519, ed25519: keys.ed25519,
                displayName: nil, keyChanged: false)
        }

        /// The device's identity keys.
        func keys() async throws -> IdentityKeys { try #require(await engine.identityKeys) }
    }

    /// A new device with a loaded (created) account, under `roomKeyPolicy`.
    func device(
        _ user: String, _ deviceID: String,
        roomKeyPolicy: SymorvaConfiguration.RoomKeyPolicy = .crossSignedWhenAvailable
    ) async throws -> Device {
        let userID = try #require(UserID(user))
        let database = try await SQLiteDatabase.open(path: ":memory:", migrations: ChatSchema.migrations)
        let store = try await CryptoStore.migrating(on: database, userID: userID, key: try SecretBox.generateKey())
        // Devices without cross-signing identities: the policy that treats them as before
        // cross-signing (the default, MSC4153's strict one, has its own tests).
        let engine = CryptoEngine(
            driver: driver, store: store, userID: userID, deviceID: deviceID, roomKeyPolicy: roomKeyPolicy)
        _ = try await engine.load()
        return Device(userID: userID, deviceID: deviceID, database: database, store: store, engine: engine)
    }

    /// Each device learns the other's keys (as a `keys/query` would store them).
    func introduce(_ first: Device, _ second: Device) async throws {
        let firstListed = try await first.listed()
        let secondListed = try await second.listed()
        _ = try await first.store.storeQueried([second.userID: [secondListed]], users: [second.userID])
        _ = try await second.store.storeQueried([first.userID: [firstListed]], users: [first.userID])
    }

    /// A signed one-time key (or the fallback key, when `fallback`) of `device`, as `keys/claim`
    /// hands it out, after publishing it.
    func claimKey(of device: Device, fallback: Bool = false, nowMilliseconds: Int64 = 0) async throws -> JSONValue {
        let upload = try JSONValue(
            parsing: try #require(
                try await device.engine.prepareUpload(
                    KeyUploadPlan(newOneTimeKeys: fallback ? 0 : 1, rotateFallbackKey: fallback)
                ).body))
        try await device.engine.uploadAnswered(includedDeviceKeys: false, nowMilliseconds: nowMilliseconds)
        guard case .object(let top) = upload,
            case .object(let keys)? = top[fallback ? "fallback_keys" : "one_time_keys"], let signed = keys.values.first
        else { throw TestFailure("no \(fallback ? "fallback" : "one-time") key in the upload") }
        return signed
    }

    /// An Olm session from `sender` to `recipient` on a claimed key of the recipient's.
    func connect(_ sender: Device, to recipient: Device, fallback: Bool = false) async throws {
        let signed = try await claimKey(of: recipient, fallback: fallback)
        let created = try await sender.engine.createSessions(
            [(try await recipient.listed(), signed)], nowMilliseconds: 0)
        #expect(created == 1)
    }

    /// Stores a to-device event in `device`'s database, as chat's sync ingest does.
    func deliver(type: String = "m.room.encrypted", sender: UserID, content: JSONValue, to device: Device)
        async throws
    {
        let raw = try JSONValue.object([
            "type": .string(type), "sender": .string(sender.rawValue), "content": content,
        ]).canonicalEncoding()
        try await device.database.transaction { db throws(StoreError) in
            try db.execute(
                "INSERT INTO e2ee_inbox_to_device(type, sender, raw) VALUES (?, ?, ?)",
                [.text(type), .text(sender.rawValue), .blob(raw)])
        }
    }

    /// The one Olm message in `content` for `recipient`'s Curve25519 key.
    func olmMessage(in content: JSONValue, for recipient: Device) async throws -> OlmMessage {
        let curve = try await recipient.keys().curve25519
        guard case .object(let members) = content, case .object(let ciphertexts)? = members["ciphertext"],
            case .object(let mine)? = ciphertexts[curve], let type = mine["type"]?.integerValue,
            let kind = OlmMessage.Kind(rawValue: type), case .string(let body)? = mine["body"]
        else { throw TestFailure("no Olm message for the recipient") }
        return OlmMessage(kind: kind, body: body)
    }
}
