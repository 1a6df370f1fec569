import Foundation
import SymorvaChat
import SymorvaCryptoDriver
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// A key backup is used only when the account vouches for it, against the real Synapse: a
/// version whose `auth_data` nobody of the account signed (what a server could make up) is
/// refused even with its private key; one signed by a cross-signed device of the account, or
/// by the master key, is used.
@Suite(
    "Key backup auth_data signatures against Synapse",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct BackupTrustTests {
    @Test("An unsigned backup version is refused with its key; a device-signed one is used by another device")
    func unsignedBackupRefused() async throws {
        let username = DevEnvironment.uniqueUsername("bkt")
        let first = CommunityFixture()
        _ = try await first.community.session.register(username: username, password: testPassword)
        let firstCrypto = try await first.readyCrypto()
        _ = try await firstCrypto.setUpRecovery()

        // A version with only a public key in auth_data, no signature: as the server could post it.
        let driver = OlmCryptoDriver()
        let forged = try driver.newBackupDecryptionKey()
        let requester = try #require(first.community.requester)
        _ = try await requester.send(
            try E2EEAPI.createBackupVersion(authData: .object(["public_key": .string(forged.publicKey)])))
        let second = CommunityFixture()
        _ = try await second.community.session.signIn(username: username, password: testPassword)
        let secondCrypto = try await second.readyCrypto()
        await #expect(throws: KeyBackupError.untrusted) {
            _ = try await secondCrypto.enableBackup(privateKey: forged.privateKey)
        }
        #expect(try await secondCrypto.backupStatus().version == nil, "nothing enabled")

        // A version the first device made (auth_data signed by it; it is cross-signed): used.
        let version = try await firstCrypto.createBackup()
        let key = try #require(try await firstCrypto.backupPrivateKey())
        #expect(try await secondCrypto.enableBackup(privateKey: key) == version)
    }
}
