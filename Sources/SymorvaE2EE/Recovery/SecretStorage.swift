import SymorvaCipher
import SymorvaCryptoDriver
import SymorvaMatrix
import SymorvaRuntime

/// Why secret storage refused a key or a secret. Cases name fields and algorithms, never bytes.
package enum SecretStorageError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The key or secret uses an algorithm other than `m.secret_storage.v1.aes-hmac-sha2`
    /// (or a passphrase algorithm other than `m.pbkdf2`).
    case unsupportedAlgorithm(String)
    /// A field is missing or malformed (its name).
    case malformed(String)
    /// The key does not pass the key description's check (the MAC of 32 zero bytes): a wrong
    /// recovery key or passphrase.
    case wrongKey
    /// An encrypted secret's MAC does not verify: another key, another secret name, or tampered
    /// with.
    case badMAC
    /// The recovery key as typed is not one.
    case recoveryKey(RecoveryKeyError)
    /// libcrypto refused (a wrong length reaching it, or a failure in the library).
    case cipher(CipherError)

    /// The case name with its field; never key material.
    package var description: String {
        switch self {
        case .unsupportedAlgorithm(let name): "unsupportedAlgorithm(\(name))"
        case .malformed(let field): "malformed(\(field))"
        case .wrongKey: "wrongKey"
        case .badMAC: "badMAC"
        case .recoveryKey(let error): "recoveryKey(\(error))"
        case .cipher(let error): "cipher(\(error))"
        }
    }
}

/// The content of `m.secret_storage.key.<key ID>` account data for an
/// `m.secret_storage.v1.aes-hmac-sha2` key: its name, the check that tells a right key from a
/// wrong one, and how to derive it from a passphrase, if it was.
package struct SecretStorageKeyDescription: Sendable, Hashable {
    /// The algorithm this type describes.
    package static let algorithm = "m.secret_storage.v1.aes-hmac-sha2"

    /// How the key derives from a passphrase (`m.pbkdf2`: PBKDF2 with HMAC-SHA-512).
    package struct Passphrase: Sendable, Hashable {
        /// The salt, used as its UTF-8 bytes.
        package var salt: String
        /// The PBKDF2 iteration count.
        package var iterations: Int
        /// The key length in bits (256 unless stated).
        package var bits: Int

        /// A passphrase description as given.
        package init(salt: String, iterations: Int, bits: Int = 256) {
            self.salt = salt
            self.iterations = iterations
            self.bits = bits
        }
    }

    /// The key's human-readable name, if any.
    package var name: String?
    /// The check's IV (base64): with `mac`, the encryption of 32 zero bytes under the name "".
    package var iv: String?
    /// The check's MAC (base64).
    package var mac: String?
    /// Present when the key derives from a passphrase.
    package var passphrase: Passphrase?

    /// A description as given.
    package init(name: String? = nil, iv: String? = nil, mac: String? = nil, passphrase: Passphrase? = nil) {
        self.name = name
        self.iv = iv
        self.mac = mac
        self.passphrase = passphrase
    }

    /// The description in account data content.
    package init(json: JSONValue) throws(SecretStorageError) {
        guard case .object(let members) = json else { throw .malformed("content") }
        guard case .string(let algorithm)? = members["algorithm"] else { throw .malformed("algorithm") }
        guard algorithm == Self.algorithm else { throw .unsupportedAlgorithm(algorithm) }
        if case .string(let name)? = members["name"] { self.name = name }
        if case .string(let iv)? = members["iv"] { self.iv = iv }
        if case .string(let mac)? = members["mac"] { self.mac = mac }
        if let value = members["passphrase"] {
            guard case .object(let passphrase) = value else { throw .malformed("passphrase") }
            guard case .string(let kind)? = passphrase["algorithm"] else { throw .malformed("passphrase.algorithm") }
            guard kind == "m.pbkdf2" else { throw .unsupportedAlgorithm(kind) }
            guard case .string(let salt)? = passphrase["salt"] else { throw .malformed("passphrase.salt") }
            guard let iterations = passphrase["iterations"]?.integerValue, iterations >= 1 else {
                throw .malformed("passphrase.iterations")
            }
            var bits = 256
            if let value = passphrase["bits"] {
                guard let given = value.integerValue, given > 0, given % 8 == 0 else {
                    throw .malformed("passphrase.bits")
                }
                bits = given
            }
            self.passphrase = Passphrase(salt: salt, iterations: iterations, bits: bits)
        }
    }

    /// The account data content.
    package var json: JSONValue {
        var members: [String: JSONValue] = ["algorithm": .string(Self.algorithm)]
        if let name { members["name"] = .string(name) }
        if let iv { members["iv"] = .string(iv) }
        if let mac { members["mac"] = .string(mac) }
        if let passphrase {
            members["passphrase"] = .object([
                "algorithm": .string("m.pbkdf2"), "salt": .string(passphrase.salt),
                "iterations": .number(Double(passphrase.iterations)), "bits": .number(Double(passphrase.bits)),
            ])
        }
        return .object(members)
    }
}

