/// The identity of one confirmation, created on the device before the confirm request leaves.
///
/// The wallet service executes a command at most once: a confirm that arrives twice with the
/// same command ID gets the first answer again, and a query by command ID tells whether the
/// command ran. The ID is a UUID string; machines cannot make randomness, so the product layer
/// generates it and passes it in with the confirmation. A command ID that has an answer is
/// spent: a new confirmation of the same draft needs a new one.
public struct CommandID: Sendable, Hashable, CustomStringConvertible {
    /// The UUID, lowercased: `8d0f1c52-2f7a-4c1e-9a43-5b6c7d8e9f01`.
    public let rawValue: String

    /// Accepts a UUID in its canonical 8-4-4-4-12 hexadecimal form, in either case.
    /// Returns `nil` for anything else, so that an ID can always travel in a URL path and a
    /// store key unescaped.
    public init?(uuidString: String) {
        let bytes = Array(uuidString.utf8)
        guard bytes.count == 36 else { return nil }
        for (offset, byte) in bytes.enumerated() {
            let isHyphen = byte == UInt8(ascii: "-")
            if [8, 13, 18, 23].contains(offset) {
                guard isHyphen else { return nil }
            } else {
                guard Self.isHexDigit(byte) else { return nil }
            }
        }
        self.rawValue = uuidString.lowercased()
    }

    /// The UUID.
    public var description: String { rawValue }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
            UInt8(ascii: "A")...UInt8(ascii: "F"):
            true
        default:
            false
        }
    }
}

/// The wallet service's identity for a prepared transfer (a draft).
public struct DraftID: Sendable, Hashable, CustomStringConvertible {
    /// The identifier as the service issued it.
    public let rawValue: String
    /// Wraps a service-issued draft identifier.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    /// The identifier.
    public var description: String { rawValue }
}

/// The wallet service's identity for a settled transfer (its ledger entry).
public struct TransferID: Sendable, Hashable, CustomStringConvertible {
    /// The identifier as the service issued it.
    public let rawValue: String
    /// Wraps a service-issued transfer identifier.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    /// The identifier.
    public var description: String { rawValue }
}

/// What the member asked for: send `amount` of `asset` to `recipient`.
public struct TransferRequest: Sendable, Hashable {
    /// Who receives the money.
    public let recipient: UserID
    /// What is sent.
    public let asset: Asset
    /// How much the recipient receives, at the asset's precision.
    public let amount: Amount

    /// Creates a request. Bring `amount` to the asset's precision first (``Asset/amount(_:)-(Amount)``);
    /// the machine refuses a draft whose figures do not match the request.
    public init(recipient: UserID, asset: Asset, amount: Amount) {
        self.recipient = recipient
        self.asset = asset
        self.amount = amount
    }
}

/// The figures of a transfer that stay meaningful after a restart: enough to show a pending or
/// finished transfer, nothing that expires with the process.
public struct TransferSummary: Sendable, Hashable {
    /// The draft the transfer was prepared as.
    public let draftID: DraftID
    /// Who receives the money.
    public let recipient: UserID
    /// What is sent.
    public let asset: Asset
    /// How much the recipient receives.
    public let amount: Amount
    /// What the service charges on top.
    public let fee: Amount
    /// What leaves the member's balance: `amount + fee`.
    public let total: Amount

    /// Creates a summary.
    public init(draftID: DraftID, recipient: UserID, asset: Asset, amount: Amount, fee: Amount, total: Amount) {
        self.draftID = draftID
        self.recipient = recipient
        self.asset = asset
        self.amount = amount
        self.fee = fee
        self.total = total
    }
}

/// A transfer the wallet service has priced and is ready to execute once the member confirms.
public struct TransferDraft: Sendable, Hashable {
    /// The service's identity for the draft.
    public let id: DraftID
    /// Who receives the money.
    public let recipient: UserID
    /// What is sent.
    public let asset: Asset
    /// How much the recipient receives.
    public let amount: Amount
    /// What the service charges on top.
    public let fee: Amount
    /// What leaves the member's balance; the machine refuses a draft where it is not `amount + fee`.
    public let total: Amount
    /// When the service stops accepting a confirmation, as an instant of the host's runtime
    /// clock (time since its origin). The interpreter converts the service's timestamp; the
    /// machine only schedules the expiry timer with it.
    public let expiresAt: Duration
    /// How the service accepts a confirmation of this draft.
    public let verificationMethods: Set<VerificationMethod>
    /// The service's X25519 public key (32 bytes) that the device seals the PIN to.
    public let sealingPublicKey: [UInt8]

    /// Creates a draft.
    public init(
        id: DraftID, recipient: UserID, asset: Asset, amount: Amount, fee: Amount, total: Amount,
        expiresAt: Duration, verificationMethods: Set<VerificationMethod>, sealingPublicKey: [UInt8]
    ) {
        self.id = id
        self.recipient = recipient
        self.asset = asset
        self.amount = amount
        self.fee = fee
        self.total = total
        self.expiresAt = expiresAt
        self.verificationMethods = verificationMethods
        self.sealingPublicKey = sealingPublicKey
    }

    /// The figures that outlive the draft.
    public var summary: TransferSummary {
        TransferSummary(draftID: id, recipient: recipient, asset: asset, amount: amount, fee: fee, total: total)
    }

    /// Whether the draft is what `request` asked for and is internally consistent.
    ///
    /// The device shows these figures to the member and the PIN confirms them, so a draft that
    /// does not add up is refused rather than shown: same recipient, asset and amount as
    /// requested, every figure at the asset's precision, `total == amount + fee`, a 32-byte
    /// sealing key, at least one verification method and an identifier that is safe to embed
    /// in the sealed payload (non-empty, no control characters).
    public func isConsistent(with request: TransferRequest) -> Bool {
        let precision = asset.precision
        guard recipient == request.recipient, asset == request.asset, amount == request.amount,
            amount.precision == precision, fee.precision == precision, total.precision == precision,
            (try? amount.adding(fee)) == total, !amount.isZero,
            sealingPublicKey.count == SealingContext.publicKeyLength, !verificationMethods.isEmpty,
            !id.rawValue.isEmpty, !id.rawValue.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F })
        else { return false }
        return true
    }
}

/// A confirmation whose command ID is in the account's store and whose outcome the device does
/// not know yet. It is what survives a restart, and what the product layer shows as unknown.
public struct PendingCommand: Sendable, Hashable {
    /// The command that was (or may have been) sent.
    public let commandID: CommandID
    /// What the command would move.
    public let summary: TransferSummary

    /// Creates a pending command.
    public init(commandID: CommandID, summary: TransferSummary) {
        self.commandID = commandID
        self.summary = summary
    }
}

/// A settled transfer: the money moved.
public struct Transfer: Sendable, Hashable {
    /// The ledger entry.
    public let id: TransferID
    /// The command that executed it.
    public let commandID: CommandID
    /// The figures that moved.
    public let summary: TransferSummary

    /// Creates a settled transfer.
    public init(id: TransferID, commandID: CommandID, summary: TransferSummary) {
        self.id = id
        self.commandID = commandID
        self.summary = summary
    }
}
