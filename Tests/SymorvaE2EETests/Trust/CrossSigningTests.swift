import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaE2EE
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// Cross-signing keys, signed JSON and the signature chain of a `keys/query` answer, with the
/// libolm driver (the integration test `CrossSigningIntegrationTests` checks the same against
/// Synapse, which verifies every signature on upload).
@Suite("Cross-signing and the signature chain")
struct CrossSigningTests {
    let driver = OlmCryptoDriver()
    let alice = UserID("@alice:example.org")
    let bob = UserID("@bob:example.org")

    /// A device's self-signed keys object, as `keys/upload` publishes it.
    func deviceKeys(user: UserID, deviceID: String) throws -> JSONValue {
        let account = try driver.newAccount()
        let keys = account.identityKeys
        let object = JSONValue.object([
            "algorithms": .array([.string("m.olm.v1.curve25519-aes-sha2"), .string("m.megolm.v1.aes-sha2")]),
            "device_id": .string(deviceID), "user_id": .string(user.rawValue),
            "keys": .object([
                "curve25519:\(deviceID)": .string(keys.curve25519), "ed25519:\(deviceID)": .string(keys.ed25519),
            ]),
        ])
        return try SignedJSON.sign(object, user: user, keyID: "ed25519:\(deviceID)") { message in
            account.sign(message)
        }
    }

    /// A `keys/query` answer from uploads: each user's cross-signing keys and devices.
    func answer(_ users: [(UserID, [String: JSONValue]?, [String: JSONValue])]) -> JSONValue {
        var masters: [String: JSONValue] = [:]
        var selfSigning: [String: JSONValue] = [:]
        var userSigning: [String: JSONValue] = [:]
        var devices: [String: JSONValue] = [:]
        for (user, upload, userDevices) in users {
            if let upload {
                masters[user.rawValue] = upload["master_key"]
                selfSigning[user.rawValue] = upload["self_signing_key"]
                userSigning[user.rawValue] = upload["user_signing_key"]
            }
            devices[user.rawValue] = .object(userDevices)
        }
        return .object([
            "device_keys": .object(devices), "master_keys": .object(masters),
            "self_signing_keys": .object(selfSigning), "user_signing_keys": .object(userSigning),
        ])
    }

    @Test("Bootstrap's upload: the master key, and the self-signing and user-signing keys signed by it")
    func uploadBody() throws {
        let keys = try CrossSigningKeys(newFor: alice, driver: driver)
        let body = try keys.uploadBody()
        let master = try #require(body["master_key"])
        #expect(master == CrossSigningKeys.keyObject(user: alice, usage: "master", publicKey: keys.master.publicKey))
        for (name, key) in [("self_signing_key", keys.selfSigning), ("user_signing_key", keys.userSigning)] {
            let object = try #require(body[name])
            #expect(SignedJSON.isSigned(object, by: alice, publicKey: keys.master.publicKey, driver: driver))
            #expect(!SignedJSON.isSigned(object, by: alice, publicKey: key.publicKey, driver: driver))
        }
        // The seeds rebuild the same keys (what recovery from secret storage does).
        let again = try CrossSigningKeys(
            userID: alice, masterSeed: keys.master.seed, selfSigningSeed: keys.selfSigning.seed,
            userSigningSeed: keys.userSigning.seed, driver: driver)
        #expect(try again.uploadBody() == body)
    }

    @Test("Own devices: cross-signed ones are verified with the master key we hold, others unverified")
    func ownDevices() throws {
        let keys = try CrossSigningKeys(newFor: alice, driver: driver)
        let signed = try keys.signDevice(try deviceKeys(user: alice, deviceID: "SIGNED"))
        // Signing keeps the device's own signature.
        #expect(
            SignedJSON.isSigned(
                signed, by: alice, publicKey: try #require(ed25519(of: signed, deviceID: "SIGNED")),
                keyID: "ed25519:SIGNED", driver: driver))
        let injected = try deviceKeys(user: alice, deviceID: "INJECTED")
        let answer = answer([(alice, try keys.uploadBody(), ["SIGNED": signed, "INJECTED": injected])])

        let identities = CrossSigningChain.identities(
            in: answer, ownUser: alice, ownMasterKey: keys.master.publicKey, driver: driver)
        let own = try #require(identities[alice])
        #expect(own.masterKey == keys.master.publicKey)
        #expect(own.selfSigningKey == keys.selfSigning.publicKey)
        #expect(own.userSigningKey == keys.userSigning.publicKey)
        #expect(own.isVerified)
        #expect(CrossSigningChain.trust(ofDevice: signed, owner: own, driver: driver) == .verified)
        #expect(CrossSigningChain.trust(ofDevice: injected, owner: own, driver: driver) == .unverified)

