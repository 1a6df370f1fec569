extension JSONValue {
    /// Why a value has no canonical encoding.
    package enum CanonicalJSONError: Error, Sendable, Equatable {
        /// A number that is not an integer in `-(2^53 - 1)...(2^53 - 1)`.
        case nonIntegerNumber
    }

    /// The value in Matrix's canonical JSON (the form that is signed: `Signing JSON` in the
    /// appendices): no whitespace, object keys sorted by their UTF-8 bytes, integers only, and
    /// strings with only `"`, `\` and control characters escaped (`\b \f \n \r \t` short,
    /// others `\u00XX`); everything else, non-ASCII included, as UTF-8.
    package func canonicalEncoding() throws(CanonicalJSONError) -> [UInt8] {
        var output: [UInt8] = []
        try Self.encode(self, into: &output)
        return output
    }

    private static func encode(_ value: JSONValue, into output: inout [UInt8]) throws(CanonicalJSONError) {
        switch value {
        case .null: output += Array("null".utf8)
        case .bool(let flag): output += Array((flag ? "true" : "false").utf8)
        case .number(let number):
            guard number.rounded() == number, abs(number) <= 9_007_199_254_740_991 else { throw .nonIntegerNumber }
            output += Array(String(Int64(number)).utf8)
        case .string(let text): encode(text, into: &output)
        case .array(let values):
            output.append(UInt8(ascii: "["))
            for (index, element) in values.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                try encode(element, into: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            let keys = members.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            for (index, key) in keys.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                encode(key, into: &output)
                output.append(UInt8(ascii: ":"))
                try encode(members[key]!, into: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    private static func encode(_ text: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): output += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x08: output += [UInt8(ascii: "\\"), UInt8(ascii: "b")]
            case 0x0C: output += [UInt8(ascii: "\\"), UInt8(ascii: "f")]
            case 0x0A: output += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: output += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: output += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                output += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}
