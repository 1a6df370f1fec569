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
        try await repl.waitForLine { $0.hasSuffix(": sealed words  [encrypted]") }
        repl.send("quit")
        #expect(try await repl.finish() == 0)
    }
}
