import SymorvaRuntime

/// Why a recovery key the user typed was refused. Cases say what is wrong, never the key.
package enum RecoveryKeyError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A character outside the Bitcoin base58 alphabet (`0`, `O`, `I`, `l`, punctuation).
    case notBase58
    /// The decoded key is not 35 bytes (prefix, 32 key bytes, parity); the length found.
    case wrongLength(Int)
    /// The first two bytes are not the spec's `0x8B 0x01`.
    case wrongPrefix
    /// The parity byte does not match: a character was mistyped.
    case wrongParity

    /// The case name (and a length); never key material.
    package var description: String {
        switch self {
        case .notBase58: "notBase58"
        case .wrongLength(let length): "wrongLength(\(length))"
        case .wrongPrefix: "wrongPrefix"
        case .wrongParity: "wrongParity"
        }
    }
}

/// The recovery key's text form (Matrix "Key representation"): the bytes `0x8B 0x01`, the 32
/// key bytes and a parity byte (the XOR of all the bytes before it), in base58 with the Bitcoin
/// alphabet, shown in groups of four characters separated by spaces. Whitespace is insignificant
/// when it is read back.
package enum RecoveryKey {
    /// The two bytes every recovery key starts with.
    package static let prefix: [UInt8] = [0x8B, 0x01]
    /// The key length in bytes.
    package static let keyLength = 32

    /// The text form of a 32-byte secret storage key.
    package static func encode(_ key: Secret<[UInt8]>) -> Secret<String> {
        var bytes = prefix + key.exposedValue
        bytes.append(bytes.reduce(0, ^))
        let text = Base58.encode(bytes)
        var grouped = ""
        for (index, character) in text.enumerated() {
            if index > 0 && index % 4 == 0 { grouped.append(" ") }
            grouped.append(character)
        }
        return Secret(grouped)
    }

    /// The 32-byte key of a recovery key as typed (spaces and line breaks ignored).
    package static func decode(_ text: Secret<String>) throws(RecoveryKeyError) -> Secret<[UInt8]> {
        let compact = text.exposedValue.filter { !$0.isWhitespace }
        guard let bytes = Base58.decode(compact) else { throw .notBase58 }
        guard bytes.count == prefix.count + keyLength + 1 else { throw .wrongLength(bytes.count) }
        guard Array(bytes.prefix(2)) == prefix else { throw .wrongPrefix }
        guard bytes.dropLast().reduce(0, ^) == bytes.last else { throw .wrongParity }
        return Secret(Array(bytes[2..<(2 + keyLength)]))
    }
}

/// Base58 with the Bitcoin alphabet (no `0`, `O`, `I`, `l`); leading zero bytes are `1`s.
package enum Base58 {
    static let alphabet = Array("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz".utf8)
    static let values: [Int8] = {
        var table = [Int8](repeating: -1, count: 128)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = Int8(index) }
        return table
    }()

    /// `bytes` in base58.
    package static func encode(_ bytes: [UInt8]) -> String {
        let zeros = bytes.prefix { $0 == 0 }.count
        // Base-58 digits, least significant first.
        var digits: [UInt8] = []
        for byte in bytes.dropFirst(zeros) {
            var carry = Int(byte)
            for index in digits.indices {
                carry += Int(digits[index]) << 8
                digits[index] = UInt8(carry % 58)
                carry /= 58
            }
            while carry > 0 {
                digits.append(UInt8(carry % 58))
                carry /= 58
            }
        }
        let text = [UInt8](repeating: alphabet[0], count: zeros) + digits.reversed().map { alphabet[Int($0)] }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes of base58 `text`, or `nil` when a character is not in the alphabet.
    package static func decode(_ text: String) -> [UInt8]? {
        let characters = Array(text.utf8)
        let zeros = characters.prefix { $0 == alphabet[0] }.count
        // Bytes, least significant first.
        var bytes: [UInt8] = []
        for character in characters.dropFirst(zeros) {
            guard character < 128, values[Int(character)] >= 0 else { return nil }
            var carry = Int(values[Int(character)])
            for index in bytes.indices {
                carry += Int(bytes[index]) * 58
                bytes[index] = UInt8(carry & 0xff)
                carry >>= 8
            }
            while carry > 0 {
                bytes.append(UInt8(carry & 0xff))
                carry >>= 8
            }
        }
        return [UInt8](repeating: 0, count: zeros) + bytes.reversed()
    }
}
