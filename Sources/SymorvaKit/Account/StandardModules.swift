import SymorvaAIStudio
import SymorvaChat
import SymorvaChatStore
import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaWallet

// The SDK's own modules, attached to every signed-in account through the same extension point
// that third-party modules use (`AccountModuleFactory`).

extension AccountModuleFactory {
    /// The modules a community gets unless told otherwise: chat (always), the wallet and the AI
    /// studio (each when the manifest enables it).
    public static var standard: [AccountModuleFactory] { [chat, wallet, aiStudio] }

    /// Chat: the account's ``/SymorvaChat/AccountChat`` (what `community.chat` shows while the account is
    /// active), started (sync from the stored since-token, send queues
    /// resumed) as soon as the account's session is restored. Its schema is the database's main
    /// migration list (``/SymorvaFeatureKit/AccountMigrations/main``), applied when the database opens.
    ///
    /// The sync loop and the send queues wait when a request is refused for its token even
    /// after the requester's own refresh (or while the session is soft logged out): they ask the
    /// session for one refresh, and resume with the session's next token (a refresh, or
    /// re-authentication).
    public static let chat = AccountModuleFactory(name: "chat") { context in
        let logger = Logger(category: "chat", center: context.logCenter)
        let chat = AccountChat(
            requester: context.requester, database: context.database.database, scope: context.scope,
            clock: context.clock, wallClock: context.wallClock, tracer: context.tracer)
        chat.onTokenRejected { context.requestTokenRefresh() }
        chat.onStop(context.onTokenRefreshed { [weak chat] in Task { await chat?.tokenRefreshed() } })
        do { try await chat.start() } catch {
            logger.error("chat did not start account=\(context.userID) error=\(error)")
        }
        return chat
    }

    /// The wallet, when the manifest enables it: the account's ``/SymorvaWallet/AccountWallet`` (what
    /// `community.wallet` shows while the account is active) with the
    /// manifest's assets; commands left unknown by an earlier run are queried again at once.
    /// The wallet versions its own tables (feature `wallet`).
    public static let wallet = AccountModuleFactory(name: "wallet") { context in
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

extension AccountModuleFactory {
    /// The AI studio, when the manifest enables it: the account's ``/SymorvaAIStudio/AccountStudio`` (what
    /// `community.aiStudio` acts for while the account is active), reading conversation content
    /// from the homeserver as the account; grants an earlier run left live are restored. The
    /// consent presenter is the one `community.aiStudio` holds. The studio versions its own table
    /// (feature `studio`).
    public static let aiStudio = AccountModuleFactory(name: "studio") { context in
        guard context.configuration.modules.aiStudio.isEnabled else { return nil }
        let logger = Logger(category: "studio", center: context.logCenter)
        do {
            let studio = try await AccountStudio(
                member: context.userID, services: context.services,
                content: HomeserverContentSource(requester: context.requester), database: context.database.database,
                scope: context.scope, presenter: UnavailableConsentPresenter(), clock: context.clock,
                wallClock: context.wallClock, tracer: context.tracer)
            do { try await studio.restoreGrants() } catch {
                logger.info("studio grants not restored account=\(context.userID) error=\(error)")
            }
            return studio
        } catch {
            logger.error("studio did not open account=\(context.userID) error=\(error)")
            return nil
        }
    }
}

extension AccountStudio: AccountModule {
    /// Stops every grant host (the scope's end does the same).
    public func stop() async { await shutdown() }
}

extension AccountChat: AccountModule {}

extension AccountWallet: AccountModule {
    /// Nothing to release: every transfer host runs in the account's scope and stops with it,
    /// and unknown commands stay in the store for the next sign-in.
    public func stop() async {}
}

extension AccountMigrations {
    /// The migrations every account database has: chat's main list and the session feature's.
    public static var standard: AccountMigrations {
        AccountMigrations(main: ChatSchema.migrations, [SessionStore.feature])
    }
}

extension AccountStorageError {
    /// The session feature's view of the failure.
    var sessionError: SessionError { .store(storeFailure) }
}
