import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime

/// The community's wallet: `community.wallet`, present exactly when the manifest enables the
/// wallet module, and then one instance for the community's whole life.
///
/// It always shows the **active** account: ``balances`` and ``pendingCommands`` switch to the
/// new account's values when the member switches accounts and are empty while nobody is signed
/// in. Operations act for the account that is active when they are called and throw
/// ``/SymorvaMachines/TransferError/notSignedIn`` when there is none. Drafts and pending transfers belong to the
/// account that made them, for good: once it is switched away from or signed out they throw
/// ``/SymorvaMachines/TransferError/accountEnded`` instead of acting for the account that is active now (its
/// unknown commands are queried again at its next sign-in). Money waits for the service:
/// nothing here is optimistic.
///
/// ```swift
/// guard let wallet = community.wallet else { return }            // disabled in the manifest
/// let draft = try await wallet.prepareTransfer(to: memberID, asset: orb, amount: Amount("25.00"))
/// switch try await draft.confirm(with: .pin(pinEntry)) {
/// case .settled(let transfer): show(transfer)
/// case .failed(let reason): show(reason)
/// case .unknown(let pending): show(try await pending.query())   // never resubmits
/// }
/// ```
public final class WalletClient: Sendable {
    /// The community's wallet settings (the manifest's assets), known before anyone signs in.
    public let configuration: WalletConfiguration

    private let active = ActiveAccount<AccountWallet>()
    private let balanceValue: ObservableValue<[Balance]>
    private let pendingValue: ObservableValue<[PendingTransfer]>

    /// A wallet that shows nobody until the community tells it which account is active.
    package init(configuration: WalletConfiguration) {
        self.configuration = configuration
        balanceValue = active.value(placeholder: []) { $0.balances }
        // Handles are the same when they are the same objects.
        let sameHandles: @Sendable ([PendingTransfer], [PendingTransfer]) -> Bool = { lhs, rhs in
            lhs.count == rhs.count && zip(lhs, rhs).allSatisfy { $0 === $1 }
        }
        pendingValue = active.value(placeholder: [], isSame: sameHandles) { $0.pendingCommands }
    }

    /// A wallet that always acts for `wallet`: for tools and tests that manage one account's
    /// ``AccountWallet`` themselves. Apps use `community.wallet`.
    public convenience init(following wallet: AccountWallet) {
        self.init(configuration: wallet.configuration)
        follow(wallet, isSignedIn: true)
    }

    /// Makes `wallet` (the new active account's) the one this client shows and acts for;
    /// `isSignedIn` tells a signed-in account without a wallet from nobody signed in.
    package func follow(_ wallet: AccountWallet?, isSignedIn: Bool) {
        active.follow(wallet, isSignedIn: isSignedIn)
    }

    private var current: AccountWallet? { active.current }

    /// The active member, or `nil` while nobody is signed in.
    public var member: UserID? { current?.member }

    /// The active member's balances, as last fetched by ``refreshBalances()`` (refreshed after
    /// every settled transfer too); empty until the first fetch and while nobody is signed in.
    public var balances: ObservableValue<[Balance]> { balanceValue }

    /// The active member's confirmations whose outcome is not known yet, oldest first; each is
    /// being queried. Empty while nobody is signed in.
    public var pendingCommands: ObservableValue<[PendingTransfer]> { pendingValue }

    /// Fetches the active member's balances, publishes them to ``balances`` and returns them.
    ///
    /// - Throws: ``/SymorvaMachines/TransferError/notSignedIn`` when nobody is signed in;
    ///   ``/SymorvaMachines/TransferError/accountEnded`` when the account was switched away from before the
    ///   answer; the service's failure.
    @discardableResult
    public func refreshBalances() async throws(TransferError) -> [Balance] {
        try await withActive { wallet async throws(TransferError) -> [Balance] in try await wallet.refreshBalances() }
    }

    /// The active member's most recent transfers and credits, newest first.
    ///
    /// - Throws: ``/SymorvaMachines/TransferError/notSignedIn`` when nobody is signed in;
    ///   ``/SymorvaMachines/TransferError/accountEnded`` when the account was switched away from before the
    ///   answer; the service's failure.
    public func history(limit: Int = 50) async throws(TransferError) -> [LedgerEntry] {
        try await withActive { wallet async throws(TransferError) -> [LedgerEntry] in
            try await wallet.history(limit: limit)
        }
    }

    /// Asks the service to price a transfer from the active member and returns the draft,
    /// bound to that member. See ``AccountWallet/prepareTransfer(to:asset:amount:)``.
    ///
    /// - Throws: ``/SymorvaMachines/TransferError/notSignedIn`` when nobody is signed in;
    ///   ``/SymorvaMachines/TransferError/accountEnded`` when the account was switched away from before the
    ///   draft was ready; ``/SymorvaMachines/TransferError/amount(_:)``,
    ///   ``/SymorvaMachines/TransferError/failure(_:)``,
    ///   ``/SymorvaMachines/TransferError/cancelled`` as ``AccountWallet`` throws them.
    public func prepareTransfer(to recipient: UserID, asset: Asset, amount: Amount) async throws(TransferError)
        -> TransferDraft
    {
        try await withActive { wallet async throws(TransferError) -> TransferDraft in
            try await wallet.prepareTransfer(to: recipient, asset: asset, amount: amount)
        }
    }

    /// Queries every command the active member's store holds from an earlier run. The
    /// community already does this at every sign-in; calling it again only adds commands it
    /// does not know yet.
    ///
    /// - Throws: ``/SymorvaMachines/TransferError/notSignedIn`` when nobody is signed in;
    ///   ``/SymorvaMachines/TransferError/store(_:)`` when the store cannot be read.
    @discardableResult
    public func resumePendingCommands() async throws(TransferError) -> [PendingTransfer] {
        try await withActive { wallet async throws(TransferError) -> [PendingTransfer] in
            try await wallet.resumePendingCommands()
        }
    }

    /// Sets the active member's wallet PIN (`replacing` is `nil` for the first one) or
    /// changes it. See ``AccountWallet/setPIN(_:replacing:)``.
    ///
    /// - Throws: ``/SymorvaMachines/TransferError/notSignedIn`` when nobody is signed in; the service's failure.
    public func setPIN(_ pin: Secret<String>, replacing oldPIN: Secret<String>? = nil) async throws(TransferError) {
        try await activeWallet().setPIN(pin, replacing: oldPIN)
    }

    /// The active member's wallet.
    private func activeWallet() throws(TransferError) -> AccountWallet {
        try active.module(orThrow: TransferError.self)
    }

    /// Runs `body` with the active member's wallet; a result that comes back after that account
    /// was switched away from or signed out is not handed out (`.accountEnded`).
    private func withActive<T: Sendable>(
        _ body: (AccountWallet) async throws(TransferError) -> T
    ) async throws(TransferError) -> T {
        try await active.withActive(body)
    }
}

extension AccountWallet: AccountBound {}

extension TransferError: ActiveAccountError {
    /// Signed in, but the account's wallet could not be opened (its store failed).
    package static var moduleUnavailable: TransferError { .store(.database) }
}

extension WalletConfiguration {
    /// The wallet settings of a manifest's wallet module.
    package init(manifest module: SymorvaConfiguration.Wallet) {
        self.init(assets: module.assets.map { Asset(code: $0.code, precision: $0.precision) })
    }
}
