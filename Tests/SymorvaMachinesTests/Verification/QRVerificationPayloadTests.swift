import Foundation
import SymorvaMachines
import Testing

/// Byte vectors written out from the spec's "QR code format" layout, not produced by the code.
private enum QRVector {
    static let header: [UInt8] = [0x4D, 0x41, 0x54, 0x52, 0x49, 0x58, 0x02]
    /// The spec's example event ID: 45 bytes (`len` `00 2D`) beginning `$ABCD`. (The spec's hex
    /// line shows `21` for the first byte, its prose says `$`, which is `24`: the prose is used.)
    static let specEventID = "$ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklm:ex.o"
    static let key00 = Array(UInt8(0x00)...UInt8(0x1F))
    static let key10 = Array(UInt8(0x10)...UInt8(0x2F))
    static let secret20 = Array(UInt8(0x20)...UInt8(0x27))

    /// The spec's example: mode `0x00`, Alice's master key `00 01 …`, Bob's `10 11 …`, secret
    /// `20 … 27`.
    static let spec: [UInt8] =
        header + [0x00, 0x00, 0x2D] + Array(specEventID.utf8) + key00 + key10 + secret20

    static let keyA = [UInt8](repeating: 0xAA, count: 32)
    static let keyB = [UInt8](repeating: 0xBB, count: 32)
    /// Mode `0x01`, to-device transaction `txn-1` (`74 78 6E 2D 31`), a 10-byte secret.
    static let selfTrusted: [UInt8] =
        header + [0x01, 0x00, 0x05, 0x74, 0x78, 0x6E, 0x2D, 0x31] + keyA + keyB
        + [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A]
    /// Mode `0x02` with a 300-byte ID (length `01 2C`, both length bytes used) that is not ASCII.
    static let longID = String(repeating: "é", count: 150)
    static let selfUntrusted: [UInt8] =
        header + [0x02, 0x01, 0x2C] + Array(longID.utf8) + keyB + keyA + [UInt8](repeating: 0x42, count: 8)
}

@Suite("QR verification payload")
struct QRVerificationPayloadTests {
    private func parse(_ bytes: [UInt8]) throws(QRVerificationPayloadError) -> QRVerificationPayload {
        try QRVerificationPayload(parsing: bytes)
    }

