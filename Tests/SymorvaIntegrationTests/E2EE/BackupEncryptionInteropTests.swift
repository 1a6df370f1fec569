import Foundation
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaRuntime
import SymorvaTesting
import Testing

/// The key backup's encryption (`m.megolm_backup.v1.curve25519-aes-sha2`) read by vodozemac, an
/// implementation independent of libolm (the interop environment's Python package): the reverse
/// of `OlmPkTests`' vodozemac vector.
@Suite(
    "Backup encryption read by vodozemac",
    .requires(NioPeer.python != nil, "needs the interop Python environment (SYMORVA_INTEROP_PYTHON)"))
struct BackupEncryptionInteropTests {
    @Test("vodozemac decrypts an entry libolm encrypted for the RFC 7748 key")
    func vodozemacDecryptsLibolm() throws {
        let driver = OlmCryptoDriver()
        // RFC 7748 §6.1 Alice's public key: the key backup_vectors.py holds the private half of.
        let publicKey = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo"
        let plaintext = #"{"algorithm":"m.megolm.v1.aes-sha2","session_key":"from libolm \#(UUID().uuidString)"}"#
        let entry = try driver.backupEncrypt(Secret(Array(plaintext.utf8)), for: publicKey)
        let output = try Self.run(["--decrypt", entry.ciphertext, entry.mac, entry.ephemeral])
        #expect(output == plaintext)
    }

    /// Runs `Tests/InteropPeer/backup_vectors.py` with `arguments`; its standard output.
    static func run(_ arguments: [String]) throws -> String {
        guard let python = NioPeer.python else { throw IntegrationFailure("SYMORVA_INTEROP_PYTHON is not set") }
        let script = try ChartLocator.packageRoot().appending(path: "Tests/InteropPeer/backup_vectors.py")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script.path] + arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw IntegrationFailure("backup_vectors.py exited with \(process.terminationStatus)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}
