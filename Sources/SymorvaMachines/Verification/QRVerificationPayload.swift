/// The verification method names of QR code verification, as the spec lists them in the
/// `methods` of `m.key.verification.request` / `ready` and the `method` of `start`.
extension KeyVerificationMethod {
    /// This device can show a QR code.
    package static let qrCodeShow = "m.qr_code.show.v1"
    /// This device can scan a QR code.
    package static let qrCodeScan = "m.qr_code.scan.v1"
    /// The `start` a scanner sends after a good scan, carrying the code's shared secret; a
    /// device that shows or scans advertises it too.
    package static let reciprocate = "m.reciprocate.v1"
}

/// What a verification QR code is for: the mode byte of the spec's "QR code format".
package enum QRVerificationMode: UInt8, Sendable, Hashable, CaseIterable {
    /// `0x00`: verifying another user with cross-signing. First key: the shower's own master
    /// key; second key: what the shower thinks the other user's master key is.
    case verifyingAnotherUser = 0x00
    /// `0x01`: self-verifying, the showing device trusts the master key. First key: the master
    /// key; second key: what the shower thinks the other device's Ed25519 key is.
    case selfVerifyingTrustedMasterKey = 0x01
    /// `0x02`: self-verifying, the showing device does not yet trust the master key. First key:
    /// the shower's own Ed25519 device key; second key: what it thinks the master key is.
    case selfVerifyingUntrustedMasterKey = 0x02
}

/// Why bytes are not a verification QR payload, or why a payload cannot be built.
package enum QRVerificationPayloadError: Error, Sendable, Hashable {
    /// The first six bytes are not the ASCII string `MATRIX`.
    case wrongPrefix
    /// The version byte is not `0x02`, the only version the spec defines.
    case unsupportedVersion(UInt8)
    /// The mode byte is none of `0x00`, `0x01`, `0x02`.
    case unknownMode(UInt8)
    /// The bytes end before the named part is complete.
    case truncated(QRVerificationPayloadPart)
    /// The flow ID (transaction ID or request event ID) is not valid UTF-8.
    case flowIDNotUTF8
    /// The flow ID is empty: a payload always names the flow it belongs to.
    case emptyFlowID
    /// The flow ID's UTF-8 is longer than the 2-byte length can say (65,535 bytes).
    case flowIDTooLong(byteCount: Int)
    /// A key is not 32 bytes (only when building a payload; parsing reads exactly 32).
    case wrongKeyLength(QRVerificationPayloadPart, byteCount: Int)
    /// The shared secret is shorter than 8 bytes (the spec: at least 8).
    case shortSecret(byteCount: Int)
}

/// The parts of a verification QR payload, in order: what ``QRVerificationPayloadError`` names.
package enum QRVerificationPayloadPart: String, Sendable, Hashable {
    case header
    case flowIDLength
    case flowID
    case firstKey
    case secondKey
}