/// One secret encrypted with an `m.secret_storage.v1.aes-hmac-sha2` key: what account data
/// `<secret name>.encrypted.<key ID>` holds. Each part is base64.
package struct EncryptedSecret: Sendable, Hashable {
    /// The AES-CTR initial counter block (16 bytes, bit 63 clear).
    package var iv: String
    /// The ciphertext of the secret's UTF-8.
    package var ciphertext: String
    /// HMAC-SHA-256 of the raw ciphertext.
    package var mac: String

    /// A secret as given.
    package init(iv: String, ciphertext: String, mac: String) {
        self.iv = iv
        self.ciphertext = ciphertext
        self.mac = mac
    }

    /// The object under the key ID in `encrypted`.
    package init(json: JSONValue) throws(SecretStorageError) {
        guard case .object(let members) = json else { throw .malformed("encrypted") }
        guard case .string(let iv)? = members["iv"] else { throw .malformed("iv") }
        guard case .string(let ciphertext)? = members["ciphertext"] else { throw .malformed("ciphertext") }
        guard case .string(let mac)? = members["mac"] else { throw .malformed("mac") }
        self.init(iv: iv, ciphertext: ciphertext, mac: mac)
    }

    /// The JSON object.
    package var json: JSONValue {
        .object(["iv": .string(iv), "ciphertext": .string(ciphertext), "mac": .string(mac)])
    }
}

