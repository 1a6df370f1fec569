import COlm
import SymorvaCryptoDriver
import SymorvaRuntime

// libolm's `olm/pk.h`: Ed25519 signing from a seed (cross-signing keys) and the key backup's
// public-key encryption (`m.megolm_backup.v1.curve25519-aes-sha2`).

extension OlmCryptoDriver {
    package func signingKey(seed: Secret<[UInt8]>) throws(CryptoDriverError) -> any SigningKey {
        try OlmPkSigningObject(seed: seed)
    }

    package func newSigningKey() throws(CryptoDriverError) -> any SigningKey {
        let random = try RandomBytes(olm_pk_signing_seed_length())
        return try OlmPkSigningObject(
            seed: Secret(Array(UnsafeBufferPointer(start: random.bytes, count: random.count))))
    }

    package func backupDecryptionKey(privateKey: Secret<[UInt8]>) throws(CryptoDriverError)
        -> any BackupDecryptionKey
    {
        try OlmPkDecryptionObject(privateKey: privateKey)
    }

    package func newBackupDecryptionKey() throws(CryptoDriverError) -> any BackupDecryptionKey {
        let random = try RandomBytes(olm_pk_private_key_length())
        return try OlmPkDecryptionObject(
            privateKey: Secret(Array(UnsafeBufferPointer(start: random.bytes, count: random.count))))
    }

    package func backupEncrypt(_ plaintext: Secret<[UInt8]>, for publicKey: String) throws(CryptoDriverError)
        -> BackupCiphertext
    {
        _ = try Ed25519Check.keyBytes(publicKey)
        let encryption = OlmPkEncryptionObject()
        var recipient = Array(publicKey.utf8)
        try encryption.check(olm_pk_encryption_set_recipient_key(encryption.pointer, &recipient, recipient.count))
        let random = try RandomBytes(olm_pk_encrypt_random_length(encryption.pointer))
        var ciphertext = [UInt8](
            repeating: 0, count: olm_pk_ciphertext_length(encryption.pointer, plaintext.exposedValue.count))
        var mac = [UInt8](repeating: 0, count: olm_pk_mac_length(encryption.pointer))
        var ephemeral = [UInt8](repeating: 0, count: olm_pk_key_length())
        let result = plaintext.exposedValue.withUnsafeBytes { input in
            olm_pk_encrypt(
                encryption.pointer, input.baseAddress, input.count, &ciphertext, ciphertext.count, &mac, mac.count,
                &ephemeral, ephemeral.count, random.pointer, random.count)
        }
        try encryption.check(result)
        return BackupCiphertext(
            ciphertext: String(decoding: ciphertext, as: UTF8.self), mac: String(decoding: mac, as: UTF8.self),
            ephemeral: String(decoding: ephemeral, as: UTF8.self))
    }
}

/// An `OlmPkSigning`: an Ed25519 key pair from a 32-byte seed.
final class OlmPkSigningObject: SigningKey {
    let memory: OlmMemory
    let pointer: OpaquePointer
    let publicKey: String
    let seed: Secret<[UInt8]>

    init(seed: Secret<[UInt8]>) throws(CryptoDriverError) {
        guard seed.exposedValue.count == olm_pk_signing_seed_length() else { throw .malformedKey }
        let memory = OlmMemory(olm_pk_signing_size())
        let pointer: OpaquePointer = olm_pk_signing(memory.base)
        var output = [UInt8](repeating: 0, count: olm_pk_signing_public_key_length())
        let result = seed.exposedValue.withUnsafeBytes { seedBytes in
            olm_pk_signing_key_from_seed(pointer, &output, output.count, seedBytes.baseAddress, seedBytes.count)
        }
        if result == olm_error() {
            let code = olm_pk_signing_last_error_code(pointer)
            _ = olm_clear_pk_signing(pointer)
            throw OlmError.map(code)
        }
        self.memory = memory
        self.pointer = pointer
        publicKey = String(decoding: output, as: UTF8.self)
        self.seed = seed
    }

    deinit { _ = olm_clear_pk_signing(pointer) }

    func sign(_ message: [UInt8]) throws(CryptoDriverError) -> String {
        var output = [UInt8](repeating: 0, count: olm_pk_signature_length())
        var input = message
        defer { Memory.clear(&input) }
        let written = olm_pk_sign(pointer, &input, input.count, &output, output.count)
        guard written != olm_error() else { throw OlmError.map(olm_pk_signing_last_error_code(pointer)) }
        return String(decoding: output.prefix(written), as: UTF8.self)
    }
}

/// An `OlmPkDecryption`: the key backup's Curve25519 private key.
final class OlmPkDecryptionObject: BackupDecryptionKey {
    let memory: OlmMemory
    let pointer: OpaquePointer
    let publicKey: String
    let privateKey: Secret<[UInt8]>

    init(privateKey: Secret<[UInt8]>) throws(CryptoDriverError) {
        guard privateKey.exposedValue.count == olm_pk_private_key_length() else { throw .malformedKey }
        let memory = OlmMemory(olm_pk_decryption_size())
        let pointer: OpaquePointer = olm_pk_decryption(memory.base)
        var output = [UInt8](repeating: 0, count: olm_pk_key_length())
        let result = privateKey.exposedValue.withUnsafeBytes { keyBytes in
            olm_pk_key_from_private(pointer, &output, output.count, keyBytes.baseAddress, keyBytes.count)
        }
        if result == olm_error() {
            let code = olm_pk_decryption_last_error_code(pointer)
            _ = olm_clear_pk_decryption(pointer)
            throw OlmError.map(code)
        }
        self.memory = memory
        self.pointer = pointer
        publicKey = String(decoding: output, as: UTF8.self)
        self.privateKey = privateKey
    }

    deinit { _ = olm_clear_pk_decryption(pointer) }

    func decrypt(_ ciphertext: BackupCiphertext) throws(CryptoDriverError) -> Secret<[UInt8]> {
        _ = try Ed25519Check.keyBytes(ciphertext.ephemeral)
        _ = try Base64Check.bytes(ciphertext.mac, or: .badMessage)
        _ = try Base64Check.bytes(ciphertext.ciphertext, or: .badMessage)
        var ephemeral = Array(ciphertext.ephemeral.utf8)
        var mac = Array(ciphertext.mac.utf8)
        // libolm decodes the ciphertext in place.
        var input = Array(ciphertext.ciphertext.utf8)
        let maximum = olm_pk_max_plaintext_length(pointer, input.count)
        var output = [UInt8](repeating: 0, count: maximum)
        defer { Memory.clear(&output) }
        let written = olm_pk_decrypt(
            pointer, &ephemeral, ephemeral.count, &mac, mac.count, &input, input.count, &output, output.count)
        guard written != olm_error() else { throw OlmError.map(olm_pk_decryption_last_error_code(pointer)) }
        return Secret(Array(output.prefix(written)))
    }
}

/// An `OlmPkEncryption`, for one entry.
final class OlmPkEncryptionObject {
    let memory: OlmMemory
    let pointer: OpaquePointer

    init() {
        memory = OlmMemory(olm_pk_encryption_size())
        pointer = olm_pk_encryption(memory.base)
    }

    deinit { _ = olm_clear_pk_encryption(pointer) }

    func check(_ result: Int) throws(CryptoDriverError) {
        if result == olm_error() { throw OlmError.map(olm_pk_encryption_last_error_code(pointer)) }
    }
}
