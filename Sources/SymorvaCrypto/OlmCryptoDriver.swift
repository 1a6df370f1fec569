import COlm
import CSodium
import SymorvaCryptoDriver
import SymorvaRuntime

/// The ``/SymorvaCryptoDriver/CryptoDriver`` implemented with libolm.
///
/// libolm is deprecated upstream; `docs/security.md` lists its known weaknesses and what this
/// driver does about each. Keys and signatures are checked (``/SymorvaCryptoDriver/Ed25519Check``
/// and libsodium's point validation) before libolm sees them; every buffer that held key material
/// or plaintext is cleared with `sodium_memzero` after use; every libolm object is cleared
/// (`olm_clear_*`) before its memory is freed.
package struct OlmCryptoDriver: CryptoDriver {
    /// The driver.
    package init() {}

    package var name: String { "libolm \(OlmLibrary.versionString)" }

    package func newAccount() throws(CryptoDriverError) -> any CryptoAccount {
        let account = OlmAccountObject()
        let random = try RandomBytes(olm_create_account_random_length(account.pointer))
        try account.check(olm_create_account(account.pointer, random.pointer, random.count))
        return account
    }

    package func account(pickle: [UInt8], key: Secret<[UInt8]>) throws(CryptoDriverError) -> any CryptoAccount {
        let account = OlmAccountObject()
        var input = pickle
        defer { Memory.clear(&input) }
        let result = key.exposedValue.withUnsafeBytes { key in
            olm_unpickle_account(account.pointer, key.baseAddress, key.count, &input, input.count)
        }
        try account.check(result, unpickling: true)
        return account
    }

    package func session(pickle: [UInt8], key: Secret<[UInt8]>) throws(CryptoDriverError) -> any CryptoSession {
        let session = OlmSessionObject()
        var input = pickle
        defer { Memory.clear(&input) }
        let result = key.exposedValue.withUnsafeBytes { key in
            olm_unpickle_session(session.pointer, key.baseAddress, key.count, &input, input.count)
        }
        try session.check(result, unpickling: true)
        return session
    }

    package func newOutboundGroupSession() throws(CryptoDriverError) -> any OutboundGroupSession {
        let session = OlmOutboundGroupObject()
        let random = try RandomBytes(olm_init_outbound_group_session_random_length(session.pointer))
        try session.check(olm_init_outbound_group_session(session.pointer, random.bytes, random.count))
        return session
    }

    package func outboundGroupSession(pickle: [UInt8], key: Secret<[UInt8]>) throws(CryptoDriverError)
        -> any OutboundGroupSession
    {
        let session = OlmOutboundGroupObject()
        var input = pickle
        defer { Memory.clear(&input) }
        let result = key.exposedValue.withUnsafeBytes { key in
            olm_unpickle_outbound_group_session(session.pointer, key.baseAddress, key.count, &input, input.count)
        }
        try session.check(result, unpickling: true)
        return session
    }

    package func inboundGroupSession(sessionKey: Secret<String>) throws(CryptoDriverError) -> any InboundGroupSession {
        var decoded = try Base64Check.bytes(sessionKey.exposedValue, or: .badSessionKey)
        Memory.clear(&decoded)
        let session = OlmInboundGroupObject()
        var input = Array(sessionKey.exposedValue.utf8)
        defer { Memory.clear(&input) }
        try session.check(olm_init_inbound_group_session(session.pointer, &input, input.count))
        return session
    }

    package func inboundGroupSession(exportedKey: Secret<String>) throws(CryptoDriverError) -> any InboundGroupSession {
        var decoded = try Base64Check.bytes(exportedKey.exposedValue, or: .badSessionKey)
        Memory.clear(&decoded)
        let session = OlmInboundGroupObject()
        var input = Array(exportedKey.exposedValue.utf8)
        defer { Memory.clear(&input) }
        try session.check(olm_import_inbound_group_session(session.pointer, &input, input.count))
        return session
    }

    package func inboundGroupSession(pickle: [UInt8], key: Secret<[UInt8]>) throws(CryptoDriverError)
        -> any InboundGroupSession
    {
        let session = OlmInboundGroupObject()
        var input = pickle
        defer { Memory.clear(&input) }
        let result = key.exposedValue.withUnsafeBytes { key in
            olm_unpickle_inbound_group_session(session.pointer, key.baseAddress, key.count, &input, input.count)
        }
        try session.check(result, unpickling: true)
        return session
    }

    package func verifyEd25519(signature: String, of message: [UInt8], key: String) throws(CryptoDriverError) {
        let keyBytes = try Ed25519Check.keyBytes(key)
        _ = try Ed25519Check.signatureBytes(signature)
        // Small-order and non-canonical point encodings never reach libolm.
        guard crypto_core_ed25519_is_valid_point(keyBytes) == 1 else { throw .malformedKey }
        let utility = OlmUtilityObject()
        var keyText = Array(key.utf8)
        var signatureText = Array(signature.utf8)
        var input = message
        defer { Memory.clear(&input) }
        let result = olm_ed25519_verify(
            utility.pointer, &keyText, keyText.count, &input, input.count, &signatureText, signatureText.count)
        guard result != olm_error() else {
            let code = olm_utility_last_error_code(utility.pointer)
            throw code == OLM_BAD_MESSAGE_MAC || code == OLM_BAD_SIGNATURE ? .badSignature : OlmError.map(code)
        }
    }

    package func sha256(_ bytes: [UInt8]) -> String {
        let utility = OlmUtilityObject()
        var output = [UInt8](repeating: 0, count: olm_sha256_length(utility.pointer))
        let written = bytes.withUnsafeBytes { input in
            olm_sha256(utility.pointer, input.baseAddress, input.count, &output, output.count)
        }
        return String(decoding: output.prefix(written == olm_error() ? 0 : written), as: UTF8.self)
    }
}