        // Without the master key we hold (a new device before recovery): cross-signed only.
        let unknown = try #require(
            CrossSigningChain.identities(in: answer, ownUser: alice, ownMasterKey: nil, driver: driver)[alice])
        #expect(!unknown.isVerified)
        #expect(CrossSigningChain.trust(ofDevice: signed, owner: unknown, driver: driver) == .crossSigned)
    }

    @Test("Another user: cross-signed devices, verified once our user-signing key signed their master key")
    func otherUser() throws {
        let aliceKeys = try CrossSigningKeys(newFor: alice, driver: driver)
        let bobKeys = try CrossSigningKeys(newFor: bob, driver: driver)
        let bobDevice = try bobKeys.signDevice(try deviceKeys(user: bob, deviceID: "BOBDEV"))
        var bobUpload = try bobKeys.uploadBody()

        var identities = CrossSigningChain.identities(
            in: answer([(alice, try aliceKeys.uploadBody(), [:]), (bob, bobUpload, ["BOBDEV": bobDevice])]),
            ownUser: alice, ownMasterKey: aliceKeys.master.publicKey, driver: driver)
        var bobIdentity = try #require(identities[bob])
        #expect(!bobIdentity.isVerified)
        #expect(CrossSigningChain.trust(ofDevice: bobDevice, owner: bobIdentity, driver: driver) == .crossSigned)

        // Alice verifies Bob: her user-signing key signs his master key.
        bobUpload["master_key"] = try aliceKeys.signUser(masterKey: try #require(bobUpload["master_key"]))
        identities = CrossSigningChain.identities(
            in: answer([(alice, try aliceKeys.uploadBody(), [:]), (bob, bobUpload, ["BOBDEV": bobDevice])]),
            ownUser: alice, ownMasterKey: aliceKeys.master.publicKey, driver: driver)
        bobIdentity = try #require(identities[bob])
        #expect(bobIdentity.isVerified)
        #expect(CrossSigningChain.trust(ofDevice: bobDevice, owner: bobIdentity, driver: driver) == .verified)

        // A user-signing key that is not ours (the master key we hold is another) verifies nobody.
        let stranger = try CrossSigningKeys(newFor: alice, driver: driver)
        identities = CrossSigningChain.identities(
            in: answer([(alice, try aliceKeys.uploadBody(), [:]), (bob, bobUpload, ["BOBDEV": bobDevice])]),
            ownUser: alice, ownMasterKey: stranger.master.publicKey, driver: driver)
        #expect(identities[bob]?.isVerified == false)
    }

    @Test("A self-signing key the master key did not sign, or someone else's keys, count for nothing")
    func brokenChain() throws {
        let keys = try CrossSigningKeys(newFor: bob, driver: driver)
        let impostor = try CrossSigningKeys(newFor: bob, driver: driver)
        var upload = try keys.uploadBody()
        // The server swaps in a self-signing key of its own, signed by another master key.
        upload["self_signing_key"] = try impostor.uploadBody()["self_signing_key"]
        let device = try impostor.signDevice(try deviceKeys(user: bob, deviceID: "EVIL"))
        let identity = try #require(
            CrossSigningChain.identities(
                in: answer([(bob, upload, ["EVIL": device])]), ownUser: alice, ownMasterKey: nil, driver: driver)[bob])
        #expect(identity.selfSigningKey == nil)
        #expect(CrossSigningChain.trust(ofDevice: device, owner: identity, driver: driver) == .unverified)

        // A master key listed under another user, or without the master usage, is no identity.
        var misplaced = try keys.uploadBody()
        misplaced["master_key"] = CrossSigningKeys.keyObject(
            user: alice, usage: "master", publicKey: keys.master.publicKey)
        #expect(
            CrossSigningChain.identities(
                in: answer([(bob, misplaced, [:])]), ownUser: alice, ownMasterKey: nil, driver: driver
            ).isEmpty)
        misplaced["master_key"] = CrossSigningKeys.keyObject(
            user: bob, usage: "self_signing", publicKey: keys.master.publicKey)
        #expect(
            CrossSigningChain.identities(
                in: answer([(bob, misplaced, [:])]), ownUser: alice, ownMasterKey: nil, driver: driver
            ).isEmpty)
    }

    @Test("A changed byte in a signed object breaks its signature")
    func tampering() throws {
        let keys = try CrossSigningKeys(newFor: alice, driver: driver)
        guard case .object(var members) = try keys.signDevice(try deviceKeys(user: alice, deviceID: "D")) else {
            Issue.record("not an object")
            return
        }
        members["device_id"] = JSONValue.string("E")
        #expect(
            !SignedJSON.isSigned(.object(members), by: alice, publicKey: keys.selfSigning.publicKey, driver: driver))
        #expect(throws: CrossSigningError.notSignable) {
            try SignedJSON.sign(.string("x"), user: alice, keyID: "k") { _ throws(CryptoDriverError) in "" }
        }
    }

    @Test("Pins: first sight pins, the same key is unchanged, another key is an identity change")
    func pins() {
        #expect(IdentityPinOutcome.compare(pinned: nil, current: "A") == .firstSeen)
        #expect(IdentityPinOutcome.compare(pinned: "A", current: "A") == .unchanged)
        #expect(IdentityPinOutcome.compare(pinned: "A", current: "B") == .changed(previous: "A"))
    }

    private func ed25519(of device: JSONValue, deviceID: String) -> String? {
        guard case .object(let members) = device, case .object(let keys)? = members["keys"],
            case .string(let key)? = keys["ed25519:\(deviceID)"]
        else { return nil }
        return key
    }
}
