import Foundation
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaServices
import SymorvaStore
import SymorvaWallet
import Testing

/// A member of the dev community with a real Matrix account, a services client that signs in
/// over OpenID, an account database file of their own and a ``AccountWallet`` on it.
///
/// Everything goes to the real Synapse and the real reference server; the test-only endpoints
/// (`/_symorva/v1/test/…`, present because the dev server runs with `--test`) are used only to
/// set the scene: credit a member, arm a fault.
final class WalletMember: Sendable {
    static let orb = Asset(code: "ORB", precision: 2)

    let account: RegisteredAccount
    let services: CommunityServicesClient
    let databasePath: String
    let scope: AccountScope
    let wallet: AccountWallet
    let environment: DevEnvironment

    var memberID: UserID { UserID(account.userID)! }

    private init(
        account: RegisteredAccount, services: CommunityServicesClient, databasePath: String, scope: AccountScope,
        wallet: AccountWallet, environment: DevEnvironment
    ) {
        self.account = account
        self.services = services
        self.databasePath = databasePath
        self.scope = scope
        self.wallet = wallet
        self.environment = environment
    }

    /// Registers a new member and opens their wallet; `servicesURL` (a ``FaultProxy``'s, say)
    /// replaces the dev services' URL for everything the member sends to the services.
    static func register(
        _ prefix: String, in environment: DevEnvironment, transport: any HTTPTransport,
        configuration: WalletConfiguration = WalletMember.configuration(), clock: any RuntimeClock = SystemClock(),
        tracer: Tracer = Tracer(), servicesURL: URL? = nil
    ) async throws -> WalletMember {
        let account = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername(prefix), in: environment, transport: transport)
        let services = CommunityServicesClient(
            baseURL: servicesURL ?? environment.servicesURL, transport: transport,
            tokenSource: HomeserverOpenIDSource(account: account, environment: environment, transport: transport))
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("symorva-wallet-\(UUID().uuidString).sqlite").path
        let scope = AccountScope(label: account.userID)
        let wallet = try await Self.openWallet(
            account: account, services: services, path: path, scope: scope, configuration: configuration,
            clock: clock, tracer: tracer)
        return WalletMember(
            account: account, services: services, databasePath: path, scope: scope, wallet: wallet,
            environment: environment)
    }

    /// A wallet client for the same member and database file, in a new scope: what a restarted
    /// process builds after signing in again.
    func reopenedWallet(
        configuration: WalletConfiguration = WalletMember.configuration(), tracer: Tracer = Tracer()
    ) async throws -> AccountWallet {
        try await Self.openWallet(
            account: account, services: services, path: databasePath, scope: AccountScope(label: account.userID),
            configuration: configuration, clock: SystemClock(), tracer: tracer)
    }

    private static func openWallet(
        account: RegisteredAccount, services: CommunityServicesClient, path: String, scope: AccountScope,
        configuration: WalletConfiguration, clock: any RuntimeClock, tracer: Tracer
    ) async throws -> AccountWallet {
        let database = try await SQLiteDatabase.open(path: path)
        return try await AccountWallet(
            member: UserID(account.userID)!, services: services, database: database, scope: scope,
            configuration: configuration, clock: clock, tracer: tracer)
    }

    /// The dev community's configuration, with quick query backoff so tests resolve fast.
    static func configuration(draftLifetime: Duration? = nil) -> WalletConfiguration {
        WalletConfiguration(
            assets: [orb],
            queryBackoff: RetryBackoff(initialDelay: .milliseconds(200), maximumDelay: .seconds(1), jitterRatio: 0),
            requestTimeout: .seconds(20), draftLifetime: draftLifetime)
    }

    /// Removes the member's database files.
    func removeFiles() {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: databasePath + suffix) }
    }

    // MARK: Scene setting (test-only endpoints)

    /// Credits `member` through the server's test endpoint (creates their wallet).
    func credit(_ member: UserID, _ amount: String) async throws {
        let body = #"{"user_id": "\#(member.rawValue)", "asset": "ORB", "amount": "\#(amount)"}"#
        _ = try await services.send(.post, "/_symorva/v1/test/wallet/credit", json: Array(body.utf8))
    }

    /// Arms a fault on the confirm endpoint for the next request.
    func armConfirmFault(_ mode: String, extra: String = "") async throws {
        let body = """
            {"path_prefix": "/_symorva/v1/wallet/transfers/confirm", "method": "POST", "mode": "\(mode)",
             "count": 1\(extra)}
            """
        _ = try await services.send(.post, "/_symorva/v1/test/faults", json: Array(body.utf8))
    }

    /// Holds the next confirm as `pending` for `milliseconds` before it executes.
    func holdNextConfirm(milliseconds: Int) async throws {
        let body = #"{"delay_ms": \#(milliseconds), "count": 1}"#
        _ = try await services.send(.post, "/_symorva/v1/test/wallet/hold", json: Array(body.utf8))
    }

    /// Arms a counting fault on the confirm endpoint: a delay of 0 for every request, which
    /// changes nothing but counts, in its `hits`, the confirm requests that reached the service.
    func countConfirms() async throws {
        let counter = #"{"path_prefix": "/_symorva/v1/wallet/transfers/confirm", "mode": "delay", "count": null}"#
        _ = try await services.send(.post, "/_symorva/v1/test/faults", json: Array(counter.utf8))
    }

    /// The `hits` of the counting fault (``countConfirms()``): confirm requests that reached the service.
    func confirmCount() async throws -> Int {
        let response = try await services.send(.get, "/_symorva/v1/test/faults")
        let list = try #require(try JSONSerialization.jsonObject(with: Data(response)) as? [String: Any])
        let faults = list["faults"] as? [[String: Any]] ?? []
        let fault = try #require(
            faults.first { $0["path_prefix"] as? String == "/_symorva/v1/wallet/transfers/confirm" })
        return try #require(fault["hits"] as? Int)
    }

    /// Waits until `count` confirm requests have reached the service (``countConfirms()`` armed).
    func waitForConfirms(_ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if try await confirmCount() >= count { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw IntegrationFailure("the confirm never reached the service")
    }

    /// Disarms every fault (a failed test must not leave one for the next).
    func clearFaults() async {
        _ = try? await services.send(.delete, "/_symorva/v1/test/faults")
    }

    // MARK: Reading

    /// The balance of ORB as the service reports it.
    /// The member's ORB balance, through `client` (default: the member's first wallet; a wallet
    /// whose scope ended refuses to act).
    func orbBalance(in client: AccountWallet? = nil) async throws -> String {
        let balances = try await (client ?? wallet).refreshBalances()
        return try #require(balances.first { $0.asset.code == "ORB" }).amount.formatted
    }

    /// Ledger entries of the member's history that a command executed.
    func entries(of commandID: CommandID, in client: AccountWallet? = nil) async throws -> [LedgerEntry] {
        try await (client ?? wallet).history(limit: 100).filter { $0.commandID == commandID }
    }

    /// Waits until the account's store holds no pending command.
    func waitForEmptyStore(_ wallet: AccountWallet? = nil) async throws {
        let database = try await SQLiteDatabase.open(path: databasePath)
        let store = try await WalletStore.open(on: database)
        for _ in 0..<100 {
            if try await store.pendingCommands().isEmpty { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("the wallet store still holds pending commands")
    }

    /// The rows of the account's store now.
    func storedCommands() async throws -> [WalletStore.StoredCommand] {
        let store = try await WalletStore.open(on: try await SQLiteDatabase.open(path: databasePath))
        return try await store.storedCommands()
    }
}

extension TransferOutcome {
    /// The settled transfer, or a test failure naming the outcome.
    func settledTransfer(sourceLocation: SourceLocation = #_sourceLocation) throws -> Transfer {
        guard case .settled(let transfer) = self else {
            throw IntegrationFailure("expected settled, got \(self)")
        }
        return transfer
    }

    /// The failure reason, or `nil`.
    var failure: TransferFailure? {
        if case .failed(let failure) = self { return failure }
        return nil
    }

    /// The pending transfer, or `nil`.
    var pending: PendingTransfer? {
        if case .unknown(let pending) = self { return pending }
        return nil
    }
}

extension Amount {
    /// An ORB amount for tests.
    static func orb(_ text: String) -> Amount { try! Amount(text, precision: 2) }
}