/// The binary payload of a verification QR code (the spec's "QR code format"): the bytes an app
/// puts in a single byte-mode QR segment, or gets back from scanning one.
///
/// Layout: `MATRIX` (ASCII), version `0x02`, the mode byte, the flow ID (the request's
/// `transaction_id` or event ID) as a big-endian 2-byte length and its UTF-8, two 32-byte
/// Ed25519 public keys (meaning per ``QRVerificationMode``), and the shared secret: the rest of
/// the bytes, at least 8.
///
/// A value is always well formed: both initializers check every part. The shared secret is what
/// the scanner sends back in `m.reciprocate.v1`, so descriptions never print it.
package struct QRVerificationPayload: Sendable, Hashable, CustomStringConvertible {
    /// `MATRIX` in ASCII, the first six bytes.
    package static let prefix: [UInt8] = Array("MATRIX".utf8)
    /// The only version the spec defines.
    package static let version: UInt8 = 0x02
    /// The length of each key.
    package static let keyLength = 32
    /// The shortest shared secret the spec allows.
    package static let minimumSecretLength = 8

    package let mode: QRVerificationMode
    /// The `transaction_id` (to-device) or the request's event ID (in a room).
    package let flowID: String
    /// The first key (32 bytes); see ``QRVerificationMode`` for whose.
    package let firstKey: [UInt8]
    /// The second key (32 bytes); see ``QRVerificationMode`` for whose.
    package let secondKey: [UInt8]
    /// The random shared secret (at least 8 bytes).
    package let sharedSecret: [UInt8]

    /// A payload to show; throws when a key is not 32 bytes, the secret is shorter than 8 bytes,
    /// or the flow ID is empty or too long for its 2-byte length.
    package init(
        mode: QRVerificationMode, flowID: String, firstKey: [UInt8], secondKey: [UInt8], sharedSecret: [UInt8]
    ) throws(QRVerificationPayloadError) {
        let idLength = flowID.utf8.count
        guard idLength > 0 else { throw .emptyFlowID }
        guard idLength <= Int(UInt16.max) else { throw .flowIDTooLong(byteCount: idLength) }
        guard firstKey.count == Self.keyLength else { throw .wrongKeyLength(.firstKey, byteCount: firstKey.count) }
        guard secondKey.count == Self.keyLength else {
            throw .wrongKeyLength(.secondKey, byteCount: secondKey.count)
        }
        guard sharedSecret.count >= Self.minimumSecretLength else {
            throw .shortSecret(byteCount: sharedSecret.count)
        }
        self.mode = mode
        self.flowID = flowID
        self.firstKey = firstKey
        self.secondKey = secondKey
        self.sharedSecret = sharedSecret
    }

    /// Reads scanned bytes. Checks, in order: prefix, version, mode, the flow ID (length, bytes,
    /// UTF-8, not empty), both keys, and a secret of at least 8 bytes (everything after the
    /// second key is the secret, so nothing can trail).
    package init(parsing bytes: [UInt8]) throws(QRVerificationPayloadError) {
        let header = Self.prefix.count + 2
        guard bytes.starts(with: Self.prefix) else {
            // A short prefix that matches so far is a cut-off payload, anything else is not ours.
            if bytes.count < Self.prefix.count, Self.prefix.starts(with: bytes) { throw .truncated(.header) }
            throw .wrongPrefix
        }
        guard bytes.count >= header - 1 else { throw .truncated(.header) }
        let version = bytes[Self.prefix.count]
        guard version == Self.version else { throw .unsupportedVersion(version) }
        guard bytes.count >= header else { throw .truncated(.header) }
        let modeByte = bytes[Self.prefix.count + 1]
        guard let mode = QRVerificationMode(rawValue: modeByte) else { throw .unknownMode(modeByte) }
        guard bytes.count >= header + 2 else { throw .truncated(.flowIDLength) }
        let idLength = Int(bytes[header]) << 8 | Int(bytes[header + 1])
        let idStart = header + 2
        guard bytes.count >= idStart + idLength else { throw .truncated(.flowID) }
        let firstStart = idStart + idLength
        guard idLength > 0 else { throw .emptyFlowID }
        let idBytes = bytes[idStart..<firstStart]
        // Decoding repairs bad UTF-8 with U+FFFD: a round trip that changes the bytes was not UTF-8.
        let flowID = String(decoding: idBytes, as: UTF8.self)
        guard flowID.utf8.elementsEqual(idBytes) else { throw .flowIDNotUTF8 }
        let secondStart = firstStart + Self.keyLength
        let secretStart = secondStart + Self.keyLength
        guard bytes.count >= secondStart else { throw .truncated(.firstKey) }
        guard bytes.count >= secretStart else { throw .truncated(.secondKey) }
        try self.init(
            mode: mode, flowID: flowID, firstKey: Array(bytes[firstStart..<secondStart]),
            secondKey: Array(bytes[secondStart..<secretStart]), sharedSecret: Array(bytes[secretStart...]))
    }

    /// The bytes to put in the QR code.
    package var encoded: [UInt8] {
        let id = Array(flowID.utf8)
        var bytes = Self.prefix
        bytes.reserveCapacity(Self.prefix.count + 4 + id.count + 2 * Self.keyLength + sharedSecret.count)
        bytes.append(Self.version)
        bytes.append(mode.rawValue)
        bytes.append(UInt8(id.count >> 8))
        bytes.append(UInt8(id.count & 0xFF))
        bytes += id
        bytes += firstKey
        bytes += secondKey
        bytes += sharedSecret
        return bytes
    }

    /// Mode and flow only: the keys are public but long, the secret must not be printed.
    package var description: String {
        "QRVerificationPayload(\(mode), flow: \(flowID), secret: <\(sharedSecret.count) bytes>)"
    }
}
