import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import Testing

/// Restart and secrecy, against the real servers. Part of the serialized wallet suite.
extension WalletIntegrationTests {
    @Test("Torn down after sending confirm, before the answer: a new client resolves it by query, exactly once")
    func restartAfterSendingConfirm() async throws {
        let (alice, bob) = try await pair()
        defer { for member in [alice, bob] { member.removeFiles() } }
        let draft = try await alice.wallet.prepareTransfer(
            to: bob.memberID, asset: WalletMember.orb, amount: .orb("12"))
        // The service records the command as pending and executes it only after 2 s, so the
        // first client is gone long before any answer.
        try await alice.holdNextConfirm(milliseconds: 2000)
        try await alice.countConfirms()
        let confirming = Task { try? await draft.confirm(with: .pin(Secret("4711"))) }
        do {
            try await alice.waitForConfirms(1)  // the request is at the service, held
        } catch {
            await alice.clearFaults()
            throw error
        }
        await alice.clearFaults()
        let stored = try await alice.storedCommands()
        #expect(stored.count == 1)
        let commandID = try #require(stored.first?.pending.commandID)

        // "Kill": the account scope ends and every host stops; the confirm's transfer is aborted.
        alice.scope.end(reason: .shutdown)
        alice.wallet.shutdown()
        confirming.cancel()

        // "Restart": a new client on the same database file, in a new scope.
        let recorder = TraceRecorder()
        let tracer = Tracer()
        tracer.addSink(recorder)
        let restarted = try await alice.reopenedWallet(tracer: tracer)
        let resumed = try await restarted.resumePendingCommands()
        #expect(resumed.map(\.commandID) == [commandID])
        #expect(restarted.pendingCommands.value.map(\.commandID) == [commandID])
        let final = try await resumed[0].states.wait(timeout: .seconds(20)) { $0.isFinal }
        guard case .settled(let transfer) = final else {
            Issue.record("expected settled, got \(final.caseName)")
            return
        }
        #expect(transfer.commandID == commandID)
        try await restarted.pendingCommands.wait { $0.isEmpty }
        try await alice.waitForEmptyStore()
        // alice's first wallet belongs to the ended scope: it refuses to act; the restarted one reads.
        await #expect(throws: TransferError.accountEnded) { try await alice.wallet.history() }
        #expect(try await alice.entries(of: commandID, in: restarted).count == 1)
        #expect(try await bob.entries(of: commandID).count == 1)
        #expect(try await alice.orbBalance(in: restarted) == "88.00")
        // The restarted client only ever queried: no confirmation left it.
        let effects = recorder.records.flatMap(\.effects)
        #expect(effects.contains("sendQuery"))
        #expect(!effects.contains("sendConfirm"))
        // Resuming again finds nothing left to do.
        #expect(try await restarted.resumePendingCommands().isEmpty)
    }

    @Test("The PIN never reaches the logs, the traces or the database file")
    func pinCanary() async throws {
        let canary = "918273"
        let capture = SharedLogCapture()
        defer { capture.finish() }
        let recorder = TraceRecorder()
        let tracer = Tracer()
        tracer.addSink(recorder)
        tracer.addSink(LoggingTraceSink())

        let alice = try await WalletMember.register("canary", in: environment, transport: transport, tracer: tracer)
        let bob = try await WalletMember.register("bob", in: environment, transport: transport)
        defer { for member in [alice, bob] { member.removeFiles() } }
        try await alice.wallet.setPIN(Secret(canary))
        try await bob.wallet.setPIN(Secret("2580"))
        try await alice.credit(alice.memberID, "50.00")

        // A wrong PIN, then the canary through a dropped answer, so that every path runs:
        // sealing, the store write, the ambiguous answer, the query.
        let draft = try await alice.wallet.prepareTransfer(to: bob.memberID, asset: WalletMember.orb, amount: .orb("5"))
        #expect(try await draft.confirm(with: .pin(Secret("000000"))).failure == .wrongPIN(attemptsLeft: 4))
        try await alice.armConfirmFault("commit_then_drop")
        let outcome = try await draft.confirm(with: .pin(Secret(canary)))
        await alice.clearFaults()
        let pending = try #require(outcome.pending)
        let commandID = pending.commandID
        // While unknown, the command is in the file: the byte search below looks at the right file.
        let fileWhilePending = try databaseBytes(alice.databasePath)
        #expect(fileWhilePending.containsBytes(Array(commandID.rawValue.utf8)))
        _ = try await pending.query().settledTransfer()

        let logText = capture.text
        #expect(!logText.isEmpty)
        #expect(!logText.contains(canary))
        #expect(!recorder.records.isEmpty)
        #expect(!recorder.records.map(\.description).joined(separator: "\n").contains(canary))
        #expect(!fileWhilePending.containsBytes(Array(canary.utf8)))
        #expect(!(try databaseBytes(alice.databasePath)).containsBytes(Array(canary.utf8)))
    }

    /// The database file and its WAL and shared-memory files, concatenated.
    private func databaseBytes(_ path: String) throws -> [UInt8] {
        var bytes: [UInt8] = []
        for suffix in ["", "-wal", "-shm"] {
            if let data = FileManager.default.contents(atPath: path + suffix) { bytes += data }
        }
        return bytes
    }
}

extension Array where Element == UInt8 {
    /// Whether `needle` occurs in the bytes.
    func containsBytes(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return needle.isEmpty }
        for start in 0...(count - needle.count) where self[start] == needle[0] {
            if Array(self[start..<(start + needle.count)]) == needle { return true }
        }
        return false
    }
}
