import SymorvaMachines
import SymorvaRuntime

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A transfer the service has priced: what the member sees before typing the PIN.
///
/// The figures on it are exactly what the PIN confirms: the device refuses a draft whose
/// figures do not match the request or do not add up. ``confirm(with:)`` sends one confirmation
/// under a fresh command ID; after a wrong PIN or a rate limit the draft stays confirmable and
/// a new call uses a new command ID. The draft expires at ``expiresAt`` (the host's clock); after that a
/// confirmation fails with ``/SymorvaMachines/TransferFailure/draftExpired``.
///
/// Each draft runs in its own machine host in the account's scope; ``states`` shows it. A draft
/// belongs to the account that prepared it, for good.
public final class TransferDraft: Sendable {
    /// The figures: recipient, asset, amount, fee, total and the draft's ID.
    public let summary: TransferSummary
    /// When the draft stops being confirmable, as an instant of the wallet's clock.
    public let expiresAt: Duration
    /// The verification methods the member may use: those the service accepts for this draft,
    /// minus biometrics when no verifier is present.
    public let verificationMethods: Set<VerificationMethod>

    let host: MachineHost<TransferMachine>
    let registry: TransferRegistry
    private let isConfirming = Lock(false)

    init(
        draft: SymorvaMachines.TransferDraft, offered: Set<VerificationMethod>, host: MachineHost<TransferMachine>,
        registry: TransferRegistry
    ) {
        self.summary = draft.summary
        self.expiresAt = draft.expiresAt
        self.verificationMethods = offered
        self.host = host
        self.registry = registry
    }

    /// The service's identity for the draft.
    public var id: DraftID { summary.draftID }
    /// Who receives the money.
    public var recipient: UserID { summary.recipient }
    /// What is sent.
    public var asset: Asset { summary.asset }
    /// What the recipient receives.
    public var amount: Amount { summary.amount }
    /// What the service charges on top.
    public var fee: Amount { summary.fee }
    /// What leaves the member's balance: `amount + fee`.
    public var total: Amount { summary.total }

    /// The transfer's state, observable (for a "confirming…" indicator, or to see it expire).
    public var states: ObservableValue<TransferState> { host.states }

    /// Whether a confirmation may be sent now: the draft is neither confirming nor finished.
    public var canConfirm: Bool {
        if case .drafted = host.states.value { return true }
        return false
    }

    /// Why the last confirmation did not go through (a wrong PIN, a malformed PIN, a rate limit
    /// with how long to wait), while the draft is still confirmable.
    public var lastRejection: TransferFailure? {
        if case .drafted(let drafted) = host.states.value { return drafted.rejection }
        return nil
    }

    /// Confirms the draft with the member's PIN (or biometrics, when offered) and waits for the
    /// outcome.
    ///
    /// The PIN is sealed on the device to the service's key; the command ID is written to the
    /// account's store before the request leaves. The answer is one of:
    /// - `.settled(transfer)`: the money moved;
    /// - `.failed(reason)`: it did not happen. For ``/SymorvaMachines/TransferFailure/wrongPIN(attemptsLeft:)``,
    ///   ``/SymorvaMachines/TransferFailure/rateLimited(retryAfter:)`` (the service turned the confirmation away
    ///   unread; confirm again after the wait) and the device's own refusals (a malformed PIN,
    ///   a method not offered) the draft stays confirmable; otherwise it is final.
    ///   ``/SymorvaMachines/TransferFailure/draftExpired`` when the draft expired first;
    /// - `.unknown(pending)`: no definitive answer arrived; the SDK queries it with backoff.
    ///
    /// - Throws: ``/SymorvaMachines/TransferError/invalidTransition(state:event:)`` when the draft is not
    ///   confirmable (another confirmation is running, or it settled, failed or was cancelled);
    ///   ``/SymorvaMachines/TransferError/cancelled`` when the calling task is cancelled before an answer (a
    ///   confirmation already sent goes on; if it ends unknown it shows in
    ///   ``WalletClient/pendingCommands``); ``/SymorvaMachines/TransferError/accountEnded`` when the draft's
    ///   account was switched away from or signed out: a draft never confirms for another account.
    public func confirm(with verification: Verification) async throws(TransferError) -> TransferOutcome {
        let started = isConfirming.withLock { running -> Bool in
            guard !running else { return false }
            running = true
            return true
        }
        guard !registry.isClosed else { throw .accountEnded }
        guard started else { throw .invalidTransition(state: "confirming", event: "confirmRequested") }
        defer { isConfirming.withLock { $0 = false } }

        let commandID = CommandID.random()
        // Claimed before anything is stored, so that a concurrent restore never queries (and
        // thereby fences) a command this process is about to send. A command the machine
        // refuses is never stored, so its claim fences nothing.
        registry.claim(commandID)
        // The machine decides whether the draft is confirmable: an ignored confirmation answers
        // with the state that refused it.
        let answer = await host.send(
            .confirmRequested(verification, commandID: commandID),
            ignored: { state in Answer.refused(state) },
            until: { state in state.isConfirming ? nil : Answer.answered(state) })
        switch answer {
        case .answered(let state):
            return try registry.outcome(of: state, host: host, event: "confirmRequested")
        case .refused(.expired):
            return .failed(.draftExpired)
        case .refused(let state):
            throw .invalidTransition(state: state.caseName, event: "confirmRequested")
        case nil:
            throw registry.isClosed ? .accountEnded : .cancelled
        }
    }

