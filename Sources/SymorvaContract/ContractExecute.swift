import SymorvaKit
import SymorvaMatrix

/// The methods `execute` answers synchronously: the SDK's pure rules, so that a shell in any
/// language applies them exactly as the Swift SDK does.
extension ContractMethods {
    /// `message.split` and `amount.parse`.
    package static var synchronousRules: ContractMethods {
        var methods = ContractMethods()
        // {text, limit?} -> {parts: [string]}: the long-message rule (docs/message-splitting.md);
        // `limit` (UTF-16 code units, default 4,096) is for tests of other limits.
        methods.synchronous["message.split"] = { params in
            let text = try params.string("text")
            let limit = try params.optionalInt("limit", in: 2...1_000_000) ?? MessageSplitter.limit
            return .object(["parts": .array(MessageSplitter.split(text, limit: limit).map(JSONValue.string))])
        }
        // {text, precision?} -> Amount: a decimal amount as the wallet reads it, at `precision`
        // fraction digits when given (an asset's), else at the text's own.
        methods.synchronous["amount.parse"] = { params in
            let text = try params.string("text")
            let precision = try params.optionalInt("precision", in: 0...Amount.maximumPrecision)
            do throws(AmountError) {
                if let precision { return ContractValues.amount(try Amount(text, precision: precision)) }
                return ContractValues.amount(try Amount(text))
            } catch {
                throw ContractError(error, domain: "amount")
            }
        }
        return methods
    }
}