// MARK: - Objects

/// An `OlmAccount` in memory of its own, cleared and freed with the object.
final class OlmAccountObject: CryptoAccount {
    let memory: OlmMemory
    let pointer: OpaquePointer

    init() {
        memory = OlmMemory(olm_account_size())
        pointer = olm_account(memory.base)
    }

    deinit { _ = olm_clear_account(pointer) }

    func check(_ result: Int, unpickling: Bool = false) throws(CryptoDriverError) {
        if result == olm_error() { throw OlmError.map(olm_account_last_error_code(pointer), unpickling: unpickling) }
    }

    var identityKeys: IdentityKeys {
        var output = [UInt8](repeating: 0, count: olm_account_identity_keys_length(pointer))
        let written = olm_account_identity_keys(pointer, &output, output.count)
        guard written != olm_error(), let object = try? FlatJSON.strings(in: output.prefix(written)) else {
            return IdentityKeys(curve25519: "", ed25519: "")
        }
        return IdentityKeys(curve25519: object["curve25519"] ?? "", ed25519: object["ed25519"] ?? "")
    }

    var maxOneTimeKeys: Int { olm_account_max_number_of_one_time_keys(pointer) }

    func sign(_ message: [UInt8]) -> String {
        var output = [UInt8](repeating: 0, count: olm_account_signature_length(pointer))
        let written = message.withUnsafeBytes { input in
            olm_account_sign(pointer, input.baseAddress, input.count, &output, output.count)
        }
        return String(decoding: output.prefix(written == olm_error() ? 0 : written), as: UTF8.self)
    }

    func generateOneTimeKeys(_ count: Int) throws(CryptoDriverError) {
        let random = try RandomBytes(olm_account_generate_one_time_keys_random_length(pointer, count))
        try check(olm_account_generate_one_time_keys(pointer, count, random.pointer, random.count))
    }

