import SymorvaChatStore
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaFeatureKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import Testing

@testable import SymorvaE2EE

/// The crypto store's part of cross-signing (migration 10): the private keys sealed, the pins
/// and their changes, each device's trust level.
@Suite("Cross-signing in the crypto store")
struct CrossSigningStoreTests {
    let alice = UserID("@alice:example.org")
    let bob = UserID("@bob:example.org")
    let driver = OlmCryptoDriver()

    func store(_ database: SQLiteDatabase, key: Secret<[UInt8]>) async throws -> CryptoStore {
        try await CryptoStore.migrating(on: database, userID: alice, key: key)
    }

    func identity(_ user: UserID, master: String, verified: Bool = false) -> UserIdentity {
        UserIdentity(
            userID: user, masterKey: master, selfSigningKey: nil, userSigningKey: nil, masterKeyObject: .object([:]),
            isVerified: verified)
    }

    @Test(
        "The private keys are kept sealed: their seeds appear nowhere in the database, another secrets key cannot open them"
    )
    func privateKeysSealed() async throws {
        let database = try await SQLiteDatabase.open(path: ":memory:", migrations: ChatSchema.migrations)
        let key = try SecretBox.generateKey()
        let store = try await store(database, key: key)
        #expect(try await store.crossSigningKeys() == nil)
        let keys = try CrossSigningKeys(newFor: alice, driver: driver)
        try await store.saveCrossSigningKeys(
            .init(
                masterKey: keys.master.publicKey, masterSeed: keys.master.seed,
                selfSigningSeed: keys.selfSigning.seed, userSigningSeed: keys.userSigning.seed))

        let loaded = try #require(try await store.crossSigningKeys())
        #expect(loaded.masterKey == keys.master.publicKey)
        #expect(try await store.crossSigningMasterKey() == keys.master.publicKey)
        let rebuilt = try CrossSigningKeys(
            userID: alice, masterSeed: loaded.masterSeed, selfSigningSeed: loaded.selfSigningSeed,
            userSigningSeed: loaded.userSigningSeed, driver: driver)
        #expect(rebuilt.master.publicKey == keys.master.publicKey)
        #expect(rebuilt.selfSigning.publicKey == keys.selfSigning.publicKey)
        #expect(rebuilt.userSigning.publicKey == keys.userSigning.publicKey)

        let stored = try await database.run { db throws(StoreError) in
            try db.queryOne(
                "SELECT sealed_master || sealed_self_signing || sealed_user_signing FROM e2ee_cross_signing_keys"
            ) { $0.blob(0) }
        }
        let blob = try #require(stored)
        for seed in [keys.master.seed, keys.selfSigning.seed, keys.userSigning.seed] {
            let bytes = seed.exposedValue
            #expect(!blob.contains(subsequence: bytes), "a seed is stored in the clear")
        }
        let stranger = try await CryptoStore.open(on: database, userID: alice, key: try SecretBox.generateKey())
        await #expect(throws: CryptoStoreError.self) { _ = try await stranger.crossSigningKeys() }

        try await store.forgetCrossSigningKeys()
        #expect(try await store.crossSigningKeys() == nil)
    }

    @Test(
        "A master key is pinned on first sight; another one is a change until acknowledged; the pinned one again clears it"
    )
    func pins() async throws {
        let database = try await SQLiteDatabase.open(path: ":memory:", migrations: ChatSchema.migrations)
        let store = try await store(database, key: try SecretBox.generateKey())
        _ = try await store.track([bob])
        _ = try await store.storeQueried([:], users: [bob], identities: [bob: identity(bob, master: "K1")])
        #expect(
            try await store.identity(of: bob) == .init(pinnedMasterKey: "K1", changedMasterKey: nil, verified: false))
        #expect(try await store.changedIdentities() == [])

        _ = try await store.storeQueried([:], users: [bob], identities: [bob: identity(bob, master: "K2")])
        #expect(try await store.changedIdentities() == [bob])
        #expect(try await store.identity(of: bob)?.pinnedMasterKey == "K1", "a change does not move the pin")

