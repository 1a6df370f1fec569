import SymorvaFeatureKit
import SymorvaRuntime

extension AccountModuleFactory {
    /// The wallet, when the manifest enables it: the account's ``AccountWallet`` (what
    /// `community.wallet` shows while the account is active) with the manifest's assets;
    /// commands left unknown by an earlier run are queried again at once. Its tables (feature
    /// `wallet`) are declared here and made when the account's database opens, whether or not the
    /// manifest enables the wallet.
    public static let wallet = AccountModuleFactory(name: "wallet", schema: WalletStore.schema) { context in
        let module = context.configuration.modules.wallet
        guard module.isEnabled else { return nil }
        let logger = Logger(category: "wallet", center: context.logCenter)
        do {
            let wallet = try await AccountWallet(
                member: context.userID, services: context.services,
                database: context.database.database, scope: context.scope,
                configuration: WalletConfiguration(manifest: module),
                clock: context.clock, wallClock: context.wallClock, tracer: context.tracer)
            Task {
                do { try await wallet.resumePendingCommands() } catch {
                    logger.info("pending wallet commands not resumed account=\(context.userID) error=\(error)")
                }
            }
            return wallet
        } catch {
            logger.error("wallet did not open account=\(context.userID) error=\(error)")
            return nil
        }
    }
}

extension AccountWallet: AccountModule {
    /// Nothing to release: every transfer host runs in the account's scope and stops with it,
    /// and unknown commands stay in the store for the next sign-in.
    public func stop() async {}
}
