import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import Testing

/// The `symorva` program dies (`SIGKILL`) between storing a wallet command and sending its
/// confirm (`SYMORVA_FAULT_POINT=wallet.persisted`). Part of the serialized wallet suite: it
/// arms the service's counting fault, which is server-wide.
extension WalletIntegrationTests {
    @Test(
        "Killed after the command is stored and before the confirm leaves: the restart queries it, never confirms it",
        .requires(DevEnvironment.current?.manifestPath != nil, "needs the dev servers' manifest"),
        .requires(REPLProcess.binary != nil, "needs the symorva binary (swift build)"))
    func killBetweenPersistAndConfirm() async throws {
        let (alice, bob) = try await pair()
        defer { for member in [alice, bob] { member.removeFiles() } }
        let data = TemporaryDataDirectory("wallet-fault")
        try await alice.countConfirms()
        do {
            try await killBeforeConfirm(alice, bob, data: data)
        } catch {
            await alice.clearFaults()
            throw error
        }
        await alice.clearFaults()
    }

    private func killBeforeConfirm(_ alice: WalletMember, _ bob: WalletMember, data: TemporaryDataDirectory)
        async throws
    {
        let processEnvironment = ["SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": environment.manifestPath!]
        var armed = processEnvironment
        armed[FaultPoint.environmentVariable] = FaultPoint.walletCommandPersisted.rawValue

        // Process 1 signs Alice in, drafts a transfer and confirms it with her PIN: it dies with
        // the command stored and the confirm not sent.
        let first = try REPLProcess(environment: armed)
        first.send("login \(alice.account.userID) --password-stdin")
        first.send(testPassword.exposedValue)
        try await first.waitForLine { $0.hasPrefix("signed in as ") }
        first.send("wallet send \(bob.memberID.rawValue) 7 ORB")
        try await first.waitForLine { $0.hasPrefix("draft ") }
        first.send("4711")
        try await first.waitForFaultPoint(.walletCommandPersisted)
        let storePath = try Self.accountStorePath(in: data.path)
        let stored = try await Self.openStore(at: storePath).storedCommands()
        #expect(stored.count == 1)
        let commandID = try #require(stored.first?.pending.commandID)
        #expect(try await alice.confirmCount() == 0)

        // Process 2 resumes the command by query: the service never saw it, so it is failed
        // (not received), cleared, and no confirm is sent after the fact.
        let second = try REPLProcess(environment: processEnvironment)
        second.send("trace on")
        second.send("whoami")
        try await second.waitForLine {
            $0.hasPrefix("trace: Transfer[") && $0.contains("event=queryResponse") && $0.contains("to=failed")
        }
        try await waitForEmptyStore(at: storePath)
        second.send("wallet pending")
        try await second.waitForLine { $0 == "no pending transfers" }
        second.send("quit")
        #expect(try await second.finish() == 0)
        #expect(!second.output.contains { $0.contains("sendConfirm") })

        // No money moved, and the service saw no confirm at all.
        #expect(try await alice.confirmCount() == 0)
        #expect(try await alice.orbBalance() == "100.00")
        #expect(try await alice.entries(of: commandID).isEmpty)
        #expect(try await bob.entries(of: commandID).isEmpty)
    }
}
