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
        // Enabling the backup also looks up, one by one, the keys of the events this device could
        // not decrypt yet, concurrently with the full restore: each backed-up key is imported by
        // exactly one of the two paths, and afterwards the device holds every one of them.
        // (The lookup logs each key it stored right after storing it.)
        #expect(restored.total == onServer.count)
        _ = try await eventually(timeout: .seconds(30), "each backed-up key imported once") { () -> Bool? in
            let onDemand = second.logs.text.components(separatedBy: "room key restored from the key backup").count - 1
            return restored.imported + onDemand == restored.total ? true : nil
        }
        for entry in try await secondCrypto.backupEntries(version: version) {
            #expect(try await secondCrypto.roomKey(roomID: RoomID(entry.roomID), sessionID: entry.sessionID) != nil)
        }
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
        "An undecryptable event's session is fetched from the backup before the other devices are asked: the message decrypts with no full restore and no sibling online"
    )
    func sessionFetchedOnDemand() async throws {
        let setup = try await Self.setUp("fay")
        _ = try await setup.firstCrypto.createBackup()
        try await setup.firstCrypto.backupState.wait(timeout: .seconds(60)) { $0 == .upToDate }
        let privateKey = try #require(try await setup.firstCrypto.backupPrivateKey())
        await setup.first.community.shutdown()

        let second = CommunityFixture()
        _ = try await second.community.session.signIn(username: setup.username, password: testPassword)
        let secondCrypto = try await second.readyCrypto()
        _ = try await secondCrypto.enableBackup(privateKey: privateKey)
        try await second.community.chat.waitForConversation(setup.roomID)
        let room = try await second.community.chat.conversation(id: setup.roomID)
        let stop = room.observe()
        defer { stop() }
        // The keys asked for before the backup was enabled are looked up in it once it is.
        _ = try await room.waitForTimeline { items in
            items.texts.contains("bob before the new device") && items.texts.contains("mine before the new device")
        }
        #expect(second.logs.text.contains("room key restored from the key backup"))
        #expect(!second.logs.text.contains("key backup restored keys="))
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
        // A version is used only when the account signed it (the master key, or a device the
        // default strict policy trusts): the first device cross-signs the second, as a
        // verification between them ends, before the second makes one.
        try await setup.firstCrypto.crossSignOwnDevice(secondCrypto.deviceID.rawValue)
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

/// The `symorva` program dies (`SIGKILL`) after Synapse answered a `PUT room_keys/keys` and
/// before the uploaded keys left the outbox (`SYMORVA_FAULT_POINT=backup.upload`).
@Suite(
    "The key backup's outbox survives the client process being killed",
    .requires(DevEnvironment.isAvailable && DevEnvironment.current?.manifestPath != nil, "needs Scripts/dev-server"),
    .requires(REPLProcess.binary != nil, "needs the symorva binary (swift build)"), .shutsDownCommunities)
struct KeyBackupKillTests {
    @Test(
        "Killed during the upload: the keys stay in the outbox, the restart uploads them, the backup holds every session"
    )
    func killDuringUpload() async throws {
        let environment = DevEnvironment.current!
        let data = TemporaryDataDirectory("backup-kill")
        let processEnvironment = ["SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": environment.manifestPath!]
        var armed = processEnvironment
        armed[FaultPoint.environmentVariable] = FaultPoint.backupUploadAnswered.rawValue

        let username = DevEnvironment.uniqueUsername("kill")
        let first = try REPLProcess(environment: armed)
        first.send("register \(username) --password-stdin")
        first.send(testPassword.exposedValue)
        try await first.waitForLine { $0.hasPrefix("registered and signed in as ") }
        first.send("create Kept --encrypted")
        let created = try await first.waitForLine { $0.hasPrefix("created !") && $0.hasSuffix(" (encrypted)") }
        let roomID = created.split(separator: " ")[1]
        first.send("open \(roomID)")
        first.send("send in the backup after a kill")
        try await first.waitForLine { $0.contains(": in the backup after a kill  [encrypted") }
        first.send("backup create")
        try await first.waitForFaultPoint(.backupUploadAnswered)
        let storePath = try WalletIntegrationTests.accountStorePath(in: data.path)
        let sessions = try await Self.count("e2ee_inbound_group_sessions", at: storePath)
        #expect(sessions >= 1)
        #expect(try await Self.count("e2ee_backup_outbox", at: storePath) == sessions, "the upload was not recorded")

        // The next process resumes: the outbox empties.
        let second = try REPLProcess(environment: processEnvironment)
        var line = ""
        for _ in 0..<300 where !line.hasSuffix(", 0 session(s) waiting") {
            let before = second.output.count
            second.send("backup status")
            line = try await second.transcript.wait(timeout: .seconds(30)) { $0.output.count > before }.output[before]
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(line.hasPrefix("backup: version ") && line.hasSuffix(", 0 session(s) waiting"))
        second.send("quit")
        #expect(try await second.finish() == 0)
        #expect(try await Self.count("e2ee_backup_outbox", at: storePath) == 0)

        // The server's backup holds every session of the device.
        let other = CommunityFixture()
        _ = try await other.community.session.signIn(username: username, password: testPassword)
        let otherCrypto = try await other.readyCrypto()
        #expect(try await otherCrypto.currentBackupVersion().count == sessions)
    }

    /// How many rows `table` of the account database at `path` holds.
    static func count(_ table: String, at path: String) async throws -> Int {
        let database = try await SQLiteDatabase.open(path: path, migrations: ChatSchema.migrations)
        return try await database.run { db throws(StoreError) in
            try db.queryOne("SELECT COUNT(*) FROM \(table)") { $0.int(0) } ?? 0
        }
    }
}