    func unpublishedOneTimeKeys() throws(CryptoDriverError) -> [String: String] {
        var output = [UInt8](repeating: 0, count: olm_account_one_time_keys_length(pointer))
        let written = olm_account_one_time_keys(pointer, &output, output.count)
        try check(written)
        return try FlatJSON.nestedStrings(in: output.prefix(written), key: "curve25519")
    }

    func generateFallbackKey() throws(CryptoDriverError) {
        let random = try RandomBytes(olm_account_generate_fallback_key_random_length(pointer))
        try check(olm_account_generate_fallback_key(pointer, random.pointer, random.count))
    }

    func unpublishedFallbackKey() throws(CryptoDriverError) -> [String: String] {
        var output = [UInt8](repeating: 0, count: olm_account_unpublished_fallback_key_length(pointer))
        let written = olm_account_unpublished_fallback_key(pointer, &output, output.count)
        try check(written)
        return try FlatJSON.nestedStrings(in: output.prefix(written), key: "curve25519")
    }

    func markKeysAsPublished() { _ = olm_account_mark_keys_as_published(pointer) }

    func forgetOldFallbackKey() { olm_account_forget_old_fallback_key(pointer) }

    func outboundSession(identityKey: String, oneTimeKey: String) throws(CryptoDriverError) -> any CryptoSession {
        _ = try Ed25519Check.keyBytes(identityKey)
        _ = try Ed25519Check.keyBytes(oneTimeKey)
        let session = OlmSessionObject()
        let random = try RandomBytes(olm_create_outbound_session_random_length(session.pointer))
        var identity = Array(identityKey.utf8)
        var oneTime = Array(oneTimeKey.utf8)
        try session.check(
            olm_create_outbound_session(
                session.pointer, pointer, &identity, identity.count, &oneTime, oneTime.count, random.pointer,
                random.count))
        return session
    }

    func inboundSession(identityKey: String, preKeyMessage: String) throws(CryptoDriverError) -> any CryptoSession {
        _ = try Ed25519Check.keyBytes(identityKey)
        _ = try Base64Check.bytes(preKeyMessage, or: .badMessage)
        let session = OlmSessionObject()
        var identity = Array(identityKey.utf8)
        var message = Array(preKeyMessage.utf8)
        try session.check(
            olm_create_inbound_session_from(
                session.pointer, pointer, &identity, identity.count, &message, message.count))
        try check(olm_remove_one_time_keys(pointer, session.pointer))
        return session
    }

    func pickle(key: Secret<[UInt8]>) throws(CryptoDriverError) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: olm_pickle_account_length(pointer))
        let written = key.exposedValue.withUnsafeBytes { key in
            olm_pickle_account(pointer, key.baseAddress, key.count, &output, output.count)
        }
        try check(written)
        return Array(output.prefix(written))
    }
}

/// An `OlmSession`.
final class OlmSessionObject: CryptoSession {
    let memory: OlmMemory
    let pointer: OpaquePointer

    init() {
        memory = OlmMemory(olm_session_size())
        pointer = olm_session(memory.base)
    }

    deinit { _ = olm_clear_session(pointer) }

    func check(_ result: Int, unpickling: Bool = false) throws(CryptoDriverError) {
        if result == olm_error() { throw OlmError.map(olm_session_last_error_code(pointer), unpickling: unpickling) }
    }

    var sessionID: String {
        var output = [UInt8](repeating: 0, count: olm_session_id_length(pointer))
        let written = olm_session_id(pointer, &output, output.count)
        return String(decoding: output.prefix(written == olm_error() ? 0 : written), as: UTF8.self)
    }

    var hasReceivedMessage: Bool { olm_session_has_received_message(pointer) != 0 }

    func matches(preKeyMessage: String, from identityKey: String) -> Bool {
        guard (try? Ed25519Check.keyBytes(identityKey)) != nil,
            (try? Base64Check.bytes(preKeyMessage, or: .badMessage)) != nil
        else { return false }
        var identity = Array(identityKey.utf8)
        var message = Array(preKeyMessage.utf8)
        return olm_matches_inbound_session_from(pointer, &identity, identity.count, &message, message.count) == 1
    }

