import SymorvaMachines
import SymorvaRuntime
import SymorvaStore

// The SDK's own modules, attached to every signed-in account through the same extension point
// that third-party modules use (`AccountModuleFactory`).

extension AccountModuleFactory {
    /// The modules a community gets unless told otherwise: chat (always) and the wallet (when
    /// the manifest enables it).
    public static var standard: [AccountModuleFactory] { [chat, wallet] }

    /// Chat: the account's `ChatClient`, started (sync from the stored since-token, send queues
    /// resumed) as soon as the account's session is restored. Its schema is the database's main
    /// migration list (``AccountMigrations/main``), applied when the database opens.
    public static let chat = AccountModuleFactory(name: "chat") { context in
        let logger = Logger(category: "chat", center: context.logCenter)
        let chat = ChatClient(
            requester: context.requester, database: context.database.database, scope: context.scope,
            clock: context.clock, tracer: context.tracer)
        do { try await chat.start() } catch {
            logger.error("chat did not start account=\(context.userID) error=\(error)")
        }
        return chat
    }

    /// The wallet, when the manifest enables it: the account's `WalletClient` with the
    /// manifest's assets; commands left unknown by an earlier run are queried again at once.
    /// The wallet versions its own tables (feature `wallet`).
    public static let wallet = AccountModuleFactory(name: "wallet") { context in
        let module = context.configuration.modules.wallet
        guard module.isEnabled else { return nil }
        let logger = Logger(category: "wallet", center: context.logCenter)
        do {
            let wallet = try await WalletClient(
                member: MemberID(context.userID.rawValue), services: context.services,
                database: context.database.database, scope: context.scope,
                configuration: WalletConfiguration(
                    assets: module.assets.map { Asset(code: $0.code, precision: $0.precision) }),
                clock: context.clock, tracer: context.tracer)
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

extension ChatClient: AccountModule {}

extension WalletClient: AccountModule {
    /// Nothing to release: every transfer host runs in the account's scope and stops with it,
    /// and unknown commands stay in the store for the next sign-in.
    public func stop() async {}
}

extension SymorvaCommunity {
    /// The active account's chat, or `nil` while no account is signed in.
    public var chat: ChatClient? { module(ChatClient.self) }

    /// The active account's wallet, or `nil` while no account is signed in or when the
    /// manifest disables the wallet module.
    public var wallet: WalletClient? { module(WalletClient.self) }
}
