import CSodium
import SymorvaRuntime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Encrypts secrets at rest (access and refresh tokens, the Olm pickle key) with libsodium's
/// XChaCha20-Poly1305 IETF AEAD under a 32-byte key.
///
/// A sealed value is `version (1 byte) ‖ nonce (24 bytes) ‖ ciphertext ‖ tag (16 bytes)`. The
/// nonce is random per message (192 bits, so random nonces never collide in practice). The
/// associated data — the version byte plus the row's identity, e.g. ``associatedData(account:field:)`` —
/// is authenticated but not stored: a ciphertext copied into another row, another account or
/// another field fails to open with ``SecretsError/decryptionFailed``, as does any flipped bit.
package struct SecretBox: Sendable {
    /// The format version written as the first byte.
    package static let formatVersion: UInt8 = 1
    /// The key length in bytes.
    package static let keyLength = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
    private static let nonceLength = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    private static let tagLength = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)

    private let key: Secret<[UInt8]>

    /// A box under `key`.
    ///
    /// - Throws: `.invalidKey` unless the key is 32 bytes; `.cryptoUnavailable` when libsodium
    ///   cannot start.
    package init(key: Secret<[UInt8]>) throws(SecretsError) {
        try Sodium.ensureInitialized()
        guard key.exposedValue.count == Self.keyLength else { throw .invalidKey(length: key.exposedValue.count) }
        self.key = key
    }

    /// A fresh random key.
    package static func generateKey() throws(SecretsError) -> Secret<[UInt8]> {
        try Sodium.ensureInitialized()
        var key = [UInt8](repeating: 0, count: keyLength)
        crypto_aead_xchacha20poly1305_ietf_keygen(&key)
        return Secret(key)
    }

    /// Associated data naming one field of one account's row; lengths are encoded so that
    /// different (account, field) pairs never produce the same bytes.
    package static func associatedData(account: String, field: String) -> [UInt8] {
        var data = Array("symorva.secret".utf8)
        for part in [account, field] {
            let bytes = Array(part.utf8)
            withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { data.append(contentsOf: $0) }
            data.append(contentsOf: bytes)
        }
        return data
    }

    /// Encrypts `plaintext`, binding it to `associatedData`.
    package func seal(_ plaintext: Secret<[UInt8]>, associatedData: [UInt8]) throws(SecretsError) -> [UInt8] {
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
    package func seal(_ plaintext: Secret<String>, associatedData: [UInt8]) throws(SecretsError) -> [UInt8] {
        try seal(plaintext.map { Array($0.utf8) }, associatedData: associatedData)
    }

    /// Decrypts what ``seal(_:associatedData:)-(Secret<[UInt8]>,_)`` produced under the same key and associated data.
    ///
    /// - Throws: `.decryptionFailed` for a wrong version, a short input, a wrong key, other
    ///   associated data, or any modification.
    package func open(_ sealed: [UInt8], associatedData: [UInt8]) throws(SecretsError) -> Secret<[UInt8]> {
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
    package func openString(_ sealed: [UInt8], associatedData: [UInt8]) throws(SecretsError) -> Secret<String> {
        let bytes = try open(sealed, associatedData: associatedData).exposedValue
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .decryptionFailed }
        return Secret(text)
    }
}

/// `sodium_init`, once per process: the one place the SDK starts libsodium.
enum Sodium {
    /// Whether libsodium is ready.
    static let isReady: Bool = sodium_init() >= 0

    static func ensureInitialized() throws(SecretsError) {
        guard isReady else { throw .cryptoUnavailable }
    }
}

/// Why sealing or opening a secret at rest, or reading its key, failed.
///
/// No case carries key material, a path or a plaintext: every case is safe to log.
public enum SecretsError: Error, Sendable, Hashable, CustomStringConvertible, LogSafe {
    /// Sealed data failed authentication: tampered, truncated, wrong key or moved between rows.
    case decryptionFailed
    /// A key does not have the required length (bytes given).
    case invalidKey(length: Int)
    /// libsodium could not be initialised or failed to encrypt.
    case cryptoUnavailable
    /// The key file's permissions let other users read or write it (the file's mode).
    case keyFilePermissions(mode: UInt32)
    /// The key file does not hold exactly one key (its size in bytes).
    case keyFileSize(bytes: Int)
    /// The key file is not a regular file owned by this user.
    case keyFileNotRegular
    /// A file-system call on the key file or its folder failed (`errno`).
    case keyFileIO(errno: Int32)

    /// The case and its codes.
    public var description: String {
        switch self {
        case .decryptionFailed: "decryptionFailed"
        case .invalidKey(let length): "invalidKey(length: \(length))"
        case .cryptoUnavailable: "cryptoUnavailable"
        case .keyFilePermissions(let mode): "keyFilePermissions(mode: \(String(mode, radix: 8)))"
        case .keyFileSize(let bytes): "keyFileSize(bytes: \(bytes))"
        case .keyFileNotRegular: "keyFileNotRegular"
        case .keyFileIO(let errno): "keyFileIO(errno: \(errno))"
        }
    }

