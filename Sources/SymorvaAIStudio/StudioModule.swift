import SymorvaFeatureKit

extension AccountStudio: AccountModule {
    /// Stops every grant host (the scope's end does the same).
    public func stop() async { await shutdown() }
}
