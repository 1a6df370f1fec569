import Foundation
import SymorvaChatStore
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaStore
import Testing

/// The `symorva` program syncs with sliding sync (the dev manifest says `auto`, and Synapse
/// advertises it) and dies (`SIGKILL`) inside the transaction that stores a response carrying
/// to-device events (`SYMORVA_FAULT_POINT=todevice.ingest`), while matrix-nio sends encrypted
/// messages to it. The to-device extension's `since` is committed only with the events it
/// covers, so the server delivers them again and no room key is lost.
@Suite(
    "Sliding sync: a kill during to-device delivery loses no room key",
    .requires(NioPeer.isAvailable, "needs Scripts/dev-server (with the nio venv)"),
    .requires(DevEnvironment.current?.manifestPath != nil, "needs Scripts/dev-server's manifest"),
    .requires(REPLProcess.binary != nil, "needs the symorva binary (swift build)"), .serialized)
struct SlidingSyncKillTests {
    @Test("Killed while a response with to-device events is being stored: the restart decrypts every message")
    func killDuringToDeviceIngest() async throws {
        let environment = DevEnvironment.current!
        let data = TemporaryDataDirectory("sliding-todevice-kill")
        // matrix-nio has no cross-signing: the permissive room key policy, explicitly.
        let processEnvironment = [
            "SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": try environment.permissiveManifest(in: data),
        ]
        var armed = processEnvironment
        armed[FaultPoint.environmentVariable] = FaultPoint.toDeviceIngest.rawValue

        // Bob runs in the symorva program with sliding sync; his device keys are published and
        // queried back first, so that nio encrypts for his device.
        let bob = try REPLProcess(environment: armed)
        bob.send("register \(DevEnvironment.uniqueUsername("bob")) --password-stdin")
        bob.send(testPassword.exposedValue)
        let registered = try await bob.waitForLine { $0.hasPrefix("registered and signed in as ") }
        let bobID = UserID(String(registered.dropFirst("registered and signed in as ".count).prefix { $0 != " " }))!
        bob.send("sync status")
        try await bob.waitForLine { $0 == "mode: sliding" }
        var listed = ""
        for _ in 0..<200 where !(listed.hasPrefix("* ") && listed.contains(" ed25519:")) {
            let before = bob.output.count
            bob.send("devices")
            listed = try await bob.transcript.wait(timeout: .seconds(30)) { $0.output.count > before }.output[before]
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(listed.contains(" ed25519:"))

        // nio creates an encrypted room and invites him; he joins; nio sends: the room key goes
        // to his device as an Olm to-device message, and the process dies storing that response.
        let (peer, _, _) = try await NioPeer.onNewAccount("niokill")
        let roomID = try await peer.createRoom(name: "Keys", invite: [bobID])
        bob.send("join \(roomID)")
        try await bob.waitForLine { $0 == "joined \(roomID)" }
        try await peer.waitForMember(bobID, in: roomID)
        try await peer.send("first secret", to: roomID)
        try await bob.waitForFaultPoint(.toDeviceIngest)
        // The transaction was undone: nothing of the response waits in the crypto inbox.
        let storePath = try WalletIntegrationTests.accountStorePath(in: data.path)
        #expect(try await CryptoKillTests.toDeviceEvents(at: storePath) == 0)
        let since = try await Self.toDeviceSince(at: storePath)
        // More traffic while he is away, in the same Megolm session (no new key).
        try await peer.send("second secret", to: roomID)

        // The next process syncs with sliding sync from the stored position: the server sends
        // the to-device events again (their `since` did not move), and both messages decrypt.
        let again = try REPLProcess(environment: processEnvironment)
        again.send("sync status")
        try await again.waitForLine { $0 == "mode: sliding" }
        again.send("open \(roomID)")
        try await again.waitForLine(timeout: .seconds(90)) { $0.contains(": first secret  [encrypted") }
        try await again.waitForLine(timeout: .seconds(90)) { $0.contains(": second secret  [encrypted") }
        again.send("quit")
        #expect(try await again.finish() == 0)
        #expect(try await CryptoKillTests.toDeviceEvents(at: storePath) == 0, "processed and removed")
        #expect(try await Self.toDeviceSince(at: storePath) != since, "the to-device position moved on")
        try await peer.quit()
    }

    /// The to-device extension's committed `since` in the account database at `path`.
    static func toDeviceSince(at path: String) async throws -> String? {
        let database = try await SQLiteDatabase.open(path: path, migrations: ChatSchema.migrations)
        return try await database.run { db throws(StoreError) in
            try db.queryOne("SELECT to_device_since FROM sliding_sync_state WHERE id = 1") { $0.optionalString(0) }
                ?? nil
        }
    }
}
