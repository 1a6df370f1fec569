import SymorvaCryptoDriver
import SymorvaE2EE
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// The recovery key's encoding and `m.secret_storage.v1.aes-hmac-sha2`, against vectors of an
/// independent implementation (matrix-rust-sdk's `secret_storage` tests: a recovery key with its
/// bytes, a key description with its check, a passphrase description with its check) and the
/// spec's rules (prefix, parity, whitespace, bit 63 of the IV, the MAC before decryption).
@Suite("Recovery key and secret storage")
struct SecretStorageTests {
    /// A recovery key and its 32 bytes.
    static let recoveryKey = "EsTpRvZTnjck8YrhRAtwXLS84Nr2r9S9LGAWDaExVAPBvLRK"
    static let recoveryKeyBytes: [UInt8] = [
        159, 189, 70, 187, 52, 81, 113, 198, 246, 2, 44, 154, 37, 213, 104, 27, 165, 78, 236, 106, 108, 73, 83, 243,
        173, 192, 185, 110, 157, 145, 173, 163,
    ]

    @Test("A recovery key decodes to its bytes, whatever its whitespace, and encodes back in groups of four")
    func recoveryKeyVector() throws {
        #expect(try RecoveryKey.decode(Secret(Self.recoveryKey)).exposedValue == Self.recoveryKeyBytes)
        let spaced = "EsT           pRvZTnjck8    YrhRAtw XLS84Nr2r9S9LGAWDaExVAPBvLRK   \n"
        #expect(try RecoveryKey.decode(Secret(spaced)).exposedValue == Self.recoveryKeyBytes)
        let encoded = RecoveryKey.encode(Secret(Self.recoveryKeyBytes)).exposedValue
        #expect(encoded == "EsTp RvZT njck 8Yrh RAtw XLS8 4Nr2 r9S9 LGAW DaEx VAPB vLRK")
    }

