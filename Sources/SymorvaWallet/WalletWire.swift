import SymorvaMachines

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The wallet service's JSON, as documented in the server's `docs/wallet.md` and OpenAPI
/// document, and its conversion to the machine's values.
///
/// Amounts are decimal strings on the wire and are parsed with ``Amount`` (never through a
/// floating-point number). Anything that does not convert is "malformed": the caller decides
/// what that means (for a confirm answer it is ambiguous, for a draft it is a failure).
enum WalletWire {
    /// The service's paths.
    enum Path {
        static let balances = "/_symorva/v1/wallet/balances"
        static let transfers = "/_symorva/v1/wallet/transfers"
        static let prepare = "/_symorva/v1/wallet/transfers/prepare"
        static let confirm = "/_symorva/v1/wallet/transfers/confirm"
        static let pin = "/_symorva/v1/wallet/pin"
        static let capabilities = "/_symorva/v1/capabilities"
        static func command(_ commandID: CommandID) -> String { "/_symorva/v1/wallet/commands/\(commandID.rawValue)" }
    }

    /// The first line of the sealed PIN-setting payload.
    static let pinPayloadVersion = "symorva-wallet-pin/1"

    // MARK: Requests

    struct PrepareRequest: Encodable {
        var recipient: String
        var asset: String
        var amount: String
        var ttlMilliseconds: Int?
        enum CodingKeys: String, CodingKey {
            case recipient, asset, amount
            case ttlMilliseconds = "ttl_ms"
        }
    }

    struct ConfirmRequest: Encodable {
        struct VerificationBody: Encodable {
            var method: String
            var sealed: String
        }
        var draftID: String
        var commandID: String
        var verification: VerificationBody
        enum CodingKeys: String, CodingKey {
            case draftID = "draft_id"
            case commandID = "command_id"
            case verification
        }
    }

    struct PINRequest: Encodable {
        var sealed: String
    }

    // MARK: Answers

    struct SealingKey: Decodable {
        var publicKey: String
        enum CodingKeys: String, CodingKey { case publicKey = "public_key" }

        var bytes: [UInt8]? { Data(base64Encoded: publicKey).map { Array($0) } }
    }

    struct Draft: Decodable {
        var draftID: String
        var recipient: String
        var asset: String
        var precision: Int
        var amount: String
        var fee: String
        var total: String
        var expiresInMilliseconds: Int64
        var verificationMethods: [String]
        var sealingKey: SealingKey
        enum CodingKeys: String, CodingKey {
            case draftID = "draft_id"
            case recipient, asset, precision, amount, fee, total
            case expiresInMilliseconds = "expires_in_ms"
            case verificationMethods = "verification_methods"
            case sealingKey = "sealing_key"
        }

        /// The draft as the machine sees it; its expiry is an instant of the host's clock, so
        /// that a skewed device clock does not matter (the service says how long is left).
        func draft(now: Duration) -> SymorvaMachines.TransferDraft? {
            guard let amount = try? Amount(amount, precision: precision),
                let fee = try? Amount(fee, precision: precision),
                let total = try? Amount(total, precision: precision),
                let key = sealingKey.bytes, let recipient = UserID(recipient)
            else { return nil }
            let methods = Set(verificationMethods.compactMap(VerificationMethod.init(rawValue:)))
            return SymorvaMachines.TransferDraft(
                id: DraftID(draftID), recipient: recipient, asset: Asset(code: asset, precision: precision),
                amount: amount, fee: fee, total: total,
                expiresAt: now + .milliseconds(max(0, expiresInMilliseconds)), verificationMethods: methods,
                sealingPublicKey: key)
        }
    }

    struct TransferBody: Decodable {
        var transferID: String
        var kind: String
        var commandID: String?
        var draftID: String?
        var sender: String?
        var recipient: String
        var asset: String
        var amount: String
        var fee: String
        var total: String
        var createdAtMilliseconds: Int64
        var direction: String?
        enum CodingKeys: String, CodingKey {
            case transferID = "transfer_id"
            case kind
            case commandID = "command_id"
            case draftID = "draft_id"
            case sender, recipient, asset, amount, fee, total
            case createdAtMilliseconds = "created_at_ms"
            case direction
        }

        /// The figures, read at the precision the service wrote them with.
        private var figures: (asset: Asset, amount: Amount, fee: Amount, total: Amount)? {
            guard let amount = try? Amount(amount) else { return nil }
            let precision = amount.precision
            guard let fee = try? Amount(fee, precision: precision),
                let total = try? Amount(total, precision: precision)
            else { return nil }
            return (Asset(code: asset, precision: precision), amount, fee, total)
        }

        /// A settled transfer of a command (not a credit).
        var transfer: Transfer? {
            guard let figures, let commandID = commandID.flatMap(CommandID.init(uuidString:)), let draftID,
                let recipient = UserID(recipient)
            else { return nil }
            let summary = TransferSummary(
                draftID: DraftID(draftID), recipient: recipient, asset: figures.asset,
                amount: figures.amount, fee: figures.fee, total: figures.total)
            return Transfer(id: TransferID(transferID), commandID: commandID, summary: summary)
        }

        /// An entry of the member's history.
        var ledgerEntry: LedgerEntry? {
            guard let figures, let recipient = UserID(recipient) else { return nil }
            let kind: LedgerEntry.Kind = kind == "credit" ? .credit : .transfer
            return LedgerEntry(
                transferID: TransferID(transferID), kind: kind,
                direction: direction == "out" ? .outgoing : .incoming,
                commandID: commandID.flatMap(CommandID.init(uuidString:)), draftID: draftID.map(DraftID.init),
                sender: sender.flatMap(UserID.init), recipient: recipient, asset: figures.asset,
                amount: figures.amount, fee: figures.fee, total: figures.total,
                createdAtMilliseconds: createdAtMilliseconds)
        }
    }

    struct Failure: Decodable {
        var code: String
        var attemptsLeft: Int?
        enum CodingKeys: String, CodingKey {
            case code
            case attemptsLeft = "attempts_left"
        }

        /// The failure as the member is told.
        var transferFailure: TransferFailure {
            switch code {
            case "wrong_pin": .wrongPIN(attemptsLeft: attemptsLeft ?? 0)
            case "locked_out": .lockedOut
            case "insufficient_funds": .insufficientFunds
            case "draft_expired": .draftExpired
            case "method_not_offered": .verification(.methodNotOffered)
            default: .rejected(code: code)
            }
        }
    }

    /// The answer to a confirm and to a query: `settled`, `failed`, `pending` or `unknown_command`.
    struct CommandAnswer: Decodable {
        var status: String
        var commandID: String
        var transfer: TransferBody?
        var failure: Failure?
        enum CodingKeys: String, CodingKey {
            case status
            case commandID = "command_id"
            case transfer, failure
        }
    }

    struct Balances: Decodable {
        struct Entry: Decodable {
            var asset: String
            var precision: Int
            var amount: String
        }
        var balances: [Entry]
    }

    struct TransferPage: Decodable {
        var transfers: [TransferBody]
        var nextFrom: String?
        enum CodingKeys: String, CodingKey {
            case transfers
            case nextFrom = "next_from"
        }
    }

    struct Capabilities: Decodable {
        struct Modules: Decodable {
            var wallet: WalletModule?
        }
        struct WalletModule: Decodable {
            var enabled: Bool
            var sealingKey: SealingKey?
            enum CodingKeys: String, CodingKey {
                case enabled
                case sealingKey = "sealing_key"
            }
        }
        var modules: Modules
    }
}
