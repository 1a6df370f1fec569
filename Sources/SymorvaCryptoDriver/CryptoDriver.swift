import SymorvaRuntime

/// The cryptographic primitives of Matrix end-to-end encryption, behind one protocol: an Olm
/// account, Olm sessions (`m.olm.v1.curve25519-aes-sha2`), Megolm outbound and inbound group
/// sessions (`m.megolm.v1.aes-sha2`), Ed25519 verification and SHA-256, Ed25519 signing keys
/// from a seed (cross-signing) and the key backup's public-key encryption
/// (`m.megolm_backup.v1.curve25519-aes-sha2`).
///
/// The SDK's implementation is `OlmCryptoDriver` (libolm, in `SymorvaCrypto`); another one
/// (vodozemac, say) can replace it by implementing these protocols: nothing above the driver
/// names libolm. `docs/security.md` says what a replacement must keep.
///
/// Everything a driver returns that holds key material is an object owned by one caller at a
/// time (not `Sendable`): a crypto actor creates, uses and pickles it. Pickles are encrypted
/// with a pickle key the caller keeps sealed at rest; keys and plaintexts travel in
/// ``/SymorvaRuntime/Secret`` wrappers.
package protocol CryptoDriver: Sendable {
    /// What the driver is, for diagnostics: `libolm 3.2.13`.
    var name: String { get }

    /// A new account with fresh identity keys.
    func newAccount() throws(CryptoDriverError) -> any CryptoAccount
    /// An account from its pickle.
    func account(pickle: [UInt8], key: Secret<[UInt8]>) throws(CryptoDriverError) -> any CryptoAccount
    /// An Olm session from its pickle.
    func session(pickle: [UInt8], key: Secret<[UInt8]>) throws(CryptoDriverError) -> any CryptoSession

    /// A new Megolm session for sending, at message index 0.
    func newOutboundGroupSession() throws(CryptoDriverError) -> any OutboundGroupSession
    /// An outbound Megolm session from its pickle.
    func outboundGroupSession(pickle: [UInt8], key: Secret<[UInt8]>) throws(CryptoDriverError)
        -> any OutboundGroupSession
    /// An inbound Megolm session from the `session_key` of an `m.room_key` event (signed by the
    /// sender's Megolm key, so it is authentic from its first index).
    func inboundGroupSession(sessionKey: Secret<String>) throws(CryptoDriverError) -> any InboundGroupSession
    /// An inbound Megolm session from an exported key (`m.forwarded_room_key`, key backups):
    /// not signed, so only as trustworthy as whoever forwarded it.
    func inboundGroupSession(exportedKey: Secret<String>) throws(CryptoDriverError) -> any InboundGroupSession
    /// An inbound Megolm session from its pickle.
    func inboundGroupSession(pickle: [UInt8], key: Secret<[UInt8]>) throws(CryptoDriverError)
        -> any InboundGroupSession

    /// Checks an Ed25519 signature of `message` by `key` (both unpadded base64). Malformed keys,
    /// malformed signatures and non-canonical signatures are refused before any verification
    /// (``Ed25519Check``).
    ///
    /// - Throws: `.malformedKey`, `.malformedSignature`, `.nonCanonicalSignature`, or
    ///   `.badSignature` when the signature does not verify.
    func verifyEd25519(signature: String, of message: [UInt8], key: String) throws(CryptoDriverError)

    /// The SHA-256 digest of `bytes`, unpadded base64 (the form Matrix uses).
    func sha256(_ bytes: [UInt8]) -> String

    /// An Ed25519 signing key (a cross-signing master, self-signing or user-signing key) from
    /// its 32-byte seed, the form secret storage keeps it in.
    ///
    /// - Throws: `.malformedKey` when the seed is not 32 bytes.
    func signingKey(seed: Secret<[UInt8]>) throws(CryptoDriverError) -> any SigningKey
    /// A new Ed25519 signing key from a fresh random seed.
    func newSigningKey() throws(CryptoDriverError) -> any SigningKey

    /// The key backup's Curve25519 decryption key from its 32-byte private key (the backup key
    /// secret storage keeps as `m.megolm_backup.v1`).
    ///
    /// - Throws: `.malformedKey` when the private key is not 32 bytes.
    func backupDecryptionKey(privateKey: Secret<[UInt8]>) throws(CryptoDriverError) -> any BackupDecryptionKey
    /// A new backup decryption key from fresh random bytes.
    func newBackupDecryptionKey() throws(CryptoDriverError) -> any BackupDecryptionKey
    /// Encrypts one backup entry (`m.megolm_backup.v1.curve25519-aes-sha2`) for the holder of the
    /// backup key `publicKey` (unpadded base64 Curve25519), with a fresh ephemeral key.
    ///
    /// - Throws: `.malformedKey` when `publicKey` is not the unpadded base64 of 32 bytes.
    func backupEncrypt(_ plaintext: Secret<[UInt8]>, for publicKey: String) throws(CryptoDriverError)
        -> BackupCiphertext

    /// A new SAS key agreement (interactive verification, `m.sas.v1`): a fresh Curve25519 key
    /// pair, one per flow.
    func newSAS() throws(CryptoDriverError) -> any SASSession
}

