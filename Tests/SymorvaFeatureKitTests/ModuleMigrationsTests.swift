import Foundation
import SymorvaFeatureKit
import SymorvaStore
import Testing

/// Module factories own their tables: what they declare is registered and applied when the
/// account's database opens, before any module is made (issue 23).
@Suite("Module migrations")
struct ModuleMigrationsTests {
    static let main = [Migration(version: 1, name: "rooms", sql: "CREATE TABLE rooms (id TEXT PRIMARY KEY)")]
    static let polls = [
        Migration(version: 1, name: "votes", sql: "CREATE TABLE polls_votes (poll TEXT, choice TEXT)"),
        Migration(version: 2, name: "closed", sql: "ALTER TABLE polls_votes ADD COLUMN closed INTEGER"),
    ]
    static let crypto = AccountMigrations.Feature(
        name: "e2ee", migrations: [Migration(version: 1, name: "keys", sql: "CREATE TABLE e2ee_keys (id TEXT)")])

    static func factories() -> [AccountModuleFactory] {
        [
            AccountModuleFactory(name: "crypto", schema: crypto) { _ in nil },
            AccountModuleFactory(name: "chat", mainMigrations: main) { _ in nil },
            AccountModuleFactory(name: "polls", migrations: polls) { _ in nil },
            AccountModuleFactory(name: "push") { _ in nil },
        ]
    }

    @Test("The registry takes the owner's main list and each factory's tables under its schema name, in order")
    func registers() {
        var migrations = AccountMigrations(main: [], [AccountMigrations.Feature(name: "session", migrations: [])])
        migrations.register(modules: Self.factories())
        #expect(migrations.main == Self.main)
        #expect(migrations.features.map(\.name) == ["session", "e2ee", "polls"])
        #expect(migrations.features.last?.migrations == Self.polls)
        #expect(Self.factories()[0].schemaName == "e2ee" && Self.factories()[2].schemaName == "polls")
    }

    @Test("Opening the database makes every declared table; a store's own apply then changes nothing")
    func appliedWhenTheDatabaseOpens() async throws {
        let path = NSTemporaryDirectory() + "symorva-module-migrations-\(UUID().uuidString).sqlite"
        defer { try? FileManager.default.removeItem(atPath: path) }
        var migrations = AccountMigrations()
        migrations.register(modules: Self.factories())
        let database = try await AccountDatabase.openFile(path: path, migrations: migrations)
        #expect(try await database.schemaVersion() == 1)
        #expect(try await database.schemaVersion(feature: "e2ee") == 1)
        #expect(try await database.schemaVersion(feature: "polls") == 2)
        #expect(try await database.schemaVersion(feature: "crypto") == 0)
        try await AccountMigrations.Feature(name: "polls", migrations: Self.polls).apply(to: database)
        #expect(try await database.schemaVersion(feature: "polls") == 2)
        try await database.execute("INSERT INTO polls_votes (poll, choice, closed) VALUES ('p', 'a', 0)")
    }

    @Test("A store that applies its schema to a bare database gets the same tables and version row")
    func bareDatabase() async throws {
        let database = try await SQLiteDatabase.open(path: ":memory:")
        try await Self.crypto.apply(to: database)
        #expect(try await database.schemaVersion(feature: "e2ee") == 1)
        let newer = AccountMigrations.Feature(name: "e2ee", migrations: [])
        await #expect(throws: StoreError.newerSchema(found: 1, supported: 0)) { try await newer.apply(to: database) }
    }
}
