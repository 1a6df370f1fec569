import SymorvaMachines
import SymorvaRuntime

/// How a confirmation or a query ended, as the member is told. Every transfer ends in one of
/// these, and "not known yet" is one of them.
public enum TransferOutcome: Sendable {
    /// The money moved.
    case settled(Transfer)
    /// It did not happen, and why. After a wrong PIN the draft stays confirmable
    /// (``TransferDraft/canConfirm``); every other reason is final.
    case failed(TransferFailure)
    /// The service may or may not have executed it. The SDK queries it with backoff until it
    /// knows; ``PendingTransfer/query()`` asks at once. It is never sent again.
    case unknown(PendingTransfer)

    /// A short name for logs and the REPL: `settled`, `failed`, `unknown`.
    public var caseName: String {
        switch self {
        case .settled: "settled"
        case .failed: "failed"
        case .unknown: "unknown"
        }
    }
}

/// What the member holds of one asset.
public struct Balance: Sendable, Hashable {
    /// The asset.
    public let asset: Asset
    /// How much, at the asset's precision.
    public let amount: Amount

    /// Creates a balance.
    public init(asset: Asset, amount: Amount) {
        self.asset = asset
        self.amount = amount
    }
}

/// One entry of the member's wallet history: a transfer sent or received, or a credit.
///
/// The history is richer than ``/SymorvaMachines/Transfer`` (which is what a confirmation settles as): it also
/// holds what others sent the member, and credits, which have no command or draft.
public struct LedgerEntry: Sendable, Hashable {
    /// What kind of entry this is.
    public enum Kind: String, Sendable, Hashable {
        /// A member-to-member transfer.
        case transfer
        /// Money credited by the community (no sender, no command).
        case credit
    }

    /// Which way the money went, seen from the member.
    public enum Direction: String, Sendable, Hashable {
        /// The member received it.
        case incoming
        /// The member sent it.
        case outgoing
    }

    /// The ledger entry's identity.
    public let transferID: TransferID
    /// A transfer or a credit.
    public let kind: Kind
    /// Received or sent.
    public let direction: Direction
    /// The command that executed it (`nil` for credits).
    public let commandID: CommandID?
    /// The draft it was prepared as (`nil` for credits).
    public let draftID: DraftID?
    /// Who sent it (`nil` for credits).
    public let sender: UserID?
    /// Who received it.
    public let recipient: UserID
    /// What moved.
    public let asset: Asset
    /// What the recipient received.
    public let amount: Amount
    /// What the service charged the sender on top.
    public let fee: Amount
    /// What left the sender's balance.
    public let total: Amount
    /// When the service executed it, in Unix milliseconds (the service's clock).
    public let createdAtMilliseconds: Int64

    /// Creates an entry.
    public init(
        transferID: TransferID, kind: Kind, direction: Direction, commandID: CommandID?, draftID: DraftID?,
        sender: UserID?, recipient: UserID, asset: Asset, amount: Amount, fee: Amount, total: Amount,
        createdAtMilliseconds: Int64
    ) {
        self.transferID = transferID
        self.kind = kind
        self.direction = direction
        self.commandID = commandID
        self.draftID = draftID
        self.sender = sender
        self.recipient = recipient
        self.asset = asset
        self.amount = amount
        self.fee = fee
        self.total = total
        self.createdAtMilliseconds = createdAtMilliseconds
    }
}

/// What the wallet needs to know about the community and the device.
public struct WalletConfiguration: Sendable {
    /// The assets the community's manifest lists. `prepareTransfer` refuses others on the
    /// device; an empty list lets the service decide.
    public var assets: [Asset]
    /// Whether a biometric verifier adapter is present (never on Linux). Biometric confirmation
    /// is offered only when it is and the service advertises it for the draft.
    public var biometricVerifierPresent: Bool
    /// How long to wait between queries of an unknown command.
    public var queryBackoff: RetryBackoff
    /// The total time allowed for each request to the service.
    public var requestTimeout: Duration
    /// A draft lifetime to ask the service for, or `nil` for the service's own. The reference
    /// server honours it only in test mode; tests use it to make drafts expire quickly.
    public var draftLifetime: Duration?

    /// Creates a configuration.
    public init(
        assets: [Asset] = [], biometricVerifierPresent: Bool = false, queryBackoff: RetryBackoff = .transferQuery,
        requestTimeout: Duration = .seconds(30), draftLifetime: Duration? = nil
    ) {
        self.assets = assets
        self.biometricVerifierPresent = biometricVerifierPresent
        self.queryBackoff = queryBackoff
        self.requestTimeout = requestTimeout
        self.draftLifetime = draftLifetime
    }

    /// The configured asset with this code, if any.
    public func asset(code: String) -> Asset? {
        assets.first { $0.code == code }
    }

    /// The machine's configuration.
    var machineConfiguration: TransferMachine.Configuration {
        TransferMachine.Configuration(biometricVerifierPresent: biometricVerifierPresent, queryBackoff: queryBackoff)
    }
}

// MARK: - Waiting for a host

extension TransferMachine.State {
    /// Whether a confirmation is between the member's PIN and the service's answer.
    var isConfirming: Bool {
        switch self {
        case .verifying, .persisting, .confirming: true
        default: false
        }
    }

    /// Whether a query is in flight (or, after a restart, about to be).
    var isQuerying: Bool {
        switch self {
        case .querying, .idle: true
        default: false
        }
    }
}
