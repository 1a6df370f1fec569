import SymorvaCrypto
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices
import SymorvaStore

/// A feature module's client for one signed-in account (the wallet, chat, …).
///
/// Modules are built by an ``AccountModuleFactory`` when the account's session starts, inside
/// the account's ``/SymorvaRuntime/AccountScope``, and stopped when the scope ends (account switch, sign-out,
/// shutdown). Hosts a module creates in ``AccountModuleContext/scope`` have their effects
/// cancelled and their late results dropped by the scope itself; ``stop()`` is for everything
/// else the module holds (timers, observers, caches).
public protocol AccountModule: Sendable {
    /// Winds the module down after its account's scope ended.
    func stop() async
}

/// Everything a module gets to build its client for one account.
public struct AccountModuleContext: Sendable {
    /// The signed-in account.
    public let userID: UserID
    /// The account's scope: create hosts in it so that switching and signing out cancel their work.
    public let scope: AccountScope
    /// The account's database, already migrated with the module's migrations.
    public let database: AccountDatabase
    /// Matrix requests as this account, with transparent token refresh.
    public let requester: any MatrixRequester
    /// The community services as this account (OpenID from this account's session).
    public let services: CommunityServicesClient
    /// The community's manifest (module switches, assets, …).
    public let configuration: SymorvaConfiguration
    /// The clock hosts sleep on.
    public let clock: any RuntimeClock
    /// The wall clock.
    public let wallClock: any WallClock
    /// The community's tracer: hosts must trace here.
    public let tracer: Tracer
    /// The community's log center.
    public let logCenter: LogCenter
    /// The account's session, for ``onTokenRefreshed(_:)`` and ``requestTokenRefresh()``.
    package let session: MachineHost<SessionMachine>
    /// The provider of the account's secrets-at-rest key (for modules that seal their own secrets).
    package let keyProvider: any KeyProvider
    /// The modules built for this account so far: those a factory ``AccountModuleFactory/requires``
    /// or ``AccountModuleFactory/uses`` are among them (chat attaches to the crypto module).
    package let built: BuiltModules

    /// A context; built by the community for each account's modules (and by tests).
    package init(
        userID: UserID, scope: AccountScope, database: AccountDatabase, requester: any MatrixRequester,
        services: CommunityServicesClient, configuration: SymorvaConfiguration, clock: any RuntimeClock,
        wallClock: any WallClock, tracer: Tracer, logCenter: LogCenter, session: MachineHost<SessionMachine>,
        keyProvider: any KeyProvider, built: BuiltModules = BuiltModules()
    ) {
        self.keyProvider = keyProvider
        self.built = built
        self.userID = userID
        self.scope = scope
        self.database = database
        self.requester = requester
        self.services = services
        self.configuration = configuration
        self.clock = clock
        self.wallClock = wallClock
        self.tracer = tracer
        self.logCenter = logCenter
        self.session = session
    }

    /// Calls `handler` each time the session has a new access token — after a refresh, after
    /// re-authenticating a soft-logged-out session — until the returned function is called.
    ///
    /// Requests through ``requester`` need none of this: it refreshes and retries by itself.
    /// It is for a module whose machine parks its work on a rejected token (chat's sync loop
    /// and send queues wait in `awaitingToken` / `waitingToken`) and must hear when to resume.
    public func onTokenRefreshed(_ handler: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        session.states.onNewAccessToken(handler)
    }

    /// Asks the session for a new access token: a module's request was refused with
    /// `M_UNKNOWN_TOKEN` even after the requester's own refresh. Joins a refresh under way;
    /// nothing happens while the session is soft logged out (re-authenticating gives a token).
    public func requestTokenRefresh() {
        session.post(.refreshNeeded)
    }
}

