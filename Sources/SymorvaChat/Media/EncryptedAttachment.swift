import Foundation
import SymorvaCipher
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The spec's `EncryptedFile` (version 2): how an attachment in an encrypted room is encrypted,
/// where it is, and the hash its ciphertext must have. It travels inside the encrypted event
/// (`file`, `info.thumbnail_file`), never in the clear. Its descriptions name the version only.
package struct EncryptedFile: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The ciphertext's `mxc://` URI.
    package var uri: MediaURI?
    /// The AES-256 key (32 bytes).
    package var key: [UInt8]
    /// The initial counter block (16 bytes, the low 64 bits zero).
    package var iv: [UInt8]
    /// SHA-256 of the ciphertext; empty while it is not known yet (a queued attachment's, whose
    /// hash is taken while it uploads, ``EncryptedAttachment/encrypt(_:to:hashing:)``).
    package var sha256: [UInt8]

    /// The JSON object of the spec (`v2`, a JWK `A256CTR` key, unpadded base64 IV and hash;
    /// `url` when the URI is known). Without a hash yet, `hashes` is left out: such an object is
    /// only ever stored (sealed), never sent.
    package var json: String {
        var jwk = [
            #""kty":"oct""#, #""key_ops":["encrypt","decrypt"]"#, #""alg":"A256CTR""#,
            #""k":"\#(Base64Text.encode(key, urlSafe: true))""#, #""ext":true"#,
        ]
        jwk.sort()
        var fields = [
            #""v":"v2""#, #""key":{\#(jwk.joined(separator: ","))}"#,
            #""iv":"\#(Base64Text.encode(iv, urlSafe: false))""#,
        ]
        if !sha256.isEmpty { fields.append(#""hashes":{"sha256":"\#(Base64Text.encode(sha256, urlSafe: false))"}"#) }
        if let uri { fields.append(#""url":"\#(uri.uriString)""#) }
        return "{" + fields.joined(separator: ",") + "}"
    }

    /// The object as it travels (read leniently; ``init(wire:)`` checks it).
    package struct Wire: Decodable, Sendable, Hashable {
        struct Key: Decodable, Sendable, Hashable {
            var alg: String?
            var k: String
        }
        var v: String?
        var url: String?
        var key: Key
        var iv: String
        var hashes: [String: String]?
    }

    /// Reads an `EncryptedFile` object; `nil` unless it is v2 with an `A256CTR` key of 32 bytes,
    /// a 16-byte IV and a 32-byte SHA-256.
    /// `hashPending` also reads one without `hashes` (a queued attachment's before its upload),
    /// with an empty ``sha256``.
    package init?(json bytes: [UInt8], hashPending: Bool = false) {
        guard let wire = try? JSONDecoder().decode(Wire.self, from: Data(bytes)) else { return nil }
        self.init(wire: wire, hashPending: hashPending)
    }

    /// The file a decoded object describes; `nil` unless it is v2 with an `A256CTR` key of 32
    /// bytes, a 16-byte IV and a 32-byte SHA-256 (or, with `hashPending`, no `hashes` at all).
    package init?(wire: Wire, hashPending: Bool = false) {
        guard wire.v == "v2", wire.key.alg == "A256CTR", let key = Base64Text.decode(wire.key.k), key.count == 32,
            let iv = Base64Text.decode(wire.iv), iv.count == 16
        else { return nil }
        var hash: [UInt8] = []
        if let hashes = wire.hashes {
            guard let stated = hashes["sha256"].flatMap(Base64Text.decode), stated.count == 32 else { return nil }
            hash = stated
        } else if !hashPending {
            return nil
        }
        self.init(uri: wire.url.flatMap(MediaURI.init), key: key, iv: iv, sha256: hash)
    }

    /// An encrypted file's description.
    package init(uri: MediaURI?, key: [UInt8], iv: [UInt8], sha256: [UInt8]) {
        self.uri = uri
        self.key = key
        self.iv = iv
        self.sha256 = sha256
    }

    /// The version only: the key must never be printed.
    package var description: String { "EncryptedFile(v2)" }
    /// The version only.
    package var customMirror: Mirror { Mirror(self, children: ["version": "v2"], displayStyle: .struct) }
}

/// Why an encrypted attachment could not be made or opened.
package enum EncryptedAttachmentError: Error, Sendable, Hashable {
    /// The source cannot be read.
    case unreadable
    /// The destination cannot be written.
    case unwritable
    /// The ciphertext's SHA-256 is not the one its `EncryptedFile` states: nothing was decrypted.
    case hashMismatch
    /// libcrypto failed.
    case cipher(CipherError)
}

/// Encrypts and decrypts attachment files for encrypted rooms, a chunk at a time (never the
/// whole file in memory): AES-256-CTR with a fresh random key and IV per file, and the SHA-256
/// of the ciphertext, checked before any byte is decrypted.
package enum EncryptedAttachment {
    static let chunkBytes = 1 << 20

    /// Encrypts `source` into `destination` (0600, synced) with a new key and IV and returns the
    /// `EncryptedFile` (no URI yet) and the ciphertext's size. Without `hashing`, the file's
    /// ``EncryptedFile/sha256`` is left empty: the send queue hashes the ciphertext while it
    /// uploads it (``HashingUpload``), one pass over the bytes fewer when the file is queued.
    package static func encrypt(
        _ source: String, to destination: String, hashing: Bool = true
    ) throws(EncryptedAttachmentError) -> (file: EncryptedFile, size: Int64) {
        let key: [UInt8]
        let iv: [UInt8]
        do {
            key = try SecureRandom.bytes(AES256CTR.keyLength)
            // v2: the high 64 bits random, the counter half zero.
            iv = try SecureRandom.bytes(8) + [UInt8](repeating: 0, count: 8)
        } catch {
            throw .cipher(error)
        }
        let size = try transform(source, to: destination, key: key, iv: iv, hashing: hashing ? .output : .none)
        return (EncryptedFile(uri: nil, key: key, iv: iv, sha256: size.hash), size.count)
    }

    /// Checks the SHA-256 of the ciphertext at `source` against `file`, then decrypts it into
    /// `destination` (0600). A mismatch is ``EncryptedAttachmentError/hashMismatch`` and writes
    /// nothing.
    package static func decrypt(
        _ source: String, to destination: String, file: EncryptedFile
    ) throws(EncryptedAttachmentError) -> Int64 {
        let hash = try sha256(of: source)
        guard ConstantTime.equal(hash, file.sha256) else { throw .hashMismatch }
        return try transform(source, to: destination, key: file.key, iv: file.iv, hashing: .none).count
    }

    /// Decrypts the send queue's own ciphertext copy at `source` into `destination` without a
    /// hash check: its hash is taken later, while it uploads. For the thumbnail step, whose
    /// `destination` is a file in memory (``AttachmentFiles/memoryFile()``), never on disk.
    package static func decryptOwnCopy(
        _ source: String, to destination: String, file: EncryptedFile
    ) throws(EncryptedAttachmentError) -> Int64 {
        try transform(source, to: destination, key: file.key, iv: file.iv, hashing: .none).count
    }

    /// The SHA-256 of the file at `path`.
    package static func sha256(of path: String) throws(EncryptedAttachmentError) -> [UInt8] {
        let input = open(path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw .unreadable }
        defer { close(input) }
        do {
            let digest = try SHA256Stream()
            var buffer = [UInt8](repeating: 0, count: chunkBytes)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else { throw EncryptedAttachmentError.unreadable }
                if count == 0 { break }
                try digest.update(Array(buffer[0..<count]))
            }
            return try digest.finish()
        } catch let error as EncryptedAttachmentError {
            throw error
        } catch let error as CipherError {
            throw .cipher(error)
        } catch {
            throw .unreadable
        }
    }

    private enum Hashing { case output, none }

    private static func transform(
        _ source: String, to destination: String, key: [UInt8], iv: [UInt8], hashing: Hashing
    ) throws(EncryptedAttachmentError) -> (count: Int64, hash: [UInt8]) {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw .unreadable }
        defer { close(input) }
        let output = open(destination, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw .unwritable }
        var failure: EncryptedAttachmentError?
        var total: Int64 = 0
        var hash: [UInt8] = []
        do throws(CipherError) {
            let stream = try AES256CTRStream(key: key, iv: iv)
            let digest = try SHA256Stream()
            var buffer = [UInt8](repeating: 0, count: chunkBytes)
            reading: while true {
                let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else {
                    failure = .unreadable
                    break
                }
                if count == 0 { break }
                // In place in the read buffer: no copy, no allocation per chunk.
                let failed = buffer.withUnsafeMutableBytes { raw -> CipherError? in
                    let chunk = UnsafeMutableRawBufferPointer(rebasing: raw[0..<count])
                    do throws(CipherError) {
                        try stream.updateInPlace(chunk)
                        if hashing == .output { try digest.update(UnsafeRawBufferPointer(chunk)) }
                    } catch {
                        return error
                    }
                    return nil
                }
                if let failed { throw failed }
                var offset = 0
                while offset < count {
                    let written = buffer.withUnsafeBytes { write(output, $0.baseAddress! + offset, count - offset) }
                    if written < 0 && errno == EINTR { continue }
                    guard written > 0 else {
                        failure = .unwritable
                        break reading
                    }
                    offset += written
                }
                total += Int64(count)
            }
            if failure == nil, hashing == .output { hash = try digest.finish() }
        } catch {
            failure = .cipher(error)
        }
        if failure == nil, fsync(output) != 0 { failure = .unwritable }
        close(output)
        if let failure {
            unlink(destination)
            throw failure
        }
        return (total, hash)
    }
}

/// Encrypts a file's bytes as the transport reads them for its upload (``HTTPBodyTransform``):
/// AES-256-CTR with a fresh key and IV, and the SHA-256 of the ciphertext taken on the way, so
/// the ciphertext is never written to disk. A rewind starts the cipher and the hash over from
/// the same key and IV: every attempt sends the same ciphertext. ``finish()`` gives the
/// `EncryptedFile` once the whole file went through.
final class EncryptingUpload: HTTPBodyTransform {
    private struct Streams {
        var cipher: AES256CTRStream?
        var digest: SHA256Stream?
        var bytes: Int64 = 0
    }

    let key: [UInt8]
    let iv: [UInt8]
    /// The file's size: the hash is final once this many bytes went through.
    let length: Int64
    // The transport calls from one thread at a time; the lock orders it with `finish()`.
    private let streams = Lock(Streams())

    /// A new key and IV (v2: the IV's counter half zero) for a file of `length` bytes.
    init(length: Int64) throws(EncryptedAttachmentError) {
        do {
            key = try SecureRandom.bytes(AES256CTR.keyLength)
            iv = try SecureRandom.bytes(8) + [UInt8](repeating: 0, count: 8)
        } catch {
            throw .cipher(error)
        }
        self.length = length
    }

    func restart() -> Bool {
        streams.withLock { streams in
            streams = Streams(cipher: try? AES256CTRStream(key: key, iv: iv), digest: try? SHA256Stream())
            return streams.cipher != nil && streams.digest != nil
        }
    }

    func transform(_ bytes: UnsafeMutableRawBufferPointer) -> Bool {
        guard !bytes.isEmpty else { return true }
        // The transport's read buffer, lent for this call only, goes into the lock as its address
        // (a pointer would tie the locked streams to the caller's region).
        let address = UInt(bitPattern: bytes.baseAddress)
        let count = bytes.count
        return streams.withLock { streams in
            guard let cipher = streams.cipher, let digest = streams.digest,
                let base = UnsafeMutableRawPointer(bitPattern: address)
            else { return false }
            let buffer = UnsafeMutableRawBufferPointer(start: base, count: count)
            // In place in that buffer: no copy, no allocation per chunk.
            do throws(CipherError) {
                try cipher.updateInPlace(buffer)
                try digest.update(UnsafeRawBufferPointer(buffer))
            } catch {
                return false
            }
            streams.bytes += Int64(count)
            return true
        }
    }

    /// The `EncryptedFile` (no URI) of what was sent, once the whole file went through.
    func finish() -> EncryptedFile? {
        streams.withLock { streams in
            guard streams.bytes == length, let hash = try? streams.digest?.finish() else { return nil }
            streams.digest = nil
            return EncryptedFile(uri: nil, key: key, iv: iv, sha256: hash)
        }
    }
}

/// Hashes a body file's bytes as the transport reads them for its upload, without changing them
/// (``HTTPBodyTransform``): the send queue's copy of an encrypted room's file is already the
/// ciphertext, and the SHA-256 its `EncryptedFile` states is taken on the way up, in place in
/// libcurl's read buffer. A rewind starts the hash over. ``finish()`` gives the hash once the
/// whole file went through.
final class HashingUpload: HTTPBodyTransform {
    private struct State {
        var digest: SHA256Stream?
        var bytes: Int64 = 0
    }

    /// The file's size: the hash is final once this many bytes went through.
    let length: Int64
    private let state = Lock(State())

    /// A hash of a body of `length` bytes.
    init(length: Int64) {
        self.length = length
    }

    func restart() -> Bool {
        state.withLock { state in
            state = State(digest: try? SHA256Stream())
            return state.digest != nil
        }
    }

    func transform(_ bytes: UnsafeMutableRawBufferPointer) -> Bool {
        guard !bytes.isEmpty else { return true }
        // As in ``EncryptingUpload``: the buffer goes into the lock as its address.
        let address = UInt(bitPattern: bytes.baseAddress)
        let count = bytes.count
        return state.withLock { state in
            guard let digest = state.digest, let base = UnsafeRawPointer(bitPattern: address) else { return false }
            do throws(CipherError) {
                try digest.update(UnsafeRawBufferPointer(start: base, count: count))
            } catch {
                return false
            }
            state.bytes += Int64(count)
            return true
        }
    }

    /// The SHA-256 of what was sent, once the whole file went through.
    func finish() -> [UInt8]? {
        state.withLock { state in
            guard state.bytes == length, let hash = try? state.digest?.finish() else { return nil }
            state.digest = nil
            return hash
        }
    }
}

/// Base64 as Matrix writes it: unpadded, standard or URL-safe alphabet.
enum Base64Text {
    static func encode(_ bytes: [UInt8], urlSafe: Bool) -> String {
        var text = Data(bytes).base64EncodedString()
        while text.hasSuffix("=") { text.removeLast() }
        if urlSafe { text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_") }
        return text
    }

    /// Decodes either alphabet, padded or not.
    static func decode(_ text: String) -> [UInt8]? {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map { [UInt8]($0) }
    }
}
