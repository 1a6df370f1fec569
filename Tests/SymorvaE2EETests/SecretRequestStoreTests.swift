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

/// The crypto store's part of secret sharing (migration 12): the SecretRequest machine's round
/// and the secrets it accepted, kept across a restart.
@Suite("Secret requests in the crypto store")
struct SecretRequestStoreTests {
    let alice = UserID("@alice:example.org")
    static let master = SecretRequest(requestID: "req-master", name: "m.cross_signing.master")
    static let backup = SecretRequest(requestID: "req-backup", name: "m.megolm_backup.v1")
    static let deadline = Timestamp(millisecondsSince1970: 1_800_000_060_000)
    static let round = SecretRequestRound(
        requests: [master, backup], deviceIDs: ["PHONE", "LAPTOP"], deadline: deadline)

    /// A database file in a fresh folder, removed at the end.
    final class Folder: Sendable {
        let path: String
        init() throws {
            let url = FileManager.default.temporaryDirectory.appendingPathComponent("symorva-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            path = url.path
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    func open(_ folder: Folder, key: Secret<[UInt8]>) async throws -> (SQLiteDatabase, CryptoStore) {
        let database = try await SQLiteDatabase.open(
            path: folder.path + "/account.db", migrations: ChatSchema.migrations)
        return (database, try await CryptoStore.migrating(on: database, userID: alice, key: key))
    }

    @Test("Each state in flight is stored and read back; idle and finished delete the round")
    func roundTrip() async throws {
        let folder = try Folder()
        let (_, store) = try await open(folder, key: try SecretBox.generateKey())
        #expect(try await store.secretRequestState() == .idle)
        var halfway = Self.round
        halfway.received = [Self.backup.name]
        for state: SecretRequestMachine.State in [
            .sending(Self.round), .waiting(Self.round), .waiting(halfway), .cancelling(halfway, .timedOut),
            .cancelling(Self.round, .cancelled), .cancelling(halfway, .allReceived),
        ] {
            try await store.saveSecretRequestState(state)
            #expect(try await store.secretRequestState() == state)
        }
        try await store.saveSecretRequestState(.finished(received: [], .timedOut))
        #expect(try await store.secretRequestState() == .idle)
    }

    @Test(
        "A kept secret is sealed with the round in one write, survives a restart, is handed out once; a new round forgets leftovers"
    )
    func keptAcrossRestart() async throws {
        let folder = try Folder()
        let key = try SecretBox.generateKey()
        var halfway = Self.round
        halfway.received = [Self.master.name]
        do {
            let (database, store) = try await open(folder, key: key)
            try await store.saveSecretRequestState(.sending(Self.round))
            try await store.saveSecretRequestState(.waiting(Self.round))
            try await store.keepReceivedSecret(
                name: Self.master.name, secret: Secret("canary-seed-text"), round: halfway)
            let blob = try await database.run { db throws(StoreError) in
                try db.queryOne("SELECT sealed_secret FROM e2ee_received_secrets") { $0.blob(0) }
            }
            let sealed = try #require(blob)
            #expect(!String(decoding: sealed, as: UTF8.self).contains("canary"))
        }
        // The restart: a new connection and store on the same file.
        let (_, store) = try await open(folder, key: key)
        let state = try await store.secretRequestState()
        #expect(state == .waiting(halfway))

        // The machine resumes the round from what was stored: before the deadline it waits on,
        // after it the requests are cancelled.
        let machine = SecretRequestMachine()
        let before = machine.transition(from: state, on: .restored(now: Self.deadline.advanced(by: .seconds(-10))))
        #expect(before.nextState(after: state) == .waiting(halfway))
        #expect(before.effects == [.scheduleTimeout(Self.deadline)])
        let after = machine.transition(from: state, on: .restored(now: Self.deadline))
        #expect(after.nextState(after: state) == .cancelling(halfway, .timedOut))
        #expect(after.effects == [.cancelTimeout, .sendCancellations(halfway, .timedOut)])

        #expect(try await store.takeReceivedSecrets() == [Self.master.name: Secret("canary-seed-text")])
        #expect(try await store.takeReceivedSecrets().isEmpty)

        try await store.keepReceivedSecret(name: Self.master.name, secret: Secret("left over"), round: halfway)
        let next = SecretRequestRound(
            requests: [SecretRequest(requestID: "req-2", name: Self.master.name)], deviceIDs: ["PHONE"],
            deadline: Self.deadline)
        try await store.saveSecretRequestState(.sending(next))
        #expect(try await store.takeReceivedSecrets().isEmpty)
        #expect(try await store.secretRequestState() == .sending(next))
    }

    @Test("A stored secret cannot be opened with another secrets-at-rest key")
    func otherKeyCannotOpen() async throws {
        let folder = try Folder()
        do {
            let (_, store) = try await open(folder, key: try SecretBox.generateKey())
            try await store.keepReceivedSecret(name: Self.master.name, secret: Secret("seed"), round: Self.round)
        }
        let (database, store) = try await open(folder, key: try SecretBox.generateKey())
        await #expect(throws: CryptoStoreError.self) { try await store.takeReceivedSecrets() }
        let left = try await database.run { db throws(StoreError) in
            try db.queryOne("SELECT COUNT(*) FROM e2ee_received_secrets") { $0.int(0) }
        }
        #expect(left == 1)  // nothing lost
    }
}
