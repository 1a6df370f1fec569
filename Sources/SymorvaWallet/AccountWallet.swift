import SymorvaCrypto
import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaServices
import SymorvaStore

/// The wallet of one signed-in member, bound to that account for its whole life: balances,
/// transfers, pending commands and history.
///
/// Apps use ``WalletClient`` (`community.wallet`), which follows whichever account is active
/// and delegates here. An `AccountWallet` is what each signed-in account's wallet module builds;
/// tools and tests that manage one account themselves may build one directly. Money waits for
/// the service: nothing here is optimistic.
///
/// ```swift
/// let draft = try await wallet.prepareTransfer(to: memberID, asset: orb, amount: Amount("25.00"))
/// switch try await draft.confirm(with: .pin(pinEntry)) {
/// case .settled(let transfer): show(transfer)
/// case .failed(let reason): show(reason)
/// case .unknown(let pending): show(try await pending.query())   // never resubmits
/// }
/// ```
///
/// Each transfer runs in its own ``/SymorvaRuntime/MachineHost`` of `TransferMachine` in the
/// account's scope, with a `TransferInterpreter`. A confirmation whose outcome is unknown is queried with
/// backoff until it resolves, and shows in ``pendingCommands`` meanwhile. After a restart, call
/// ``resumePendingCommands()`` once the account is signed in: every command left in the store is
/// queried the same way. Ending the scope (sign-out, switch) stops every transfer host; a late
/// answer is dropped, the command stays in the store for the next sign-in, and the client, its
/// drafts and its pending transfers answer ``/SymorvaMachines/TransferError/accountEnded``.
public final class AccountWallet: Sendable {
    /// The signed-in member.
    public let member: UserID
    /// The community's wallet settings.
    public let configuration: WalletConfiguration

    /// The member's balances, as last fetched by ``refreshBalances()`` (refreshed after every
    /// settled transfer too). Empty until the first fetch.
    public var balances: ObservableValue<[Balance]> { balancePublisher.observable }

    /// Confirmations whose outcome is not known yet, oldest first. Each is being queried.
    public var pendingCommands: ObservableValue<[PendingTransfer]> { registry.pendingCommands }

    let service: WalletService
    let store: WalletStore
    let interpreter: TransferInterpreter
    let machine: TransferMachine
    let registry: TransferRegistry
    private let scope: AccountScope
    private let clock: any RuntimeClock
    private let tracer: Tracer
    private let balancePublisher = ObservableValue<[Balance]>.Publisher([])
    private let logger = Logger(category: "wallet")

    /// Creates the wallet of the member signed in to `scope`, migrating the wallet's tables in
    /// the account's database.
    ///
    /// - Parameters:
    ///   - member: the signed-in member's Matrix user ID.
    ///   - services: the account's authenticated community services client.
    ///   - database: the account's database; the wallet keeps its pending commands there.
    ///   - scope: the account's scope; every transfer host runs in it.
    ///   - configuration: the community's assets and the device's verifiers.
    ///   - clock: the clock of timers (draft expiry, query backoff).
    ///   - wallClock: the clock that stamps stored commands.
    ///   - tracer: where transfer transitions are traced.
    /// - Throws: ``/SymorvaMachines/TransferError/store(_:)`` when the database cannot be migrated.
    public init(
        member: UserID, services: CommunityServicesClient, database: SQLiteDatabase, scope: AccountScope,
        configuration: WalletConfiguration = WalletConfiguration(), clock: any RuntimeClock = SystemClock(),
        wallClock: any WallClock = SystemWallClock(), tracer: Tracer = .shared
    ) async throws(TransferError) {
        do throws(StoreError) {
            store = try await WalletStore.open(on: database, wallClock: wallClock)
        } catch {
            throw .store(error.storeFailure)
        }
        self.member = member
        self.configuration = configuration
        self.scope = scope
        self.clock = clock
        self.tracer = tracer
        machine = TransferMachine(configuration: configuration.machineConfiguration)
        interpreter = TransferInterpreter(
            services: services, store: store, requestTimeout: configuration.requestTimeout,
            draftLifetime: configuration.draftLifetime)
        service = interpreter.service
        registry = TransferRegistry(store: store)
        registry.onSettled = { [weak self] in
            guard let self else { return }
            Task { try? await self.refreshBalances() }
        }
        let registry = self.registry
        scope.onAdvance { [weak scope] _ in
            registry.stopAll(closing: scope?.isEnded ?? true)
        }
    }

    // MARK: Balances and history

    /// Fetches the member's balances, publishes them to ``balances`` and returns them.
    @discardableResult
    public func refreshBalances() async throws(TransferError) -> [Balance] {
        try ensureCurrent()
        let fetched = try await service.balances()
        balancePublisher.publish(fetched)
        return fetched
    }

    /// The member's most recent transfers and credits, newest first: sent and received.
    public func history(limit: Int = 50) async throws(TransferError) -> [LedgerEntry] {
        try ensureCurrent()
        return try await service.history(limit: max(1, min(limit, 100)))
    }

    // MARK: Transfers

