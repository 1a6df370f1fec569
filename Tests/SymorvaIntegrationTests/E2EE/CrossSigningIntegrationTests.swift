import Foundation
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaE2EE
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTransport
import Testing

/// Cross-signing against the real Synapse, which checks every signature it is given: bootstrap
/// (`keys/device_signing/upload`), a device signed by its self-signing key and a user signed by
/// another's user-signing key (`keys/signatures/upload`), the chain read back from `keys/query`
/// at each trust level, a device the account adds without cross-signing, a forged signature
/// refused, and an identity reset seen as a change of the pinned master key.
@Suite("Cross-signing against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct CrossSigningIntegrationTests {
    let transport = CurlTransport()
    let driver = OlmCryptoDriver()
    let password = "correct horse battery staple"

    /// An account with one device whose self-signed keys are published.
    struct Device {
        let account: RegisteredAccount
        let olm: any CryptoAccount
        var userID: UserID { UserID(account.userID)! }
    }

    /// Sends `endpoint` (its method, its body) as `account`; the status and the parsed answer.
    func send(_ endpoint: MatrixEndpoint, as account: RegisteredAccount) async throws -> (Int, JSONValue) {
        let environment = try #require(DevEnvironment.current)
        let url = environment.homeserverURL.appending(path: endpoint.path)
        let response = try await transport.send(
            .json(
                HTTPMethod(rawValue: endpoint.method.rawValue), url: url, body: endpoint.body ?? [],
                bearerToken: account.accessToken))
        return (response.status, try JSONValue(parsing: response.body))
    }

    /// Publishes self-signed device keys for the account's device.
    func publishDevice(_ account: RegisteredAccount) async throws -> Device {
        let olm = try driver.newAccount()
        let user = UserID(account.userID)!
        let keys = olm.identityKeys
        let deviceID = account.deviceID
        let object = try SignedJSON.sign(
            .object([
                "algorithms": .array([.string("m.olm.v1.curve25519-aes-sha2"), .string("m.megolm.v1.aes-sha2")]),
                "device_id": .string(deviceID), "user_id": .string(user.rawValue),
                "keys": .object([
                    "curve25519:\(deviceID)": .string(keys.curve25519), "ed25519:\(deviceID)": .string(keys.ed25519),
                ]),
            ]), user: user, keyID: "ed25519:\(deviceID)"
        ) { message in olm.sign(message) }
        let (status, _) = try await send(
            try E2EEAPI.upload(deviceKeys: object, oneTimeKeys: [:], fallbackKeys: [:]), as: account)
        #expect(status == 200)
        return Device(account: account, olm: olm)
    }

    /// Uploads `keys` as the account's cross-signing identity, completing the password stage of
    /// user-interactive authentication when Synapse asks for it (it does when replacing keys);
    /// whether it asked.
    @discardableResult
    func uploadIdentity(_ keys: CrossSigningKeys, for device: Device) async throws -> Bool {
        let body = try keys.uploadBody()
        var (status, answer) = try await send(try E2EEAPI.uploadSigningKeys(body), as: device.account)
        let askedForPassword = status == 401
        if askedForPassword {
            guard case .object(let members) = answer, case .string(let session)? = members["session"] else {
                throw IntegrationFailure("401 without a UIA session")
            }
            let auth = JSONValue.object([
                "type": .string("m.login.password"), "session": .string(session), "password": .string(password),
                "identifier": .object(["type": .string("m.id.user"), "user": .string(device.account.userID)]),
            ])
            (status, answer) = try await send(try E2EEAPI.uploadSigningKeys(body, auth: auth), as: device.account)
        }
        #expect(status == 200, "device_signing/upload answered \(status)")
        return askedForPassword
    }

    /// `keys/query` for `users` as `device`.
    func query(_ users: [UserID], as device: Device) async throws -> JSONValue {
        let (status, answer) = try await send(try E2EEAPI.query(users: users), as: device.account)
        #expect(status == 200)
        return answer
    }

    /// The `failures` of a `keys/signatures/upload` answer.
    func uploadSignatures(_ signed: [String: [String: JSONValue]], as device: Device) async throws -> [String:
        JSONValue]
    {
        let (status, answer) = try await send(try E2EEAPI.uploadSignatures(signed), as: device.account)
        #expect(status == 200)
        guard case .object(let members) = answer, case .object(let failures)? = members["failures"] else { return [:] }
        return failures
    }

    func register(_ prefix: String) async throws -> RegisteredAccount {
        try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername(prefix), password: password, in: try #require(DevEnvironment.current),
            transport: transport)
    }

    @Test("Bootstrap, cross-signed and verified devices, an unsigned device, a forged signature, an identity reset")
    func crossSigningChain() async throws {
        // Alice bootstraps and cross-signs her device.
        let alice = try await publishDevice(try await register("xs-alice"))
        let aliceKeys = try CrossSigningKeys(newFor: alice.userID, driver: driver)
        // The first identity of an account needs no password (MSC3967, in Synapse).
        #expect(try await uploadIdentity(aliceKeys, for: alice) == false)
        var answer = try await query([alice.userID], as: alice)
        let aliceDevice = try #require(
            CrossSigningChain.deviceKeys(in: answer, user: alice.userID, deviceID: alice.account.deviceID))
        let failures = try await uploadSignatures(
            [alice.userID.rawValue: [alice.account.deviceID: try aliceKeys.signDevice(aliceDevice)]], as: alice)
        #expect(failures.isEmpty, "Synapse refused the device signature: \(failures.keys)")

        answer = try await query([alice.userID], as: alice)
        var identities = CrossSigningChain.identities(
            in: answer, ownUser: alice.userID, ownMasterKey: aliceKeys.master.publicKey, driver: driver)
        let aliceIdentity = try #require(identities[alice.userID])
        #expect(aliceIdentity.masterKey == aliceKeys.master.publicKey)
        #expect(aliceIdentity.selfSigningKey == aliceKeys.selfSigning.publicKey)
        #expect(aliceIdentity.userSigningKey == aliceKeys.userSigning.publicKey)
        let signedDevice = try #require(
            CrossSigningChain.deviceKeys(in: answer, user: alice.userID, deviceID: alice.account.deviceID))
        #expect(CrossSigningChain.trust(ofDevice: signedDevice, owner: aliceIdentity, driver: driver) == .verified)

        // Synapse checks signatures: a device signature by a key that is not Alice's
        // self-signing key is refused, and nothing is stored.
        let forger = try CrossSigningKeys(newFor: alice.userID, driver: driver)
        let refused = try await uploadSignatures(
            [alice.userID.rawValue: [alice.account.deviceID: try forger.signDevice(aliceDevice)]], as: alice)
        #expect(!refused.isEmpty)

        // Bob bootstraps too; Alice sees his device cross-signed, then verified once her
        // user-signing key signed his master key.
        let bob = try await publishDevice(try await register("xs-bob"))
        let bobKeys = try CrossSigningKeys(newFor: bob.userID, driver: driver)
        try await uploadIdentity(bobKeys, for: bob)
        let bobDevice = try #require(
            CrossSigningChain.deviceKeys(
                in: try await query([bob.userID], as: bob), user: bob.userID, deviceID: bob.account.deviceID))
        #expect(
            try await uploadSignatures(
                [bob.userID.rawValue: [bob.account.deviceID: try bobKeys.signDevice(bobDevice)]], as: bob
            ).isEmpty)

        // A second device of Bob's account that nobody cross-signed (what a server could add).
        var second = try await loginAgain(bob.account)
        second = try await publishDevice(second).account

        answer = try await query([alice.userID, bob.userID], as: alice)
        identities = CrossSigningChain.identities(
            in: answer, ownUser: alice.userID, ownMasterKey: aliceKeys.master.publicKey, driver: driver)
        var bobIdentity = try #require(identities[bob.userID])
        #expect(!bobIdentity.isVerified)
        let bobSigned = try #require(
            CrossSigningChain.deviceKeys(in: answer, user: bob.userID, deviceID: bob.account.deviceID))
        #expect(CrossSigningChain.trust(ofDevice: bobSigned, owner: bobIdentity, driver: driver) == .crossSigned)
        let unsigned = try #require(
            CrossSigningChain.deviceKeys(in: answer, user: bob.userID, deviceID: second.deviceID))
        #expect(CrossSigningChain.trust(ofDevice: unsigned, owner: bobIdentity, driver: driver) == .unverified)

        #expect(
            try await uploadSignatures(
                [
                    bob.userID.rawValue: [
                        bobKeys.master.publicKey: try aliceKeys.signUser(masterKey: bobIdentity.masterKeyObject)
                    ]
                ],
                as: alice
            ).isEmpty)
        answer = try await query([alice.userID, bob.userID], as: alice)
        identities = CrossSigningChain.identities(
            in: answer, ownUser: alice.userID, ownMasterKey: aliceKeys.master.publicKey, driver: driver)
        bobIdentity = try #require(identities[bob.userID])
        #expect(bobIdentity.isVerified)
        #expect(
            CrossSigningChain.trust(
                ofDevice: try #require(
                    CrossSigningChain.deviceKeys(in: answer, user: bob.userID, deviceID: bob.account.deviceID)),
                owner: bobIdentity, driver: driver) == .verified)

        // Bob resets his identity (user-interactive authentication with his password): the
        // master key Alice pinned is no longer his, and nothing of the old chain carries over.
        let pinned = bobIdentity.masterKey
        let reset = try CrossSigningKeys(newFor: bob.userID, driver: driver)
        #expect(try await uploadIdentity(reset, for: bob) == true)
        answer = try await query([bob.userID], as: alice)
        let after = try #require(
            CrossSigningChain.identities(
                in: answer, ownUser: alice.userID, ownMasterKey: aliceKeys.master.publicKey, driver: driver)[bob.userID]
        )
        #expect(after.masterKey == reset.master.publicKey)
        #expect(IdentityPinOutcome.compare(pinned: pinned, current: after.masterKey) == .changed(previous: pinned))
        #expect(
            CrossSigningChain.trust(
                ofDevice: try #require(
                    CrossSigningChain.deviceKeys(in: answer, user: bob.userID, deviceID: bob.account.deviceID)),
                owner: after, driver: driver) == .unverified)
    }

    /// A new device of `account` through `/login` with its password.
    func loginAgain(_ account: RegisteredAccount) async throws -> RegisteredAccount {
        let environment = try #require(DevEnvironment.current)
        let body = JSONValue.object([
            "type": .string("m.login.password"), "password": .string(password),
            "identifier": .object(["type": .string("m.id.user"), "user": .string(account.userID)]),
        ])
        let response = try await transport.send(
            .json(
                .post, url: environment.homeserverURL.appending(path: "/_matrix/client/v3/login"),
                body: try body.canonicalEncoding()))
        guard response.isSuccess, case .object(let members) = try JSONValue(parsing: response.body),
            case .string(let token)? = members["access_token"], case .string(let deviceID)? = members["device_id"]
        else { throw IntegrationFailure("login answered \(response.status)") }
        return RegisteredAccount(userID: account.userID, accessToken: Secret(token), deviceID: deviceID)
    }
}
