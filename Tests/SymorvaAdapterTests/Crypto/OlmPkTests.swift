import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaRuntime
import Testing

/// libolm's `pk.h` behind the driver: signing keys from a seed (cross-signing) and the key
/// backup's `m.megolm_backup.v1.curve25519-aes-sha2` encryption.
@Suite("The libolm driver's signing and backup keys")
struct OlmPkTests {
    let driver = OlmCryptoDriver()

    /// RFC 8032 §7.1 tests 1–3: (seed, public key, message, signature), hex.
    static let rfc8032: [(seed: String, key: String, message: String, signature: String)] = [
        (
            "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
        ),
        (
            "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
            "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
            "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"
        ),
        (
            "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
            "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
            "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"
        ),
    ]

    @Test("A signing key from an RFC 8032 seed has its public key and gives its signatures")
    func signingVectors() throws {
        for vector in Self.rfc8032 {
            let key = try driver.signingKey(seed: Secret(hex(vector.seed)))
            #expect(key.publicKey == UnpaddedBase64.encode(hex(vector.key)))
            #expect(key.seed.exposedValue == hex(vector.seed))
            let signature = try key.sign(hex(vector.message))
            #expect(signature == UnpaddedBase64.encode(hex(vector.signature)))
            try driver.verifyEd25519(signature: signature, of: hex(vector.message), key: key.publicKey)
        }
    }

    @Test("A new signing key signs what verification accepts; its seed rebuilds the same key")
    func newSigningKey() throws {
        let key = try driver.newSigningKey()
        let message = Array(#"{"usage":["master"],"user_id":"@a:example.org"}"#.utf8)
        try driver.verifyEd25519(signature: try key.sign(message), of: message, key: key.publicKey)
        let again = try driver.signingKey(seed: key.seed)
        #expect(again.publicKey == key.publicKey)
        #expect(try driver.newSigningKey().publicKey != key.publicKey)
    }

    @Test("A seed that is not 32 bytes is refused")
    func badSeed() {
        #expect(throws: CryptoDriverError.malformedKey) { try driver.signingKey(seed: Secret([1, 2, 3])) }
        #expect(throws: CryptoDriverError.malformedKey) {
            try driver.signingKey(seed: Secret([UInt8](repeating: 1, count: 33)))
        }
    }

    /// RFC 7748 §6.1: Alice's private key and its public key.
    static let alicePrivate = "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"
    static let alicePublic = "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"

    /// One entry vodozemac (Rust, independent of libolm) encrypted for Alice's key:
    /// `Tests/InteropPeer/backup_vectors.py`, run with the interop venv (vodozemac 0.10.0).
    static let vodozemacEntry = BackupCiphertext(
        ciphertext:
            "giSC5e22ZhheCxlJ0pnHWSOKmnjatNFC4nxfr7LP49SrzzA4JfwDt7kkuHsZGMuGrpKqDGeInENtr3RYdO4WJisYd1UIGXA56pp3xetUPXEh8UJnK9lbvttwXmFfCBNPlYbyZSzqZq+YV/tlcKZOqM/3ud6pj4b/enMmO1W/FkmIDOxCDwY22zZcxOdWvwDx5bQ1I5DcY9vMdpIJxLPiGA",
        mac: "EpdY/AyZmsE", ephemeral: "RkEMuhH0piS43PmAOQW+++NrfKgIjRZB90XjOuAHh14")
    static let vodozemacPlaintext =
        #"{"algorithm":"m.megolm.v1.aes-sha2","sender_key":"vodozemac","session_key":"not a real key","sender_claimed_keys":{},"forwarding_curve25519_key_chain":[]}"#

    @Test("The backup key from RFC 7748's private key has its public key and reads vodozemac's entry")
    func backupVectors() throws {
        let key = try driver.backupDecryptionKey(privateKey: Secret(hex(Self.alicePrivate)))
        #expect(key.publicKey == UnpaddedBase64.encode(hex(Self.alicePublic)))
        let plaintext = try key.decrypt(Self.vodozemacEntry)
        #expect(String(decoding: plaintext.exposedValue, as: UTF8.self) == Self.vodozemacPlaintext)
    }

    @Test("An entry encrypted for a new backup key decrypts with it, and only with it")
    func backupRoundTrip() throws {
        let key = try driver.newBackupDecryptionKey()
        let plaintext = Array(#"{"session_key":"AQID"}"#.utf8)
        let entry = try driver.backupEncrypt(Secret(plaintext), for: key.publicKey)
        #expect(UnpaddedBase64.decode(entry.mac)?.count == 8)
        #expect(UnpaddedBase64.decode(entry.ephemeral)?.count == 32)
        #expect(try key.decrypt(entry).exposedValue == plaintext)
        // A fresh ephemeral key per entry.
        #expect(try driver.backupEncrypt(Secret(plaintext), for: key.publicKey) != entry)
        // The same private key rebuilds the key.
        #expect(try driver.backupDecryptionKey(privateKey: key.privateKey).decrypt(entry).exposedValue == plaintext)
        let other = try driver.newBackupDecryptionKey()
        #expect(throws: CryptoDriverError.badMessageMAC) { try other.decrypt(entry) }
    }

    @Test("Tampered or malformed entries and keys are refused")
    func backupRefuses() throws {
        let key = try driver.backupDecryptionKey(privateKey: Secret(hex(Self.alicePrivate)))
        var tampered = Self.vodozemacEntry
        tampered.mac = "AAAAAAAAAAA"
        #expect(throws: CryptoDriverError.badMessageMAC) { try key.decrypt(tampered) }
        var malformed = Self.vodozemacEntry
        malformed.ephemeral = "not base64!"
        #expect(throws: CryptoDriverError.malformedKey) { try key.decrypt(malformed) }
        malformed = Self.vodozemacEntry
        malformed.ciphertext = "%%%"
        #expect(throws: CryptoDriverError.badMessage) { try key.decrypt(malformed) }
        #expect(throws: CryptoDriverError.malformedKey) {
            try driver.backupDecryptionKey(privateKey: Secret([UInt8](repeating: 1, count: 31)))
        }
        #expect(throws: CryptoDriverError.malformedKey) {
            try driver.backupEncrypt(Secret([1]), for: "short")
        }
    }

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
}