    func encrypt(_ plaintext: Secret<[UInt8]>) throws(CryptoDriverError) -> OlmMessage {
        let type = olm_encrypt_message_type(pointer)
        try check(type)
        let random = try RandomBytes(olm_encrypt_random_length(pointer))
        let length = plaintext.exposedValue.count
        var output = [UInt8](repeating: 0, count: olm_encrypt_message_length(pointer, length))
        let written = plaintext.exposedValue.withUnsafeBytes { input in
            olm_encrypt(pointer, input.baseAddress, input.count, random.pointer, random.count, &output, output.count)
        }
        try check(written)
        return OlmMessage(
            kind: type == 0 ? .preKey : .normal, body: String(decoding: output.prefix(written), as: UTF8.self))
    }

    func decrypt(_ message: OlmMessage) throws(CryptoDriverError) -> Secret<[UInt8]> {
        _ = try Base64Check.bytes(message.body, or: .badMessage)
        let type = message.kind.rawValue
        // The maximum length takes its own copy: libolm decodes its input in place.
        var probe = Array(message.body.utf8)
        let maximum = olm_decrypt_max_plaintext_length(pointer, type, &probe, probe.count)
        try check(maximum)
        var input = Array(message.body.utf8)
        var output = [UInt8](repeating: 0, count: maximum)
        defer { Memory.clear(&output) }
        let written = olm_decrypt(pointer, type, &input, input.count, &output, output.count)
        try check(written)
        return Secret(Array(output.prefix(written)))
    }

    func pickle(key: Secret<[UInt8]>) throws(CryptoDriverError) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: olm_pickle_session_length(pointer))
        let written = key.exposedValue.withUnsafeBytes { key in
            olm_pickle_session(pointer, key.baseAddress, key.count, &output, output.count)
        }
        try check(written)
        return Array(output.prefix(written))
    }
}

/// An `OlmOutboundGroupSession`.
final class OlmOutboundGroupObject: OutboundGroupSession {
    let memory: OlmMemory
    let pointer: OpaquePointer

    init() {
        memory = OlmMemory(olm_outbound_group_session_size())
        pointer = olm_outbound_group_session(memory.base)
    }

    deinit { _ = olm_clear_outbound_group_session(pointer) }

    func check(_ result: Int, unpickling: Bool = false) throws(CryptoDriverError) {
        if result == olm_error() {
            throw OlmError.map(olm_outbound_group_session_last_error_code(pointer), unpickling: unpickling)
        }
    }

    var sessionID: String {
        var output = [UInt8](repeating: 0, count: olm_outbound_group_session_id_length(pointer))
        let written = olm_outbound_group_session_id(pointer, &output, output.count)
        return String(decoding: output.prefix(written == olm_error() ? 0 : written), as: UTF8.self)
    }

    var messageIndex: Int { Int(olm_outbound_group_session_message_index(pointer)) }

    func sessionKey() throws(CryptoDriverError) -> Secret<String> {
        var output = [UInt8](repeating: 0, count: olm_outbound_group_session_key_length(pointer))
        defer { Memory.clear(&output) }
        let written = olm_outbound_group_session_key(pointer, &output, output.count)
        try check(written)
        return Secret(String(decoding: output.prefix(written), as: UTF8.self))
    }

    func encrypt(_ plaintext: Secret<[UInt8]>) throws(CryptoDriverError) -> String {
        let length = plaintext.exposedValue.count
        var output = [UInt8](repeating: 0, count: olm_group_encrypt_message_length(pointer, length))
        let written = plaintext.exposedValue.withUnsafeBytes { input in
            olm_group_encrypt(
                pointer, input.baseAddress?.assumingMemoryBound(to: UInt8.self), input.count, &output, output.count)
        }
        try check(written)
        return String(decoding: output.prefix(written), as: UTF8.self)
    }

