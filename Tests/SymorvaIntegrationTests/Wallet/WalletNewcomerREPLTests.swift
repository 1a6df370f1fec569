import Foundation
import SymorvaKit
import SymorvaMachines
import Testing

/// A newcomer's first transfer, typed into the built `symorva` program against the real
/// servers: two members register, one sets a PIN and sends to the other, who never used the
/// wallet; both see their balances and histories. Part of the serialized wallet suite.
extension WalletIntegrationTests {
    @Test(
        "A newcomer registers, sets a PIN and sends to a member who never used the wallet",
        .requires(DevEnvironment.current?.manifestPath != nil, "needs the dev servers' manifest"),
        .requires(REPLProcess.binary != nil, "needs the symorva binary (swift build)"))
    func newcomersFirstTransfer() async throws {
        let data = TemporaryDataDirectory("wallet-newcomer")
        let processEnvironment = ["SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": environment.manifestPath!]
        let aliceName = DevEnvironment.uniqueUsername("alice")
        let bobName = DevEnvironment.uniqueUsername("bob")
        let aliceID = "@\(aliceName):\(environment.serverName)"
        let bobID = "@\(bobName):\(environment.serverName)"

        let first = try REPLProcess(environment: processEnvironment)
        for name in [aliceName, bobName] {
            first.send("register \(name) --password-stdin")
            first.send(testPassword.exposedValue)
            try await first.waitForLine { $0.hasPrefix("registered and signed in as @\(name):") }
        }
        first.send("wallet pin")
        first.send("2468")
        first.send("2468")
        try await first.waitForLine { $0 == "wallet PIN set" }
        // The scene: what the dev environment's starting balance gives every new wallet outside
        // test mode (Scripts/test runs the services in test mode, where wallets start empty).
        let bank = try await WalletMember.register("bank", in: environment, transport: transport)
        defer { bank.removeFiles() }
        try await bank.credit(UserID(bobID)!, "20.00")

        first.send("wallet send \(aliceID) 5.00 ORB")
        try await first.waitForLine { $0.hasPrefix("draft ") && $0.contains("5.00 ORB to \(aliceID)") }
        first.send("2468")
        try await first.waitForLine { $0.hasPrefix("settled: 5.00 ORB to \(aliceID) (transfer t_") }
        first.send("wallet balances")
        try await first.waitForLine { $0 == "  ORB  15.00" }
        first.send("wallet history")
        try await first.waitForLine { $0.hasPrefix("  -5.00 ORB   to \(aliceID)  t_") }
        try await first.waitForLine { $0.hasPrefix("  +20.00 ORB  credit  t_") }
        first.send("switch \(aliceName)")
        try await first.waitForLine { $0.hasPrefix("switched to \(aliceID)") }
        first.send("wallet balances")
        try await first.waitForLine { $0 == "  ORB  5.00" }
        first.send("wallet history")
        try await first.waitForLine { $0.hasPrefix("  +5.00 ORB  from \(bobID)  t_") }
        first.send("quit")
        #expect(try await first.finish() == 0)
        #expect(first.transcript.value.errors.filter { $0.contains("error: ") }.isEmpty)

        // The PIN's mistakes print as sentences, and a changed PIN is the one that sends.
        let second = try REPLProcess(environment: processEnvironment)
        // A member without a PIN is told to set one, whether sending or changing.
        let carolName = DevEnvironment.uniqueUsername("carol")
        second.send("register \(carolName) --password-stdin")
        second.send(testPassword.exposedValue)
        try await second.waitForLine { $0.hasPrefix("registered and signed in as @\(carolName):") }
        let noPIN = "error: the wallet has no PIN yet; set one with 'wallet pin'"
        for (line, secrets) in [
            ("wallet send \(aliceID) 1.00 ORB", []), ("wallet pin --change", ["2468", "1357", "1357"]),
        ] {
            let before = second.transcript.value.errors.filter { $0.hasSuffix(noPIN) }.count
            second.send(line)
            for secret in secrets { second.send(secret) }
            try await second.transcript.wait(timeout: .seconds(60)) { transcript in
                transcript.errors.filter { $0.hasSuffix(noPIN) }.count > before || transcript.hasExited
            }
        }
        second.send("switch \(bobName)")
        // (waitForLine stops at the first error line; from here on errors are expected.)
        try await second.transcript.wait(timeout: .seconds(60)) { transcript in
            transcript.output.contains { $0.hasPrefix("switched to \(bobID)") } || transcript.hasExited
        }
        for (line, secrets, answer) in [
            ("wallet pin", ["1111", "2222"], "error: the two PINs differ; the PIN was not changed"),
            (
                "wallet pin", ["1111", "1111"],
                "error: the wallet already has a PIN; change it with 'wallet pin --change'"
            ),
            ("wallet pin", ["12", "12"], "error: a PIN is 4 to 12 digits; the PIN was not changed"),
            ("wallet pin --change", ["9999", "1357", "1357"], "error: wrong current PIN; the PIN was not changed"),
        ] {
            second.send(line)
            for secret in secrets { second.send(secret) }
            try await second.transcript.wait(timeout: .seconds(60)) { transcript in
                transcript.errors.contains { $0.hasSuffix(answer) } || transcript.hasExited
            }
        }
        second.send("wallet pin --change")
        for secret in ["2468", "1357", "1357"] { second.send(secret) }
        try await second.transcript.wait(timeout: .seconds(60)) {
            $0.output.contains("wallet PIN changed") || $0.hasExited
        }
        second.send("wallet send \(aliceID) 1.00 ORB")
        second.send("1357")
        try await second.transcript.wait(timeout: .seconds(60)) { transcript in
            transcript.output.contains { $0.hasPrefix("settled: 1.00 ORB to \(aliceID)") } || transcript.hasExited
        }
        second.send("quit")
        #expect(try await second.finish() == 1)  // piped mode: some commands failed, as expected
        let errors = second.transcript.value.errors.filter { $0.contains("error: ") }
        #expect(errors.count == 6, "\(errors)")
        #expect(second.output.contains("wallet PIN changed"))
        #expect(second.output.contains { $0.hasPrefix("settled: 1.00 ORB to \(aliceID)") })
        // No PIN ever reached the program's output.
        // (User names carry a time stamp and a random number: they are taken out first.)
        let printed = (first.output + second.output).map {
            $0.replacingOccurrences(of: aliceName, with: "alice").replacingOccurrences(of: bobName, with: "bob")
        }
        for pin in ["2468", "1357", "9999", "1111", "2222"] {
            #expect(!printed.contains { $0.contains(pin) })
        }
    }
}
