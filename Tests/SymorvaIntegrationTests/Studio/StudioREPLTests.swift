import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaTransport
import Testing

/// The `studio` commands typed into the built `symorva` program against the real servers: the
/// consent sheet is shown and answered, a yes grants, the summary cites the selected messages, a
/// revoke ends it, and a no shares nothing.
extension StudioIntegrationTests {
    @Test(
        "studio grant shows the consent sheet; yes grants, summarize cites the selection, revoke ends it, no shares nothing",
        .requires(DevEnvironment.current?.manifestPath != nil, "needs the dev servers' manifest"),
        .requires(REPLProcess.binary != nil, "needs the symorva binary (swift build)"))
    func repl() async throws {
        let environment = DevEnvironment.current!
        let transport = CurlTransport()
        let name = DevEnvironment.uniqueUsername("studio-repl")
        let account = try await RegisteredAccount.register(name, in: environment, transport: transport)
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL(environment.homeserverURL.absoluteString)!, userID: UserID(account.userID)!,
            accessToken: account.accessToken, transport: transport)
        let room = try await Self.createRoom(requester)
        var sent: [EventID] = []
        for (n, body) in Self.bodies.enumerated() { sent.append(try await Self.send(body, to: room, n: n, requester)) }
        let ids = sent

        let data = TemporaryDataDirectory("studio-repl")
        let repl = try REPLProcess(
            environment: ["SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": environment.manifestPath!])
        repl.send("login \(name) --password-stdin")
        repl.send(testPassword.exposedValue)
        try await repl.waitForLine { $0.hasPrefix("signed in as @\(name):") }
        repl.send("studio grant \(room.rawValue) --messages \(ids[0].rawValue) \(ids[2].rawValue)")
        try await repl.waitForLine { $0.hasPrefix("consent: Share 2 selected messages of \(room.rawValue) with ") }
        repl.send("yes")
        let granted = try await repl.waitForLine {
            $0.hasPrefix("grant gr_") && $0.hasSuffix(": 2 selected messages, active")
        }
        let grantID = String(granted.dropFirst("grant ".count).prefix { $0 != ":" })
        repl.send("studio grants")
        try await repl.waitForLine { $0.contains(grantID) && $0.contains("active") }
        repl.send("studio summarize")
        try await repl.waitForLine { $0 == "summary of 2 message(s) (extractive-lexrank):" }
        try await repl.waitForLine {
            $0.hasPrefix("  - ") && $0.hasSuffix("[\(ids[0].rawValue)]") || $0.hasSuffix("[\(ids[2].rawValue)]")
        }
        repl.send("studio revoke \(grantID)")
        try await repl.waitForLine { $0 == "grant \(grantID) revoked" }
        // From here on the commands fail as they should: wait on the error lines themselves.
        repl.send("studio summarize \(grantID)")
        try await repl.transcript.wait(timeout: .seconds(60)) { transcript in
            transcript.errors.contains { $0.hasSuffix("error: the grant is revoked: nothing was sent") }
                || transcript.hasExited
        }
        repl.send("studio grant \(room.rawValue) --since \(ids[1].rawValue)")
        repl.send("no")
        try await repl.transcript.wait(timeout: .seconds(60)) { transcript in
            transcript.errors.contains { $0.hasSuffix("error: declined: nothing was shared") } || transcript.hasExited
        }
        repl.send("quit")
        #expect(try await repl.finish() == 1)  // piped mode: the last two commands failed, as they should
        let output = repl.transcript.value.output.joined(separator: "\n")
        #expect(output.contains("consent: Share every message from \(ids[1].rawValue) on of \(room.rawValue)"))
    }
}