    /// Asks the service to price a transfer and returns the draft to show the member.
    ///
    /// - Parameters:
    ///   - recipient: the member who receives the money.
    ///   - asset: what is sent; one of ``WalletConfiguration/assets`` when that list is set.
    ///   - amount: what the recipient receives; brought to the asset's precision first.
    /// - Throws: ``/SymorvaMachines/TransferError/amount(_:)`` when the amount has more decimals than the asset;
    ///   ``/SymorvaMachines/TransferError/failure(_:)`` when the service refuses (insufficient funds, unknown
    ///   recipient, locked wallet, still rate limited after the services client waited the hint…)
    ///   or cannot be reached; ``/SymorvaMachines/TransferError/cancelled`` when the
    ///   calling task is cancelled; ``/SymorvaMachines/TransferError/accountEnded`` when the account's scope has
    ///   ended.
    public func prepareTransfer(to recipient: UserID, asset: Asset, amount: Amount) async throws(TransferError)
        -> TransferDraft
    {
        let scaled: Amount
        do throws(AmountError) { scaled = try asset.amount(amount) } catch { throw .amount(error) }
        if !configuration.assets.isEmpty && !configuration.assets.contains(asset) {
            throw .failure(.assetUnknown)
        }
        let host = try makeHost()
        let request = TransferRequest(recipient: recipient, asset: asset, amount: scaled)
        let state = await host.send(.prepareRequested(request)) { state -> TransferMachine.State? in
            if case .preparing = state { return nil }
            return state
        }
        switch state {
        case .drafted(let drafted):
            return TransferDraft(
                draft: drafted.draft, offered: machine.offeredMethods(for: drafted.draft), host: host,
                registry: registry)
        case .failed(let failure, _):
            throw .failure(failure)
        case nil:
            // The calling task was cancelled (or the account ended) while the service priced it:
            // abandon the draft.
            host.post(.cancelled)
            throw registry.isClosed ? .accountEnded : .cancelled
        default:
            throw .cancelled
        }
    }

    /// Queries every command left in the account's store by an earlier run, and keeps querying
    /// each with backoff until the service answers. Call it once the account is signed in.
    ///
    /// Each shows in ``pendingCommands`` (as unknown) until it resolves. A command this client
    /// is confirming right now is left alone. Calling it again only adds commands it does not
    /// know yet.
    ///
    /// - Returns: the commands it started to resolve.
    /// - Throws: ``/SymorvaMachines/TransferError/store(_:)`` when the store cannot be read;
    ///   ``/SymorvaMachines/TransferError/accountEnded`` when the account's scope has ended.
    @discardableResult
    public func resumePendingCommands() async throws(TransferError) -> [PendingTransfer] {
        let stored: [PendingCommand]
        do throws(StoreError) { stored = try await store.pendingCommands() } catch {
            throw .store(error.storeFailure)
        }
        var resumed: [PendingTransfer] = []
        for pending in stored where registry.claim(pending.commandID) {
            let host = try makeHost()
            let handle = registry.pendingTransfer(for: pending, host: host)
            await host.send(.restored(pending))
            resumed.append(handle)
        }
        if !resumed.isEmpty { logger.notice("resuming pending wallet commands count=\(resumed.count)") }
        return resumed
    }

    // MARK: PIN

    /// Sets the member's wallet PIN (`replacing` is `nil` for the first one) or changes it.
    ///
    /// Both PINs are sealed on the device to the service's public key, bound to the member, and
    /// never stored or logged.
    ///
    /// - Throws: ``/SymorvaMachines/TransferError/failure(_:)`` with
    ///   ``/SymorvaMachines/TransferFailure/verification(_:)``
    ///   (``/SymorvaMachines/VerificationError/malformedPIN``) for a PIN that is not 4–12 digits,
    ///   ``/SymorvaMachines/TransferFailure/lockedOut``, or ``/SymorvaMachines/TransferFailure/rejected(code:)`` with
    ///   the service's code (`SY_WRONG_PIN`, `SY_PIN_ALREADY_SET`, …).
    public func setPIN(_ pin: Secret<String>, replacing oldPIN: Secret<String>? = nil) async throws(TransferError) {
        try ensureCurrent()
        guard SealingContext.isWellFormed(pin: pin), oldPIN.map(SealingContext.isWellFormed(pin:)) ?? true else {
            throw .failure(.verification(.malformedPIN))
        }
        let key = try await service.sealingKey()
        let payload = pin.map { pin in
            let lines = [WalletWire.pinPayloadVersion, member.rawValue, oldPIN?.exposedValue ?? "", pin]
            return Array(lines.joined(separator: "\n").utf8)
        }
        let sealed: [UInt8]
        do throws(SealedBoxError) {
            sealed = try SealedBox.seal(payload.exposedValue, recipientPublicKey: key)
        } catch {
            throw .failure(.verification(.sealingFailed))
        }
        try await service.setPIN(sealed: sealed)
    }

    // MARK: Lifetime

    /// Stops every transfer host of this client, as the end of the account's scope does. Sent
    /// confirmations stay in the store; a new client on the same database resumes them.
    public func shutdown() {
        registry.stopAll(closing: true)
    }

    /// Whether the account's scope has ended or the client was shut down: the client, its
    /// drafts and its pending transfers then refuse to act.
    public var isEnded: Bool { scope.isEnded || registry.isClosed }

    /// Throws ``TransferError/accountEnded`` once the client's account has ended.
    func ensureCurrent() throws(TransferError) {
        if isEnded { throw .accountEnded }
    }

    private func makeHost() throws(TransferError) -> MachineHost<TransferMachine> {
        try ensureCurrent()
        let host = MachineHost(
            machine: machine, initial: .idle, interpreter: interpreter, instance: scope.label, scope: scope,
            clock: clock, tracer: tracer)
        guard registry.adopt(host) else { throw .accountEnded }
        return host
    }
}
