import CSodium
import SymorvaRuntime

/// Encrypts secrets at rest (access and refresh tokens, the Olm pickle key) with libsodium's
/// XChaCha20-Poly1305 IETF AEAD under a 32-byte key.
///
/// A sealed value is `version (1 byte) ‖ nonce (24 bytes) ‖ ciphertext ‖ tag (16 bytes)`. The
/// nonce is random per message (192 bits, so random nonces never collide in practice). The
/// associated data — the version byte plus the row's identity, e.g. ``associatedData(account:field:)`` —
/// is authenticated but not stored: a ciphertext copied into another row, another account or
/// another field fails to open with ``StoreError/decryptionFailed``, as does any flipped bit.
public struct SecretBox: Sendable {
    /// The format version written as the first byte.
    public static let formatVersion: UInt8 = 1
    /// The key length in bytes.
    public static let keyLength = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
    private static let nonceLength = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    private static let tagLength = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)

    private let key: Secret<[UInt8]>

    /// A box under `key`.
    ///
    /// - Throws: `.invalidKey` unless the key is 32 bytes; `.cryptoUnavailable` when libsodium
    ///   cannot start.
    public init(key: Secret<[UInt8]>) throws(StoreError) {
        try Sodium.ensureInitialized()
        guard key.exposedValue.count == Self.keyLength else { throw .invalidKey(length: key.exposedValue.count) }
        self.key = key
    }

    /// A fresh random key.
    public static func generateKey() throws(StoreError) -> Secret<[UInt8]> {
        try Sodium.ensureInitialized()
        var key = [UInt8](repeating: 0, count: keyLength)
        crypto_aead_xchacha20poly1305_ietf_keygen(&key)
        return Secret(key)
    }

    /// Associated data naming one field of one account's row; lengths are encoded so that
    /// different (account, field) pairs never produce the same bytes.
    public static func associatedData(account: String, field: String) -> [UInt8] {
        var data = Array("symorva.secret".utf8)
        for part in [account, field] {
            let bytes = Array(part.utf8)
            withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { data.append(contentsOf: $0) }
            data.append(contentsOf: bytes)
        }
        return data
    }

    /// Encrypts `plaintext`, binding it to `associatedData`.
    public func seal(_ plaintext: Secret<[UInt8]>, associatedData: [UInt8]) throws(StoreError) -> [UInt8] {
        let message = plaintext.exposedValue
        var output = [UInt8](repeating: 0, count: 1 + Self.nonceLength + message.count + Self.tagLength)
        output[0] = Self.formatVersion
        let additional = [Self.formatVersion] + associatedData
        let code = output.withUnsafeMutableBufferPointer { out -> Int32 in
            let nonce = out.baseAddress! + 1
            randombytes_buf(nonce, Self.nonceLength)
            var written: UInt64 = 0
            return crypto_aead_xchacha20poly1305_ietf_encrypt(
                nonce + Self.nonceLength, &written, message, UInt64(message.count), additional,
                UInt64(additional.count), nil, nonce, key.exposedValue)
        }
        guard code == 0 else { throw .cryptoUnavailable }
        return output
    }

    /// Encrypts a UTF-8 string (a token).
    public func seal(_ plaintext: Secret<String>, associatedData: [UInt8]) throws(StoreError) -> [UInt8] {
        try seal(plaintext.map { Array($0.utf8) }, associatedData: associatedData)
    }

    /// Decrypts what ``seal(_:associatedData:)`` produced under the same key and associated data.
    ///
    /// - Throws: `.decryptionFailed` for a wrong version, a short input, a wrong key, other
    ///   associated data, or any modification.
    public func open(_ sealed: [UInt8], associatedData: [UInt8]) throws(StoreError) -> Secret<[UInt8]> {
        guard sealed.count >= 1 + Self.nonceLength + Self.tagLength, sealed[0] == Self.formatVersion else {
            throw .decryptionFailed
        }
        let additional = [sealed[0]] + associatedData
        let messageLength = sealed.count - 1 - Self.nonceLength - Self.tagLength
        var message = [UInt8](repeating: 0, count: messageLength)
        let code = sealed.withUnsafeBufferPointer { input -> Int32 in
            let nonce = input.baseAddress! + 1
            let ciphertext = nonce + Self.nonceLength
            var written: UInt64 = 0
            return message.withUnsafeMutableBufferPointer { out in
                crypto_aead_xchacha20poly1305_ietf_decrypt(
                    out.baseAddress, &written, nil, ciphertext, UInt64(messageLength + Self.tagLength), additional,
                    UInt64(additional.count), nonce, key.exposedValue)
            }
        }
        guard code == 0 else { throw .decryptionFailed }
        return Secret(message)
    }

    /// Decrypts a UTF-8 string sealed with ``seal(_:associatedData:)-(Secret<String>,_)``.
    public func openString(_ sealed: [UInt8], associatedData: [UInt8]) throws(StoreError) -> Secret<String> {
        let bytes = try open(sealed, associatedData: associatedData).exposedValue
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .decryptionFailed }
        return Secret(text)
    }
}

/// `sodium_init`, once per process.
enum Sodium {
    private static let initialized: Bool = sodium_init() >= 0

    static func ensureInitialized() throws(StoreError) {
        guard initialized else { throw .cryptoUnavailable }
    }
}
