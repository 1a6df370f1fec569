import SymorvaKit
import SymorvaMatrix

/// A typed error of the protocol: what an answer's `error` member carries.
///
/// `domain` says whose error it is: `contract` for the protocol's own (bad JSON, an unknown
/// method, wrong parameters, a handle this client never issued), or the feature whose Swift error
/// it is (`session`, `chat`, `wallet`, `meetings`, `studio`, `directory`, `amount`); `code` is the
/// Swift error's case name (`accountEnded`, `notSignedIn`, `declined`, …), `message` its
/// description (log-safe: the SDK's errors carry no secret and no message body), `details` the
/// case's values when they help a program (a wrong PIN's attempts left, a parameter's name).
package struct ContractError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `contract` or a feature's name.
    package var domain: String
    /// The case name, stable across releases: what programs switch on.
    package var code: String
    /// A human-readable sentence (English), safe to log.
    package var message: String
    /// Values of the case, when there are any.
    package var details: JSONValue?

    /// An error.
    package init(domain: String, code: String, message: String, details: JSONValue? = nil) {
        self.domain = domain
        self.code = code
        self.message = message
        self.details = details
    }

    /// `domain.code: message`.
    package var description: String { "\(domain).\(code): \(message)" }

    /// The `error` member of an answer.
    package var json: JSONValue {
        .object(["domain": .string(domain), "code": .string(code), "message": .string(message), "details": details])
    }

    // MARK: The protocol's own errors

    /// The text is not JSON (or nested deeper than 64 levels).
    package static func parseError(_ reason: String) -> ContractError {
        ContractError(domain: "contract", code: "parseError", message: "The request is not JSON: \(reason).")
    }

    /// The JSON is not a request object (no `method`, an `id` that is neither string nor number).
    package static func invalidRequest(_ reason: String) -> ContractError {
        ContractError(domain: "contract", code: "invalidRequest", message: "The request is not valid: \(reason).")
    }

    /// The request is longer than the protocol accepts.
    package static func requestTooLarge(limit: Int) -> ContractError {
        ContractError(
            domain: "contract", code: "requestTooLarge", message: "A request may be at most \(limit) bytes.",
            details: .object(["limit": .int(limit)]))
    }

    /// No method of this name (or not one `execute` runs synchronously).
    package static func methodNotFound(_ method: String) -> ContractError {
        ContractError(
            domain: "contract", code: "methodNotFound", message: "There is no method \(method).",
            details: .object(["method": .string(String(method.prefix(100)))]))
    }

    /// A parameter is missing or of the wrong type or form; names it.
    package static func invalidParams(_ name: String, _ expected: String) -> ContractError {
        ContractError(
            domain: "contract", code: "invalidParams", message: "Parameter \(name) must be \(expected).",
            details: .object(["parameter": .string(name), "expected": .string(expected)]))
    }

    /// A handle this client never issued, one it released, or one of another kind.
    package static func invalidHandle(_ name: String, kind: String) -> ContractError {
        ContractError(
            domain: "contract", code: "invalidHandle",
            message: "Parameter \(name) is not a \(kind) handle of this client.",
            details: .object(["parameter": .string(name), "kind": .string(kind)]))
    }

    /// The handle belongs to an account that was signed out or switched away from.
    package static func accountEnded(domain: String) -> ContractError {
        ContractError(
            domain: domain, code: "accountEnded",
            message: "The handle belongs to an account that was signed out or switched away from.")
    }

    /// The optional module is disabled in the manifest (its client is absent).
    package static func moduleDisabled(_ module: String) -> ContractError {
        ContractError(
            domain: "contract", code: "moduleDisabled", message: "The manifest disables the \(module) module.",
            details: .object(["module": .string(module)]))
    }

    /// The client was destroyed: nothing more is done.
    package static let closed = ContractError(
        domain: "contract", code: "closed", message: "The client is closed.")

    /// `error` itself when it is a contract error, else `contract.internal` (a method threw
    /// something it should have mapped: a bug, reported without its text).
    package static func wrapping(_ error: any Error) -> ContractError {
        if let error = error as? ContractError { return error }
        return ContractError(
            domain: "contract", code: "internal", message: "The SDK failed unexpectedly (\(caseName(of: error))).")
    }

    /// No subscription or host request with that ID.
    package static func unknownID(_ name: String) -> ContractError {
        ContractError(
            domain: "contract", code: "unknownID", message: "Parameter \(name) names nothing open on this client.",
            details: .object(["parameter": .string(name)]))
    }
}

extension ContractError {
    /// A feature's typed Swift error in the protocol's shape: the case name as `code`, the
    /// description as `message`, and for wrapped reasons (`TransferError.failure(.wrongPIN(…))`)
    /// the reason's case name and values in `details`.
    package init(_ error: some Error, domain: String) {
        self.init(
            domain: domain, code: Self.caseName(of: error), message: String(describing: error),
            details: Self.caseDetails(of: error))
    }

    /// The case name of an enum value (`accountEnded`, `failure`), whatever its description says.
    package static func caseName(of value: Any) -> String {
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .enum, let label = mirror.children.first?.label { return label }
        // A case without values has no child; its default description is its name, but a
        // CustomStringConvertible may say more, so only the leading identifier is kept.
        let text = mirror.displayStyle == .enum ? "\(value)" : String(describing: type(of: value))
        return String(text.prefix { $0.isLetter || $0.isNumber || $0 == "_" })
    }

    /// The values of an enum case as JSON: a wrapped enum as `{reason, …}`, labelled values by
    /// label, numbers and strings as they are; `nil` when the case has none.
    package static func caseDetails(of value: Any) -> JSONValue? {
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .enum, let payload = mirror.children.first?.value else { return nil }
        return details(of: payload)
    }

    private static func details(of payload: Any) -> JSONValue? {
        let mirror = Mirror(reflecting: payload)
        switch mirror.displayStyle {
        case .enum?:
            var members: [String: JSONValue] = ["reason": .string(caseName(of: payload))]
            if case .object(let inner)? = caseDetails(of: payload) {
                for (key, value) in inner where key != "reason" { members[key] = value }
            } else if let inner = caseDetails(of: payload) {
                members["value"] = inner
            }
            return .object(members)
        case .tuple?:
            var members: [String: JSONValue] = [:]
            for (index, child) in mirror.children.enumerated() {
                let key = child.label.map { $0.hasPrefix(".") ? "value\(index)" : $0 } ?? "value\(index)"
                if let value = scalar(child.value) { members[key] = value }
            }
            return .object(members)
        default:
            return scalar(payload).map { .object(["value": $0]) }
        }
    }

    /// Numbers, booleans, strings and IDs as JSON; `nil` for anything else (never a secret: the
    /// SDK's errors hold none, and a `Secret` is not one of these types).
    private static func scalar(_ value: Any) -> JSONValue? {
        switch value {
        case let number as Int: .int(number)
        case let flag as Bool: .bool(flag)
        case let text as String: .string(text)
        case let duration as Duration: .number(Double(duration.wholeMilliseconds))
        case let optional as Duration?: optional.map { .number(Double($0.wholeMilliseconds)) } ?? .null
        case let strings as [String]: .array(strings.map(JSONValue.string))
        case let id as UserID: .string(id.rawValue)
        case let id as RoomID: .string(id.rawValue)
        case let id as EventID: .string(id.rawValue)
        default: nil
        }
    }
}
