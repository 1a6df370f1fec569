import SymorvaKit
import SymorvaMatrix

/// A request's `params`, read with typed errors that name the parameter.
///
/// Reading never logs a value: a password or PIN read here goes straight into a `Secret`.
package struct ContractParams: Sendable {
    /// The members (empty when the request had no `params`).
    package let members: [String: JSONValue]

    /// Params from a request's `params` member: an object, or absent.
    package init(_ value: JSONValue?) throws(ContractError) {
        switch value {
        case nil, .null?: members = [:]
        case .object(let members)?: self.members = members
        case let other?: throw .invalidRequest("params must be an object, not \(other.typeName)")
        }
    }

    /// Params from known members (tests).
    package init(members: [String: JSONValue]) { self.members = members }

    /// A required string.
    package func string(_ name: String) throws(ContractError) -> String {
        guard let value = try optionalString(name) else { throw .invalidParams(name, "a string") }
        return value
    }

    /// An optional string (absent or null is `nil`).
    package func optionalString(_ name: String) throws(ContractError) -> String? {
        switch members[name] {
        case nil, .null?: return nil
        case .string(let text)?: return text
        case _?: throw .invalidParams(name, "a string")
        }
    }

    /// A required non-empty secret string (a password, a PIN), wrapped at once.
    package func secret(_ name: String) throws(ContractError) -> Secret<String> {
        guard case .string(let text)? = members[name], !text.isEmpty else {
            throw .invalidParams(name, "a non-empty string")
        }
        return Secret(text)
    }

    /// An optional secret string.
    package func optionalSecret(_ name: String) throws(ContractError) -> Secret<String>? {
        switch members[name] {
        case nil, .null?: return nil
        case .string(let text)? where !text.isEmpty: return Secret(text)
        case _?: throw .invalidParams(name, "a non-empty string")
        }
    }

    /// An optional integer in `range`.
    package func optionalInt(_ name: String, in range: ClosedRange<Int>) throws(ContractError) -> Int? {
        switch members[name] {
        case nil, .null?: return nil
        case let value?:
            guard let number = value.integerValue, range.contains(number) else {
                throw .invalidParams(name, "an integer in \(range.lowerBound)...\(range.upperBound)")
            }
            return number
        }
    }

    /// An optional boolean.
    package func optionalBool(_ name: String) throws(ContractError) -> Bool? {
        switch members[name] {
        case nil, .null?: return nil
        case .bool(let flag)?: return flag
        case _?: throw .invalidParams(name, "a boolean")
        }
    }

    /// An optional array of strings.
    package func optionalStrings(_ name: String) throws(ContractError) -> [String]? {
        switch members[name] {
        case nil, .null?: return nil
        case .array(let values)?:
            var strings: [String] = []
            for value in values {
                guard case .string(let text) = value else { throw .invalidParams(name, "an array of strings") }
                strings.append(text)
            }
            return strings
        case _?: throw .invalidParams(name, "an array of strings")
        }
    }

    /// A required Matrix user ID.
    package func userID(_ name: String) throws(ContractError) -> UserID {
        guard let userID = UserID(try string(name)) else { throw .invalidParams(name, "a Matrix user ID") }
        return userID
    }

    /// A required room ID (`!…`).
    package func roomID(_ name: String) throws(ContractError) -> RoomID {
        let text = try string(name)
        guard text.hasPrefix("!"), text.count > 1 else { throw .invalidParams(name, "a room ID (!…)") }
        return RoomID(text)
    }

    /// A required event ID (`$…`).
    package func eventID(_ name: String) throws(ContractError) -> EventID {
        guard let eventID = try optionalEventID(name) else { throw .invalidParams(name, "an event ID ($…)") }
        return eventID
    }

    /// An optional event ID.
    package func optionalEventID(_ name: String) throws(ContractError) -> EventID? {
        guard let text = try optionalString(name) else { return nil }
        guard text.hasPrefix("$"), text.count > 1 else { throw .invalidParams(name, "an event ID ($…)") }
        return EventID(text)
    }
}
