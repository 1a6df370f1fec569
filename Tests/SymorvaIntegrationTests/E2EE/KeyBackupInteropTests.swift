import Foundation
import SymorvaChat
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import Testing

/// The key backup read and written by vodozemac (the interop environment's Python package, an
/// implementation independent of libolm), through Synapse.
@Suite(
    "Key backup interoperability with vodozemac",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .requires(NioPeer.python != nil, "needs the interop Python environment (SYMORVA_INTEROP_PYTHON)"),
    .shutsDownCommunities)
struct KeyBackupInteropTests {
    @Test(
        "vodozemac decrypts every entry SymorvaKit uploaded with the backup key; an entry vodozemac wrote is restored by a new device, which reads the message"
    )
    func bothWays() async throws {
        let setup = try await KeyBackupIntegrationTests.setUp("hal")
        let version = try await setup.firstCrypto.createBackup()
        try await setup.firstCrypto.backupState.wait(timeout: .seconds(60)) { $0 == .upToDate }
        let privateKey = try #require(try await setup.firstCrypto.backupPrivateKey())
        let entries = try await setup.firstCrypto.backupEntries(version: version)
        #expect(entries.count >= 2)

        // vodozemac reads SymorvaKit's entries: each is the session it is filed under.
        let driver = OlmCryptoDriver()
        var plaintexts: [String: String] = [:]
        for entry in entries {
            let input = [
                UnpaddedBase64.encode(privateKey.exposedValue), entry.key.sessionData.ciphertext,
                entry.key.sessionData.mac,
                entry.key.sessionData.ephemeral,
            ].joined(separator: "\n")
            let plaintext = try Self.run("--decrypt-stdin", input: input)
            let session = try #require(BackedUpSession(plaintext: Secret(Array(plaintext.utf8))))
            #expect(session.algorithm == "m.megolm.v1.aes-sha2")
            let imported = try driver.inboundGroupSession(exportedKey: session.sessionKey)
            #expect(imported.sessionID == entry.sessionID)
            #expect(imported.firstKnownIndex == entry.key.firstMessageIndex)
            plaintexts[entry.sessionID] = plaintext
        }
        await setup.first.community.shutdown()

        // A new device makes a new backup (empty: it holds no key) and vodozemac writes the
        // sessions into it, encrypted for its public key; the device restores them.
        let second = CommunityFixture()
        _ = try await second.community.session.signIn(username: setup.username, password: testPassword)
        let secondCrypto = try await second.readyCrypto()
        let newVersion = try await secondCrypto.createBackup()
        let newKey = try driver.backupDecryptionKey(privateKey: try #require(try await secondCrypto.backupPrivateKey()))
        var written: [(roomID: String, sessionID: String, key: BackedUpRoomKey)] = []
        for entry in entries {
            let lines = try Self.run("--encrypt-stdin", input: newKey.publicKey + "\n" + plaintexts[entry.sessionID]!)
                .split(separator: "\n").map(String.init)
            try #require(lines.count == 3)
            written.append(
                (
                    entry.roomID, entry.sessionID,
                    BackedUpRoomKey(
                        firstMessageIndex: entry.key.firstMessageIndex, forwardedCount: 0, isVerified: false,
                        sessionData: BackupCiphertext(ciphertext: lines[0], mac: lines[1], ephemeral: lines[2]))
                ))
        }
        try await secondCrypto.putBackupEntries(written, version: newVersion)
        let restored = try await secondCrypto.restoreBackup()
        // Creating the backup also looks up, one by one, the keys of the events this device could
        // not decrypt yet; under load that lookup can run after vodozemac's entries are in,
        // concurrently with the restore: each key is imported by exactly one of the two paths.
        #expect(restored.total == entries.count)
        _ = try await eventually(timeout: .seconds(30), "each written key imported once") { () -> Bool? in
            let onDemand = second.logs.text.components(separatedBy: "room key restored from the key backup").count - 1
            return restored.imported + onDemand == entries.count ? true : nil
        }
        try await second.community.chat.waitForConversation(setup.roomID)
        let room = try await second.community.chat.conversation(id: setup.roomID)
        let stop = room.observe()
        defer { stop() }
        _ = try await room.waitForTimeline { items in
            items.texts.contains("bob before the new device") && items.texts.contains("mine before the new device")
        }
    }

    /// Runs `Tests/InteropPeer/backup_vectors.py` with `mode`, `input` on its standard input;
    /// its standard output.
    static func run(_ mode: String, input: String) throws -> String {
        guard let python = NioPeer.python else { throw IntegrationFailure("SYMORVA_INTEROP_PYTHON is not set") }
        let script = try ChartLocator.packageRoot().appending(path: "Tests/InteropPeer/backup_vectors.py")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script.path, mode]
        let output = Pipe()
        let stdin = Pipe()
        process.standardOutput = output
        process.standardInput = stdin
        try process.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw IntegrationFailure("backup_vectors.py \(mode) exited with \(process.terminationStatus)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}
