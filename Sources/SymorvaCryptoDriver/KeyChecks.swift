/// Unpadded base64 (RFC 4648 §4 without `=`), the encoding of Matrix keys and signatures,
/// decoded strictly: only the standard alphabet, no whitespace, and the unused bits of the last
/// character zero, so that every byte string has exactly one accepted text.
package enum UnpaddedBase64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let values: [Int8] = {
        var table = [Int8](repeating: -1, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = Int8(index) }
        return table
    }()

    /// The bytes of `text`, or `nil` when it is not canonical unpadded base64. Trailing `=`
    /// padding of a correctly padded text is tolerated (clients should accept it).
    package static func decode(_ text: String) -> [UInt8]? {
        var characters = Array(text.utf8)
        if characters.count % 4 == 0 {
            var padding = 0
            while padding < 2, characters.last == UInt8(ascii: "=") {
                characters.removeLast()
                padding += 1
            }
        }
        guard characters.count % 4 != 1 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(characters.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in characters {
            let value = values[Int(character)]
            guard value >= 0 else { return nil }
            accumulator = (accumulator << 6) | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // Non-canonical: the bits left over must be zero.
        guard accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return bytes
    }

    /// `bytes` as unpadded base64.
    package static func encode(_ bytes: some Collection<UInt8>) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in bytes {
            accumulator = (accumulator << 8) | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                output.append(alphabet[Int((accumulator >> UInt32(bits)) & 0x3F)])
            }
        }
        if bits > 0 { output.append(alphabet[Int((accumulator << UInt32(6 - bits)) & 0x3F)]) }
        return String(decoding: output, as: UTF8.self)
    }
}

/// Checks on Ed25519 keys and signatures made before a signature reaches a crypto library.
///
/// libolm (through 3.2.16) accepts a signature whose scalar `S` is not reduced modulo the group
/// order `L`, so anyone can turn a valid signature into a second valid one (CVE-2024-45193,
/// signature malleability). These checks refuse such signatures, and malformed keys, whatever
/// the driver: a signature must be the canonical encoding of 64 bytes with `S < L`.
package enum Ed25519Check {
    /// The group order `L = 2^252 + 27742317777372353535851937790883648493`, little-endian.
    static let order: [UInt8] = [
        0xED, 0xD3, 0xF5, 0x5C, 0x1A, 0x63, 0x12, 0x58, 0xD6, 0x9C, 0xF7, 0xA2, 0xDE, 0xF9, 0xDE, 0x14,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
    ]

    /// The 32 bytes of an Ed25519 or Curve25519 public key.
    ///
    /// - Throws: `.malformedKey` unless `key` is canonical unpadded base64 of 32 bytes.
    package static func keyBytes(_ key: String) throws(CryptoDriverError) -> [UInt8] {
        guard let bytes = UnpaddedBase64.decode(key), bytes.count == 32 else { throw .malformedKey }
        return bytes
    }

    /// The 64 bytes of a signature that may be verified.
    ///
    /// - Throws: `.malformedSignature` unless `signature` is canonical unpadded base64 of 64
    ///   bytes; `.nonCanonicalSignature` when its scalar is not below `L`.
    package static func signatureBytes(_ signature: String) throws(CryptoDriverError) -> [UInt8] {
        guard let bytes = UnpaddedBase64.decode(signature), bytes.count == 64 else { throw .malformedSignature }
        guard isReduced(bytes[32..<64]) else { throw .nonCanonicalSignature }
        return bytes
    }

    /// Whether the little-endian scalar is below `L`.
    static func isReduced(_ scalar: ArraySlice<UInt8>) -> Bool {
        let scalar = Array(scalar)
        for index in stride(from: 31, through: 0, by: -1) where scalar[index] != order[index] {
            return scalar[index] < order[index]
        }
        return false  // equal to L
    }
}

/// The check every base64 input passes before it reaches a crypto library's own decoder: Megolm
/// session keys and exports, Olm and Megolm message bodies.
///
/// libolm decodes base64 with lookup tables (CVE-2024-45192, a cache-timing side channel) and
/// leniently: it ignores stray bits and maps characters outside the alphabet to something. What
/// reaches it is therefore first decoded here, strictly (``UnpaddedBase64``), and refused unless
/// it is canonical: malformed or ambiguous input never reaches libolm, whoever sent it.
package enum Base64Check {
    /// The bytes `text` encodes.
    ///
    /// - Throws: `failure` unless `text` is canonical unpadded base64 of at least `minimumBytes`.
    package static func bytes(_ text: String, minimumBytes: Int = 1, or failure: CryptoDriverError)
        throws(CryptoDriverError) -> [UInt8]
    {
        guard let bytes = UnpaddedBase64.decode(text), bytes.count >= minimumBytes, !text.hasSuffix("=") else {
            throw failure
        }
        return bytes
    }
}
