import Foundation
import SymorvaMachines
import SymorvaRuntime
import Testing

@testable import SymorvaFeatureKit
@testable import SymorvaSession
@testable import SymorvaStore

@Suite("Account registry and account databases")
struct AccountRegistryTests {
    let data = TestDataDirectory()

    func entry(_ user: UserID, pending: Bool = false) -> StoredAccount {
        StoredAccount(
            userID: user, deviceID: DeviceID("D"), homeserverURL: HomeserverURL("https://h.example")!,
            isPendingWipe: pending)
    }

    @Test("A missing accounts.json is an empty registry; writes are read back in order")
    func readWrite() throws {
        let file = AccountRegistryFile(path: data.path + "/accounts.json")
        #expect(try file.read() == AccountRegistry())
        var registry = AccountRegistry()
        registry.upsert(entry(SessionSamples.bob))
        registry.upsert(entry(SessionSamples.alice))
        registry.active = SessionSamples.alice
        try file.write(registry)
        #expect(try file.read() == registry)
        #expect(
            try file.read().restoredAccounts
                == RestoredAccounts(accounts: ["@bob:example.org", "@alice:example.org"], active: "@alice:example.org"))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: data.path).filter { $0.contains(".tmp-") }
        #expect(leftovers.isEmpty)
    }

    @Test("Upserting keeps the position; removing the active account clears it; pending wipes are not restored")
    func mutations() {
        var registry = AccountRegistry()
        registry.upsert(entry(SessionSamples.alice))
        registry.upsert(entry(SessionSamples.bob))
        registry.active = SessionSamples.alice
        registry.upsert(entry(SessionSamples.alice, pending: true))
        #expect(registry.accounts.map(\.userID) == [SessionSamples.alice, SessionSamples.bob])
        #expect(registry.restorable.map(\.userID) == [SessionSamples.bob])
        registry.remove(SessionSamples.alice)
        #expect(registry.active == nil)
        #expect(registry.accounts.map(\.userID) == [SessionSamples.bob])
    }

    @Test("An unreadable accounts.json is a typed error")
    func corrupt() throws {
        try FileManager.default.createDirectory(atPath: data.path, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: data.path + "/accounts.json", contents: Data("{not json".utf8))
        #expect(throws: AccountStorageError.unreadableRegistry(reason: "not an account list")) {
            try AccountRegistryFile(path: data.path + "/accounts.json").read()
        }
    }

    @Test("Restore finishes a wipe that a crash interrupted")
    func pendingWipeFinished() async throws {
        let storage = SessionSamples.storage(data)
        let store = try await storage.sessionStore(for: SessionSamples.alice)
        try await store.save(SessionSamples.session(), savedAt: Timestamp(millisecondsSince1970: 1))
        try await storage.record(SessionSamples.session())
        var registry = try AccountRegistryFile(path: data.path + "/accounts.json").read()
        registry.upsert(entry(SessionSamples.alice, pending: true))
        try AccountRegistryFile(path: data.path + "/accounts.json").write(registry)

        let relaunched = SessionSamples.storage(data)
        #expect(try await relaunched.restore() == RestoredAccounts(accounts: [], active: nil))
        #expect(
            !FileManager.default.fileExists(atPath: AccountDatabase.directory(for: SessionSamples.alice, in: data.path))
        )
        #expect(try AccountRegistryFile(path: data.path + "/accounts.json").read().accounts.isEmpty)
    }

    @Test("Folder names are file-system safe and differ for IDs that differ only in case")
    func folderNames() {
        let upper = AccountDatabase.folderName(for: UserID("@Alice:example.org"))
        let lower = AccountDatabase.folderName(for: UserID("@alice:example.org"))
        #expect(upper != lower)
        #expect(upper.lowercased() != lower.lowercased())
        #expect(lower.hasPrefix("alice_example.org-"))
        let odd = AccountDatabase.folderName(for: UserID("@a/b..:[::1]:8448"))
        #expect(!odd.contains("/") && !odd.contains(":"))
    }

    @Test("Each feature migrates on its own version row; reopening applies nothing twice; a newer schema is refused")
    func featureMigrations() async throws {
        var migrations = AccountMigrations.community(modules: [])
        migrations.register(
            feature: "polls",
            [
                Migration(version: 1, name: "a", sql: "CREATE TABLE polls_a (id INTEGER)"),
                Migration(version: 2, name: "b", sql: "CREATE TABLE polls_b (id INTEGER)"),
            ])
        migrations.register(
            feature: "chat", [Migration(version: 1, name: "rooms", sql: "CREATE TABLE chat_rooms (id TEXT)")])
        let first = try await AccountDatabase.open(
            userID: SessionSamples.alice, dataDirectory: data.path, migrations: migrations)
        #expect(try await first.database.schemaVersion(feature: "session") == 1)
        #expect(try await first.database.schemaVersion(feature: "polls") == 2)
        #expect(try await first.database.schemaVersion(feature: "chat") == 1)
        let again = try await AccountDatabase.open(
            userID: SessionSamples.alice, dataDirectory: data.path, migrations: migrations)
        #expect(try await again.database.schemaVersion(feature: "polls") == 2)

        await #expect(throws: AccountStorageError.store(.newerSchema(found: 2, supported: 1))) {
            var older = AccountMigrations.community(modules: [])
            older.register(
                feature: "polls", [Migration(version: 1, name: "a", sql: "CREATE TABLE polls_a (id INTEGER)")])
            _ = try await AccountDatabase.open(
                userID: SessionSamples.alice, dataDirectory: self.data.path, migrations: older)
        }
    }
}