        // The server lists the pinned key again: nothing to acknowledge.
        _ = try await store.storeQueried([:], users: [bob], identities: [bob: identity(bob, master: "K1")])
        #expect(try await store.changedIdentities() == [])
        #expect(try await store.acknowledgeIdentity(of: bob) == false)

        _ = try await store.storeQueried([:], users: [bob], identities: [bob: identity(bob, master: "K3")])
        #expect(try await store.acknowledgeIdentity(of: bob))
        #expect(
            try await store.identity(of: bob) == .init(pinnedMasterKey: "K3", changedMasterKey: nil, verified: false))
        #expect(try await store.changedIdentities() == [])

        #expect(try await store.identity(of: bob)?.change == nil)
    }

    @Test(
        "A pinned identity the server stops listing is a change (removed) until acknowledged; acknowledged, the user has none; it coming back clears it"
    )
    func pinnedIdentityDisappears() async throws {
        let database = try await SQLiteDatabase.open(path: ":memory:", migrations: ChatSchema.migrations)
        let store = try await store(database, key: try SecretBox.generateKey())
        _ = try await store.track([bob])
        _ = try await store.storeQueried([:], users: [bob], identities: [bob: identity(bob, master: "K1")])
        // The server lists Bob without any master key: the pin stays, the change is visible.
        _ = try await store.storeQueried([:], users: [bob])
        #expect(try await store.identity(of: bob)?.pinnedMasterKey == "K1")
        #expect(try await store.identity(of: bob)?.change == .removed)
        #expect(try await store.changedIdentities() == [bob])
        // It comes back, the same: nothing to acknowledge.
        _ = try await store.storeQueried([:], users: [bob], identities: [bob: identity(bob, master: "K1")])
        #expect(try await store.identity(of: bob)?.change == nil)
        // Another one after it: replaced.
        _ = try await store.storeQueried([:], users: [bob])
        _ = try await store.storeQueried([:], users: [bob], identities: [bob: identity(bob, master: "K2")])
        #expect(try await store.identity(of: bob)?.change == .replaced)
        _ = try await store.storeQueried([:], users: [bob])
        #expect(try await store.identity(of: bob)?.change == .removed)
        // Acknowledged gone: no pin, nothing changed; the next identity seen is pinned anew.
        #expect(try await store.acknowledgeIdentity(of: bob))
        #expect(try await store.identity(of: bob) == nil)
        #expect(try await store.changedIdentities() == [])
        _ = try await store.storeQueried([:], users: [bob])
        #expect(try await store.identity(of: bob) == nil, "no pin: nothing to lose")
        _ = try await store.storeQueried([:], users: [bob], identities: [bob: identity(bob, master: "K3")])
        #expect(
            try await store.identity(of: bob) == .init(pinnedMasterKey: "K3", changedMasterKey: nil, verified: false))
    }

    @Test("Under crossSignedOnly a user whose identity changed, not acknowledged, gets nothing; acknowledged, again")
    func changedIdentityGetsNothing() async throws {
        let database = try await SQLiteDatabase.open(path: ":memory:", migrations: ChatSchema.migrations)
        let store = try await store(database, key: try SecretBox.generateKey())
        _ = try await store.track([bob])
        let signed = CryptoStore.Device(
            userID: bob, deviceID: "SIGNED", curve25519: "c", ed25519: "e", displayName: nil, keyChanged: false,
            trust: .crossSigned)
        _ = try await store.storeQueried([:], users: [bob], identities: [bob: identity(bob, master: "K1")])
        let engine = CryptoEngine(driver: OlmCryptoDriver(), store: store, userID: alice, deviceID: "A")
        #expect(try await engine.policyAllows(signed))
        for change in [nil, "K2"] {
            // Pinned K1 (again, after the removal acknowledged below dropped the pin).
            _ = try await store.storeQueried([:], users: [bob], identities: [bob: identity(bob, master: "K1")])
            if let change {
                _ = try await store.storeQueried([:], users: [bob], identities: [bob: identity(bob, master: change)])
            } else {
                _ = try await store.storeQueried([:], users: [bob])
            }
            #expect(try await engine.policyAllows(signed) == false, "changed to \(change ?? "none")")
            #expect(try await store.acknowledgeIdentity(of: bob))
            #expect(try await engine.policyAllows(signed))
        }
    }

    @Test("Each device keeps the trust level of the last query; a device whose keys changed is unverified")
    func trustLevels() async throws {
        let database = try await SQLiteDatabase.open(path: ":memory:", migrations: ChatSchema.migrations)
        let store = try await store(database, key: try SecretBox.generateKey())
        _ = try await store.track([bob])
        func device(_ id: String, ed25519: String, trust: DeviceTrustLevel) -> CryptoStore.Device {
            CryptoStore.Device(
                userID: bob, deviceID: id, curve25519: "c-\(id)", ed25519: ed25519, displayName: nil, keyChanged: false,
                trust: trust)
        }
        _ = try await store.storeQueried(
            [bob: [device("A", ed25519: "a", trust: .crossSigned), device("B", ed25519: "b", trust: .unverified)]],
            users: [bob])
        var stored = try await store.devices(of: bob)
        #expect(stored.map(\.trust) == [.crossSigned, .unverified])

        // B is cross-signed later; A shows other keys (refused, flagged): it loses its level.
        let refused = try await store.storeQueried(
            [bob: [device("A", ed25519: "other", trust: .verified), device("B", ed25519: "b", trust: .verified)]],
            users: [bob])
        #expect(refused == 1)
        stored = try await store.devices(of: bob)
        #expect(stored.map(\.trust) == [.unverified, .verified])
        #expect(stored.map(\.keyChanged) == [true, false])
    }
}