    private func unpaddedBase64(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "=", with: "")
    }

    @Test("The spec's example parses to its values and is produced byte for byte")
    func specExample() throws {
        #expect(QRVector.specEventID.utf8.count == 0x2D)
        let payload = try parse(QRVector.spec)
        #expect(payload.mode == .verifyingAnotherUser)
        #expect(payload.flowID == QRVector.specEventID)
        #expect(unpaddedBase64(payload.firstKey).hasPrefix("AAECAwQFBg"))
        #expect(unpaddedBase64(payload.secondKey).hasPrefix("EBESExQVFh"))
        #expect(unpaddedBase64(payload.sharedSecret) == "ICEiIyQlJic")
        let built = try QRVerificationPayload(
            mode: .verifyingAnotherUser, flowID: QRVector.specEventID, firstKey: QRVector.key00,
            secondKey: QRVector.key10, sharedSecret: QRVector.secret20)
        #expect(built.encoded == QRVector.spec)
        #expect(built == payload)
    }

    @Test("Modes 0x01 and 0x02: parsed and produced byte for byte, big-endian length")
    func selfVerificationVectors() throws {
        let trusted = try QRVerificationPayload(
            mode: .selfVerifyingTrustedMasterKey, flowID: "txn-1", firstKey: QRVector.keyA,
            secondKey: QRVector.keyB, sharedSecret: Array(1...10))
        #expect(trusted.encoded == QRVector.selfTrusted)
        #expect(try parse(QRVector.selfTrusted) == trusted)

        let untrusted = try QRVerificationPayload(
            mode: .selfVerifyingUntrustedMasterKey, flowID: QRVector.longID, firstKey: QRVector.keyB,
            secondKey: QRVector.keyA, sharedSecret: [UInt8](repeating: 0x42, count: 8))
        #expect(QRVector.longID.utf8.count == 300)
        #expect(untrusted.encoded == QRVector.selfUntrusted)
        #expect(try parse(QRVector.selfUntrusted) == untrusted)
    }

    @Test("Round trips in every mode, with secrets of 8 to 64 bytes")
    func roundTrips() throws {
        for mode in QRVerificationMode.allCases {
            for secretLength in [8, 9, 16, 33, 64] {
                let payload = try QRVerificationPayload(
                    mode: mode, flowID: "$event:example.org", firstKey: QRVector.key00, secondKey: QRVector.key10,
                    sharedSecret: (0..<secretLength).map { UInt8(truncatingIfNeeded: $0 &* 37) })
                let bytes = payload.encoded
                #expect(bytes.count == 6 + 1 + 1 + 2 + 18 + 64 + secretLength)
                #expect(try parse(bytes) == payload)
                #expect(try parse(bytes).encoded == bytes)
            }
        }
    }

    @Test("Every malformation is rejected with its error")
    func malformed() {
        let good = QRVector.selfTrusted
        let cases: [([UInt8], QRVerificationPayloadError)] = [
            ([], .truncated(.header)),
            (Array("MATR".utf8), .truncated(.header)),
            (Array("MATRIX".utf8), .truncated(.header)),
            (Array(good.prefix(7)), .truncated(.header)),
            (Array("XATRIX".utf8) + good.dropFirst(6), .wrongPrefix),
            (Array("matrix".utf8) + good.dropFirst(6), .wrongPrefix),
            (Array("NOT A QR CODE".utf8), .wrongPrefix),
            (Array(good.prefix(6)) + [0x01] + good.dropFirst(7), .unsupportedVersion(0x01)),
            (Array(good.prefix(6)) + [0x03] + good.dropFirst(7), .unsupportedVersion(0x03)),
            (Array(good.prefix(7)) + [0x03] + good.dropFirst(8), .unknownMode(0x03)),
            (Array(good.prefix(7)) + [0xFF] + good.dropFirst(8), .unknownMode(0xFF)),
            (Array(good.prefix(9)), .truncated(.flowIDLength)),
            (Array(good.prefix(13)), .truncated(.flowID)),
            (QRVector.header + [0x00, 0xFF, 0xFF] + QRVector.keyA, .truncated(.flowID)),
            (QRVector.header + [0x00, 0x00, 0x00] + QRVector.keyA + QRVector.keyB + QRVector.secret20, .emptyFlowID),
            (
                QRVector.header + [0x00, 0x00, 0x02, 0xFF, 0xFE] + QRVector.keyA + QRVector.keyB + QRVector.secret20,
                .flowIDNotUTF8
            ),
            (
                QRVector.header + [0x00, 0x00, 0x02, 0xC3, 0x28] + QRVector.keyA + QRVector.keyB + QRVector.secret20,
                .flowIDNotUTF8
            ),
            (Array(good.prefix(15)), .truncated(.firstKey)),
            (Array(good.prefix(15 + 31)), .truncated(.firstKey)),
            (Array(good.prefix(15 + 32)), .truncated(.secondKey)),
            (Array(good.prefix(15 + 63)), .truncated(.secondKey)),
            (Array(good.prefix(15 + 64)), .shortSecret(byteCount: 0)),
            (Array(good.prefix(15 + 64 + 7)), .shortSecret(byteCount: 7)),
        ]
        for (bytes, expected) in cases {
            #expect(throws: expected, "\(bytes.count) bytes") { try parse(bytes) }
        }
    }

    @Test("Every cut of a good payload before its secret's eighth byte is rejected, never read")
    func everyTruncation() {
        for (vector, secretLength) in [(QRVector.spec, 8), (QRVector.selfTrusted, 10), (QRVector.selfUntrusted, 8)] {
            let shortest = vector.count - (secretLength - 8)
            for length in 0..<shortest {
                #expect(throws: QRVerificationPayloadError.self) { try parse(Array(vector.prefix(length))) }
            }
            #expect((try? parse(vector)) != nil)
        }
    }

    @Test("A payload is only built from parts the spec allows")
    func buildingChecksParts() {
        let mode = QRVerificationMode.verifyingAnotherUser
        let key = QRVector.keyA
        let secret = QRVector.secret20
        #expect(throws: QRVerificationPayloadError.emptyFlowID) {
            try QRVerificationPayload(mode: mode, flowID: "", firstKey: key, secondKey: key, sharedSecret: secret)
        }
        #expect(throws: QRVerificationPayloadError.flowIDTooLong(byteCount: 65_536)) {
            try QRVerificationPayload(
                mode: mode, flowID: String(repeating: "a", count: 65_536), firstKey: key, secondKey: key,
                sharedSecret: secret)
        }
        #expect(throws: QRVerificationPayloadError.wrongKeyLength(.firstKey, byteCount: 31)) {
            try QRVerificationPayload(
                mode: mode, flowID: "t", firstKey: Array(key.dropLast()), secondKey: key, sharedSecret: secret)
        }
        #expect(throws: QRVerificationPayloadError.wrongKeyLength(.secondKey, byteCount: 33)) {
            try QRVerificationPayload(
                mode: mode, flowID: "t", firstKey: key, secondKey: key + [0], sharedSecret: secret)
        }
        #expect(throws: QRVerificationPayloadError.shortSecret(byteCount: 7)) {
            try QRVerificationPayload(
                mode: mode, flowID: "t", firstKey: key, secondKey: key, sharedSecret: Array(secret.prefix(7)))
        }
        let longest = String(repeating: "a", count: 65_535)
        let payload = try? QRVerificationPayload(
            mode: mode, flowID: longest, firstKey: key, secondKey: key, sharedSecret: secret)
        #expect(payload?.encoded[8..<10] == [0xFF, 0xFF])
    }

    @Test("The description names mode and flow, never the secret")
    func descriptionHidesSecret() throws {
        let payload = try parse(QRVector.spec)
        #expect(payload.description.contains("verifyingAnotherUser"))
        #expect(!payload.description.contains(unpaddedBase64(payload.sharedSecret)))
        #expect(!payload.description.contains("32, 33"))
    }
}
