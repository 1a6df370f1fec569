import CLibcrypto

/// HKDF with SHA-256 (RFC 5869): secret storage derives its AES and HMAC keys from the storage
/// key with it (salt: 32 zero bytes, info: the secret's name).
package enum HKDFSHA256 {
    /// The largest output RFC 5869 allows for SHA-256 (255 blocks of 32 bytes).
    package static let maximumLength = 255 * 32

    /// `length` bytes of output keying material from `inputKey`, `salt` and `info`.
    ///
    /// An empty salt is the RFC's default (a block of zeros); an empty `info` is allowed.
    package static func derive(
        inputKey: [UInt8], salt: [UInt8], info: [UInt8], length: Int
    ) throws(CipherError) -> [UInt8] {
        guard length >= 1, length <= maximumLength else { throw .invalidOutputLength(length) }
        for input in [inputKey, salt, info] where input.count > Int(Int32.max) {
            throw .inputTooLong(input.count)
        }
        guard let context = EVP_PKEY_CTX_new_id(NID_hkdf, nil) else {
            throw .library(operation: "EVP_PKEY_CTX_new_id")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_derive_init(context) == 1 else { throw .library(operation: "EVP_PKEY_derive_init") }
        guard EVP_PKEY_CTX_set_hkdf_md(context, EVP_sha256()) == 1 else {
            throw .library(operation: "EVP_PKEY_CTX_set_hkdf_md")
        }
        if !salt.isEmpty {
            guard EVP_PKEY_CTX_set1_hkdf_salt(context, salt, Int32(salt.count)) == 1 else {
                throw .library(operation: "EVP_PKEY_CTX_set1_hkdf_salt")
            }
        }
        let keySet = withNonNullBytes(inputKey) { EVP_PKEY_CTX_set1_hkdf_key(context, $0, Int32(inputKey.count)) }
        guard keySet == 1 else { throw .library(operation: "EVP_PKEY_CTX_set1_hkdf_key") }
        if !info.isEmpty {
            guard EVP_PKEY_CTX_add1_hkdf_info(context, info, Int32(info.count)) == 1 else {
                throw .library(operation: "EVP_PKEY_CTX_add1_hkdf_info")
            }
        }
        var output = [UInt8](repeating: 0, count: length)
        var written = length
        guard EVP_PKEY_derive(context, &output, &written) == 1, written == length else {
            throw .library(operation: "EVP_PKEY_derive")
        }
        return output
    }
}

/// PBKDF2 with HMAC-SHA-512 (RFC 8018): the recovery passphrase's key derivation
/// (`m.pbkdf2`, with the salt and iteration count stored in the key's account data).
package enum PBKDF2SHA512 {
    /// `length` bytes derived from `password` and `salt` with `iterations` rounds.
    package static func derive(
        password: [UInt8], salt: [UInt8], iterations: Int, length: Int
    ) throws(CipherError) -> [UInt8] {
        guard iterations >= 1, iterations <= Int(Int32.max) else { throw .invalidIterationCount(iterations) }
        guard length >= 1, length <= Int(Int32.max) else { throw .invalidOutputLength(length) }
        for input in [password, salt] where input.count > Int(Int32.max) {
            throw .inputTooLong(input.count)
        }
        var output = [UInt8](repeating: 0, count: length)
        let code = withNonNullBytes(password) { passwordPointer in
            withNonNullBytes(salt) { saltPointer in
                passwordPointer.withMemoryRebound(to: CChar.self, capacity: max(password.count, 1)) { passwordChars in
                    PKCS5_PBKDF2_HMAC(
                        passwordChars, Int32(password.count), saltPointer, Int32(salt.count), Int32(iterations),
                        EVP_sha512(), Int32(length), &output)
                }
            }
        }
        guard code == 1 else { throw .library(operation: "PKCS5_PBKDF2_HMAC") }
        return output
    }
}

/// Random bytes from libcrypto's CSPRNG (`RAND_bytes`): attachment keys and IVs, secret
/// storage IVs, recovery keys.
package enum SecureRandom {
    /// `count` random bytes.
    package static func bytes(_ count: Int) throws(CipherError) -> [UInt8] {
        guard count >= 0, count <= Int(Int32.max) else { throw .invalidOutputLength(count) }
        guard count > 0 else { return [] }
        var output = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&output, Int32(count)) == 1 else { throw .library(operation: "RAND_bytes") }
        return output
    }
}
