import Foundation
import SymorvaChat
import SymorvaCryptoDriver
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// Secret sharing between two SymorvaKit devices of one account, against the real Synapse
/// (`m.secret.request` / `m.secret.send` over Olm): a device the account has not cross-signed
/// is refused; once cross-signed by the first device, the second gets the cross-signing keys and
/// the key backup's key, is cross-signed with them and reads an earlier message from the backup.
@Suite(
    "Secret sharing between own devices against Synapse",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct SecretSharingTests {
    @Test(
        "An own device not cross-signed gets no secret; once cross-signed it gets the cross-signing and backup keys and reads history"
    )
    func ownDeviceGetsSecretsOnceCrossSigned() async throws {
        let username = DevEnvironment.uniqueUsername("sss")
        let first = CommunityFixture()
        let account = try await first.community.session.register(username: username, password: testPassword)
        let firstCrypto = try await first.readyCrypto()
        _ = try await firstCrypto.setUpRecovery()
        // Alone: no other device to ask.
        await #expect(throws: RecoveryError.noTrustedDevice) {
            _ = try await firstCrypto.requestSecretsFromOwnDevices(timeout: .seconds(5))
        }
        // An earlier message, its room key in the backup.
        let roomID = try await first.community.chat.createRoom(name: "Before the second device", isEncrypted: true)
        let room = try await first.community.chat.conversation(id: roomID)
        let text = "secret sharing history \(UUID().uuidString)"
        _ = try await room.send(.text(text)).sentEventID()
        let backupDeadline = ContinuousClock.now + .seconds(60)
        while true {
            let backedUp = try await firstCrypto.currentBackupVersion().count
            let waiting = try await firstCrypto.backupStatus().waiting
            if backedUp >= 1, waiting == 0 { break }
            guard ContinuousClock.now < backupDeadline else { throw IntegrationFailure("room key never backed up") }
            try await Task.sleep(for: .milliseconds(100))
        }

        let second = CommunityFixture()
        _ = try await second.community.session.signIn(username: username, password: testPassword)
        let secondCrypto = try await second.readyCrypto()
        try await secondCrypto.identityState.wait(timeout: .seconds(60)) { $0 == .needsRecovery }

        // Not cross-signed yet: the first device refuses every request, nothing arrives.
        await #expect(throws: RecoveryError.secretsNotReceived) {
            _ = try await secondCrypto.requestSecretsFromOwnDevices(timeout: .seconds(8))
        }
        #expect(first.logs.text.contains("secret requests refused="))
        #expect(!first.logs.text.contains("secret requests answered="))
        #expect(try await secondCrypto.store.crossSigningKeys() == nil)

        // The first device cross-signs the second (what a verification ends with): now it answers.
        try await firstCrypto.crossSignOwnDevice(secondCrypto.deviceID.rawValue)
        let outcome = try await secondCrypto.requestSecretsFromOwnDevices(timeout: .seconds(60))
        #expect(outcome.crossSigning)
        let restored = try #require(outcome.backupRestore)
        #expect(restored.total >= 1)
        try await secondCrypto.identityState.wait(timeout: .seconds(60)) { $0 == .ready }
        let held = try #require(try await secondCrypto.store.crossSigningKeys())
        #expect(held.masterKey == (try await firstCrypto.store.crossSigningMasterKey()))
        #expect(try await secondCrypto.backupStatus().version == (try await firstCrypto.backupStatus().version))
        // Its own device is verified (signed with the keys it now holds).
        let deadline = ContinuousClock.now + .seconds(60)
        while try await secondCrypto.ownDevices().first(where: { $0.deviceID == secondCrypto.deviceID.rawValue })?
            .trust != .verified
        {
            guard ContinuousClock.now < deadline else { throw IntegrationFailure("second device never verified") }
            try await Task.sleep(for: .milliseconds(100))
        }
        // The earlier message reads on the second device (its key came from the backup).
        try await second.community.chat.waitForConversation(roomID)
        let secondRoom = try await second.community.chat.conversation(id: roomID)
        let stopRoom = secondRoom.observe()
        defer { stopRoom() }
        _ = try await secondRoom.waitForTimeline { items in items.texts.contains(text) }

        // Canary: no private key (base64) nor the message in a log line of either device.
        let seeds = [held.masterSeed, held.selfSigningSeed, held.userSigningSeed]
        let backupKey = try #require(try await secondCrypto.backupPrivateKey())
        for fixture in [first, second] {
            let logs = fixture.logs.text
            for seed in seeds + [backupKey] {
                #expect(!logs.contains(UnpaddedBase64.encode(seed.exposedValue)))
            }
            #expect(!logs.contains(text))
        }
        #expect(account.userID == firstCrypto.userID)
    }
}
