import SymorvaRuntime

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The one JSON coder of the SDK's wire bodies: Matrix requests and answers, the community
/// services, Janus, and the event contents chat reads from its store.
///
/// One configuration, so that every module sends and reads JSON the same way:
/// - **Encoding** sorts object keys and leaves `/` unescaped: the same value always gives the
///   same bytes (tests compare bodies; the services and the homeserver read either form).
/// - **Decoding** uses the types' own `CodingKeys` (no key or date strategy), ignores unknown
///   fields, and reports a failure by its field path only (``WireJSONError``), never by the
///   values, which may be tokens or message bodies.
///
/// Feature modules map a ``WireJSONError`` to their own error once, where they read an answer
/// (`.malformedResponse`, `.invalidResponse`, …).
package enum WireJSON {
    /// Encodes `value` as a JSON body.
    ///
    /// - Throws: ``WireJSONError`` when the value cannot be JSON (a non-finite number, an
    ///   encoder of its own that throws): the request is not sent.
    package static func encode(_ value: some Encodable) throws(WireJSONError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return Array(try encoder.encode(value))
        } catch let EncodingError.invalidValue(_, context) {
            throw WireJSONError(reason: "invalid value at \(path(context.codingPath))")
        } catch {
            throw WireJSONError(reason: "not encodable")
        }
    }

    /// Decodes `type` from a JSON body.
    ///
    /// - Throws: ``WireJSONError`` naming the first field that is missing, null or of the wrong
    ///   type, or `not JSON`.
    package static func decode<Value: Decodable>(_ type: Value.Type, from body: [UInt8]) throws(WireJSONError)
        -> Value
    {
        do {
            return try JSONDecoder().decode(Value.self, from: Data(body))
        } catch let DecodingError.keyNotFound(key, context) {
            throw WireJSONError(reason: "missing \(path(context.codingPath + [key]))")
        } catch let DecodingError.typeMismatch(_, context) {
            throw WireJSONError(reason: "wrong type at \(path(context.codingPath))")
        } catch let DecodingError.valueNotFound(_, context) {
            throw WireJSONError(reason: "null at \(path(context.codingPath))")
        } catch let DecodingError.dataCorrupted(context) where context.codingPath.isEmpty {
            throw WireJSONError(reason: "not JSON")
        } catch let DecodingError.dataCorrupted(context) {
            throw WireJSONError(reason: "invalid value at \(path(context.codingPath))")
        } catch {
            throw WireJSONError(reason: "not JSON")
        }
    }

    /// `type` decoded from `body`, or `nil` when the body is not that JSON (for readers that
    /// treat every unreadable answer alike).
    package static func decodeIfValid<Value: Decodable>(_ type: Value.Type, from body: [UInt8]) -> Value? {
        try? decode(type, from: body)
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.isEmpty ? "(root)" : keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
    }
}

/// Why a body could not be encoded or decoded as JSON: the field path and what was wrong with
/// it (`missing grant.expires_in_ms`, `wrong type at balances.[0].amount`, `not JSON`), never a
/// value. Safe to log.
package struct WireJSONError: Error, Sendable, Hashable, CustomStringConvertible, LogSafe {
    /// What was wrong, by field path.
    package let reason: String

    /// An error with `reason`.
    package init(reason: String) { self.reason = reason }

    package var description: String { "WireJSONError(\(reason))" }

    package var logDescription: String { description }
}
