import Foundation
import SymorvaChat
import SymorvaChatStore
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import Testing

/// The server-side key backup (`m.megolm_backup.v1.curve25519-aes-sha2`) on the real Synapse.
@Suite(
    "Key backup against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct KeyBackupIntegrationTests {
    /// A registered account with an encrypted room shared with Bob, one message of Bob's and one
    /// of the account's own in it.
    struct Setup {
        let username: String
        let first: CommunityFixture
        let firstCrypto: AccountCrypto
        let bob: MembershipEncryptionTests.Member
        let roomID: RoomID
    }

    static func setUp(_ prefix: String) async throws -> Setup {
        let username = DevEnvironment.uniqueUsername(prefix)
        let first = CommunityFixture()
        let account = try await first.community.session.register(username: username, password: testPassword)
        let firstCrypto = try await first.readyCrypto()
        let bob = try await MembershipEncryptionTests.Member.register("bob")
        let roomID = try await bob.chat.createRoom(name: "Backed up", invitees: [account.userID], isEncrypted: true)
        try await first.community.chat.waitForConversation(roomID, .invited)
        _ = try await first.community.chat.join(roomIDOrAlias: roomID.rawValue)
        let bobRoom = try await bob.chat.conversation(id: roomID)
        let stopBob = bobRoom.observe()
        defer { stopBob() }
        try await MembershipEncryptionTests.waitForMembership(.join, of: account.userID, in: bobRoom)
        try await bob.crypto.waitForDevice(firstCrypto.deviceID.rawValue, of: account.userID)
        _ = try await bobRoom.send(.text("bob before the new device")).sentEventID()
        let firstRoom = try await first.community.chat.conversation(id: roomID)
        let stopFirst = firstRoom.observe()
        defer { stopFirst() }
        try await firstRoom.waitForTimeline { $0.texts.contains("bob before the new device") }
        _ = try await firstRoom.send(.text("mine before the new device")).sentEventID()
        return Setup(username: username, first: first, firstCrypto: firstCrypto, bob: bob, roomID: roomID)
    }

    @Test(
        "A backup created after the messages uploads every room key; a new device of the account given the backup key restores them and reads the messages sent before it existed"
    )
    func newDeviceRestores() async throws {
        let setup = try await Self.setUp("dora")
        let version = try await setup.firstCrypto.createBackup()
        try await setup.firstCrypto.backupState.wait(timeout: .seconds(60)) { $0 == .upToDate }
        let status = try await setup.firstCrypto.backupStatus()
        #expect(status.version == version && status.waiting == 0 && status.stopReason == nil)
        let onServer = try await setup.firstCrypto.currentBackupVersion()
        #expect(onServer.version == version && onServer.count >= 2)
        let privateKey = try #require(try await setup.firstCrypto.backupPrivateKey())
        // The first device goes away: no sibling can forward a key.
        await setup.first.community.shutdown()

        let second = CommunityFixture()
        _ = try await second.community.session.signIn(username: setup.username, password: testPassword)
        let secondCrypto = try await second.readyCrypto()
        #expect(try await secondCrypto.enableBackup(privateKey: privateKey) == version)
        let restored = try await secondCrypto.restoreBackup()
        #expect(restored.total == onServer.count && restored.imported >= 2)
        try await second.community.chat.waitForConversation(setup.roomID)
        let room = try await second.community.chat.conversation(id: setup.roomID)
        let stop = room.observe()
        defer { stop() }
        _ = try await room.waitForTimeline { items in
            items.texts.contains("bob before the new device") && items.texts.contains("mine before the new device")
        }
        // Restored keys are not uploaded again.
        #expect(try await secondCrypto.backupStatus().waiting == 0)
        let wrong = try SecretBox.generateKey()
        await #expect(throws: KeyBackupError.keyMismatch) { try await secondCrypto.enableBackup(privateKey: wrong) }
        for canary in ["bob before the new device", "mine before the new device"] {
            #expect(!second.logs.text.contains(canary))
        }
    }

    @Test(
        "A backup replaced by another device's new version is noticed at the next upload (M_WRONG_ROOM_KEYS_VERSION), one deleted at the next check; uploads stop"
    )
    func replacedAndDeleted() async throws {
        let setup = try await Self.setUp("eve")
        _ = try await setup.firstCrypto.createBackup()
        try await setup.firstCrypto.backupState.wait(timeout: .seconds(60)) { $0 == .upToDate }

        let second = CommunityFixture()
        _ = try await second.community.session.signIn(username: setup.username, password: testPassword)
        let secondCrypto = try await second.readyCrypto()
        let newVersion = try await secondCrypto.createBackup()

        // The first device's next room key (a new room's session) meets the new version.
        let lobby = try await setup.first.community.chat.createRoom(name: "After the replacement", isEncrypted: true)
        let lobbyRoom = try await setup.first.community.chat.conversation(id: lobby)
        _ = try await lobbyRoom.send(.text("after")).sentEventID()
        try await setup.firstCrypto.backupState.wait(timeout: .seconds(60)) { $0 == .disabled }
        let status = try await setup.firstCrypto.backupStatus()
        #expect(status.stopReason == .replaced && status.waiting == 0)

        // A third device uses the new version (given its key); the second deletes it: the
        // third's next check notices.
        let third = CommunityFixture()
        _ = try await third.community.session.signIn(username: setup.username, password: testPassword)
        let thirdCrypto = try await third.readyCrypto()
        let newKey = try #require(try await secondCrypto.backupPrivateKey())
        #expect(try await thirdCrypto.enableBackup(privateKey: newKey) == newVersion)
        try await secondCrypto.deleteBackup()
        // Synapse's current version is the newest one left: the first device's, not the third's.
        #expect(try await thirdCrypto.currentBackupVersion().version != newVersion)
        let checked = try await thirdCrypto.checkBackup()
        #expect(checked.stopReason == .deleted && checked.version == newVersion)
        #expect(thirdCrypto.backupState.value == .disabled)
    }
}
