import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import Testing

@testable import SymorvaE2EE

/// The key backup without a server: the endpoints, the merge rule, the durable outbox, and an
/// entry written by one device restored by another.
@Suite("KeyBackup")
struct KeyBackupTests {
    let fixture = EngineFixture()
    let room = "!room:example.org"

    @Test("Backup endpoints: versions, and room keys for all, a room and a session under ?version=")
    func endpoints() throws {
        let created = try E2EEAPI.createBackupVersion(authData: .object(["public_key": .string("K")]))
        #expect(created.method == .post && created.path == "/_matrix/client/v3/room_keys/version")
        #expect(E2EEAPI.backupVersion().path == "/_matrix/client/v3/room_keys/version")
        #expect(E2EEAPI.backupVersion("7").path == "/_matrix/client/v3/room_keys/version/7")
        #expect(E2EEAPI.deleteBackupVersion("7").method == .delete)
        let session = E2EEAPI.roomKeys(version: "7", scope: .session(RoomID("!a:b"), sessionID: "s/1"))
        #expect(session.path == "/_matrix/client/v3/room_keys/keys/%21a%3Ab/s%2F1")
        #expect(session.query == [.init(name: "version", value: "7")])
        let put = try E2EEAPI.putRoomKeys(version: "7", scope: .room(RoomID("!a:b")), body: .object([:]))
        #expect(put.method == .put && put.path == "/_matrix/client/v3/room_keys/keys/%21a%3Ab")
        #expect(E2EEAPI.roomKeys(version: "7", scope: .all).path == "/_matrix/client/v3/room_keys/keys")
    }

    @Test("The merge rule: verified beats unverified, then the lower first index, then fewer forwards")
    func mergeRule() {
        let data = BackupCiphertext(ciphertext: "c", mac: "m", ephemeral: "e")
        func key(_ index: Int, _ forwards: Int, _ verified: Bool) -> BackedUpRoomKey {
            BackedUpRoomKey(firstMessageIndex: index, forwardedCount: forwards, isVerified: verified, sessionData: data)
        }
        #expect(key(9, 3, true).isBetter(than: key(0, 0, false)))
        #expect(!key(0, 0, false).isBetter(than: key(9, 3, true)))
        #expect(key(1, 5, false).isBetter(than: key(2, 0, false)))
        #expect(key(2, 0, false).isBetter(than: key(2, 1, false)))
        #expect(!key(2, 1, false).isBetter(than: key(2, 1, false)))
        #expect(BackedUpRoomKey(json: key(4, 1, true).json) == key(4, 1, true))
    }

    @Test("Errors name their case only")
    func errorsPrintNoSecrets() {
        #expect(KeyBackupError.keyMismatch.caseName == "keyMismatch")
        #expect(KeyBackupState.uploading(remaining: 3).caseName == "uploading")
    }

    @Test(
        "Sessions enter the outbox in the transaction that stores them once a backup is in use; a better key waiting is not removed by the upload of the older one"
    )
    func outbox() async throws {
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        let backupKey = try fixture.driver.newBackupDecryptionKey()
        _ = try await alice.engine.outboundSession(roomID: room, choice: .new, nowMilliseconds: 0)
        #expect(try await alice.store.backupWaitingCount() == 0)  // no backup: nothing waits
        try await alice.store.useBackup(version: "1", publicKey: backupKey.publicKey, privateKey: backupKey.privateKey)
        #expect(try await alice.store.backupWaitingCount() == 1)  // what the device held
        _ = try await alice.engine.outboundSession(roomID: room, choice: .new, nowMilliseconds: 0)
        let waiting = try await alice.store.backupOutbox(limit: 10)
        #expect(waiting.count == 2)

        // The first entry is stored again (a better key) while its upload is in flight.
        let first = waiting[0]
        try await alice.store.saveInboundSession(
            CryptoStore.InboundSessionRow(
                roomID: "!other:example.org", sessionID: "unrelated", senderKey: "k", signingKey: "s",
                forwarded: false, pickle: first.session.pickle))
        try await alice.database.transaction { db throws(StoreError) in
            try CryptoStore.enqueueForBackup(roomID: first.session.roomID, sessionID: first.session.sessionID, in: db)
        }
        let remaining = try await alice.store.backupUploaded(
            waiting.map { ($0.session.roomID, $0.session.sessionID, $0.seq) })
        #expect(remaining == 2)  // the re-entered one and the unrelated one
        #expect(try await alice.store.backupPrivateKey()?.exposedValue == backupKey.privateKey.exposedValue)

        try await alice.store.stopBackup(.replaced)
        #expect(try await alice.store.backupWaitingCount() == 0)
        #expect(try await alice.store.storedBackup()?.stopped == .replaced)
    }

    @Test(
        "An entry one device backs up is restored by another, which decrypts the message; restored keys are not uploaded again"
    )
    func entryRoundTrip() async throws {
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        let newDevice = try await fixture.device("@alice:example.org", "NEW")
        let backupKey = try fixture.driver.newBackupDecryptionKey()
        try await alice.store.useBackup(version: "1", publicKey: backupKey.publicKey, privateKey: backupKey.privateKey)
        let (sessionID, _) = try await alice.engine.outboundSession(roomID: room, choice: .new, nowMilliseconds: 0)
        let encrypted = try await alice.engine.megolmEncrypt(
            roomID: room, sessionID: sessionID, eventType: "m.room.message",
            content: Array(#"{"body":"before the new device","msgtype":"m.text"}"#.utf8))

        let entry = try #require(try await alice.store.backupOutbox(limit: 10).first)
        let backedUp = try await alice.engine.backupEntry(entry.session, publicKey: backupKey.publicKey)
        #expect(backedUp.isVerified && backedUp.forwardedCount == 0 && backedUp.firstMessageIndex == 0)
        let served = try #require(BackedUpRoomKey(json: backedUp.json))

        try await newDevice.store.useBackup(
            version: "1", publicKey: backupKey.publicKey, privateKey: backupKey.privateKey)
        let rows = try await newDevice.engine.restoredSessions(
            [(room, sessionID, served), (room, "another-session", served)], privateKey: backupKey.privateKey)
        #expect(rows.count == 1)  // an entry filed under another session is left out
        #expect(try await newDevice.engine.importBackedUp(rows) == 1)
        #expect(try await newDevice.store.backupWaitingCount() == 0)
        let stored = try #require(try await newDevice.store.inboundSession(roomID: room, sessionID: sessionID))
        #expect(stored.fromBackup && stored.forwarded)
        let plaintext = try #require(
            try await newDevice.engine.megolmDecrypt(roomID: room, content: try JSONValue(parsing: encrypted)))
        #expect(String(decoding: plaintext.exposedValue, as: UTF8.self).contains("before the new device"))

        // Another key cannot read the entry.
        let other = try fixture.driver.newBackupDecryptionKey()
        #expect(
            try await newDevice.engine.restoredSessions([(room, sessionID, served)], privateKey: other.privateKey)
                .isEmpty)
    }
}
