import Foundation
import SymorvaChat
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaE2EE
import SymorvaHTTP
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
        // The first sign-in made the account's identity (the automatic bootstrap), without
        // secret storage: nothing to restore from yet.
        try await waitForIdentity(firstCrypto, .ready)
        #expect(firstCrypto.automaticBootstrap.value == .finished(created: true))

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

    @Test(
        "Another user's identity reset is a visible change until acknowledged, and under the strict policy their devices get no room key until then; the reset needs the password"
    )
    func identityResetSeen() async throws {
        let alice = try await MembershipEncryptionTests.Member.register("idalice")
        let bob = try await MembershipEncryptionTests.Member.register("idbob")
        let roomID = try await alice.chat.createRoom(name: "Identities", invitees: [bob.userID], isEncrypted: true)
        try await bob.chat.waitForConversation(roomID, .invited)
        _ = try await bob.chat.join(roomIDOrAlias: roomID.rawValue)

        _ = try await bob.crypto.setUpRecovery()
        try await waitForTrust(alice.crypto, user: bob.userID, deviceID: bob.crypto.deviceID.rawValue, .crossSigned)
        #expect(try await alice.crypto.identityChanged(of: bob.userID) == false, "pinned on first sight")
        #expect(alice.crypto.identityState.value == .ready, "Alice's own identity, made at her sign-in")

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
        #expect(try await alice.crypto.identityChange(of: bob.userID) == .replaced)
        // Meanwhile (the default strict policy) Bob's device, cross-signed by the new identity,
        // gets no room key from her.
        let aliceRoom = try await alice.chat.conversation(id: roomID)
        let unacknowledged = try await aliceRoom.send(.text("while Bob's identity is unacknowledged")).sentEventID()
        let unsharedSession = try MembershipEncryptionTests.sessionID(
            of: try await bob.encryptedContent(of: unacknowledged, in: roomID))
        // Alice's record of whom the session went to (written before the event was sent).
        let outbound = try #require(try await alice.crypto.store.outboundSession(roomID: roomID.rawValue))
        #expect(outbound.sessionID == unsharedSession)
        #expect(!outbound.sharedWith.contains { $0.hasPrefix(bob.userID.rawValue + " ") }, "\(outbound.sharedWith)")
        #expect(try await bob.crypto.roomKey(roomID: roomID, sessionID: unsharedSession) == nil)
        #expect(try await alice.crypto.acknowledgeIdentityChange(of: bob.userID))
        #expect(try await alice.crypto.identityChange(of: bob.userID) == nil)
        // Acknowledged: her next message's key reaches him.
        let acknowledged = try await aliceRoom.send(.text("after the acknowledgement")).sentEventID()
        let sharedSession = try MembershipEncryptionTests.sessionID(
            of: try await bob.encryptedContent(of: acknowledged, in: roomID))
        _ = try await eventually(timeout: .seconds(60), "Bob's room key") {
            try await bob.crypto.roomKey(roomID: roomID, sessionID: sharedSession)
        }
        try await waitForIdentity(alice.crypto, .ready)
        #expect(try await alice.crypto.identityChanged(of: bob.userID) == false)
        try await waitForTrust(alice.crypto, user: bob.userID, deviceID: bob.crypto.deviceID.rawValue, .crossSigned)
    }
}

