import Foundation
import SymorvaChat
import SymorvaCryptoDriver
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// Recovery and the key backup joined, against the real Synapse: setting up recovery creates a
/// backup whose key secret storage keeps; a new device given only the recovery key is
/// cross-signed and reads every earlier message from the backup, its first device shut down.
@Suite(
    "Recovery restores the key backup against Synapse",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct RecoveryBackupTests {
    @Test(
        "Recovery set up creates a backup signed by the device and the master key; a new device given only the recovery key is cross-signed and reads every earlier message"
    )
    func newDeviceRestoresWithTheRecoveryKey() async throws {
        let setup = try await KeyBackupIntegrationTests.setUp("rbk")
        let account = setup.firstCrypto.userID
        let recoveryKey = try await setup.firstCrypto.setUpRecovery()

        // The backup: created by the set-up, its auth_data signed by this device and the master key.
        let onServer = try await setup.firstCrypto.currentBackupVersion()
        #expect(try await setup.firstCrypto.backupStatus().version == onServer.version)
        let masterKey = try #require(try await setup.firstCrypto.store.crossSigningMasterKey())
        #expect(
            SignedJSON.isSigned(onServer.authData, by: account, publicKey: masterKey, driver: OlmCryptoDriver()))
        guard case .object(let authData) = onServer.authData, case .object(let signatures)? = authData["signatures"],
            case .object(let byUser)? = signatures[account.rawValue]
        else {
            Issue.record("auth_data has no signatures of \(account)")
            return
        }
        #expect(byUser["ed25519:\(setup.firstCrypto.deviceID.rawValue)"] != nil)
        // Setting up again keeps the same backup (its key goes into the new secret storage).
        let again = try await setup.firstCrypto.setUpRecovery()
        #expect(try await setup.firstCrypto.currentBackupVersion().version == onServer.version)

        // Messages after the set-up, one in a new room (a new session, uploaded from the outbox).
        let room = try await setup.first.community.chat.conversation(id: setup.roomID)
        _ = try await room.send(.text("mine after recovery")).sentEventID()
        let later = try await setup.first.community.chat.createRoom(name: "After recovery", isEncrypted: true)
        let laterRoom = try await setup.first.community.chat.conversation(id: later)
        _ = try await laterRoom.send(.text("in the later room")).sentEventID()
        // Bob's session and the account's two (one a room) are in the backup, none waiting.
        let deadline = ContinuousClock.now + .seconds(60)
        var sessions = 0
        while true {
            sessions = try await setup.firstCrypto.currentBackupVersion().count
            if sessions >= 3, try await setup.firstCrypto.backupStatus().waiting == 0 { break }
            guard ContinuousClock.now < deadline else {
                throw IntegrationFailure("the backup holds \(sessions) sessions")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        // The first device goes away: no sibling can forward a key.
        await setup.first.community.shutdown()

        let second = CommunityFixture()
        _ = try await second.community.session.signIn(username: setup.username, password: testPassword)
        let secondCrypto = try await second.readyCrypto()
        try await secondCrypto.identityState.wait(timeout: .seconds(60)) { $0 == .needsRecovery }
        let seen = Lock<[KeyBackupState]>([])
        let stop = secondCrypto.backupState.subscribe { state in seen.withLock { $0.append(state) } }
        // The first recovery key was replaced by the second.
        await #expect(throws: RecoveryError.wrongRecoveryKey) {
            try await secondCrypto.restore(recoveryKey: recoveryKey)
        }
        let restored = try #require(try await secondCrypto.restore(recoveryKey: again))
        stop()
        // Every session is new to this device. Using the backup also looks up, one by one, the keys
        // of the events this device could not decrypt yet, concurrently with the full restore:
        // each key is imported by exactly one of the two paths (Bob could forward his own before
        // the restore: one less), and afterwards the device holds every one.
        #expect(restored.total == sessions)
        _ = try await eventually(timeout: .seconds(30), "each backed-up key imported once") { () -> Bool? in
            let onDemand = second.logs.text.components(separatedBy: "room key restored from the key backup").count - 1
            let imported = restored.imported + onDemand
            return imported == sessions || imported == sessions - 1 ? true : nil
        }
        let version = try #require(try await secondCrypto.backupStatus().version)
        for entry in try await secondCrypto.backupEntries(version: version) {
            #expect(try await secondCrypto.roomKey(roomID: RoomID(entry.roomID), sessionID: entry.sessionID) != nil)
        }
        #expect(seen.withLock { $0 }.contains(.restoring(imported: restored.total, total: restored.total)))
        #expect(try await secondCrypto.backupStatus().version == onServer.version)
        try await secondCrypto.identityState.wait(timeout: .seconds(60)) { $0 == .ready }
        try await RecoveryTests().waitForTrust(
            secondCrypto, user: account, deviceID: secondCrypto.deviceID.rawValue, .verified)

        for (roomID, texts) in [
            (setup.roomID, ["bob before the new device", "mine before the new device", "mine after recovery"]),
            (later, ["in the later room"]),
        ] {
            try await second.community.chat.waitForConversation(roomID)
            let conversation = try await second.community.chat.conversation(id: roomID)
            let stopRoom = conversation.observe()
            defer { stopRoom() }
            _ = try await conversation.waitForTimeline { items in texts.allSatisfy { items.texts.contains($0) } }
        }
        for canary in [again.exposedValue, "mine after recovery", "in the later room"] {
            #expect(!second.logs.text.contains(canary))
        }
    }
}
