import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaServices
import Synchronization

/// One signed-in account's running session: its scope, database, session host, requester,
/// services client and modules. Internal: product code sees ``SessionClient`` and the modules.
///
/// Built by `startSession` of the app flow and stopped by `endSession`; everything it starts
/// lives in ``scope``.
package final class AccountContext: Sendable {
    /// The account.
    package let userID: UserID
    /// The account's scope: everything the session starts lives in it.
    package let scope: AccountScope
    /// The account's database.
    package let database: AccountDatabase
    /// The account's session host.
    package let sessionHost: MachineHost<SessionMachine>
    /// Matrix requests as the account, with transparent token refresh.
    package let requester: SessionRequester
    /// The community services as the account.
    package let services: CommunityServicesClient
    /// The account's modules, by name and type.
    package let modules: AccountModules
    /// Where the session host's authorized requests finish (``SessionClient``'s `authorize`).
    package let authorizations: AuthorizationResults

    private init(
        userID: UserID, scope: AccountScope, database: AccountDatabase, sessionHost: MachineHost<SessionMachine>,
        requester: SessionRequester, services: CommunityServicesClient, modules: AccountModules,
        authorizations: AuthorizationResults
    ) {
        self.authorizations = authorizations
        self.userID = userID
        self.scope = scope
        self.database = database
        self.sessionHost = sessionHost
        self.requester = requester
        self.services = services
        self.modules = modules
    }

    /// Opens the account's database, restores its session from the store (no network) in a
    /// host that belongs to `scope`, and builds the requester, the services client and the
    /// modules.
    static func start(
        userID: UserID, scope: AccountScope, storage: AccountStorage, machine: SessionMachine,
        configuration: SymorvaConfiguration, environment: SymorvaEnvironment, factories: [AccountModuleFactory]
    ) async throws(AccountStorageError) -> AccountContext {
        let database = try await storage.database(for: userID)
        let authorizations = AuthorizationResults()
        let interpreter = SessionInterpreter(
            transport: environment.transport, wallClock: environment.wallClock, storage: storage,
            logger: environment.logger("session"), authorizations: authorizations)
        let host = MachineHost(
            machine: machine, initial: .signedOut, interpreter: interpreter, instance: userID.rawValue, scope: scope,
            clock: environment.clock, wallClock: environment.wallClock, tracer: environment.tracer)
        let restored = await host.send(.restoreRequested(userID)) {
            state -> SessionMachine.State? in
            if case .restoring = state { return nil }
            return state
        }
        var homeserverURL = configuration.homeserver.url
        switch restored {
        case .signedIn(let session), .softLoggedOut(let session, _): homeserverURL = session.homeserver.baseURL
        default: break
        }
        let requester = SessionRequester(
            userID: userID, homeserverURL: homeserverURL, transport: environment.transport, host: host,
            wallClock: environment.wallClock, logger: environment.logger("requester"))
        let services = CommunityServicesClient(
            baseURL: configuration.services.url, transport: environment.transport,
            tokenSource: SessionOpenIDSource(requester: requester, session: host), clock: environment.clock,
            wallClock: environment.wallClock)
        var modules: [String: any AccountModule] = [:]
        if case .failed = restored {
            // The stored session is unreadable: no module can work for this account.
        } else {
            let context = AccountModuleContext(
                userID: userID, scope: scope, database: database, requester: requester, services: services,
                configuration: configuration, clock: environment.clock, wallClock: environment.wallClock,
                tracer: environment.tracer, logCenter: environment.logCenter, session: host,
                keyProvider: environment.keyProvider)
            for factory in factories {
                if let module = await factory.make(context) {
                    modules[factory.name] = module
                    context.built.add(module)
                }
            }
            // Only factories look modules up: kept, the list would close a cycle through the
            // modules' closures over the context (the account's database never closed).
            context.built.removeAll()
        }
        return AccountContext(
            userID: userID, scope: scope, database: database, sessionHost: host, requester: requester,
            services: services, modules: AccountModules(modules), authorizations: authorizations)
    }

    /// Stops the session host, the modules and the services client. The scope has already
    /// ended (its work is cancelled); this releases what is left.
    func stop() async {
        await sessionHost.stop()
        for module in modules.byName.values { await module.stop() }
        await services.invalidate()
    }
}
