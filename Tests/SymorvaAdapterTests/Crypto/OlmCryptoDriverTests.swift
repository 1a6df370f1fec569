import COlm
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaRuntime
import Testing

@Suite("The libolm crypto driver")
struct OlmCryptoDriverTests {
    let driver = OlmCryptoDriver()
    let pickleKey = Secret([UInt8](repeating: 7, count: 32))

    // MARK: Published vectors

    @Test("SHA-256 gives the FIPS 180-2 digests, in unpadded base64")
    func sha256Vectors() {
        #expect(driver.sha256([]) == "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU")
        #expect(driver.sha256(Array("abc".utf8)) == "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0")
    }

    /// RFC 8032 §7.1, tests 1 and 2.
    static let rfc8032: [(key: String, message: String, signature: String)] = [
        (
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
        ),
        (
            "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
            "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"
        ),
    ]

    @Test("Ed25519 verification accepts the RFC 8032 vectors and refuses them altered")
    func ed25519Vectors() throws {
        for vector in Self.rfc8032 {
            let key = UnpaddedBase64.encode(hex(vector.key))
            let message = hex(vector.message)
            let signature = UnpaddedBase64.encode(hex(vector.signature))
            try driver.verifyEd25519(signature: signature, of: message, key: key)
            #expect(throws: CryptoDriverError.badSignature) {
                try driver.verifyEd25519(signature: signature, of: message + [0], key: key)
            }
        }
    }

    @Test("A malleated signature (S + L) is refused before libolm, which would accept it (CVE-2024-45193)")
    func malleatedSignature() throws {
        let vector = Self.rfc8032[0]
        var bytes = hex(vector.signature)
        addOrder(to: &bytes)
        let malleated = UnpaddedBase64.encode(bytes)
        let key = UnpaddedBase64.encode(hex(vector.key))
        #expect(throws: CryptoDriverError.nonCanonicalSignature) {
            try driver.verifyEd25519(signature: malleated, of: [], key: key)
        }
        // libolm itself verifies the malleated signature: the check above is what protects us.
        #expect(Self.libolmAccepts(signature: malleated, message: [], key: key))
    }

    @Test("Malformed and small-order keys, and malformed signatures, never reach verification")
    func malformedInputs() throws {
        let vector = Self.rfc8032[0]
        let signature = UnpaddedBase64.encode(hex(vector.signature))
        let smallOrder = UnpaddedBase64.encode([1] + [UInt8](repeating: 0, count: 31))
        #expect(throws: CryptoDriverError.malformedKey) {
            try driver.verifyEd25519(signature: signature, of: [], key: smallOrder)
        }
        #expect(throws: CryptoDriverError.malformedKey) {
            try driver.verifyEd25519(signature: signature, of: [], key: "not base64!")
        }
        #expect(throws: CryptoDriverError.malformedSignature) {
            try driver.verifyEd25519(
                signature: String(signature.dropLast()), of: [], key: UnpaddedBase64.encode(hex(vector.key)))
        }
    }

    @Test("Unpadded base64 round-trips and refuses non-canonical text")
    func base64() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(UnpaddedBase64.decode(UnpaddedBase64.encode(bytes)) == bytes)
        }
        #expect(UnpaddedBase64.decode("QQ") == [0x41])
        #expect(UnpaddedBase64.decode("QQ==") == [0x41])
        #expect(UnpaddedBase64.decode("QR") == nil, "unused bits set")
        #expect(UnpaddedBase64.decode("Q") == nil)
        #expect(UnpaddedBase64.decode("QQ Q") == nil)
        #expect(UnpaddedBase64.decode("QQ-_") == nil, "URL-safe alphabet")
    }

    // MARK: Accounts

    @Test("An account has identity keys, signs with its Ed25519 key, and survives a pickle round trip")
    func account() throws {
        let account = try driver.newAccount()
        let keys = account.identityKeys
        #expect(try Ed25519Check.keyBytes(keys.curve25519).count == 32)
        #expect(try Ed25519Check.keyBytes(keys.ed25519).count == 32)
        let message = Array(#"{"algorithms":[],"device_id":"DEVICE"}"#.utf8)
        try driver.verifyEd25519(signature: account.sign(message), of: message, key: keys.ed25519)

        let restored = try driver.account(pickle: try account.pickle(key: pickleKey), key: pickleKey)
        #expect(restored.identityKeys == keys)
        #expect(throws: CryptoDriverError.badPickle) {
            _ = try driver.account(pickle: try account.pickle(key: pickleKey), key: Secret([1, 2, 3]))
        }
    }

    @Test("One-time keys and the fallback key are unpublished until marked, and bounded by the account")
    func oneTimeKeys() throws {
        let account = try driver.newAccount()
        #expect(account.maxOneTimeKeys == 100)
        try account.generateOneTimeKeys(5)
        let keys = try account.unpublishedOneTimeKeys()
        #expect(keys.count == 5)
        #expect(try keys.values.allSatisfy { try Ed25519Check.keyBytes($0).count == 32 })
        #expect(try account.unpublishedFallbackKey().isEmpty)
        try account.generateFallbackKey()
        #expect(try account.unpublishedFallbackKey().count == 1)
        account.markKeysAsPublished()
        #expect(try account.unpublishedOneTimeKeys().isEmpty)
        #expect(try account.unpublishedFallbackKey().isEmpty)
    }

    // MARK: Olm sessions

    @Test("Olm: a pre-key message starts the session, replies are normal messages, tampering is detected")
    func olmSession() throws {
        let alice = try driver.newAccount()
        let bob = try driver.newAccount()
        try bob.generateOneTimeKeys(1)
        let oneTimeKey = try #require(try bob.unpublishedOneTimeKeys().values.first)
        bob.markKeysAsPublished()

        let outbound = try alice.outboundSession(identityKey: bob.identityKeys.curve25519, oneTimeKey: oneTimeKey)
        let first = try outbound.encrypt(Secret(Array("hello bob".utf8)))
        #expect(first.kind == .preKey)

        let inbound = try bob.inboundSession(identityKey: alice.identityKeys.curve25519, preKeyMessage: first.body)
        #expect(inbound.sessionID == outbound.sessionID)
        #expect(inbound.matches(preKeyMessage: first.body, from: alice.identityKeys.curve25519))
        #expect(try inbound.decrypt(first).exposedValue == Array("hello bob".utf8))
        // The one-time key is spent: the same pre-key message cannot start a second session.
        #expect(throws: CryptoDriverError.unknownOneTimeKey) {
            _ = try bob.inboundSession(identityKey: alice.identityKeys.curve25519, preKeyMessage: first.body)
        }

        let reply = try inbound.encrypt(Secret(Array("hello alice".utf8)))
        #expect(reply.kind == .normal)
        #expect(try outbound.decrypt(reply).exposedValue == Array("hello alice".utf8))
        #expect(outbound.hasReceivedMessage)
        #expect(try outbound.encrypt(Secret(Array("again".utf8))).kind == .normal)

        var tampered = Array(reply.body.utf8)
        tampered[tampered.count / 2] =
            tampered[tampered.count / 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(throws: CryptoDriverError.self) {
            _ = try outbound.decrypt(OlmMessage(kind: .normal, body: String(decoding: tampered, as: UTF8.self)))
        }

        let restored = try driver.session(pickle: try inbound.pickle(key: pickleKey), key: pickleKey)
        #expect(restored.sessionID == inbound.sessionID)
        let next = try outbound.encrypt(Secret(Array("after the pickle".utf8)))
        #expect(try restored.decrypt(next).exposedValue == Array("after the pickle".utf8))
    }

    @Test("Sessions refuse malformed identity and one-time keys")
    func olmMalformedKeys() throws {
        let alice = try driver.newAccount()
        #expect(throws: CryptoDriverError.malformedKey) {
            _ = try alice.outboundSession(identityKey: "short", oneTimeKey: alice.identityKeys.curve25519)
        }
        #expect(throws: CryptoDriverError.malformedKey) {
            _ = try alice.outboundSession(identityKey: alice.identityKeys.curve25519, oneTimeKey: "short")
        }
    }

    // MARK: Megolm

    @Test("Megolm: the shared key decrypts from its index on; an export starts later and is not verified")
    func megolm() throws {
        let outbound = try driver.newOutboundGroupSession()
        #expect(outbound.messageIndex == 0)
        let inbound = try driver.inboundGroupSession(sessionKey: try outbound.sessionKey())
        #expect(inbound.sessionID == outbound.sessionID)
        #expect(inbound.isVerified)
        let ciphertexts = try (0..<3).map { try outbound.encrypt(Secret(Array("message \($0)".utf8))) }
        #expect(outbound.messageIndex == 3)
        for (index, ciphertext) in ciphertexts.enumerated() {
            let decrypted = try inbound.decrypt(ciphertext)
            #expect(decrypted.messageIndex == index)
            #expect(decrypted.plaintext.exposedValue == Array("message \(index)".utf8))
        }

        let forwarded = try driver.inboundGroupSession(exportedKey: try inbound.export(from: 1))
        #expect(forwarded.firstKnownIndex == 1)
        #expect(!forwarded.isVerified)
        #expect(throws: CryptoDriverError.unknownMessageIndex) { _ = try forwarded.decrypt(ciphertexts[0]) }
        #expect(try forwarded.decrypt(ciphertexts[2]).messageIndex == 2)

        let restoredOutbound = try driver.outboundGroupSession(
            pickle: try outbound.pickle(key: pickleKey), key: pickleKey)
        #expect(restoredOutbound.messageIndex == 3)
        let restoredInbound = try driver.inboundGroupSession(pickle: try inbound.pickle(key: pickleKey), key: pickleKey)
        let later = try restoredOutbound.encrypt(Secret(Array("later".utf8)))
        #expect(try restoredInbound.decrypt(later).messageIndex == 3)
    }

    @Test("Megolm refuses a malformed session key and a corrupt ciphertext")
    func megolmMalformed() throws {
        #expect(throws: CryptoDriverError.self) {
            _ = try driver.inboundGroupSession(sessionKey: Secret("AAAA"))
        }
        let outbound = try driver.newOutboundGroupSession()
        let inbound = try driver.inboundGroupSession(sessionKey: try outbound.sessionKey())
        #expect(throws: CryptoDriverError.badMessage) { _ = try inbound.decrypt("not a megolm message") }
    }

    /// `text` with its last character replaced by one that encodes the same leading bits and
    /// non-zero unused bits (a second spelling of the same bytes that libolm's lenient decoder
    /// takes), or `nil` when the text has no unused bits.
    private func strayBits(_ text: String) -> String? {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        let unused = [0, 0, 4, 2][text.count % 4]
        guard unused > 0, let last = text.last, let value = alphabet.firstIndex(of: last) else { return nil }
        return String(text.dropLast()) + String(alphabet[value | 1])
    }

    @Test(
        "Session keys, exports and message bodies that are not canonical base64 never reach libolm's decoder (CVE-2024-45192)"
    )
    func nonCanonicalBase64Refused() throws {
        let outbound = try driver.newOutboundGroupSession()
        let key = try outbound.sessionKey().exposedValue
        let inbound = try driver.inboundGroupSession(sessionKey: Secret(key))
        let exported = try inbound.export(from: 0).exposedValue
        let stray = try #require(strayBits(key), "the session key has no unused bits")
        #expect(throws: CryptoDriverError.badSessionKey) { try driver.inboundGroupSession(sessionKey: Secret(stray)) }
        #expect(throws: CryptoDriverError.badSessionKey) {
            try driver.inboundGroupSession(sessionKey: Secret(key + "\n"))
        }
        #expect(throws: CryptoDriverError.badSessionKey) {
            try driver.inboundGroupSession(exportedKey: Secret("-" + exported.dropFirst()))
        }
        #expect(throws: CryptoDriverError.badSessionKey) {
            try driver.inboundGroupSession(exportedKey: Secret(exported + "===="))
        }
        // Plaintexts of three lengths: one of them leaves unused bits in the last character.
        let ciphertext = try #require(
            try [1, 17, 33].map { String(repeating: "a", count: $0) }.map {
                try outbound.encrypt(Secret(Array($0.utf8)))
            }.first { strayBits($0) != nil })
        #expect(throws: CryptoDriverError.badMessage) { _ = try inbound.decrypt(try #require(strayBits(ciphertext))) }
        #expect(throws: CryptoDriverError.badMessage) { _ = try inbound.decrypt(ciphertext + "=") }

        // Olm: a pre-key message with stray bits is refused before libolm decodes it.
        let alice = try driver.newAccount()
        let bob = try driver.newAccount()
        try bob.generateOneTimeKeys(1)
        let oneTimeKey = try #require(try bob.unpublishedOneTimeKeys().values.first)
        let session = try alice.outboundSession(identityKey: bob.identityKeys.curve25519, oneTimeKey: oneTimeKey)
        let message = try #require(
            try [1, 17, 33].map { String(repeating: "a", count: $0) }.map {
                try session.encrypt(Secret(Array($0.utf8)))
            }.first { strayBits($0.body) != nil })
        let tampered = try #require(strayBits(message.body))
        #expect(throws: CryptoDriverError.badMessage) {
            _ = try bob.inboundSession(identityKey: alice.identityKeys.curve25519, preKeyMessage: tampered)
        }
        let received = try bob.inboundSession(
            identityKey: alice.identityKeys.curve25519, preKeyMessage: message.body)
        #expect(!received.matches(preKeyMessage: tampered, from: alice.identityKeys.curve25519))
        #expect(throws: CryptoDriverError.badMessage) {
            _ = try received.decrypt(OlmMessage(kind: .preKey, body: tampered))
        }
    }

    // MARK: Helpers

    private func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    /// Adds the group order L to the scalar half of a signature (little-endian).
    private func addOrder(to signature: inout [UInt8]) {
        let order: [UInt8] = [
            0xED, 0xD3, 0xF5, 0x5C, 0x1A, 0x63, 0x12, 0x58, 0xD6, 0x9C, 0xF7, 0xA2, 0xDE, 0xF9, 0xDE, 0x14,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
        ]
        var carry = 0
        for index in 0..<32 {
            let sum = Int(signature[32 + index]) + Int(order[index]) + carry
            signature[32 + index] = UInt8(sum & 0xFF)
            carry = sum >> 8
        }
    }

    /// libolm's own verification, without the driver's checks.
    private static func libolmAccepts(signature: String, message: [UInt8], key: String) -> Bool {
        let memory = UnsafeMutableRawPointer.allocate(byteCount: olm_utility_size(), alignment: 16)
        defer { memory.deallocate() }
        let utility = olm_utility(memory)
        var keyText = Array(key.utf8)
        var signatureText = Array(signature.utf8)
        var input = message
        let result = olm_ed25519_verify(
            utility, &keyText, keyText.count, &input, input.count, &signatureText, signatureText.count)
        _ = olm_clear_utility(utility)
        return result != olm_error()
    }
}
