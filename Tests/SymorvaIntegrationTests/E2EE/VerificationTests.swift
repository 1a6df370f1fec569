import Foundation
import SymorvaCryptoDriver
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import Testing

/// Interactive verification (SAS over to-device messages) between two SymorvaKit accounts
/// against the real Synapse: the same emoji on both sides, both verified, and the signature on
/// the server changes the trust level.
@Suite(
    "Interactive verification against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct VerificationTests {
    typealias Member = MembershipEncryptionTests.Member

    /// Two members in an encrypted room (so each tracks the other's devices), each with a
    /// cross-signing identity.
    func members() async throws -> (Member, Member) {
        let alice = try await Member.register("valice")
        let bob = try await Member.register("vbob")
        let roomID = try await alice.chat.createRoom(name: "Verify", invitees: [bob.userID], isEncrypted: true)
        try await bob.chat.waitForConversation(roomID, .invited)
        _ = try await bob.chat.join(roomIDOrAlias: roomID.rawValue)
        _ = try await alice.crypto.setUpRecovery()
        _ = try await bob.crypto.setUpRecovery()
        let recovery = RecoveryTests()
        try await recovery.waitForTrust(
            alice.crypto, user: bob.userID, deviceID: bob.crypto.deviceID.rawValue, .crossSigned)
        return (alice, bob)
    }

    func code(of verification: SASVerification) async throws -> SASVerificationState {
        try await verification.state.wait(timeout: .seconds(60)) {
            if case .showingCode = $0 { return true }
            if case .cancelled = $0 { return true }
            return false
        }
        return verification.state.value
    }

    @Test("Request, ready, SAS: the same emoji on both sides, both verified, Bob's devices verified for Alice")
    func requestFlow() async throws {
        let (alice, bob) = try await members()
        let outgoing = try await alice.crypto.verify(bob.userID, device: bob.crypto.deviceID)
        try await bob.crypto.incomingVerification.wait(timeout: .seconds(60)) { $0 != nil }
        let incoming = try #require(bob.crypto.incomingVerification.value)
        #expect(incoming.transactionID == outgoing.transactionID && incoming.otherUserID == alice.userID)
        await incoming.accept()
        try await outgoing.state.wait(timeout: .seconds(60)) { $0 == .ready }
        await outgoing.startSAS()
        let aliceCode = try await code(of: outgoing)
        let bobCode = try await code(of: incoming)
        guard case .showingCode(let emoji, let decimals) = aliceCode else {
            Issue.record("Alice: \(aliceCode)")
            return
        }
        #expect(bobCode == aliceCode)
        #expect(emoji.count == 7 && decimals.count == 3)
        await outgoing.confirm()
        await incoming.confirm()
        try await outgoing.state.wait(timeout: .seconds(60)) { $0 == .verified }
        try await incoming.state.wait(timeout: .seconds(60)) { $0 == .verified }
        // Alice's user-signing key signed Bob's master key: his device is verified for her.
        try await RecoveryTests().waitForTrust(
            alice.crypto, user: bob.userID, deviceID: bob.crypto.deviceID.rawValue, .verified)
        try await RecoveryTests().waitForTrust(
            bob.crypto, user: alice.userID, deviceID: alice.crypto.deviceID.rawValue, .verified)
    }

    @Test("The codes differ: both sides end cancelled with m.mismatched_sas, nothing verified")
    func mismatch() async throws {
        let (alice, bob) = try await members()
        let outgoing = try await alice.crypto.verify(bob.userID, device: bob.crypto.deviceID, startDirectly: true)
        try await bob.crypto.incomingVerification.wait(timeout: .seconds(60)) { $0 != nil }
        let incoming = try #require(bob.crypto.incomingVerification.value)
        await incoming.accept()
        _ = try await code(of: outgoing)
        _ = try await code(of: incoming)
        await incoming.mismatch()
        try await outgoing.state.wait(timeout: .seconds(60)) {
            $0 == .cancelled(code: "m.mismatched_sas", byUs: false)
        }
        #expect(incoming.state.value == .cancelled(code: "m.mismatched_sas", byUs: true))
        let bobDevice = try await alice.crypto.devices(of: bob.userID).first {
            $0.deviceID == bob.crypto.deviceID.rawValue
        }
        #expect(bobDevice?.trust == .crossSigned)
    }

    @Test(
        "Self-verification: after the emoji, the new device holds the cross-signing keys and the backup key and reads a message sent before it existed"
    )
    func newOwnDeviceGetsTheSecrets() async throws {
        let username = DevEnvironment.uniqueUsername("vself")
        let first = CommunityFixture()
        _ = try await first.community.session.register(username: username, password: testPassword)
        let firstCrypto = try await first.readyCrypto()
        _ = try await firstCrypto.setUpRecovery()
        // A message before the second device exists, its room key in the backup.
        let roomID = try await first.community.chat.createRoom(name: "Before the new device", isEncrypted: true)
        let room = try await first.community.chat.conversation(id: roomID)
        let text = "self verification history \(UUID().uuidString)"
        _ = try await room.send(.text(text)).sentEventID()
        _ = try await eventually(timeout: .seconds(60), "the room key backed up") { () async throws -> Bool? in
            let backedUp = try await firstCrypto.currentBackupVersion().count
            let waiting = try await firstCrypto.backupStatus().waiting
            return backedUp >= 1 && waiting == 0 ? true : nil
        }

        let second = CommunityFixture()
        _ = try await second.community.session.signIn(username: username, password: testPassword)
        let secondCrypto = try await second.readyCrypto()
        try await secondCrypto.identityState.wait(timeout: .seconds(60)) { $0 == .needsRecovery }
        #expect(try await secondCrypto.store.crossSigningKeys() == nil)

        // The new device asks the first one; the first accepts; the emoji match.
        let outgoing = try await secondCrypto.verify(secondCrypto.userID, device: firstCrypto.deviceID)
        try await firstCrypto.incomingVerification.wait(timeout: .seconds(60)) { $0 != nil }
        let incoming = try #require(firstCrypto.incomingVerification.value)
        await incoming.accept()
        try await outgoing.state.wait(timeout: .seconds(60)) { $0 == .ready }
        await outgoing.startSAS()
        let newCode = try await code(of: outgoing)
        let trustedCode = try await code(of: incoming)
        guard case .showingCode = newCode else {
            Issue.record("new device: \(newCode)")
            return
        }
        #expect(newCode == trustedCode)
        await incoming.confirm()
        await outgoing.confirm()
        try await outgoing.state.wait(timeout: .seconds(60)) { $0 == .verified }
        try await incoming.state.wait(timeout: .seconds(60)) { $0 == .verified }

        // The new device took the secrets: the cross-signing keys of the identity, the backup key.
        try await secondCrypto.identityState.wait(timeout: .seconds(60)) { $0 == .ready }
        let held = try #require(try await secondCrypto.store.crossSigningKeys())
        #expect(held.masterKey == (try await firstCrypto.store.crossSigningMasterKey()))
        let backupKey = try await eventually(timeout: .seconds(60), "the backup key received") {
            try await secondCrypto.backupPrivateKey()
        }
        #expect(backupKey == (try await firstCrypto.backupPrivateKey()))
        #expect(try await secondCrypto.backupStatus().version == (try await firstCrypto.backupStatus().version))
        // Each device sees the other verified.
        try await RecoveryTests().waitForTrust(
            firstCrypto, user: firstCrypto.userID, deviceID: secondCrypto.deviceID.rawValue, .verified)
        try await RecoveryTests().waitForTrust(
            secondCrypto, user: secondCrypto.userID, deviceID: firstCrypto.deviceID.rawValue, .verified)
        // The message sent before the new device existed reads there (its key from the backup).
        try await second.community.chat.waitForConversation(roomID)
        let secondRoom = try await second.community.chat.conversation(id: roomID)
        let stopRoom = secondRoom.observe()
        defer { stopRoom() }
        _ = try await secondRoom.waitForTimeline { items in items.texts.contains(text) }
        // The message can become readable (its key looked up in the backup) before the
        // self-verification's secret round, restore included, logs its outcome: wait for the line.
        let outcome = try await eventually(timeout: .seconds(60), "the self-verification's secret outcome logged") {
            second.logs.text.split(separator: "\n").first { $0.contains("secrets after self-verification") }
        }
        #expect(outcome.contains("secrets after self-verification device=\(firstCrypto.deviceID.rawValue)"))
        // No private key in a log line of either device.
        for fixture in [first, second] {
            for seed in [held.masterSeed, held.selfSigningSeed, held.userSigningSeed] {
                #expect(!fixture.logs.text.contains(UnpaddedBase64.encode(seed.exposedValue)))
            }
        }
    }

    /// A request from `asker` to `device` of `user`, accepted on `answerer`: both flows ready.
    func readyFlows(
        _ asker: AccountCrypto, _ answerer: AccountCrypto, user: UserID, device: DeviceID
    ) async throws -> (SASVerification, SASVerification) {
        let outgoing = try await asker.verify(user, device: device)
        try await answerer.incomingVerification.wait(timeout: .seconds(60)) {
            $0?.transactionID == outgoing.transactionID
        }
        let incoming = try #require(answerer.incomingVerification.value)
        await incoming.accept()
        try await outgoing.state.wait(timeout: .seconds(60)) { $0 == .ready }
        try await incoming.state.wait(timeout: .seconds(60)) { $0 == .ready }
        return (outgoing, incoming)
    }

    /// `shower` shows its code (mode `mode`), `scanner` scans it, the shower's person confirms:
    /// both verified.
    func showAndScan(_ shower: SASVerification, _ scanner: SASVerification, mode: UInt8) async throws {
        let code = try #require(await shower.qrCode())
        #expect(Array(code.prefix(8)) == Array("MATRIX".utf8) + [0x02, mode])
        #expect(await shower.qrCode() == code)  // one code per flow
        // Bytes that are no code: a typed error, the flow goes on.
        await #expect(throws: KeyVerificationError.invalidQRCode) { try await scanner.scanned([0x01, 0x02]) }
        #expect(scanner.state.value == .ready)
        try await scanner.scanned(code)
        #expect(scanner.state.value == .confirmed)
        try await shower.state.wait(timeout: .seconds(60)) { $0 == .otherDeviceScanned }
        await shower.confirm()
        try await shower.state.wait(timeout: .seconds(60)) { $0 == .verified }
        try await scanner.state.wait(timeout: .seconds(60)) { $0 == .verified }
    }

    @Test("QR mode 0x00: Bob shows, Alice scans, Bob confirms: both verified, each signed the other on Synapse")
    func qrOtherUser() async throws {
        let (alice, bob) = try await members()
        let (outgoing, incoming) = try await readyFlows(
            alice.crypto, bob.crypto, user: bob.userID, device: bob.crypto.deviceID)
        try await showAndScan(incoming, outgoing, mode: 0x00)
        try await RecoveryTests().waitForTrust(
            alice.crypto, user: bob.userID, deviceID: bob.crypto.deviceID.rawValue, .verified)
        try await RecoveryTests().waitForTrust(
            bob.crypto, user: alice.userID, deviceID: alice.crypto.deviceID.rawValue, .verified)
    }

    @Test("QR: a code of another user's keys is refused: the scanner cancels m.key_mismatch, nothing verified")
    func qrMismatch() async throws {
        let (alice, bob) = try await members()
        let (outgoing, incoming) = try await readyFlows(
            alice.crypto, bob.crypto, user: bob.userID, device: bob.crypto.deviceID)
        var code = try #require(await incoming.qrCode())
        // The second key (what Bob thinks Alice's master key is) changed: not Alice's.
        let flowLength = Int(code[8]) << 8 | Int(code[9])
        code[10 + flowLength + 32] ^= 0x01
        try await outgoing.scanned(code)
        #expect(outgoing.state.value == .cancelled(code: "m.key_mismatch", byUs: true))
        try await incoming.state.wait(timeout: .seconds(60)) { $0 == .cancelled(code: "m.key_mismatch", byUs: false) }
        let bobDevice = try await alice.crypto.devices(of: bob.userID).first {
            $0.deviceID == bob.crypto.deviceID.rawValue
        }
        #expect(bobDevice?.trust == .crossSigned)
    }

    /// A first device with recovery set up and a second, new device of the same account.
    func ownDevices(_ prefix: String) async throws -> (CommunityFixture, AccountCrypto, CommunityFixture, AccountCrypto)
    {
        let username = DevEnvironment.uniqueUsername(prefix)
        let first = CommunityFixture()
        _ = try await first.community.session.register(username: username, password: testPassword)
        let firstCrypto = try await first.readyCrypto()
        _ = try await firstCrypto.setUpRecovery()
        let second = CommunityFixture()
        _ = try await second.community.session.signIn(username: username, password: testPassword)
        let secondCrypto = try await second.readyCrypto()
        try await secondCrypto.identityState.wait(timeout: .seconds(60)) { $0 == .needsRecovery }
        return (first, firstCrypto, second, secondCrypto)
    }

    @Test(
        "QR mode 0x01: the trusted device shows, the new device scans: both verified, the new device takes the cross-signing keys"
    )
    func qrSelfTrustedShows() async throws {
        let (_, firstCrypto, _, secondCrypto) = try await ownDevices("vqr1")
        let (outgoing, incoming) = try await readyFlows(
            secondCrypto, firstCrypto, user: secondCrypto.userID, device: firstCrypto.deviceID)
        try await showAndScan(incoming, outgoing, mode: 0x01)
        try await secondCrypto.identityState.wait(timeout: .seconds(60)) { $0 == .ready }
        #expect(
            try await secondCrypto.store.crossSigningKeys()?.masterKey
                == (try await firstCrypto.store.crossSigningMasterKey()))
        try await RecoveryTests().waitForTrust(
            firstCrypto, user: firstCrypto.userID, deviceID: secondCrypto.deviceID.rawValue, .verified)
        try await RecoveryTests().waitForTrust(
            secondCrypto, user: secondCrypto.userID, deviceID: firstCrypto.deviceID.rawValue, .verified)
    }

    @Test(
        "QR mode 0x02: the new device shows, the trusted device scans: both verified, the new device takes the cross-signing keys"
    )
    func qrSelfUntrustedShows() async throws {
        let (_, firstCrypto, _, secondCrypto) = try await ownDevices("vqr2")
        let (outgoing, incoming) = try await readyFlows(
            secondCrypto, firstCrypto, user: secondCrypto.userID, device: firstCrypto.deviceID)
        try await showAndScan(outgoing, incoming, mode: 0x02)
        try await secondCrypto.identityState.wait(timeout: .seconds(60)) { $0 == .ready }
        #expect(
            try await secondCrypto.store.crossSigningKeys()?.masterKey
                == (try await firstCrypto.store.crossSigningMasterKey()))
        try await RecoveryTests().waitForTrust(
            firstCrypto, user: firstCrypto.userID, deviceID: secondCrypto.deviceID.rawValue, .verified)
        try await RecoveryTests().waitForTrust(
            secondCrypto, user: secondCrypto.userID, deviceID: firstCrypto.deviceID.rawValue, .verified)
    }

    @Test(
        "A request to every device of Bob: his first device answers, his second hears m.accepted and ends cancelled; the flow goes on with the first"
    )
    func acceptedByAnotherDevice() async throws {
        let (alice, bob) = try await members()
        let bobsOther = CommunityFixture()
        _ = try await bobsOther.community.session.signIn(
            username: String(bob.userID.rawValue.dropFirst().prefix { $0 != ":" }), password: testPassword)
        let otherCrypto = try await bobsOther.readyCrypto()
        // Alice knows both of Bob's devices.
        _ = try await eventually(timeout: .seconds(60), "Bob's second device listed") {
            try await alice.crypto.devices(of: bob.userID).first { $0.deviceID == otherCrypto.deviceID.rawValue }
        }
        let outgoing = try await alice.crypto.verify(bob.userID)
        try await bob.crypto.incomingVerification.wait(timeout: .seconds(60)) {
            $0?.transactionID == outgoing.transactionID
        }
        try await otherCrypto.incomingVerification.wait(timeout: .seconds(60)) {
            $0?.transactionID == outgoing.transactionID
        }
        let first = try #require(bob.crypto.incomingVerification.value)
        let second = try #require(otherCrypto.incomingVerification.value)
        await first.accept()
        try await outgoing.state.wait(timeout: .seconds(60)) { $0 == .ready }
        #expect(outgoing.otherDeviceID == bob.crypto.deviceID)
        try await second.state.wait(timeout: .seconds(60)) { $0 == .cancelled(code: "m.accepted", byUs: false) }
        // The flow with the first device goes on to the end.
        await outgoing.startSAS()
        _ = try await code(of: outgoing)
        _ = try await code(of: first)
        await outgoing.confirm()
        await first.confirm()
        try await outgoing.state.wait(timeout: .seconds(60)) { $0 == .verified }
        try await first.state.wait(timeout: .seconds(60)) { $0 == .verified }
    }

    @Test("QR: the shower's person says the other device did not scan: both end cancelled m.user, nothing verified")
    func qrNotScanned() async throws {
        let (alice, bob) = try await members()
        let (outgoing, incoming) = try await readyFlows(
            alice.crypto, bob.crypto, user: bob.userID, device: bob.crypto.deviceID)
        let code = try #require(await incoming.qrCode())
        try await outgoing.scanned(code)
        try await incoming.state.wait(timeout: .seconds(60)) { $0 == .otherDeviceScanned }
        await incoming.mismatch()
        #expect(incoming.state.value == .cancelled(code: "m.user", byUs: true))
        try await outgoing.state.wait(timeout: .seconds(60)) { $0 == .cancelled(code: "m.user", byUs: false) }
        let bobDevice = try await alice.crypto.devices(of: bob.userID).first {
            $0.deviceID == bob.crypto.deviceID.rawValue
        }
        #expect(bobDevice?.trust == .crossSigned)
    }
}