    /// How a confirmation ended for the handle.
    private enum Answer: Sendable {
        /// The machine took the confirmation and settled here.
        case answered(TransferMachine.State)
        /// The machine ignored the confirmation in this state.
        case refused(TransferMachine.State)
    }

    /// Abandons the draft. Does nothing once a confirmation is on its way: a sent confirmation
    /// cannot be taken back.
    public func cancel() async {
        guard !registry.isClosed else { return }
        await host.send(.cancelled)
    }
}

/// A confirmation whose outcome the device does not know yet.
///
/// The SDK queries it by command ID with backoff (1 s, 2 s, 4 s … capped at 60 s) until the
/// service answers, also after a restart (``WalletClient/resumePendingCommands()``).
/// ``query()`` asks at once. Nothing here ever sends the confirmation again.
public final class PendingTransfer: Sendable, Identifiable {
    /// The command that was (or may have been) sent.
    public let commandID: CommandID
    /// What it would move.
    public let summary: TransferSummary

    let host: MachineHost<TransferMachine>
    let registry: TransferRegistry

    init(_ pending: PendingCommand, host: MachineHost<TransferMachine>, registry: TransferRegistry) {
        self.commandID = pending.commandID
        self.summary = pending.summary
        self.host = host
        self.registry = registry
    }

    /// The command ID.
    public var id: CommandID { commandID }

    /// The transfer's state, observable: `unknown` and `querying` until it resolves.
    public var states: ObservableValue<TransferState> { host.states }

    /// Queries the command now (or joins the query in flight) and returns what the service
    /// said: `.settled`, `.failed` (``/SymorvaMachines/TransferFailure/notReceived`` when the service never got
    /// it; prepare the transfer again), or `.unknown(self)` when it still cannot tell.
    ///
    /// - Throws: ``/SymorvaMachines/TransferError/cancelled`` when the calling task is cancelled first;
    ///   ``/SymorvaMachines/TransferError/accountEnded`` when its account was switched away from or signed out
    ///   (the next sign-in of that account resumes the command).
    public func query() async throws(TransferError) -> TransferOutcome {
        guard !registry.isClosed else { throw .accountEnded }
        // An unknown command queries now; one already querying ignores the request and the
        // wait joins its query; a resolved one answers at once.
        let answered = await host.send(.queryRequested) { state in state.isQuerying ? nil : state }
        guard let answered else { throw registry.isClosed ? .accountEnded : .cancelled }
        return try registry.outcome(of: answered, host: host, event: "queryRequested")
    }
}

extension CommandID {
    /// A fresh random command ID.
    static func random() -> CommandID {
        guard let commandID = CommandID(uuidString: UUID().uuidString) else {
            preconditionFailure("UUID().uuidString is not a canonical UUID")
        }
        return commandID
    }
}
