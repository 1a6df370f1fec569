import Foundation
import SymorvaChat
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import Testing

/// Cross-signing and secret storage against an independent implementation, through the real
/// Synapse: mautrix-python (`Tests/InteropPeer/mautrix_peer.py`, its own libolm binding) sets up
/// an account's identity and secret storage and SymorvaKit restores from mautrix's recovery key;
/// SymorvaKit sets them up and mautrix verifies its own device with SymorvaKit's recovery key.
@Suite(
    "Cross-signing and secret storage with mautrix",
    .requires(NioPeer.isAvailable, "needs Scripts/dev-server and the interop Python environment"),
    .shutsDownCommunities)
struct MautrixCrossSigningInteropTests {
    /// What a peer run printed.
    struct PeerResult: Decodable {
        var device_id: String
        var master_key: String
        var self_signing_key: String
        var recovery_key: String?
    }

    /// Runs `mautrix_peer.py <operation>` as a new device of `user`, the password in its
    /// environment and `input` (a recovery key) on its standard input.
    static func peer(_ operation: String, user: String, input: String? = nil) async throws -> PeerResult {
        let python = try #require(NioPeer.python)
        let environment = try #require(DevEnvironment.current)
        let script = try ChartLocator.packageRoot().appending(path: "Tests/InteropPeer/mautrix_peer.py")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [
            script.path, operation, "--homeserver", environment.homeserverURL.absoluteString, "--user", user,
        ]
        process.environment = ProcessInfo.processInfo.environment.merging(
            ["SYMORVA_PEER_PASSWORD": testPassword.exposedValue]) { $1 }
        let output = Pipe()
        let errors = Pipe()
        let stdin = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = stdin
        try process.run()
        if let input { stdin.fileHandleForWriting.write(Data((input + "\n").utf8)) }
        try stdin.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw IntegrationFailure("mautrix_peer.py \(operation) exited \(process.terminationStatus): \(errorText)")
        }
        return try JSONDecoder().decode(PeerResult.self, from: data)
    }

    @Test("mautrix sets up cross-signing and secret storage; SymorvaKit restores from mautrix's recovery key")
    func restoreFromMautrix() async throws {
        // mautrix makes the account's identity: SymorvaKit must not make one at its sign-in.
        var manual = try #require(DevEnvironment.current).configuration
        manual.encryption.crossSigningBootstrap = .manual
        let fixture = CommunityFixture(configuration: manual)
        let account = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("mxa"), password: testPassword)
        let crypto = try await fixture.readyCrypto()
        let mautrix = try await Self.peer("bootstrap", user: account.userID.rawValue)
        let recoveryKey = try #require(mautrix.recovery_key)

        try await crypto.identityState.wait(timeout: .seconds(60)) { $0 == .needsRecovery }
        let restored = try await crypto.restore(recoveryKey: Secret(recoveryKey))
        #expect(restored == nil, "mautrix's secret storage holds no backup key")
        try await crypto.identityState.wait(timeout: .seconds(60)) { $0 == .ready }
        #expect(try await crypto.store.crossSigningMasterKey() == mautrix.master_key)
        // This device is cross-signed with mautrix's keys; mautrix's device, which its own
        // self-signing key signed, is verified from here (we hold the master key now).
        let recovery = RecoveryTests()
        try await recovery.waitForTrust(crypto, user: crypto.userID, deviceID: crypto.deviceID.rawValue, .verified)
        try await recovery.waitForTrust(crypto, user: crypto.userID, deviceID: mautrix.device_id, .verified)
        let observer = try await registerPeerAccount("mxobs")
        #expect(
            try await recovery.chainTrust(of: crypto.deviceID.rawValue, user: crypto.userID, seenBy: observer)
                == .crossSigned)
        #expect(!fixture.logs.text.contains(recoveryKey))
    }

    @Test(
        "SymorvaKit sets up cross-signing and secret storage; mautrix verifies its device with SymorvaKit's recovery key"
    )
    func mautrixVerifiesWithOurRecoveryKey() async throws {
        let fixture = CommunityFixture()
        let account = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("mxb"), password: testPassword)
        let crypto = try await fixture.readyCrypto()
        let recoveryKey = try await crypto.setUpRecovery()
        let masterKey = try #require(try await crypto.store.crossSigningMasterKey())

        let mautrix = try await Self.peer("verify", user: account.userID.rawValue, input: recoveryKey.exposedValue)
        #expect(mautrix.master_key == masterKey, "mautrix read our master key from secret storage")
        // mautrix signed its own device with our self-signing key: Synapse's chain says so, to us
        // (verified: our own identity) and to another account (cross-signed).
        let recovery = RecoveryTests()
        try await recovery.waitForTrust(crypto, user: crypto.userID, deviceID: mautrix.device_id, .verified)
        let observer = try await registerPeerAccount("mxobs")
        #expect(
            try await recovery.chainTrust(of: mautrix.device_id, user: crypto.userID, seenBy: observer) == .crossSigned)
        #expect(!fixture.logs.text.contains(recoveryKey.exposedValue))
    }
}
