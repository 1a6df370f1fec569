import Foundation
import SymorvaKit
import Testing

/// The REPL's encryption commands against the real Synapse.
@Suite(
    "REPL encryption commands against Synapse",
    .requires(DevEnvironment.isAvailable && DevEnvironment.current?.manifestPath != nil, "needs Scripts/dev-server"),
    .requires(REPLProcess.binary != nil, "needs the symorva binary (swift build)"))
struct CryptoREPLTests {
    @Test("devices lists this device, create --encrypted makes an encrypted room, and its messages show as encrypted")
    func encryptedRoomInTheREPL() async throws {
        let environment = DevEnvironment.current!
        let data = TemporaryDataDirectory("crypto-repl")
        let repl = try REPLProcess(
            environment: ["SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": environment.manifestPath!])
        repl.send("register \(DevEnvironment.uniqueUsername("repl")) --password-stdin")
        repl.send(testPassword.exposedValue)
        try await repl.waitForLine { $0.hasPrefix("registered and signed in as ") }
        // The device's keys are published and queried back shortly after sign-in.
        var listed = ""
        for _ in 0..<100 {
            let before = repl.output.count
            repl.send("devices")
            let transcript = try await repl.transcript.wait(timeout: .seconds(30)) { $0.output.count > before }
            listed = transcript.output[before]
            if listed.hasPrefix("* ") && listed.contains(" ed25519:") { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(listed.hasPrefix("* ") && listed.contains(" ed25519:"))
        repl.send("create Vault --encrypted")
        let created = try await repl.waitForLine { $0.hasPrefix("created !") && $0.hasSuffix(" (encrypted)") }
        let roomID = created.split(separator: " ")[1]
        repl.send("encryption \(roomID)")
        try await repl.waitForLine { $0 == "\(roomID): encrypted" }
        repl.send("create Lobby")
        let plain = try await repl.waitForLine { $0.hasPrefix("created !") && !$0.hasSuffix(" (encrypted)") }
        let plainID = plain.split(separator: " ")[1]
        repl.send("encryption \(plainID)")
        try await repl.waitForLine { $0 == "\(plainID): notEncrypted" }
        repl.send("encryption \(plainID) on")
        try await repl.waitForLine { $0 == "\(plainID): encrypted" }
        // Nothing is missing in a room this device created: no request goes out again.
        repl.send("encryption \(roomID) keys")
        try await repl.waitForLine { $0 == "\(roomID): 0 key request(s) sent again" }
        repl.send("open \(roomID)")
        repl.send("send sealed words")
        try await repl.waitForLine { $0.contains(": sealed words  [encrypted") }
        repl.send("quit")
        #expect(try await repl.finish() == 0)
    }

    /// Sends `devices` until a line satisfies `match` (the device's trust comes with a later
    /// `keys/query`); returns the lines of the last listing.
    func waitForDevices(
        _ repl: REPLProcess, _ command: String = "devices", until match: @escaping (String) -> Bool
    ) async throws -> [String] {
        var lines: [String] = []
        for _ in 0..<300 {
            let before = repl.output.count
            repl.send(command)
            let transcript = try await repl.transcript.wait(timeout: .seconds(30)) { transcript in
                transcript.output.dropFirst(before).contains {
                    $0.hasPrefix("identity: ") || $0.contains(" identity: ")
                }
            }
            lines = Array(transcript.output.dropFirst(before))
            if lines.contains(where: match) { return lines }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("never listed as expected: \(lines)")
        return lines
    }

    @Test(
        "recovery setup prints the recovery key once; a second device's recovery restore cross-signs it; devices shows trust and the identity; trust ok"
    )
    func recoveryInTheREPL() async throws {
        let environment = DevEnvironment.current!
        let username = DevEnvironment.uniqueUsername("recrepl")
        let firstData = TemporaryDataDirectory("recovery-repl-1")
        let first = try REPLProcess(
            environment: ["SYMORVA_DATA_DIR": firstData.path, "SYMORVA_MANIFEST": environment.manifestPath!])
        first.send("register \(username) --password-stdin")
        first.send(testPassword.exposedValue)
        let registered = try await first.waitForLine { $0.hasPrefix("registered and signed in as ") }
        let userID = String(registered.dropFirst("registered and signed in as ".count).prefix { $0 != " " })
        _ = try await waitForDevices(first) { $0.hasPrefix("* ") && $0.contains(" ed25519:") }
        first.send("recovery setup")
        let keyLine = try await first.waitForLine { $0.hasPrefix("recovery key: ") }
        let recoveryKey = String(keyLine.dropFirst("recovery key: ".count))
        #expect(first.output.filter { $0.contains(recoveryKey) }.count == 1, "printed once")
        _ = try await waitForDevices(first) { $0 == "identity: ready" }
        _ = try await waitForDevices(first) { $0.hasPrefix("* ") && $0.hasSuffix(" verified") }

        let secondData = TemporaryDataDirectory("recovery-repl-2")
        let second = try REPLProcess(
            environment: ["SYMORVA_DATA_DIR": secondData.path, "SYMORVA_MANIFEST": environment.manifestPath!])
        second.send("login \(username) --password-stdin")
        second.send(testPassword.exposedValue)
        try await second.waitForLine { $0.hasPrefix("signed in as ") }
        _ = try await waitForDevices(second) { $0 == "identity: needs recovery" }
        second.send("recovery restore")
        second.send(recoveryKey)
        try await second.waitForLine { $0 == "device cross-signed" }
        // The set-up created a key backup; the restore enabled it and restored its keys (none yet).
        try await second.waitForLine { $0 == "backup restored: 0 new key(s) of 0" }
        let listed = try await waitForDevices(second) { $0.hasPrefix("* ") && $0.hasSuffix(" verified") }
        #expect(listed.contains("identity: ready"))
        #expect(listed.filter { $0.hasSuffix(" verified") }.count == 2, "both devices verified: \(listed)")
        // Nothing changed for the account: nothing to acknowledge.
        second.send("trust \(userID) ok")
        try await second.waitForLine { $0 == "\(userID): no identity change" }
        for repl in [first, second] {
            repl.send("quit")
            #expect(try await repl.finish() == 0)
        }
    }
}