@Suite("The room key policy")
struct RoomKeyPolicyUnitTests {
    let alice = UserID("@alice:example.org")
    let bob = UserID("@bob:example.org")
    let carol = UserID("@carol:example.org")

    @Test(
        "Each policy's devices: cross-signed ones always, others of a user with an identity only under allDevices, a changed key never"
    )
    func policies() async throws {
        let database = try await SQLiteDatabase.open(path: ":memory:", migrations: ChatSchema.migrations)
        let store = try await CryptoStore.migrating(on: database, userID: alice, key: try SecretBox.generateKey())
        // Bob has an identity (pinned); Carol never set one up.
        _ = try await store.storeQueried(
            [:], users: [bob],
            identities: [
                bob: UserIdentity(
                    userID: bob, masterKey: "K", selfSigningKey: nil, userSigningKey: nil,
                    masterKeyObject: .object([:]), isVerified: false)
            ])
        func device(_ user: UserID, _ id: String, _ trust: DeviceTrustLevel, changed: Bool = false)
            -> CryptoStore.Device
        {
            CryptoStore.Device(
                userID: user, deviceID: id, curve25519: "c", ed25519: "e", displayName: nil, keyChanged: changed,
                trust: trust)
        }
        let devices = [
            device(bob, "SIGNED", .crossSigned), device(bob, "INJECTED", .unverified),
            device(carol, "PLAIN", .unverified), device(bob, "CHANGED", .crossSigned, changed: true),
        ]
        let expected: [SymorvaConfiguration.RoomKeyPolicy: [String]] = [
            .crossSignedOnly: ["SIGNED"],
            .crossSignedWhenAvailable: ["SIGNED", "PLAIN"],
            .allDevices: ["SIGNED", "INJECTED", "PLAIN"],
        ]
        for (policy, allowed) in expected {
            let engine = CryptoEngine(
                driver: OlmCryptoDriver(), store: store, userID: alice, deviceID: "A", roomKeyPolicy: policy)
            var got: [String] = []
            for device in devices where try await engine.policyAllows(device) { got.append(device.deviceID) }
            #expect(got == allowed, "\(policy)")
        }
    }
}

extension [UInt8] {
    fileprivate func contains(subsequence: [UInt8]) -> Bool {
        guard !subsequence.isEmpty, subsequence.count <= count else { return false }
        for start in 0...(count - subsequence.count)
        where self[start..<(start + subsequence.count)].elementsEqual(subsequence) {
            return true
        }
        return false
    }
}
