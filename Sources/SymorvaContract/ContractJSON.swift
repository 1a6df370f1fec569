import SymorvaMatrix

/// The protocol's JSON writer: one line per message, no whitespace, keys sorted, `/` unescaped,
/// every control character escaped (so a message never contains a raw newline and JSON lines
/// framing holds), numbers as integers when they are integral.
package enum ContractJSON {
    /// `value` as UTF-8 JSON text without a trailing newline.
    package static func encode(_ value: JSONValue) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(128)
        write(value, into: &output)
        return output
    }

    /// `value` as a `String` (tests and logs of protocol errors).
    package static func string(_ value: JSONValue) -> String { String(decoding: encode(value), as: UTF8.self) }

    private static func write(_ value: JSONValue, into output: inout [UInt8]) {
        switch value {
        case .null: output += "null".utf8
        case .bool(let flag): output += (flag ? "true" : "false").utf8
        case .number(let number): write(number, into: &output)
        case .string(let text): write(text, into: &output)
        case .array(let values):
            output.append(UInt8(ascii: "["))
            for (index, element) in values.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                write(element, into: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                write(key, into: &output)
                output.append(UInt8(ascii: ":"))
                write(members[key] ?? .null, into: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    private static func write(_ number: Double, into output: inout [UInt8]) {
        guard number.isFinite else {
            output += "null".utf8
            return
        }
        if number.rounded() == number, abs(number) <= 9_007_199_254_740_992 {
            output += String(Int64(number)).utf8
        } else {
            output += "\(number)".utf8
        }
    }

    private static let hex = Array("0123456789abcdef".utf8)

    private static func write(_ text: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): output += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x0A: output += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: output += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: output += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0x00..<0x20, 0x7F:
                output += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            default: output.append(byte)
            }
        }
        // U+2028 and U+2029 pass as UTF-8: JSON allows them and the framing is on `\n` only.
        output.append(UInt8(ascii: "\""))
    }
}

extension JSONValue {
    /// A JSON object from pairs, dropping `nil` values (optional fields are absent, not null).
    package static func object(_ pairs: KeyValuePairs<String, JSONValue?>) -> JSONValue {
        var members: [String: JSONValue] = [:]
        for (key, value) in pairs { if let value { members[key] = value } }
        return .object(members)
    }

    /// An integer as a JSON number.
    package static func int(_ value: Int) -> JSONValue { .number(Double(value)) }

    /// The member `key` of an object, `nil` for anything else or a missing key.
    package subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }
}
