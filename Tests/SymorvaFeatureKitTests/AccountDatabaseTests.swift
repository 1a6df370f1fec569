import Foundation
import SymorvaFeatureKit
import SymorvaMachines
import SymorvaStore
import Testing

@Suite("Account database")
struct AccountDatabaseTests {
    /// A fresh folder under the temporary directory, removed when `body` returns.
    private func withDataDirectory(_ body: (String) async throws -> Void) async throws {
        let path = NSTemporaryDirectory() + "symorva-account-db-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await body(path)
    }

    @Test("An account's database is opened with the account settings: 8 KB pages, 16 MB cache, no automatic checkpoint")
    func accountSettings() async throws {
        try await withDataDirectory { data in
            let userID: UserID = "@alice:example.org"
            let account = try await AccountDatabase.open(
                userID: userID, dataDirectory: data, migrations: AccountMigrations())
            let database = account.database
            #expect(try await database.queryOne("PRAGMA page_size") { $0.int(0) } == 8192)
            #expect(try await database.queryOne("PRAGMA cache_size") { $0.int(0) } == -16384)
            #expect(try await database.queryOne("PRAGMA wal_autocheckpoint") { $0.int(0) } == 0)
            #expect(try await database.queryOne("PRAGMA journal_mode") { $0.string(0) } == "wal")
            try await database.checkpoint()
        }
    }

    @Test("A file created with another page size keeps it; the per-connection settings still apply")
    func existingPageSize() async throws {
        try await withDataDirectory { data in
            let path = data + "/old.sqlite"
            try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
            let old = try await SQLiteDatabase.open(path: path)
            try await old.executeScript("CREATE TABLE t(x)")
            let reopened = try await AccountDatabase.openFile(path: path, migrations: AccountMigrations())
            #expect(try await reopened.queryOne("PRAGMA page_size") { $0.int(0) } == 4096)
            #expect(try await reopened.queryOne("PRAGMA wal_autocheckpoint") { $0.int(0) } == 0)
        }
    }
}
