import SymorvaFeatureKit
import SymorvaMachines

extension AccountMigrations {
    /// The migrations of a community with `modules`: the session feature's, then every
    /// module's, as its factory declares them (in the order given: pass the ordered list).
    package static func community(modules: [AccountModuleFactory]) -> AccountMigrations {
        var migrations = AccountMigrations(main: [], [SessionStore.feature])
        migrations.register(modules: modules)
        return migrations
    }
}

extension AccountStorageError {
    /// The session feature's view of the failure.
    var sessionError: SessionError { .store(storeFailure) }
}
