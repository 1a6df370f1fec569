import Foundation

/// What the simulated homeserver reads from ciphertexts without any key: libolm's message
/// framing (a version byte, then protobuf-style fields) names the message key each ciphertext
/// was made with.
///
/// - A Megolm message is `0x03`, field 1 (varint) the **message index**, field 2 the ciphertext,
///   then a MAC and a signature. Its key is (session ID, index).
/// - An Olm message is `0x03`, field 1 the sender's **ratchet key**, field 2 (varint) the
///   **chain index**, field 4 the ciphertext, then a MAC. A message key is fixed by (sender
///   identity key, ratchet key, chain index): ratchet keys are fresh random Curve25519 keys, so
///   two sessions never share one.
/// - An Olm pre-key message is `0x03`, fields 1–3 the one-time, base and identity keys, field 4
///   the inner Olm message, whose ratchet key and chain index name the key.
///
/// Encrypting the same plaintext under the same message key gives the same bytes (AES-CBC with
/// key and IV derived from the message key), so a retried request is not a reuse; two
/// *different* ciphertexts under one key are.
enum SimWire {
    /// Decodes libolm's unpadded (or padded) standard base64.
    static func base64(_ text: String) -> [UInt8]? {
        var padded = text
        while padded.count % 4 != 0 { padded += "=" }
        return Data(base64Encoded: padded).map { Array($0) }
    }

    /// The message index of a Megolm ciphertext.
    static func megolmIndex(_ ciphertext: String) -> UInt64? {
        guard let bytes = base64(ciphertext), bytes.first == 3 else { return nil }
        let fields = Self.fields(bytes[1...])
        return fields.first { $0.tag == 1 }?.varint
    }

    /// The message key name of an Olm message of `type` 0 (pre-key) or 1: its ratchet key
    /// (base64) and chain index.
    static func olmKey(type: Int, body: String) -> (ratchetKey: String, chainIndex: UInt64)? {
        guard let bytes = base64(body), bytes.first == 3 else { return nil }
        var message = bytes[...]
        if type == 0 {
            guard let inner = fields(bytes[1...]).first(where: { $0.tag == 4 })?.bytes, inner.first == 3 else {
                return nil
            }
            message = inner[...]
        }
        let fields = fields(message.dropFirst())
        guard let ratchet = fields.first(where: { $0.tag == 1 })?.bytes,
            let index = fields.first(where: { $0.tag == 2 })?.varint
        else { return nil }
        return (Data(ratchet).base64EncodedString(), index)
    }

    struct Field {
        var tag: UInt64
        var varint: UInt64?
        var bytes: [UInt8]?
    }

    /// The protobuf-style fields at the start of `bytes`, up to the first one that does not
    /// parse (the MAC and signature that follow are not fields).
    static func fields(_ bytes: ArraySlice<UInt8>) -> [Field] {
        var result: [Field] = []
        var index = bytes.startIndex
        func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while index < bytes.endIndex, shift < 64 {
                let byte = bytes[index]
                index += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
            return nil
        }
        while index < bytes.endIndex {
            guard let key = varint() else { break }
            let tag = key >> 3
            switch key & 7 {
            case 0:
                guard let value = varint() else { return result }
                result.append(Field(tag: tag, varint: value))
            case 2:
                guard let length = varint(), length <= UInt64(bytes.endIndex - index) else { return result }
                result.append(Field(tag: tag, bytes: Array(bytes[index..<index + Int(length)])))
                index += Int(length)
            default: return result
            }
        }
        return result
    }
}