    @Test("A mistyped character, a wrong prefix, a wrong length and a non-base58 character are refused")
    func recoveryKeyRefusals() {
        #expect(throws: RecoveryKeyError.wrongParity) {
            try RecoveryKey.decode(Secret("EsTpRvZTnjck8YrhRAtwXLS84Nr2r9S9LGAWDaExVAPBvLRk"))
        }
        #expect(throws: RecoveryKeyError.wrongPrefix) {
            try RecoveryKey.decode(Secret("AATpRvZTnjck8YrhRAtwXLS84Nr2r9S9LGAWDaExVAPBvLRk"))
        }
        #expect(throws: RecoveryKeyError.self) {
            try RecoveryKey.decode(Secret("AATpRvZTnjck8YrhRAtwXLS84Nr2r9S9"))
        }
        #expect(throws: RecoveryKeyError.notBase58) {
            try RecoveryKey.decode(Secret("AATpRvZTnjck8YrhRAtwXLS84Nr0OIl"))
        }
    }

    @Test("Random keys survive the recovery key round trip; every key starts with the prefix's 'Es'")
    func recoveryKeyRoundTrip() throws {
        for _ in 0..<50 {
            let key = try SecretStorage.newKey()
            let text = RecoveryKey.encode(key)
            #expect(text.exposedValue.hasPrefix("Es"))
            #expect(try RecoveryKey.decode(text).exposedValue == key.exposedValue)
        }
    }

    @Test("Base58 keeps leading zero bytes as '1's")
    func base58Zeros() {
        #expect(Base58.encode([0, 0, 1]) == "112")
        #expect(Base58.decode("112") == [0, 0, 1])
        #expect(Base58.encode([]) == "")
    }

    @Test("A recovery key passes its key description's check; another key fails it")
    func keyCheckVector() throws {
        let key = try RecoveryKey.decode(Secret("EsTj 3yST y93F SLpB jJsz eAXc 2XzA ygD3 w69H fGaN TKBj jXEd"))
        let description = try SecretStorageKeyDescription(
            json: .object([
                "algorithm": .string("m.secret_storage.v1.aes-hmac-sha2"), "iv": .string("xv5b6/p3ExEw++wTyfSHEg=="),
                "mac": .string("ujBBbXahnTAMkmPUX2/0+VTfUh63pGyVRuBcDMgmJC8="),
            ]))
        try SecretStorage.check(key, against: description)
        // Our own check with the same IV is the same MAC (unpadded).
        let iv = try #require(UnpaddedBase64.decode("xv5b6/p3ExEw++wTyfSHEg=="))
        #expect(try SecretStorage.describe(key, iv: iv).mac == "ujBBbXahnTAMkmPUX2/0+VTfUh63pGyVRuBcDMgmJC8")
        #expect(throws: SecretStorageError.wrongKey) {
            try SecretStorage.check(Secret(Self.recoveryKeyBytes), against: description)
        }
    }

    @Test("A passphrase gives the described key (PBKDF2-SHA-512 with its salt and iterations); another does not")
    func passphraseVector() throws {
        let description = try SecretStorageKeyDescription(
            json: .object([
                "algorithm": .string("m.secret_storage.v1.aes-hmac-sha2"), "iv": .string("gH2iNpiETFhApvW6/FFEJQ"),
                "mac": .string("9Lw12m5SKDipNghdQXKjgpfdj1/K7HFI2brO+UWAGoM"),
                "passphrase": .object([
                    "algorithm": .string("m.pbkdf2"), "salt": .string("IuLnH7S85YtZmkkBJKwNUKxWF42g9O1H"),
                    "iterations": .number(10),
                ]),
            ]))
        let parameters = try #require(description.passphrase)
        #expect(parameters.bits == 256)
        let key = try SecretStorage.key(passphrase: Secret("It's a secret to everybody"), parameters: parameters)
        try SecretStorage.check(key, against: description)
        let wrong = try SecretStorage.key(passphrase: Secret("It's a secret to nobody"), parameters: parameters)
        #expect(throws: SecretStorageError.wrongKey) { try SecretStorage.check(wrong, against: description) }
    }

    @Test("A secret decrypts under its key and name; another name, another key or a changed byte is a bad MAC")
    func secretRoundTrip() throws {
        let key = try SecretStorage.newKey()
        let secret = Secret(Array("It's a secret to everybody".utf8))
        let encrypted = try SecretStorage.encrypt(secret, name: "m.cross_signing.master", key: key)
        #expect(try SecretStorage.decrypt(encrypted, name: "m.cross_signing.master", key: key) == secret)
        #expect(throws: SecretStorageError.badMAC) {
            try SecretStorage.decrypt(encrypted, name: "m.cross_signing.self_signing", key: key)
        }
        #expect(throws: SecretStorageError.badMAC) {
            try SecretStorage.decrypt(encrypted, name: "m.cross_signing.master", key: try SecretStorage.newKey())
        }
        var ciphertext = try #require(UnpaddedBase64.decode(encrypted.ciphertext))
        ciphertext[0] ^= 1
        var tampered = encrypted
        tampered.ciphertext = UnpaddedBase64.encode(ciphertext)
        #expect(throws: SecretStorageError.badMAC) {
            try SecretStorage.decrypt(tampered, name: "m.cross_signing.master", key: key)
        }
        #expect(try EncryptedSecret(json: encrypted.json) == encrypted)
    }

    @Test("Fresh IVs have bit 63 clear (the spec's workaround for AES-CTR counter differences)")
    func ivBit63() throws {
        let key = try SecretStorage.newKey()
        for _ in 0..<64 {
            let encrypted = try SecretStorage.encrypt(Secret([1, 2, 3]), name: "n", key: key)
            let iv = try #require(UnpaddedBase64.decode(encrypted.iv))
            #expect(iv.count == 16)
            #expect(iv[8] & 0x80 == 0)
        }
    }

    @Test("A key description round-trips through account data; one without a check accepts any key")
    func descriptions() throws {
        let key = try SecretStorage.newKey()
        let parameters = SecretStorageKeyDescription.Passphrase(salt: "salt", iterations: 3)
        let description = try SecretStorage.describe(key, name: "Recovery", passphrase: parameters)
        #expect(try SecretStorageKeyDescription(json: description.json) == description)
        try SecretStorage.check(key, against: description)
        try SecretStorage.check(try SecretStorage.newKey(), against: SecretStorageKeyDescription())
        #expect(throws: SecretStorageError.unsupportedAlgorithm("m.secret_storage.v2")) {
            try SecretStorageKeyDescription(json: .object(["algorithm": .string("m.secret_storage.v2")]))
        }
        #expect(throws: SecretStorageError.malformed("iv")) {
            try SecretStorage.check(key, against: SecretStorageKeyDescription(iv: "AAAA", mac: description.mac))
        }
    }

    @Test("Errors and the recovery key's wrapper never print key material")
    func redaction() throws {
        let text = RecoveryKey.encode(Secret(Self.recoveryKeyBytes))
        #expect(!"\(text)".contains("EsTp"))
        #expect("\(SecretStorageError.recoveryKey(.wrongParity))" == "recoveryKey(wrongParity)")
    }
}
