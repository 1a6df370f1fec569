import Foundation
import SymorvaChatStore
import SymorvaCrypto
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import Testing

@testable import SymorvaE2EE

/// Secret sharing's round across a restart of the account's crypto: `AccountCrypto` starts its
/// SecretRequest machine from the round the crypto store kept and either waits on or cancels it.
/// The homeserver is the scripted HTTP double (unit tier); the Synapse tier is `SecretSharingTests`.
@Suite("Secret requests across a restart")
struct SecretRequestRestartTests {
    let alice = UserID("@alice:example.org")
    static let master = SecretRequest(requestID: "req-master", name: "m.cross_signing.master")
    static let backup = SecretRequest(requestID: "req-backup", name: "m.megolm_backup.v1")
    static let deadline = Timestamp(millisecondsSince1970: 1_800_000_060_000)
    static let round = SecretRequestRound(requests: [master, backup], deviceIDs: ["PHONE"], deadline: deadline)
    static var halfway: SecretRequestRound {
        var round = Self.round
        round.received = [master.name]
        return round
    }

    final class FixedWallClock: WallClock, Sendable {
        let now: Timestamp
        init(_ now: Timestamp) { self.now = now }
    }

    final class Folder: Sendable {
        let path: String
        init() throws {
            let url = FileManager.default.temporaryDirectory.appendingPathComponent("symorva-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            path = url.path
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    /// The first run: a round waiting with one secret kept, then the process ends.
    func firstRun(_ folder: Folder, key: Secret<[UInt8]>) async throws {
        let database = try await SQLiteDatabase.open(
            path: folder.path + "/account.db", migrations: ChatSchema.migrations)
        let store = try await CryptoStore.migrating(on: database, userID: alice, key: key)
        try await store.saveSecretRequestState(.sending(Self.round))
        try await store.saveSecretRequestState(.waiting(Self.round))
        try await store.keepReceivedSecret(name: Self.master.name, secret: Secret("kept-seed"), round: Self.halfway)
    }

    /// The second run on the same file.
    func secondRun(
        _ folder: Folder, key: Secret<[UInt8]>, transport: ScriptedHTTPTransport, now: Timestamp, clock: ManualClock
    )
        async throws -> AccountCrypto
    {
        let database = try await SQLiteDatabase.open(
            path: folder.path + "/account.db", migrations: ChatSchema.migrations)
        try await database.migrate(feature: CryptoStore.feature, CryptoStore.migrations)
        transport.on("POST", "/_matrix/client/v3/keys/upload") { _ in
            .json(200, #"{"one_time_key_counts": {"signed_curve25519": 50}}"#)
        }
        transport.on("PUT", pathPrefix: "/_matrix/client/v3/sendToDevice/m.secret.request/") { _ in .json(200, "{}") }
        return try await AccountCrypto(
            userID: alice, deviceID: DeviceID("TABLET"), database: database, secretsKey: key,
            requester: FixedTokenMatrixRequester(
                homeserverURL: HomeserverURL("https://matrix.example.org")!, userID: alice,
                accessToken: Secret("token"), transport: transport),
            scope: AccountScope(label: alice.rawValue), clock: clock, wallClock: FixedWallClock(now),
            tracer: Tracer(), logCenter: LogCenter(threshold: .trace))
    }

    /// The transaction IDs of the `m.secret.request` messages sent.
    func secretRequestTransactions(_ transport: ScriptedHTTPTransport) -> Set<String> {
        Set(
            transport.requests.compactMap { request in
                let path = request.url.path
                let prefix = "/_matrix/client/v3/sendToDevice/m.secret.request/"
                return path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : nil
            })
    }

    func finished(_ crypto: AccountCrypto) async throws -> SecretRequestMachine.State {
        try await crypto.secretRequests.states.wait {
            if case .finished = $0 { return true }
            return false
        }
    }

    @Test(
        "Past its deadline, the stored round is cancelled at start at every device asked; the secret kept before is handed out"
    )
    func pastDeadline() async throws {
        let folder = try Folder()
        let key = try SecretBox.generateKey()
        try await firstRun(folder, key: key)
        let transport = ScriptedHTTPTransport()
        let crypto = try await secondRun(
            folder, key: key, transport: transport, now: Self.deadline.advanced(by: .seconds(1)), clock: ManualClock())
        #expect(crypto.secretRequests.states.value == .waiting(Self.halfway), "started from the stored round")
        await crypto.start()
        #expect(try await finished(crypto) == .finished(received: [Self.master.name], .timedOut))
        #expect(secretRequestTransactions(transport) == ["src-req-master", "src-req-backup"], "cancellations only")
        #expect(try await crypto.store.takeReceivedSecrets() == [Self.master.name: Secret("kept-seed")])
        await crypto.stop()
    }

    @Test("Before its deadline, the stored round waits on without asking again, and its stored deadline still ends it")
    func beforeDeadline() async throws {
        let folder = try Folder()
        let key = try SecretBox.generateKey()
        try await firstRun(folder, key: key)
        let transport = ScriptedHTTPTransport()
        let clock = ManualClock()
        let crypto = try await secondRun(
            folder, key: key, transport: transport, now: Self.deadline.advanced(by: .seconds(-30)), clock: clock)
        await crypto.start()
        // The deadline's timer: 30 s on the runtime clock (a barrier on the clock, not a sleep).
        let limit = ContinuousClock.now + TestWaiting.defaultTimeout
        while !clock.pendingDeadlines.contains(.seconds(30)) {
            guard ContinuousClock.now < limit else { throw TestFailure("the deadline's timer never started") }
            await Task.yield()
        }
        #expect(crypto.secretRequests.states.value == .waiting(Self.halfway))
        #expect(secretRequestTransactions(transport).isEmpty, "nothing asked again, nothing cancelled yet")
        await clock.advance(by: .seconds(30))
        #expect(try await finished(crypto) == .finished(received: [Self.master.name], .timedOut))
        #expect(secretRequestTransactions(transport) == ["src-req-master", "src-req-backup"])
        await crypto.stop()
    }
}
