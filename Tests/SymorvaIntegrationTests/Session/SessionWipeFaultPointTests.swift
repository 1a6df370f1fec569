import Foundation
import SymorvaRuntime
import Testing

/// The `symorva` program dies (`SIGKILL`) half-way through wiping an account at sign-out
/// (`SYMORVA_FAULT_POINT=account.wipe`: folder deleted, key and registry entry kept).
@Suite(
    "An account wipe survives the client process being killed",
    .requires(DevEnvironment.isAvailable && DevEnvironment.current?.manifestPath != nil, "needs Scripts/dev-server"),
    .requires(REPLProcess.binary != nil, "needs the symorva binary (swift build)"))
struct SessionWipeFaultPointTests {
    @Test("Killed during the wipe at sign-out: the next launch finishes the wipe and never restores the account")
    func killDuringWipe() async throws {
        let environment = DevEnvironment.current!
        let data = TemporaryDataDirectory("wipe-fault")
        let processEnvironment = ["SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": environment.manifestPath!]
        var armed = processEnvironment
        armed[FaultPoint.environmentVariable] = FaultPoint.accountWipe.rawValue

        let first = try REPLProcess(environment: armed)
        first.send("register \(DevEnvironment.uniqueUsername("wiped")) --password-stdin")
        first.send(testPassword.exposedValue)
        try await first.waitForLine { $0.hasPrefix("registered and signed in as ") }
        let keys = data.path + "/keys"
        #expect(try FileManager.default.contentsOfDirectory(atPath: keys).count == 1)
        first.send("logout")
        try await first.waitForFaultPoint(.accountWipe)

        // Half-done: the account's folder is gone, its key and its registry entry are not.
        let accounts = data.path + "/accounts"
        #expect((try? FileManager.default.contentsOfDirectory(atPath: accounts))?.isEmpty ?? true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: keys).count == 1)

        // The next launch finishes the wipe before restoring anything.
        let second = try REPLProcess(environment: processEnvironment)
        second.send("whoami")
        try await second.waitForLine { $0 == "not signed in" }
        second.send("accounts")
        try await second.waitForLine { $0 == "no accounts" }
        second.send("quit")
        #expect(try await second.finish() == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: keys).isEmpty)
        #expect((try? FileManager.default.contentsOfDirectory(atPath: accounts))?.isEmpty ?? true)
    }
}