    /// Same as ``description``: no case carries user data.
    public var logDescription: String { description }
}

/// Supplies the 32-byte key that protects an account's secrets at rest (`SecretBox`).
///
/// Linux uses ``FileKeyProvider``; Apple platforms may provide a Keychain-backed one.
public protocol KeyProvider: Sendable {
    /// The account's key, created on first use.
    func key(for account: String) throws(SecretsError) -> Secret<[UInt8]>

    /// Forgets the account's key when its data is wiped. A missing key is not an error.
    func removeKey(for account: String) throws(SecretsError)
}

extension KeyProvider {
    /// Keeps the key: providers whose keys cost nothing to keep need not implement removal.
    public func removeKey(for account: String) throws(SecretsError) {}
}

/// Keeps one key per account in a file readable by the user only (mode 0600), in a folder of
/// the SDK's data directory (created 0700).
///
/// A missing key file is created atomically: the key is written to a private temporary file
/// that is then hard-linked into place, so a concurrent creator never sees half a key and the
/// first creator wins. An existing file is refused — never silently replaced — if it is not a
/// regular file owned by the user, if group or others have any permission on it, or if it
/// does not hold exactly 32 bytes: losing the key means losing the secrets, so a human decides.
public struct FileKeyProvider: KeyProvider {
    /// The folder holding the key files.
    public let directory: String

    /// A provider storing keys in `directory`.
    public init(directory: String) { self.directory = directory }

    /// The account's key, read from its file or created there.
    public func key(for account: String) throws(SecretsError) -> Secret<[UInt8]> {
        try Sodium.ensureInitialized()
        try Self.makeDirectory(directory)
        let path = keyPath(for: account)
        if let key = try Self.readKey(path) { return key }
        let key = try SecretBox.generateKey()
        try Self.createKey(path, key: key)
        // Read back: if another process won the race, its key is the one on disk.
        guard let stored = try Self.readKey(path) else { throw .keyFileIO(errno: ENOENT) }
        return stored
    }

    /// Deletes the account's key file; a missing file is not an error.
    public func removeKey(for account: String) throws(SecretsError) {
        if unlink(keyPath(for: account)) != 0 && errno != ENOENT { throw .keyFileIO(errno: errno) }
    }

    /// The key file for `account`: a hash of the account ID, so that any ID makes a safe name.
    public func keyPath(for account: String) -> String {
        var digest = [UInt8](repeating: 0, count: 16)
        let input = Array(account.utf8)
        crypto_generichash(&digest, digest.count, input, UInt64(input.count), nil, 0)
        let hex = digest.map { byte in
            let text = String(byte, radix: 16)
            return text.count == 1 ? "0" + text : text
        }
        return directory + "/account-" + hex.joined() + ".key"
    }

    // MARK: Files

    private static func readKey(_ path: String) throws(SecretsError) -> Secret<[UInt8]>? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw errno == ELOOP ? .keyFileNotRegular : .keyFileIO(errno: errno)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .keyFileIO(errno: errno) }
        guard (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid() else { throw .keyFileNotRegular }
        let permissions = UInt32(info.st_mode & 0o777)
        guard permissions & 0o077 == 0 else { throw .keyFilePermissions(mode: permissions) }
        guard Int(info.st_size) == SecretBox.keyLength else { throw .keyFileSize(bytes: Int(info.st_size)) }
        var key = [UInt8](repeating: 0, count: SecretBox.keyLength)
        let count = key.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count == SecretBox.keyLength else { throw .keyFileSize(bytes: max(0, count)) }
        return Secret(key)
    }

    private static func createKey(_ path: String, key: Secret<[UInt8]>) throws(SecretsError) {
        var suffix = [UInt8](repeating: 0, count: 8)
        randombytes_buf(&suffix, suffix.count)
        let temporary = path + ".tmp-" + suffix.map { String($0 % 36, radix: 36) }.joined()
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .keyFileIO(errno: errno) }
        defer { unlink(temporary) }
        let written = key.exposedValue.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fchmod(fd, 0o600) == 0 && fsync(fd) == 0
        let failure = errno
        close(fd)
        guard written == SecretBox.keyLength, synced else { throw .keyFileIO(errno: failure) }
        // link() never replaces an existing file: if another creator got there first, keep theirs.
        if link(temporary, path) != 0 && errno != EEXIST { throw .keyFileIO(errno: errno) }
        syncDirectory(of: path)
    }

    private static func makeDirectory(_ directory: String) throws(SecretsError) {
        var prefix = directory.hasPrefix("/") ? "" : "."
        for component in directory.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST { throw .keyFileIO(errno: errno) }
        }
    }

    private static func syncDirectory(of path: String) {
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        let fd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }
}