/// How a SAS MAC is written: the two MAC methods of `m.sas.v1` compute the same HMAC and differ
/// only in its base64.
package enum SASMACEncoding: Sendable, Hashable {
    /// `hkdf-hmac-sha256.v2`: correct unpadded base64.
    case fixedBase64
    /// `hkdf-hmac-sha256`: libolm's historical (incorrect) base64, for older clients.
    case legacyBase64
}

/// One side of a SAS key agreement: our ephemeral Curve25519 key pair and, once set, the
/// shared secret with the peer's key. Not thread-safe: its owner serialises access.
package protocol SASSession: AnyObject {
    /// Our public key, unpadded base64 (the `key` of `m.key.verification.key`).
    var publicKey: String { get }
    /// Whether the peer's key is set (bytes and MACs need it).
    var hasTheirKey: Bool { get }
    /// Sets the peer's public key (unpadded base64); the shared secret follows.
    ///
    /// - Throws: `.malformedKey` when it is not a Curve25519 key.
    func setTheirKey(_ key: String) throws(CryptoDriverError)
    /// `count` bytes from HKDF-SHA-256 of the shared secret with `info` (the SAS bytes).
    func generateBytes(info: String, count: Int) throws(CryptoDriverError) -> [UInt8]
    /// The MAC of `input` with the HKDF key for `info`, written as `encoding` says.
    func mac(_ input: String, info: String, encoding: SASMACEncoding) throws(CryptoDriverError) -> String
}

/// An Ed25519 key pair made from a seed: the private part of a cross-signing key.
package protocol SigningKey: AnyObject {
    /// The public key, unpadded base64 (the key ID part of `ed25519:<key>`).
    var publicKey: String { get }
    /// The 32-byte seed the key pair is made from: what secret storage keeps.
    var seed: Secret<[UInt8]> { get }
    /// Signs `message` (canonical JSON); unpadded base64 of the 64-byte signature.
    func sign(_ message: [UInt8]) throws(CryptoDriverError) -> String
}

/// The private key of a key backup (`m.megolm_backup.v1.curve25519-aes-sha2`): it reads
/// every entry encrypted for its public key.
package protocol BackupDecryptionKey: AnyObject {
    /// The Curve25519 public key, unpadded base64 (the backup version's `auth_data.public_key`).
    var publicKey: String { get }
    /// The 32-byte private key: what secret storage keeps as `m.megolm_backup.v1`.
    var privateKey: Secret<[UInt8]> { get }
    /// Decrypts one entry's `session_data`.
    ///
    /// - Throws: `.badMessageMAC` when the MAC does not verify (another key, or tampered with),
    ///   `.badMessage` or `.malformedKey` when a part is malformed.
    func decrypt(_ ciphertext: BackupCiphertext) throws(CryptoDriverError) -> Secret<[UInt8]>
}

