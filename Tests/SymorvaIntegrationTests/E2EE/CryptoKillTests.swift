import Foundation
import SymorvaChatStore
import SymorvaCrypto
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import SymorvaTransport
import Testing

/// The `symorva` program dies (`SIGKILL`) after Synapse answered the first `keys/upload` and
/// before the device recorded its keys as published (`SYMORVA_FAULT_POINT=keys.upload`).
@Suite(
    "End-to-end encryption keys survive the client process being killed",
    .requires(DevEnvironment.isAvailable && DevEnvironment.current?.manifestPath != nil, "needs Scripts/dev-server"),
    .requires(REPLProcess.binary != nil, "needs the symorva binary (swift build)"))
struct CryptoKillTests {
    let transport = CurlTransport()

    @Test(
        "Killed before the keys-upload answer is recorded: the restart uploads the same keys again and is ready, no error loop"
    )
    func killBeforeUploadRecorded() async throws {
        let environment = DevEnvironment.current!
        let data = TemporaryDataDirectory("crypto-kill")
        let processEnvironment = ["SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": environment.manifestPath!]
        var armed = processEnvironment
        armed[FaultPoint.environmentVariable] = FaultPoint.keysUploadAnswered.rawValue

        let first = try REPLProcess(environment: armed)
        first.send("register \(DevEnvironment.uniqueUsername("kill")) --password-stdin")
        first.send(testPassword.exposedValue)
        let registered = try await first.waitForLine { $0.hasPrefix("registered and signed in as ") }
        let userID = UserID(String(registered.dropFirst("registered and signed in as ".count).prefix { $0 != " " }))!
        try await first.waitForFaultPoint(.keysUploadAnswered)
        let storePath = try WalletIntegrationTests.accountStorePath(in: data.path)
        #expect(try await Self.published(at: storePath) == false)

        // What the server holds now: the device keys the killed process uploaded.
        let bobAccount = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername("bob"), in: environment, transport: transport)
        let bob = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL(environment.homeserverURL.absoluteString)!, userID: UserID(bobAccount.userID)!,
            accessToken: bobAccount.accessToken, transport: transport)
        let before = try await Self.devices(of: userID, bob: bob)
        #expect(before.count == 1)

        // Process 2 re-sends the stored keys (the same ones: Synapse accepts them) and is ready.
        let second = try REPLProcess(environment: processEnvironment)
        second.send("trace on")
        second.send("whoami")
        try await second.waitForLine {
            $0.hasPrefix("trace: Crypto[") && $0.contains("event=keysUploaded") && $0.contains("to=ready")
        }
        second.send("quit")
        #expect(try await second.finish() == 0)
        #expect(!second.output.contains { $0.hasPrefix("trace: Crypto[") && $0.contains("to=failed") })
        #expect(try await Self.published(at: storePath) == true)
        let after = try await Self.devices(of: userID, bob: bob)
        #expect(after == before, "the same device keys")
    }

    @Test(
        "Killed right after a sync that brought a room key is committed: the key is kept, and the restart decrypts the message"
    )
    func killAfterToDeviceCommitted() async throws {
        let environment = DevEnvironment.current!
        let data = TemporaryDataDirectory("todevice-kill")
        let processEnvironment = ["SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": environment.manifestPath!]
        var armed = processEnvironment
        armed[FaultPoint.environmentVariable] = FaultPoint.toDeviceCommitted.rawValue

        // Bob runs in the symorva program, armed to die once a batch with to-device events is
        // committed; his device's keys are published and queried back first.
        let bob = try REPLProcess(environment: armed)
        bob.send("register \(DevEnvironment.uniqueUsername("bob")) --password-stdin")
        bob.send(testPassword.exposedValue)
        let registered = try await bob.waitForLine { $0.hasPrefix("registered and signed in as ") }
        let bobID = UserID(String(registered.dropFirst("registered and signed in as ".count).prefix { $0 != " " }))!
        var listed = ""
        // And cross-signed (the automatic bootstrap at sign-in): under the default room key
        // policy Alice sends her key only to a device its owner cross-signed.
        for _ in 0..<200
        where !(listed.hasPrefix("* ") && listed.contains(" ed25519:") && listed.hasSuffix(" verified")) {
            let before = bob.output.count
            bob.send("devices")
            listed = try await bob.transcript.wait(timeout: .seconds(30)) { $0.output.count > before }.output[before]
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(listed.contains(" ed25519:") && listed.hasSuffix(" verified"))

        // Alice invites him to an encrypted room; he joins; she sends: the room key goes to his
        // device as an Olm to-device message, and the process dies once that sync is committed.
        let alice = CommunityFixture()
        _ = try await alice.community.session.register(
            username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let roomID = try await alice.community.chat.createRoom(name: "Kept", invitees: [bobID], isEncrypted: true)
        bob.send("join \(roomID)")
        try await bob.waitForLine { $0 == "joined \(roomID)" }
        try await alice.community.chat.conversation(id: roomID).send(.text("kept across a kill")).waitUntilSent()
        try await bob.waitForFaultPoint(.toDeviceCommitted)
        let storePath = try WalletIntegrationTests.accountStorePath(in: data.path)
        let stored = try await Self.toDeviceEvents(at: storePath)
        #expect(stored > 0, "the to-device events were committed with the sync token")

        // The next process processes the stored to-device message and decrypts the event.
        let again = try REPLProcess(environment: processEnvironment)
        again.send("open \(roomID)")
        try await again.waitForLine(timeout: .seconds(90)) { $0.contains(": kept across a kill  [encrypted") }
        again.send("quit")
        #expect(try await again.finish() == 0)
        #expect(try await Self.toDeviceEvents(at: storePath) == 0, "processed and removed")
    }

    /// How many to-device events the account database at `path` holds unprocessed.
    static func toDeviceEvents(at path: String) async throws -> Int {
        let database = try await SQLiteDatabase.open(path: path, migrations: ChatSchema.migrations)
        return try await database.run { db throws(StoreError) in
            try db.queryOne("SELECT COUNT(*) FROM e2ee_inbox_to_device") { $0.int(0) } ?? 0
        }
    }

    /// Whether the account database at `path` records the device keys as published.
    static func published(at path: String) async throws -> Bool? {
        let database = try await SQLiteDatabase.open(path: path, migrations: ChatSchema.migrations)
        return try await database.run { db throws(StoreError) in
            try db.queryOne("SELECT published FROM e2ee_account WHERE id = 1") { $0.int(0) != 0 }
        }
    }

    /// `user`'s verified devices as another account sees them.
    static func devices(of user: UserID, bob: FixedTokenMatrixRequester) async throws -> [CryptoStore.Device] {
        let answer = try JSONValue(parsing: try await bob.send(try E2EEAPI.query(users: [user])).body)
        let (devices, refused) = DeviceKeys.verifiedDevices(in: answer, driver: OlmCryptoDriver())
        #expect(refused == 0)
        return devices[user] ?? []
    }
}