/// How a feature module attaches to every signed-in account: its name, its database
/// migrations, and a closure that builds its client for one account.
///
/// A module of an app's own, next to the SDK's (the factories in `modules:` replace the
/// standard list, so keep it):
///
/// ```swift
/// struct AccountPolls: AccountModule {
///     let database: SQLiteDatabase
///     let scope: AccountScope
///     func stop() async {}
/// }
///
/// let polls = AccountModuleFactory(
///     name: "polls",
///     migrations: [Migration(version: 1, name: "polls", sql: "CREATE TABLE polls_votes (poll TEXT, choice TEXT)")]
/// ) { context in
///     AccountPolls(database: context.database.database, scope: context.scope)
/// }
/// let community = SymorvaCommunity(
///     configuration: configuration, environment: environment, modules: AccountModuleFactory.standard + [polls])
/// let active = community.module(AccountPolls.self)  // the active account's, or nil
/// ```
///
/// The migrations are applied per feature (a row in `symorva_feature_schema`, versions of its
/// own) when the account's database opens, before `make` runs: the one way a module's tables are
/// made and versioned. The SDK's own modules declare theirs the same way (the wallet, the
/// studio, end-to-end encryption under `e2ee`, and chat, whose list is the file's main one).
public struct AccountModuleFactory: Sendable {
    /// The module's name: its key in ``AccountModules`` and in the database's `symorva_feature_schema`,
    /// and the prefix of its tables.
    public var name: String
    /// The module's migrations, versions 1, 2, 3, … (its own numbering), applied when the
    /// account's database opens, before ``make``. Empty for a module without tables.
    public var migrations: [Migration]
    /// The name ``migrations`` are versioned under in `symorva_feature_schema`: the factory's
    /// ``name`` unless the module's tables predate it under another (`e2ee` for `crypto`).
    package var schemaName: String
    /// The account database's main list, versioned by the file's `user_version`: chat's schema,
    /// the oldest user of the file. Only one module declares one.
    package var mainMigrations: [Migration]
    /// The modules this one cannot work without, by factory name: they are built before it, and
    /// a list without one of them is refused (``AccountModuleGraphError/missingRequirement(module:requires:)``).
    public var requires: [String]
    /// The modules this one attaches to when they are in the list, by factory name: they are
    /// built before it when present (chat and the studio use `crypto` for encrypted rooms), and
    /// it works without them.
    public var uses: [String]
    /// Builds the module for one account; `nil` when the module does not apply (disabled in
    /// the manifest). Runs when the account's session starts, after the session is restored and
    /// after the modules of ``requires`` and ``uses`` (found in ``AccountModuleContext``'s
    /// modules built so far).
    public var make: @Sendable (AccountModuleContext) async -> (any AccountModule)?

    /// A factory.
    ///
    /// - Parameters:
    ///   - requires: modules that must be in the community's list; built first.
    ///   - uses: modules built first when they are in the list.
    public init(
        name: String, migrations: [Migration] = [], requires: [String] = [], uses: [String] = [],
        make: @escaping @Sendable (AccountModuleContext) async -> (any AccountModule)?
    ) {
        self.name = name
        self.migrations = migrations
        self.schemaName = name
        self.mainMigrations = []
        self.requires = requires
        self.uses = uses
        self.make = make
    }

    /// A factory whose tables are `schema` (its name in `symorva_feature_schema`, its migrations).
    package init(
        name: String, schema: AccountMigrations.Feature, requires: [String] = [], uses: [String] = [],
        make: @escaping @Sendable (AccountModuleContext) async -> (any AccountModule)?
    ) {
        self.init(name: name, migrations: schema.migrations, requires: requires, uses: uses, make: make)
        self.schemaName = schema.name
    }

    /// The factory of the module that owns the account database's main list (`user_version`).
    package init(
        name: String, mainMigrations: [Migration], requires: [String] = [], uses: [String] = [],
        make: @escaping @Sendable (AccountModuleContext) async -> (any AccountModule)?
    ) {
        self.init(name: name, requires: requires, uses: uses, make: make)
        self.mainMigrations = mainMigrations
    }
}

/// The modules built so far for one account, while its factories run.
package final class BuiltModules: Sendable {
    private let modules = Lock<[any AccountModule]>([])

    package init() {}

    /// Records a module that was just built.
    package func add(_ module: any AccountModule) { modules.withLock { $0.append(module) } }

    /// The built module of type `type`, if any.
    package func module<Module: AccountModule>(_ type: Module.Type) -> Module? {
        modules.withLock { $0.lazy.compactMap { $0 as? Module }.first }
    }

    /// Forgets the modules once every factory has run. Modules keep closures over their
    /// ``AccountModuleContext`` (chat asks it for a token refresh), and the context holds this
    /// list: kept, it would hold every module, and with them the account's database, alive in a
    /// cycle after the account ends.
    package func removeAll() { modules.withLock { $0.removeAll() } }
}

/// The modules built for one account, by name and by type.
public struct AccountModules: Sendable {
    /// The modules by factory name.
    public let byName: [String: any AccountModule]

    /// Modules keyed by their factory's name.
    public init(_ byName: [String: any AccountModule] = [:]) { self.byName = byName }

    /// The module of type `type`, if one was built.
    public func module<Module: AccountModule>(_ type: Module.Type) -> Module? {
        for module in byName.values {
            if let typed = module as? Module { return typed }
        }
        return nil
    }

    /// The module built by the factory called `name`.
    public subscript(name: String) -> (any AccountModule)? { byName[name] }
}

extension ObservableValue where Value == SessionMachine.State {
    /// Calls `handler` for every later `signedIn` state whose access token differs from the last
    /// one seen signed in (the state at subscription is the baseline, so a session soft logged
    /// out then counts its re-authentication), until the returned function is called.
    package func onNewAccessToken(_ handler: @escaping @Sendable () -> Void) -> Unsubscribe {
        let seen = Lock<(isFirst: Bool, token: Secret<String>?)>((true, nil))
        return subscribe { state in
            let token: Secret<String>? =
                state.signedInSession?.tokens.accessToken
            let isNew = seen.withLock { seen -> Bool in
                defer { seen.isFirst = false }
                guard let token, token != seen.token else { return false }
                seen.token = token
                return !seen.isFirst
            }
            if isNew { handler() }
        }
    }
}
