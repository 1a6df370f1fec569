import Foundation
import SymorvaAIStudio
import SymorvaChatStore
import SymorvaE2EE
import SymorvaFeatureKit
import SymorvaKit
import SymorvaStore
import SymorvaWallet
import Testing

/// The SDK's own modules declare their tables through their factories, like an app's module:
/// one mechanism, applied when the account's database opens (issue 23).
@Suite("Standard module migrations")
struct StandardMigrationsTests {
    @Test("Every standard module with tables declares them: chat's main list, e2ee, wallet, studio")
    func declared() {
        let factories = AccountModuleFactory.standard
        #expect(factories.first { $0.name == "chat" }?.mainMigrations == ChatSchema.migrations)
        #expect(factories.first { $0.name == "crypto" }?.schemaName == CryptoStore.feature)
        #expect(factories.first { $0.name == "crypto" }?.migrations == CryptoStore.migrations)
        #expect(factories.first { $0.name == "wallet" }?.migrations == WalletStore.migrations)
        #expect(factories.first { $0.name == "studio" }?.migrations == AccountStudio.schema.migrations)
        let standard = AccountMigrations.standard
        #expect(standard.main == ChatSchema.migrations)
        #expect(standard.features.map(\.name) == ["session", "e2ee", "wallet", "studio"])
    }

    @Test("Opening an account database makes every module's tables before any module is made")
    func madeWhenOpened() async throws {
        let path = NSTemporaryDirectory() + "symorva-standard-migrations-\(UUID().uuidString).sqlite"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let database = try await AccountDatabase.openFile(path: path, migrations: .standard)
        #expect(try await database.schemaVersion() == ChatSchema.migrations.count)
        #expect(try await database.schemaVersion(feature: "e2ee") == CryptoStore.migrations.count)
        #expect(try await database.schemaVersion(feature: "wallet") == WalletStore.migrations.count)
        #expect(try await database.schemaVersion(feature: "studio") == AccountStudio.schema.migrations.count)
        // The wallet's store finds its tables made: it applies nothing more.
        _ = try await WalletStore.open(on: database)
        #expect(try await database.schemaVersion(feature: "wallet") == WalletStore.migrations.count)
    }
}