/// The room key policy against Synapse: a device the server adds to an account with a
/// cross-signing identity (here: signed in through the API with made-up keys) gets no room key.
@Suite(
    "The room key policy against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct RoomKeyPolicyTests {
    let transport = CurlTransport()

    /// Signs in to `user`'s account through the API: a new device, not SymorvaKit's.
    func signInRaw(_ user: UserID) async throws -> RegisteredAccount {
        let environment = try #require(DevEnvironment.current)
        let body = try JSONValue.object([
            "type": .string("m.login.password"), "password": .string(testPassword.exposedValue),
            "identifier": .object(["type": .string("m.id.user"), "user": .string(user.rawValue)]),
        ]).canonicalEncoding()
        let response = try await transport.send(
            .json(.post, url: environment.homeserverURL.appending(path: "/_matrix/client/v3/login"), body: body))
        guard case .object(let members) = try JSONValue(parsing: response.body),
            case .string(let token)? = members["access_token"], case .string(let deviceID)? = members["device_id"]
        else { throw IntegrationFailure("login answered \(response.status)") }
        return RegisteredAccount(userID: user.rawValue, accessToken: Secret(token), deviceID: deviceID)
    }

    /// The to-device events of type `type` from `sender` the device's `/sync` delivers within `timeout`
    /// (an empty list when none came).
    func toDeviceEvents(
        for device: RegisteredAccount, since: inout String?, type: String, from sender: UserID, timeout: Duration
    ) async throws -> [JSONValue] {
        let environment = try #require(DevEnvironment.current)
        let deadline = ContinuousClock.now + timeout
        var found: [JSONValue] = []
        repeat {
            var url = environment.homeserverURL.appending(path: "/_matrix/client/v3/sync")
            var query = [URLQueryItem(name: "timeout", value: "1000")]
            if let since { query.append(URLQueryItem(name: "since", value: since)) }
            url.append(queryItems: query)
            let response = try await transport.send(
                HTTPRequest(method: .get, url: url, bearerToken: device.accessToken))
            guard case .object(let top) = try JSONValue(parsing: response.body) else { break }
            if case .string(let next)? = top["next_batch"] { since = next }
            if case .object(let toDevice)? = top["to_device"], case .array(let events)? = toDevice["events"] {
                found += events.filter {
                    guard case .object(let event) = $0 else { return false }
                    return event["type"] == .string(type) && event["sender"] == .string(sender.rawValue)
                }
            }
        } while found.isEmpty && ContinuousClock.now < deadline
        return found
    }

    @Test(
        "A device added to a cross-signed account through the API gets no room key and no forwarded key; cross-signed by its owner, it gets both"
    )
    func injectedDeviceGetsNoRoomKey() async throws {
        let alice = try await MembershipEncryptionTests.Member.register("injalice")
        let bob = try await MembershipEncryptionTests.Member.register("injbob")
        _ = try await alice.crypto.setUpRecovery()
        let roomID = try await bob.chat.createRoom(name: "Injected", invitees: [alice.userID], isEncrypted: true)
        try await alice.chat.waitForConversation(roomID, .invited)
        _ = try await alice.chat.join(roomIDOrAlias: roomID.rawValue)
        let bobRoom = try await bob.chat.conversation(id: roomID)
        let stopBob = bobRoom.observe()
        defer { stopBob() }
        try await MembershipEncryptionTests.waitForMembership(.join, of: alice.userID, in: bobRoom)

        // The server (anyone with the password, here) adds a device with made-up keys, self-signed
        // and with a one-time key, so that nothing but the policy keeps a room key from it.
        let injected = try await signInRaw(alice.userID)
        let device = try await CrossSigningIntegrationTests().publishDevice(injected)
        // Two one-time keys: Bob's room key and Alice's forwarded key each need an Olm session.
        try device.olm.generateOneTimeKeys(2)
        var oneTimeKeys: [String: JSONValue] = [:]
        for (keyID, key) in try device.olm.unpublishedOneTimeKeys() {
            oneTimeKeys["signed_curve25519:\(keyID)"] = try SignedJSON.sign(
                .object(["key": .string(key)]), user: alice.userID, keyID: "ed25519:\(injected.deviceID)"
            ) { message in device.olm.sign(message) }
        }
        _ = try await CrossSigningIntegrationTests().send(
            try E2EEAPI.upload(deviceKeys: nil, oneTimeKeys: oneTimeKeys, fallbackKeys: [:]), as: injected)
        try await RecoveryTests().waitForTrust(
            bob.crypto, user: alice.userID, deviceID: alice.crypto.deviceID.rawValue, .crossSigned)
        try await RecoveryTests().waitForTrust(bob.crypto, user: alice.userID, deviceID: injected.deviceID, .unverified)

        let withheld = try await bobRoom.send(.text("not for the injected device")).sentEventID()
        let withheldSession = try MembershipEncryptionTests.sessionID(
            of: try await bob.encryptedContent(of: withheld, in: roomID))
        let aliceRoom = try await alice.chat.conversation(id: roomID)
        let stopAlice = aliceRoom.observe()
        defer { stopAlice() }
        try await aliceRoom.waitForTimeline { $0.texts.contains("not for the injected device") }
        var since: String?
        let before = try await toDeviceEvents(
            for: injected, since: &since, type: "m.room.encrypted", from: bob.userID, timeout: .seconds(3))
        #expect(before.isEmpty, "the injected device received \(before.count) encrypted to-device events from Bob")

        // Nor a forwarded key: it asks Alice's device, which knows it (unverified), for the session.
        try await RecoveryTests().waitForTrust(
            alice.crypto, user: alice.userID, deviceID: injected.deviceID, .unverified)
        try await askForRoomKey(withheldSession, in: roomID, from: injected, to: alice, requestID: "injected-1")
        let forwardedBefore = try await toDeviceEvents(
            for: injected, since: &since, type: "m.room.encrypted", from: alice.userID, timeout: .seconds(3))
        #expect(
            forwardedBefore.isEmpty, "Alice's device forwarded \(forwardedBefore.count) keys to the injected device")

        // The control: Alice cross-signs it (her self-signing key); Bob's next message's key reaches it.
        let held = try #require(try await alice.crypto.store.crossSigningKeys())
        let keys = try CrossSigningKeys(
            userID: alice.userID, masterSeed: held.masterSeed, selfSigningSeed: held.selfSigningSeed,
            userSigningSeed: held.userSigningSeed, driver: OlmCryptoDriver())
        let (_, answer) = try await CrossSigningIntegrationTests().send(
            try E2EEAPI.query(users: [alice.userID]), as: injected)
        let deviceKeys = try #require(
            CrossSigningChain.deviceKeys(in: answer, user: alice.userID, deviceID: injected.deviceID))
        let failures = try await CrossSigningIntegrationTests().uploadSignatures(
            [alice.userID.rawValue: [injected.deviceID: try keys.signDevice(deviceKeys)]], as: device)
        #expect(failures.isEmpty)
        try await RecoveryTests().waitForTrust(
            bob.crypto, user: alice.userID, deviceID: injected.deviceID, .crossSigned)
        _ = try await bobRoom.send(.text("now it may read")).sentEventID()
        let after = try await toDeviceEvents(
            for: injected, since: &since, type: "m.room.encrypted", from: bob.userID, timeout: .seconds(30))
        #expect(!after.isEmpty, "cross-signed, the device got Bob's room key")

        // Cross-signed (verified, to the device holding the identity that signed it), its request
        // for the withheld session is answered with that session.
        try await RecoveryTests().waitForTrust(
            alice.crypto, user: alice.userID, deviceID: injected.deviceID, .verified)
        try await askForRoomKey(withheldSession, in: roomID, from: injected, to: alice, requestID: "injected-2")
        let forwarded = try await toDeviceEvents(
            for: injected, since: &since, type: "m.room.encrypted", from: alice.userID, timeout: .seconds(30))
        let aliceCurve = try #require(
            try await bob.crypto.devices(of: alice.userID).first { $0.deviceID == alice.crypto.deviceID.rawValue }
        ).curve25519
        let answers = try forwarded.map { try Self.olmPlaintext($0, for: device, from: aliceCurve) }
        #expect(answers.map(\.type) == ["m.forwarded_room_key"])
        #expect(answers.map(\.sessionID) == [withheldSession])
    }

    /// Sends Alice's device an `m.room_key_request` for `sessionID` from `requester`, as a client
    /// missing that key does (to the account's own devices, in the clear).
    func askForRoomKey(
        _ sessionID: String, in roomID: RoomID, from requester: RegisteredAccount,
        to alice: MembershipEncryptionTests.Member, requestID: String
    ) async throws {
        let content = JSONValue.object([
            "action": .string("request"), "request_id": .string(requestID),
            "requesting_device_id": .string(requester.deviceID),
            "body": .object([
                "algorithm": .string("m.megolm.v1.aes-sha2"), "room_id": .string(roomID.rawValue),
                "session_id": .string(sessionID),
            ]),
        ])
        let (status, _) = try await CrossSigningIntegrationTests().send(
            try E2EEAPI.sendToDevice(
                eventType: "m.room_key_request", transactionID: TransactionID(requestID),
                messages: [alice.userID.rawValue: [alice.crypto.deviceID.rawValue: content]]),
            as: requester)
        #expect(status == 200)
    }

    /// The type and session of an Olm-encrypted to-device event for `device` (a pre-key message
    /// from `senderKey`: the first of its session).
    static func olmPlaintext(
        _ event: JSONValue, for device: CrossSigningIntegrationTests.Device, from senderKey: String
    ) throws -> (type: String, sessionID: String?) {
        guard case .object(let members) = event, case .object(let content)? = members["content"],
            case .object(let ciphertexts)? = content["ciphertext"],
            case .object(let mine)? = ciphertexts[device.olm.identityKeys.curve25519],
            case .number(let kind)? = mine["type"], kind == 0, case .string(let body)? = mine["body"]
        else { throw IntegrationFailure("not a pre-key message for the device: \(event)") }
        let session = try device.olm.inboundSession(identityKey: senderKey, preKeyMessage: body)
        let plaintext = try session.decrypt(OlmMessage(kind: .preKey, body: body))
        guard case .object(let decrypted) = try JSONValue(parsing: plaintext.exposedValue),
            case .string(let type)? = decrypted["type"]
        else { throw IntegrationFailure("no type in the Olm plaintext") }
        var sessionID: String?
        if case .object(let inner)? = decrypted["content"], case .string(let id)? = inner["session_id"] {
            sessionID = id
        }
        return (type, sessionID)
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