    func pickle(key: Secret<[UInt8]>) throws(CryptoDriverError) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: olm_pickle_outbound_group_session_length(pointer))
        let written = key.exposedValue.withUnsafeBytes { key in
            olm_pickle_outbound_group_session(pointer, key.baseAddress, key.count, &output, output.count)
        }
        try check(written)
        return Array(output.prefix(written))
    }
}

/// An `OlmInboundGroupSession`.
final class OlmInboundGroupObject: InboundGroupSession {
    let memory: OlmMemory
    let pointer: OpaquePointer

    init() {
        memory = OlmMemory(olm_inbound_group_session_size())
        pointer = olm_inbound_group_session(memory.base)
    }

    deinit { _ = olm_clear_inbound_group_session(pointer) }

    func check(_ result: Int, unpickling: Bool = false) throws(CryptoDriverError) {
        if result == olm_error() {
            throw OlmError.map(olm_inbound_group_session_last_error_code(pointer), unpickling: unpickling)
        }
    }

    var sessionID: String {
        var output = [UInt8](repeating: 0, count: olm_inbound_group_session_id_length(pointer))
        let written = olm_inbound_group_session_id(pointer, &output, output.count)
        return String(decoding: output.prefix(written == olm_error() ? 0 : written), as: UTF8.self)
    }

    var firstKnownIndex: Int { Int(olm_inbound_group_session_first_known_index(pointer)) }

    var isVerified: Bool { olm_inbound_group_session_is_verified(pointer) != 0 }

    func decrypt(_ ciphertext: String) throws(CryptoDriverError) -> MegolmPlaintext {
        _ = try Base64Check.bytes(ciphertext, or: .badMessage)
        var probe = Array(ciphertext.utf8)
        let maximum = olm_group_decrypt_max_plaintext_length(pointer, &probe, probe.count)
        try check(maximum)
        var input = Array(ciphertext.utf8)
        var output = [UInt8](repeating: 0, count: maximum)
        defer { Memory.clear(&output) }
        var index: UInt32 = 0
        let written = olm_group_decrypt(pointer, &input, input.count, &output, output.count, &index)
        try check(written)
        return MegolmPlaintext(plaintext: Secret(Array(output.prefix(written))), messageIndex: Int(index))
    }

    func export(from index: Int) throws(CryptoDriverError) -> Secret<String> {
        var output = [UInt8](repeating: 0, count: olm_export_inbound_group_session_length(pointer))
        defer { Memory.clear(&output) }
        let written = olm_export_inbound_group_session(pointer, &output, output.count, UInt32(clamping: index))
        try check(written)
        return Secret(String(decoding: output.prefix(written), as: UTF8.self))
    }

    func pickle(key: Secret<[UInt8]>) throws(CryptoDriverError) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: olm_pickle_inbound_group_session_length(pointer))
        let written = key.exposedValue.withUnsafeBytes { key in
            olm_pickle_inbound_group_session(pointer, key.baseAddress, key.count, &output, output.count)
        }
        try check(written)
        return Array(output.prefix(written))
    }
}

/// An `OlmUtility`, for verification and hashing.
final class OlmUtilityObject {
    let memory: OlmMemory
    let pointer: OpaquePointer

    init() {
        memory = OlmMemory(olm_utility_size())
        pointer = olm_utility(memory.base)
    }

    deinit { _ = olm_clear_utility(pointer) }
}

// MARK: - Support

/// Memory for one libolm object, zeroed before it is freed.
final class OlmMemory {
    let base: UnsafeMutableRawPointer
    let count: Int

    init(_ count: Int) {
        self.count = count
        base = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: 16)
        base.initializeMemory(as: UInt8.self, repeating: 0, count: count)
    }

    deinit {
        sodium_memzero(base, count)
        base.deallocate()
    }
}

