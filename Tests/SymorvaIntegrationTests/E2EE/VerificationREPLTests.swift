import Foundation
import SymorvaKit
import Testing

/// `verify` in the REPL against the real Synapse: two REPL processes signed in to one account
/// verify each other with the emoji.
@Suite(
    "REPL verification against Synapse",
    .requires(DevEnvironment.isAvailable && DevEnvironment.current?.manifestPath != nil, "needs Scripts/dev-server"),
    .requires(REPLProcess.binary != nil, "needs the symorva binary (swift build)"))
struct VerificationREPLTests {
    @Test(
        "verify <@me> <device> on one device, verify accept on the other: the same emoji, match? y, verified on both"
    )
    func ownDeviceInTheREPL() async throws {
        let environment = try #require(DevEnvironment.current)
        let username = DevEnvironment.uniqueUsername("verrepl")
        let firstData = TemporaryDataDirectory("verify-repl-1")
        let first = try REPLProcess(
            environment: ["SYMORVA_DATA_DIR": firstData.path, "SYMORVA_MANIFEST": environment.manifestPath!])
        first.send("register \(username) --password-stdin")
        first.send(testPassword.exposedValue)
        let registered = try await first.waitForLine { $0.hasPrefix("registered and signed in as ") }
        let userID = String(registered.dropFirst("registered and signed in as ".count).prefix { $0 != " " })

        let secondData = TemporaryDataDirectory("verify-repl-2")
        let second = try REPLProcess(
            environment: ["SYMORVA_DATA_DIR": secondData.path, "SYMORVA_MANIFEST": environment.manifestPath!])
        second.send("login \(username) --password-stdin")
        second.send(testPassword.exposedValue)
        try await second.waitForLine { $0.hasPrefix("signed in as ") }
        // The second device as its own listing shows it ("* DEVICE …"), then known to the first.
        let own = try await CryptoREPLTests().waitForDevices(second) { $0.hasPrefix("* ") && $0.contains(" ed25519:") }
        let line = try #require(own.first { $0.hasPrefix("* ") })
        let secondDevice = String(line.dropFirst(2).prefix { $0 != " " })
        _ = try await CryptoREPLTests().waitForDevices(first) { $0.hasPrefix("  \(secondDevice) ") }

        first.send("verify \(userID) \(secondDevice)")
        // The request is announced at the prompt before anyone asks.
        try await second.waitForLine {
            $0.hasPrefix("verification request from \(userID) ") && $0.hasSuffix(": verify accept | verify cancel")
        }
        second.send("verify accept")
        try await second.waitForLine { $0 == "verification request from \(userID)" }
        let firstEmoji = try await first.waitForLine { $0.hasPrefix("emoji: ") }
        let secondEmoji = try await second.waitForLine { $0.hasPrefix("emoji: ") }
        #expect(firstEmoji == secondEmoji)
        #expect(firstEmoji.split(separator: ",").count == 7)
        let firstDecimals = try await first.waitForLine { $0.hasPrefix("decimals: ") }
        #expect(try await second.waitForLine { $0.hasPrefix("decimals: ") } == firstDecimals)
        first.send("y")
        second.send("y")
        try await first.waitForLine { $0 == "verified \(userID) \(secondDevice)" }
        try await second.waitForLine { $0.hasPrefix("verified \(userID) ") }
        for repl in [first, second] {
            repl.send("quit")
            #expect(try await repl.finish() == 0)
        }
    }

    @Test(
        "verify qr on the new device prints its payload, verify scan <payload> on the device with the keys: scanned? y, verified on both"
    )
    func qrInTheREPL() async throws {
        let environment = try #require(DevEnvironment.current)
        let username = DevEnvironment.uniqueUsername("vqrrepl")
        let firstData = TemporaryDataDirectory("verify-qr-repl-1")
        let first = try REPLProcess(
            environment: ["SYMORVA_DATA_DIR": firstData.path, "SYMORVA_MANIFEST": environment.manifestPath!])
        first.send("register \(username) --password-stdin")
        first.send(testPassword.exposedValue)
        let registered = try await first.waitForLine { $0.hasPrefix("registered and signed in as ") }
        let userID = String(registered.dropFirst("registered and signed in as ".count).prefix { $0 != " " })
        first.send("recovery setup")
        try await first.waitForLine { $0.hasPrefix("recovery key: ") }
        let firstOwn = try await CryptoREPLTests().waitForDevices(first) {
            $0.hasPrefix("* ") && $0.contains(" ed25519:")
        }
        let firstLine = try #require(firstOwn.first { $0.hasPrefix("* ") })
        let firstDevice = String(firstLine.dropFirst(2).prefix { $0 != " " })

        let secondData = TemporaryDataDirectory("verify-qr-repl-2")
        let second = try REPLProcess(
            environment: ["SYMORVA_DATA_DIR": secondData.path, "SYMORVA_MANIFEST": environment.manifestPath!])
        second.send("login \(username) --password-stdin")
        second.send(testPassword.exposedValue)
        try await second.waitForLine { $0.hasPrefix("signed in as ") }
        let own = try await CryptoREPLTests().waitForDevices(second) { $0.hasPrefix("* ") && $0.contains(" ed25519:") }
        let line = try #require(own.first { $0.hasPrefix("* ") })
        let secondDevice = String(line.dropFirst(2).prefix { $0 != " " })
        _ = try await CryptoREPLTests().waitForDevices(first) { $0.hasPrefix("  \(secondDevice) ") }

        // The new device shows (mode 0x02: it does not hold the keys), the first one scans.
        second.send("verify qr \(userID) \(firstDevice)")
        let qrLine = try await second.waitForLine { $0.hasPrefix("qr: ") }
        let payload = try #require(Data(base64Encoded: String(qrLine.dropFirst(4))))
        #expect(Array(payload.prefix(8)) == Array("MATRIX".utf8) + [0x02, 0x02])
        try await first.waitForLine { $0.hasPrefix("verification request from \(userID) ") }
        first.send("verify scan \(qrLine.dropFirst(4))")
        try await second.waitForLine { $0 == "the other device scanned this code" }
        second.send("y")
        try await second.waitForLine { $0 == "verified \(userID) \(firstDevice)" }
        try await first.waitForLine { $0 == "verified \(userID) \(secondDevice)" }
        for repl in [first, second] {
            repl.send("quit")
            #expect(try await repl.finish() == 0)
        }
    }
}