/// A device's long-term Olm account: identity keys, one-time keys and the fallback key.
package protocol CryptoAccount: AnyObject {
    /// The account's Curve25519 and Ed25519 identity keys.
    var identityKeys: IdentityKeys { get }
    /// How many one-time keys the account can hold (libolm: 100).
    var maxOneTimeKeys: Int { get }

    /// Signs `message` with the Ed25519 identity key; unpadded base64.
    func sign(_ message: [UInt8]) -> String

    /// Generates `count` new one-time keys (the oldest are dropped beyond ``maxOneTimeKeys``).
    func generateOneTimeKeys(_ count: Int) throws(CryptoDriverError)
    /// The one-time keys not yet marked published: key ID → Curve25519 key.
    func unpublishedOneTimeKeys() throws(CryptoDriverError) -> [String: String]
    /// Generates a new fallback key (the previous one stays usable until the next rotation).
    func generateFallbackKey() throws(CryptoDriverError)
    /// The fallback key not yet marked published, if any: key ID → Curve25519 key.
    func unpublishedFallbackKey() throws(CryptoDriverError) -> [String: String]
    /// Marks the current one-time keys and fallback key as published.
    func markKeysAsPublished()
    /// Forgets the fallback key that the current one replaced: pre-key messages on it no longer
    /// start sessions. Called once messages sent before the new key was published have arrived.
    func forgetOldFallbackKey()

    /// A session to `identityKey` (a Curve25519 key) from one of its claimed one-time keys.
    func outboundSession(identityKey: String, oneTimeKey: String) throws(CryptoDriverError) -> any CryptoSession
    /// The session a pre-key message from `identityKey` starts; the one-time key it used is
    /// removed from the account.
    func inboundSession(identityKey: String, preKeyMessage: String) throws(CryptoDriverError) -> any CryptoSession

    /// The account, encrypted with `key`.
    func pickle(key: Secret<[UInt8]>) throws(CryptoDriverError) -> [UInt8]
}

/// An Olm session with one other device (a double ratchet).
package protocol CryptoSession: AnyObject {
    /// The session's ID (unpadded base64).
    var sessionID: String { get }
    /// Whether the session has received a message (a sender stops sending pre-key messages then).
    var hasReceivedMessage: Bool { get }

    /// Whether a pre-key message from `identityKey` belongs to this session.
    func matches(preKeyMessage: String, from identityKey: String) -> Bool
    /// Encrypts `plaintext`: a pre-key message (type 0) until the session has received one, else a
    /// normal message (type 1).
    func encrypt(_ plaintext: Secret<[UInt8]>) throws(CryptoDriverError) -> OlmMessage
    /// Decrypts a message of this session.
    func decrypt(_ message: OlmMessage) throws(CryptoDriverError) -> Secret<[UInt8]>

    /// The session, encrypted with `key`.
    func pickle(key: Secret<[UInt8]>) throws(CryptoDriverError) -> [UInt8]
}

/// A Megolm session this device sends with.
package protocol OutboundGroupSession: AnyObject {
    /// The session's ID (unpadded base64).
    var sessionID: String { get }
    /// The index the next message will have.
    var messageIndex: Int { get }
    /// The session key at the current index, to share in `m.room_key` (a ratchet state:
    /// whoever holds it reads every message from this index on).
    func sessionKey() throws(CryptoDriverError) -> Secret<String>
    /// Encrypts `plaintext` (the JSON of `{type, content, room_id}`); base64 ciphertext.
    func encrypt(_ plaintext: Secret<[UInt8]>) throws(CryptoDriverError) -> String
    /// The session, encrypted with `key`.
    func pickle(key: Secret<[UInt8]>) throws(CryptoDriverError) -> [UInt8]
}

/// A Megolm session this device reads with.
package protocol InboundGroupSession: AnyObject {
    /// The session's ID (unpadded base64).
    var sessionID: String { get }
    /// The first message index this session can decrypt.
    var firstKnownIndex: Int { get }
    /// Whether the session's key came signed from its sender (`m.room_key`), not forwarded.
    var isVerified: Bool { get }
    /// Decrypts a Megolm ciphertext; the plaintext and its message index (for replay checks).
    func decrypt(_ ciphertext: String) throws(CryptoDriverError) -> MegolmPlaintext
    /// The session exported from `index` (to forward it, or to back it up).
    func export(from index: Int) throws(CryptoDriverError) -> Secret<String>
    /// The session, encrypted with `key`.
    func pickle(key: Secret<[UInt8]>) throws(CryptoDriverError) -> [UInt8]
}