/// Random bytes from libsodium's generator, in memory of their own, cleared when released.
final class RandomBytes {
    let pointer: UnsafeMutableRawPointer
    let count: Int
    var bytes: UnsafeMutablePointer<UInt8> { pointer.assumingMemoryBound(to: UInt8.self) }

    init(_ count: Int) throws(CryptoDriverError) {
        do { try Sodium.ensureInitialized() } catch { throw .randomness }
        self.count = count
        pointer = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 16)
        randombytes_buf(pointer, count)
    }

    deinit {
        sodium_memzero(pointer, count)
        pointer.deallocate()
    }
}

/// Clearing buffers.
enum Memory {
    static func clear(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { sodium_memzero(base, buffer.count) }
        }
    }
}

/// libolm's error codes as driver errors.
enum OlmError {
    /// The error for `code`; when `unpickling`, a bad key is the pickle's (a wrong pickle key).
    static func map(_ code: OlmErrorCode, unpickling: Bool = false) -> CryptoDriverError {
        if unpickling && code == OLM_BAD_ACCOUNT_KEY { return .badPickle }
        return switch code {
        case OLM_BAD_MESSAGE_MAC: .badMessageMAC
        case OLM_BAD_MESSAGE_VERSION, OLM_BAD_MESSAGE_FORMAT, OLM_INVALID_BASE64: .badMessage
        case OLM_BAD_MESSAGE_KEY_ID: .unknownOneTimeKey
        case OLM_BAD_ACCOUNT_KEY: .malformedKey
        case OLM_UNKNOWN_PICKLE_VERSION, OLM_CORRUPTED_PICKLE, OLM_BAD_LEGACY_ACCOUNT_PICKLE, OLM_PICKLE_EXTRA_DATA:
            .badPickle
        case OLM_BAD_SESSION_KEY: .badSessionKey
        case OLM_UNKNOWN_MESSAGE_INDEX: .unknownMessageIndex
        case OLM_BAD_SIGNATURE: .badSignature
        case OLM_NOT_ENOUGH_RANDOM: .randomness
        default: .library(String(cString: _olm_error_to_string(code)))
        }
    }
}

/// The flat JSON objects libolm returns (`{"curve25519":"…","ed25519":"…"}` and
/// `{"curve25519":{"AAAAAQ":"…"}}`): string values without escapes, which is all libolm writes.
enum FlatJSON {
    /// The string members of a one-level object.
    static func strings(in bytes: some Collection<UInt8>) throws(CryptoDriverError) -> [String: String] {
        let bytes = Array(bytes)
        guard bytes.first == UInt8(ascii: "{"), bytes.last == UInt8(ascii: "}") else {
            throw .library("unexpected JSON")
        }
        // Between the braces: "k":"v" pairs; splitting on quotes puts keys and values at the
        // odd positions, separators (`:` and `,`) at the even ones.
        let parts = bytes.dropFirst().dropLast().split(separator: UInt8(ascii: "\""), omittingEmptySubsequences: false)
        var result: [String: String] = [:]
        var index = 1
        while index + 2 < parts.count {
            result[String(decoding: parts[index], as: UTF8.self)] = String(decoding: parts[index + 2], as: UTF8.self)
            index += 4
        }
        return result
    }

    /// The string members of the object under `key` of a two-level object.
    static func nestedStrings(in bytes: some Collection<UInt8>, key: String) throws(CryptoDriverError)
        -> [String: String]
    {
        let bytes = Array(bytes)
        let marker = Array("\"\(key)\":{".utf8)
        guard bytes.count >= marker.count,
            let start = (0...(bytes.count - marker.count)).first(where: {
                bytes[$0..<($0 + marker.count)].elementsEqual(marker)
            }),
            let end = bytes[(start + marker.count)...].firstIndex(of: UInt8(ascii: "}"))
        else { throw .library("unexpected JSON") }
        return try strings(in: bytes[(start + marker.count - 1)...end])
    }
}
