import CLibcrypto

/// AES-256 in counter mode (NIST SP 800-38A), the cipher of secret storage
/// (`m.secret_storage.v1.aes-hmac-sha2`), key backup's MAC'd payloads and encrypted attachments.
///
/// The 16-byte IV is the initial counter block; the whole block is incremented as one 128-bit
/// big-endian integer, as the Matrix specification requires. Encryption and decryption are the
/// same operation. CTR gives no integrity: callers pair it with `HMACSHA256` (or a SHA-256 of
/// the ciphertext) and check that first.
package enum AES256CTR {
    /// The key length in bytes.
    package static let keyLength = 32
    /// The IV (initial counter block) length in bytes.
    package static let ivLength = 16

    /// Encrypts (or decrypts) `data` in one call.
    package static func apply(key: [UInt8], iv: [UInt8], to data: [UInt8]) throws(CipherError) -> [UInt8] {
        let stream = try AES256CTRStream(key: key, iv: iv)
        return try stream.update(data)
    }
}

/// AES-256-CTR over data that arrives in pieces (an attachment streamed from or to disk): each
/// `update` continues the key stream where the previous one ended, at any byte offset.
///
/// Not `Sendable`: one stream belongs to one task.
package final class AES256CTRStream {
    private let context: OpaquePointer

    /// Starts a key stream at counter block `iv`.
    package init(key: [UInt8], iv: [UInt8]) throws(CipherError) {
        guard key.count == AES256CTR.keyLength else {
            throw .invalidKeyLength(expected: AES256CTR.keyLength, actual: key.count)
        }
        guard iv.count == AES256CTR.ivLength else {
            throw .invalidIVLength(expected: AES256CTR.ivLength, actual: iv.count)
        }
        guard let context = EVP_CIPHER_CTX_new() else { throw .library(operation: "EVP_CIPHER_CTX_new") }
        guard EVP_EncryptInit_ex(context, EVP_aes_256_ctr(), nil, key, iv) == 1 else {
            EVP_CIPHER_CTX_free(context)
            throw .library(operation: "EVP_EncryptInit_ex")
        }
        self.context = context
    }

    deinit { EVP_CIPHER_CTX_free(context) }

    /// The next `data.count` bytes of the key stream XORed with `data`.
    package func update(_ data: [UInt8]) throws(CipherError) -> [UInt8] {
        guard !data.isEmpty else { return [] }
        guard data.count <= Int(Int32.max) else { throw .inputTooLong(data.count) }
        var output = [UInt8](repeating: 0, count: data.count)
        var written: Int32 = 0
        let code = EVP_EncryptUpdate(context, &output, &written, data, Int32(data.count))
        guard code == 1, Int(written) == data.count else { throw .library(operation: "EVP_EncryptUpdate") }
        return output
    }

    /// XORs the next `buffer.count` bytes of the key stream into `buffer` itself (libcrypto
    /// allows a cipher's input and output to be the same memory): no copy, no allocation, for a
    /// chunk encrypted where it lies (an upload's read buffer).
    package func updateInPlace(_ buffer: UnsafeMutableRawBufferPointer) throws(CipherError) {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
        guard buffer.count <= Int(Int32.max) else { throw .inputTooLong(buffer.count) }
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        var written: Int32 = 0
        let code = EVP_EncryptUpdate(context, bytes, &written, bytes, Int32(buffer.count))
        guard code == 1, Int(written) == buffer.count else { throw .library(operation: "EVP_EncryptUpdate") }
    }
}
