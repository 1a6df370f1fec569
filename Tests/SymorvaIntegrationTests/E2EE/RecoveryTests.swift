import Foundation
import SymorvaChat
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTransport
import Testing

/// Cross-signing, secret storage and recovery through the product (`AccountCrypto`), against
/// the real Synapse: bootstrap, a second device restored with the recovery key and cross-signed
/// by the chain Synapse returns, another user's identity reset seen as a change until
/// acknowledged; no recovery key or private key in a log or an unsealed file.
@Suite(
    "Identity and recovery against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct RecoveryTests {
    /// Waits until `crypto`'s identity state is `expected`.
    func waitForIdentity(_ crypto: AccountCrypto, _ expected: IdentityState) async throws {
        try await crypto.identityState.wait(timeout: .seconds(60)) { $0 == expected }
    }

    /// Waits until `crypto` lists `deviceID` of `user` at `trust`.
    func waitForTrust(
        _ crypto: AccountCrypto, user: UserID, deviceID: String, _ trust: DeviceTrustLevel
    ) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            let device = try await crypto.devices(of: user).first { $0.deviceID == deviceID }
            if device?.trust == trust { return }
            guard ContinuousClock.now < deadline else {
                throw IntegrationFailure(
                    "\(deviceID) never \(trust) (now \(device.map { "\($0.trust)" } ?? "unknown"))")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// `keys/query` for `user` as another account, and the trust level Synapse's chain gives
    /// `deviceID` (our own checks, over the answer Synapse returns).
    func chainTrust(of deviceID: String, user: UserID, seenBy observer: RegisteredAccount) async throws
        -> DeviceTrustLevel
    {
        let environment = try #require(DevEnvironment.current)
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL(environment.homeserverURL.absoluteString)!,
            userID: UserID(observer.userID)!, accessToken: observer.accessToken, transport: CurlTransport())
        let answer = try JSONValue(parsing: try await requester.send(try E2EEAPI.query(users: [user])).body)
        let driver = OlmCryptoDriver()
        let identities = CrossSigningChain.identities(
            in: answer, ownUser: UserID(observer.userID)!, ownMasterKey: nil, driver: driver)
        let keys = try #require(CrossSigningChain.deviceKeys(in: answer, user: user, deviceID: deviceID))
        return CrossSigningChain.trust(ofDevice: keys, owner: identities[user], driver: driver)
    }

    /// Every byte of every file under `folder` (databases with their WAL, key files).
    func files(under folder: URL) throws -> [(String, [UInt8])] {
        var result: [(String, [UInt8])] = []
        let enumerator = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.isRegularFileKey])
        while let url = enumerator?.nextObject() as? URL {
            guard (try? url.resourceValues(forKeys: [.isRegularFileKey]))?.isRegularFile == true,
                let data = FileManager.default.contents(atPath: url.path)
            else { continue }
            result.append((url.lastPathComponent, [UInt8](data)))
        }
        return result
    }

    @Test(
        "Bootstrap, then a second device restores with the recovery key and is cross-signed; nothing secret in logs or files"
    )
    func bootstrapAndRestore() async throws {
        let username = DevEnvironment.uniqueUsername("rec")
        let first = CommunityFixture()
        let account = try await first.community.session.register(username: username, password: testPassword)
        let firstCrypto = try await first.readyCrypto()
        try await waitForIdentity(firstCrypto, .none)

        let recoveryKey = try await firstCrypto.setUpRecovery()
        try await waitForIdentity(firstCrypto, .ready)
        // The device is cross-signed: the next query (Synapse tells the device list changed) shows it.
        try await waitForTrust(
            firstCrypto, user: account.userID, deviceID: firstCrypto.deviceID.rawValue, .verified)
        // Setting up again on the same device only makes a new secret storage key.
        let again = try await firstCrypto.setUpRecovery()
        #expect(again != recoveryKey)

        // A second device of the account: the identity exists, this device does not hold it.
        let second = CommunityFixture()
        _ = try await second.community.session.signIn(username: username, password: testPassword)
        let secondCrypto = try await second.readyCrypto()
        try await waitForIdentity(secondCrypto, .needsRecovery)
        // Setting up on it is refused: the account's identity would be replaced.
        await #expect(throws: RecoveryError.identityExists) { _ = try await secondCrypto.setUpRecovery() }
        // The first recovery key was replaced by the second: it opens nothing any more.
        await #expect(throws: RecoveryError.wrongRecoveryKey) {
            try await secondCrypto.restore(recoveryKey: recoveryKey)
        }
        await #expect(throws: RecoveryError.malformedRecoveryKey) {
            try await secondCrypto.restore(recoveryKey: Secret("EsT not a recovery key"))
        }
        try await secondCrypto.restore(recoveryKey: again)
        try await waitForIdentity(secondCrypto, .ready)

        // Both devices see each other as verified; another account sees both cross-signed by
        // the chain Synapse serves.
        try await waitForTrust(
            secondCrypto, user: account.userID, deviceID: firstCrypto.deviceID.rawValue, .verified)
        try await waitForTrust(
            firstCrypto, user: account.userID, deviceID: secondCrypto.deviceID.rawValue, .verified)
        let observer = try await registerPeerAccount("obs")
        for device in [firstCrypto.deviceID, secondCrypto.deviceID] {
            #expect(try await chainTrust(of: device.rawValue, user: account.userID, seenBy: observer) == .crossSigned)
        }

        // Canary: neither recovery key, nor a private key's seed (raw or base64), in a log line or a file.
        let seeds = try #require(try await secondCrypto.store.crossSigningKeys())
        var needles: [(String, [UInt8])] = [
            ("recovery key", Array(recoveryKey.exposedValue.utf8)), ("recovery key", Array(again.exposedValue.utf8)),
            ("recovery key without spaces", Array(again.exposedValue.filter { $0 != " " }.utf8)),
        ]
        for (name, seed) in [
            ("master", seeds.masterSeed), ("self-signing", seeds.selfSigningSeed),
            ("user-signing", seeds.userSigningSeed),
        ] {
            needles.append((name, seed.exposedValue))
            needles.append((name + " base64", Array(UnpaddedBase64.encode(seed.exposedValue).utf8)))
        }
        for fixture in [first, second] {
            let logs = Array(fixture.logs.text.utf8)
            let traces = Array(fixture.trace.records.map(\.description).joined(separator: "\n").utf8)
            let stored = try files(under: URL(fileURLWithPath: fixture.data.path))
            #expect(stored.contains { $0.0.hasSuffix(".db") || $0.0.hasSuffix(".sqlite") }, "no database file read")
            #expect(fixture.logs.text.contains("recovery set up") || fixture.logs.text.contains("recovery restored"))
            for (file, bytes) in stored + [("logs", logs), ("traces", traces)] {
                for (name, needle) in needles {
                    #expect(!bytes.containsRun(needle), "\(name) found in \(file)")
                }
            }
        }
    }

    @Test("Another user's identity reset is a visible change until acknowledged; the reset needs the password")
    func identityResetSeen() async throws {
        let alice = try await MembershipEncryptionTests.Member.register("idalice")
        let bob = try await MembershipEncryptionTests.Member.register("idbob")
        let roomID = try await alice.chat.createRoom(name: "Identities", invitees: [bob.userID], isEncrypted: true)
        try await bob.chat.waitForConversation(roomID, .invited)
        _ = try await bob.chat.join(roomIDOrAlias: roomID.rawValue)

        _ = try await bob.crypto.setUpRecovery()
        try await waitForTrust(alice.crypto, user: bob.userID, deviceID: bob.crypto.deviceID.rawValue, .crossSigned)
        #expect(try await alice.crypto.identityChanged(of: bob.userID) == false, "pinned on first sight")
        #expect(alice.crypto.identityState.value == .none, "Alice has no identity of her own")

        // Bob loses his recovery key and resets: a wrong password changes nothing.
        let session = bob.fixture.community.session
        func authorizer(_ password: Secret<String>) -> @Sendable (MatrixEndpoint) async throws(RecoveryError) -> [UInt8]
        {
            { endpoint throws(RecoveryError) in
                do throws(SessionError) {
                    return try await session.authorize(
                        method: endpoint.method.rawValue, path: endpoint.path, body: endpoint.body ?? [],
                        password: password)
                } catch {
                    throw .authorization("\(error)")
                }
            }
        }
        await #expect(throws: RecoveryError.self) {
            _ = try await bob.crypto.resetRecovery(authorize: authorizer(Secret("wrong password")))
        }
        #expect(try await alice.crypto.identityChanged(of: bob.userID) == false)
        _ = try await bob.crypto.resetRecovery(authorize: authorizer(testPassword))
        try await waitForIdentity(bob.crypto, .ready)

        // Alice sees the change, and keeps seeing it until she acknowledges it.
        try await waitForIdentity(alice.crypto, .identityChanged(bob.userID))
        #expect(try await alice.crypto.identityChanged(of: bob.userID))
        #expect(try await alice.crypto.acknowledgeIdentityChange(of: bob.userID))
        try await waitForIdentity(alice.crypto, .none)
        #expect(try await alice.crypto.identityChanged(of: bob.userID) == false)
        try await waitForTrust(alice.crypto, user: bob.userID, deviceID: bob.crypto.deviceID.rawValue, .crossSigned)
    }
}

extension [UInt8] {
    fileprivate func containsRun(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return false }
        for start in 0...(count - needle.count) where self[start..<(start + needle.count)].elementsEqual(needle) {
            return true
        }
        return false
    }
}