/// `m.secret_storage.v1.aes-hmac-sha2`: secrets (the cross-signing private keys, the backup
/// key) encrypted in account data with a 32-byte key the user holds as a recovery key or
/// derives from a passphrase.
///
/// For a secret named `N`: HKDF-SHA-256 of the key with 32 zero bytes as salt and `N` as info
/// gives 64 bytes, an AES-256 key and an HMAC key; the secret's UTF-8 is encrypted with
/// AES-256-CTR under a random IV whose bit 63 is clear, and the MAC is HMAC-SHA-256 of the
/// ciphertext. A key's check is the encryption of 32 zero bytes under the name "".
package enum SecretStorage {
    /// The key length in bytes.
    package static let keyLength = 32

    /// A new random 32-byte key.
    package static func newKey() throws(SecretStorageError) -> Secret<[UInt8]> {
        Secret(try cipher { () throws(CipherError) in try SecureRandom.bytes(keyLength) })
    }

    /// The key a passphrase gives with the description's salt and iterations (PBKDF2 with
    /// HMAC-SHA-512).
    package static func key(
        passphrase: Secret<String>, parameters: SecretStorageKeyDescription.Passphrase
    ) throws(SecretStorageError) -> Secret<[UInt8]> {
        guard parameters.bits == keyLength * 8 else { throw .malformed("passphrase.bits") }
        return Secret(
            try cipher { () throws(CipherError) in
                try PBKDF2SHA512.derive(
                    password: Array(passphrase.exposedValue.utf8), salt: Array(parameters.salt.utf8),
                    iterations: parameters.iterations, length: parameters.bits / 8)
            })
    }

    /// The description of `key`: its check (`iv`, `mac`) under a fresh IV unless one is given
    /// (tests), with `name` and `passphrase` as given.
    package static func describe(
        _ key: Secret<[UInt8]>, name: String? = nil, passphrase: SecretStorageKeyDescription.Passphrase? = nil,
        iv: [UInt8]? = nil
    ) throws(SecretStorageError) -> SecretStorageKeyDescription {
        let check = try encrypt(Secret([UInt8](repeating: 0, count: 32)), name: "", key: key, iv: iv)
        return SecretStorageKeyDescription(name: name, iv: check.iv, mac: check.mac, passphrase: passphrase)
    }

    /// Whether `key` is the described key: the MAC of 32 zero bytes encrypted with the
    /// description's IV must be its MAC (compared in constant time). A description without a
    /// check accepts any key, as the spec says.
    ///
    /// - Throws: `.wrongKey` when the check fails; `.malformed` for a check that cannot be read.
    package static func check(_ key: Secret<[UInt8]>, against description: SecretStorageKeyDescription)
        throws(SecretStorageError)
    {
        guard let ivText = description.iv, let macText = description.mac else { return }
        guard let iv = UnpaddedBase64.decode(ivText), iv.count == AES256CTR.ivLength else { throw .malformed("iv") }
        guard let mac = UnpaddedBase64.decode(macText), mac.count == HMACSHA256.length else {
            throw .malformed("mac")
        }
        let check = try encrypt(Secret([UInt8](repeating: 0, count: 32)), name: "", key: key, iv: iv)
        guard let computed = UnpaddedBase64.decode(check.mac), ConstantTime.equal(computed, mac) else {
            throw .wrongKey
        }
    }

    /// `secret` encrypted under `key` for the secret name `name`, with a fresh IV unless one is
    /// given (the key check and tests give theirs).
    package static func encrypt(
        _ secret: Secret<[UInt8]>, name: String, key: Secret<[UInt8]>, iv: [UInt8]? = nil
    ) throws(SecretStorageError) -> EncryptedSecret {
        let (aesKey, macKey) = try keys(key, name: name)
        var counter: [UInt8]
        if let iv {
            counter = iv
        } else {
            counter = try cipher { () throws(CipherError) in try SecureRandom.bytes(AES256CTR.ivLength) }
            counter[8] &= 0x7f
        }
        guard counter.count == AES256CTR.ivLength else { throw .malformed("iv") }
        let ciphertext = try cipher { () throws(CipherError) in
            try AES256CTR.apply(key: aesKey.exposedValue, iv: counter, to: secret.exposedValue)
        }
        let mac = try cipher { () throws(CipherError) in
            try HMACSHA256.authenticate(ciphertext, key: macKey.exposedValue)
        }
        return EncryptedSecret(
            iv: UnpaddedBase64.encode(counter), ciphertext: UnpaddedBase64.encode(ciphertext),
            mac: UnpaddedBase64.encode(mac))
    }

    /// The secret `encrypted` holds, once its MAC verifies under `key` for `name`.
    ///
    /// - Throws: `.badMAC` when it does not (nothing is decrypted then), `.malformed` for parts
    ///   that are not base64 of the right lengths.
    package static func decrypt(_ encrypted: EncryptedSecret, name: String, key: Secret<[UInt8]>)
        throws(SecretStorageError) -> Secret<[UInt8]>
    {
        guard let iv = UnpaddedBase64.decode(encrypted.iv), iv.count == AES256CTR.ivLength else {
            throw .malformed("iv")
        }
        guard let ciphertext = UnpaddedBase64.decode(encrypted.ciphertext) else { throw .malformed("ciphertext") }
        guard let mac = UnpaddedBase64.decode(encrypted.mac), mac.count == HMACSHA256.length else {
            throw .malformed("mac")
        }
        let (aesKey, macKey) = try keys(key, name: name)
        let verified = try cipher { () throws(CipherError) in
            try HMACSHA256.verify(mac, of: ciphertext, key: macKey.exposedValue)
        }
        guard verified else { throw .badMAC }
        return Secret(
            try cipher { () throws(CipherError) in
                try AES256CTR.apply(key: aesKey.exposedValue, iv: iv, to: ciphertext)
            })
    }

    /// The AES and HMAC keys for one secret name.
    static func keys(_ key: Secret<[UInt8]>, name: String) throws(SecretStorageError) -> (
        Secret<[UInt8]>, Secret<[UInt8]>
    ) {
        guard key.exposedValue.count == keyLength else { throw .malformed("key") }
        let derived = try cipher { () throws(CipherError) in
            try HKDFSHA256.derive(
                inputKey: key.exposedValue, salt: [UInt8](repeating: 0, count: 32), info: Array(name.utf8), length: 64)
        }
        return (Secret(Array(derived[..<32])), Secret(Array(derived[32...])))
    }

    /// `body`'s result, its libcrypto error wrapped.
    static func cipher<T>(_ body: () throws(CipherError) -> T) throws(SecretStorageError) -> T {
        do { return try body() } catch { throw .cipher(error) }
    }
}
