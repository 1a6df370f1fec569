import CLibcrypto

/// SHA-256 (FIPS 180-4): the hash of encrypted attachments' ciphertext and of the recovery
/// schemes' inputs.
package enum SHA256Digest {
    /// The digest length in bytes.
    package static let length = 32

    /// The digest of `data`.
    package static func hash(_ data: [UInt8]) throws(CipherError) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: length)
        var written: UInt32 = 0
        guard EVP_Digest(data, data.count, &output, &written, EVP_sha256(), nil) == 1, written == length else {
            throw .library(operation: "EVP_Digest")
        }
        return output
    }
}

/// SHA-256 over data that arrives in pieces (an attachment's ciphertext as it streams).
///
/// Not `Sendable`: one hasher belongs to one task.
package final class SHA256Stream {
    private let context: OpaquePointer
    private var finished = false

    /// A hasher with nothing hashed yet.
    package init() throws(CipherError) {
        guard let context = EVP_MD_CTX_new() else { throw .library(operation: "EVP_MD_CTX_new") }
        guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else {
            EVP_MD_CTX_free(context)
            throw .library(operation: "EVP_DigestInit_ex")
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Adds `data` to the hash.
    package func update(_ data: [UInt8]) throws(CipherError) {
        guard !finished else { throw .library(operation: "EVP_DigestUpdate after final") }
        guard EVP_DigestUpdate(context, data, data.count) == 1 else { throw .library(operation: "EVP_DigestUpdate") }
    }

    /// Adds the bytes at `buffer` to the hash, without copying them.
    package func update(_ buffer: UnsafeRawBufferPointer) throws(CipherError) {
        guard !finished else { throw .library(operation: "EVP_DigestUpdate after final") }
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
        guard EVP_DigestUpdate(context, base, buffer.count) == 1 else { throw .library(operation: "EVP_DigestUpdate") }
    }

    /// The digest of everything added; the hasher takes no more data afterwards.
    package func finish() throws(CipherError) -> [UInt8] {
        guard !finished else { throw .library(operation: "EVP_DigestFinal_ex twice") }
        finished = true
        var output = [UInt8](repeating: 0, count: SHA256Digest.length)
        var written: UInt32 = 0
        guard EVP_DigestFinal_ex(context, &output, &written) == 1, written == SHA256Digest.length else {
            throw .library(operation: "EVP_DigestFinal_ex")
        }
        return output
    }
}

/// HMAC-SHA-256 (RFC 2104): the MAC of secret storage and of key backup entries.
package enum HMACSHA256 {
    /// The MAC length in bytes.
    package static let length = 32

    /// The MAC of `data` under `key` (any key length; longer than 64 bytes is hashed first).
    package static func authenticate(_ data: [UInt8], key: [UInt8]) throws(CipherError) -> [UInt8] {
        guard key.count <= Int(Int32.max) else { throw .inputTooLong(key.count) }
        var output = [UInt8](repeating: 0, count: length)
        var written: UInt32 = 0
        // An empty key still needs a valid pointer: libcrypto rejects NULL with length 0.
        let result = withNonNullBytes(key) { keyPointer in
            HMAC(EVP_sha256(), keyPointer, Int32(key.count), data, data.count, &output, &written)
        }
        guard result != nil, written == length else { throw .library(operation: "HMAC") }
        return output
    }

    /// Whether `mac` is the MAC of `data` under `key`, compared in constant time.
    package static func verify(_ mac: [UInt8], of data: [UInt8], key: [UInt8]) throws(CipherError) -> Bool {
        let expected = try authenticate(data, key: key)
        return ConstantTime.equal(mac, expected)
    }
}

/// Comparison whose time does not depend on where two byte strings differ.
package enum ConstantTime {
    /// Whether `a` and `b` are equal (`CRYPTO_memcmp`; the lengths are not secret).
    package static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        guard !a.isEmpty else { return true }
        return CRYPTO_memcmp(a, b, a.count) == 0
    }
}

/// `body` with a pointer to `bytes`, never NULL (a one-byte stand-in when `bytes` is empty).
func withNonNullBytes<R>(_ bytes: [UInt8], _ body: (UnsafePointer<UInt8>) -> R) -> R {
    let storage = bytes.isEmpty ? [0] : bytes
    return storage.withUnsafeBufferPointer { body($0.baseAddress!) }
}
