import Foundation
import SymorvaChatStore
import SymorvaKit
import SymorvaMachines
import SymorvaStore
import SymorvaWallet
import Testing

/// A real process death between the confirm request and its answer. Part of the serialized
/// wallet suite: it arms the service's hold and a counting fault, which are server-wide.
extension WalletIntegrationTests {
    @Test(
        "Killed (SIGKILL) after sending confirm, before the answer: the restarted process resolves it by query, once",
        .requires(DevEnvironment.current?.manifestPath != nil, "needs the dev servers' manifest"),
        .requires(REPLProcess.binary != nil, "needs the symorva binary (swift build)"))
    func killAfterSendingConfirm() async throws {
        let (alice, bob) = try await pair()
        defer { for member in [alice, bob] { member.removeFiles() } }
        let data = TemporaryDataDirectory("wallet-kill")
        // Counts the confirm requests that reach the service (a delay of 0 changes nothing else).
        try await alice.countConfirms()
        do {
            try await killAndRestart(alice, bob, data: data)
        } catch {
            await alice.clearFaults()
            throw error
        }
        await alice.clearFaults()
    }

    private func killAndRestart(_ alice: WalletMember, _ bob: WalletMember, data: TemporaryDataDirectory)
        async throws
    {
        let processEnvironment = ["SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": environment.manifestPath!]

        // Process 1 signs Alice in on a device of its own and sends; the service accepts the
        // confirm as pending and holds its answer while the process is killed.
        let first = try REPLProcess(environment: processEnvironment)
        first.send("login \(alice.account.userID) --password-stdin")
        first.send(testPassword.exposedValue)
        try await first.waitForLine { $0.hasPrefix("signed in as ") }
        first.send("wallet send \(bob.memberID.rawValue) 12 ORB")
        try await first.waitForLine { $0.hasPrefix("draft ") }
        try await alice.holdNextConfirm(milliseconds: 5000)
        first.send("4711")
        try await alice.waitForConfirms(1)
        try await first.kill()
        #expect(!first.output.contains { $0.hasPrefix("settled") || $0.hasPrefix("unknown") })

        // The command was in the account's store when the process died.
        let storePath = try Self.accountStorePath(in: data.path)
        let stored = try await Self.openStore(at: storePath).storedCommands()
        #expect(stored.count == 1)
        let commandID = try #require(stored.first?.pending.commandID)

        // Process 2 on the same data folder: restoring the account resumes the command, which
        // is queried (pending while held, then settled) and never confirmed again.
        let second = try REPLProcess(environment: processEnvironment)
        second.send("trace on")
        second.send("whoami")
        try await second.waitForLine {
            $0.hasPrefix("trace: Transfer[") && $0.contains("event=queryResponse") && $0.contains("to=settled")
        }
        try await waitForEmptyStore(at: storePath)
        second.send("wallet pending")
        try await second.waitForLine { $0 == "no pending transfers" }
        second.send("quit")
        #expect(try await second.finish() == 0)
        #expect(!second.output.contains { $0.contains("sendConfirm") })

        // Exactly one ledger entry on each side, and the service saw one confirm in all.
        #expect(try await alice.entries(of: commandID).count == 1)
        #expect(try await bob.entries(of: commandID).count == 1)
        #expect(try await alice.orbBalance() == "88.00")
        #expect(try await bob.orbBalance() == "12.00")
        #expect(try await alice.confirmCount() == 1)
    }

    /// Waits until the account database at `path` holds no pending wallet command.
    func waitForEmptyStore(at path: String) async throws {
        let store = try await Self.openStore(at: path)
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if try await store.storedCommands().isEmpty { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw IntegrationFailure("the account's store still holds the command")
    }

    /// The wallet's tables in an account database (whose main schema is chat's).
    static func openStore(at path: String) async throws -> WalletStore {
        try await WalletStore.open(on: try await SQLiteDatabase.open(path: path, migrations: ChatSchema.migrations))
    }

    /// The one account database under a data folder (`accounts/<folder>/store.sqlite`).
    static func accountStorePath(in dataPath: String) throws -> String {
        let accounts = dataPath + "/accounts"
        let folders = try FileManager.default.contentsOfDirectory(atPath: accounts)
        let folder = try #require(folders.count == 1 ? folders.first : nil, "account folders: \(folders)")
        return "\(accounts)/\(folder)/store.sqlite"
    }
}
