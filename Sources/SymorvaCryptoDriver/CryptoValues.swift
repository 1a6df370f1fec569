import SymorvaRuntime

/// A device's identity keys, unpadded base64.
public struct IdentityKeys: Sendable, Hashable {
    /// The Curve25519 key (Olm sessions are set up with it; `sender_key` of events).
    public var curve25519: String
    /// The Ed25519 key (signs the device keys and the one-time keys).
    public var ed25519: String

    /// Identity keys as given.
    public init(curve25519: String, ed25519: String) {
        self.curve25519 = curve25519
        self.ed25519 = ed25519
    }
}

/// An Olm message as it travels in `m.room.encrypted` to-device content.
package struct OlmMessage: Sendable, Hashable {
    /// The message type: a pre-key message (which starts a session) or a normal one.
    package enum Kind: Int, Sendable, Hashable {
        /// Type 0: carries what the receiver needs to create the session.
        case preKey = 0
        /// Type 1: a message of an established session.
        case normal = 1
    }

    /// The type.
    package var kind: Kind
    /// The ciphertext, base64.
    package var body: String

    /// A message as given.
    package init(kind: Kind, body: String) {
        self.kind = kind
        self.body = body
    }
}

/// A decrypted Megolm message.
package struct MegolmPlaintext: Sendable {
    /// The plaintext JSON (`{type, content, room_id}`).
    package var plaintext: Secret<[UInt8]>
    /// The message's index in its session: the same index for two different events is a replay.
    package var messageIndex: Int

    /// A plaintext and its index.
    package init(plaintext: Secret<[UInt8]>, messageIndex: Int) {
        self.plaintext = plaintext
        self.messageIndex = messageIndex
    }
}

/// One key backup entry's encrypted `session_data` (`m.megolm_backup.v1.curve25519-aes-sha2`),
/// each part unpadded base64 as the server stores it.
package struct BackupCiphertext: Sendable, Hashable {
    /// The AES-256-CBC ciphertext of the session's JSON.
    package var ciphertext: String
    /// The first 8 bytes of the HMAC-SHA-256 (libolm's computation, which the spec keeps).
    package var mac: String
    /// The sender's ephemeral Curve25519 public key.
    package var ephemeral: String

    /// A ciphertext as given.
    package init(ciphertext: String, mac: String, ephemeral: String) {
        self.ciphertext = ciphertext
        self.mac = mac
        self.ephemeral = ephemeral
    }
}

/// Why a crypto driver refused.
package enum CryptoDriverError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A key is not the unpadded base64 of 32 bytes (or the library refused it as a key).
    case malformedKey
    /// A signature is not the unpadded base64 of 64 bytes.
    case malformedSignature
    /// A signature's scalar is not reduced (S ≥ L): a malleated signature (CVE-2024-45193).
    case nonCanonicalSignature
    /// The signature does not verify.
    case badSignature
    /// A message or ciphertext is not one the session can read (corrupt, wrong session, wrong type).
    case badMessage
    /// The message's MAC did not verify: tampered with, or not for this session.
    case badMessageMAC
    /// A pre-key message names a one-time key this account does not hold (used or never made).
    case unknownOneTimeKey
    /// The Megolm session does not have the key for this message index (it starts later).
    case unknownMessageIndex
    /// A session key or exported key is malformed.
    case badSessionKey
    /// A pickle is corrupt, or was pickled with another key.
    case badPickle
    /// The system's random source failed.
    case randomness
    /// Another error the library reported, by its name.
    case library(String)

    package var description: String {
        switch self {
        case .malformedKey: "malformed key"
        case .malformedSignature: "malformed signature"
        case .nonCanonicalSignature: "non-canonical signature"
        case .badSignature: "bad signature"
        case .badMessage: "bad message"
        case .badMessageMAC: "bad message MAC"
        case .unknownOneTimeKey: "unknown one-time key"
        case .unknownMessageIndex: "unknown message index"
        case .badSessionKey: "bad session key"
        case .badPickle: "bad pickle"
        case .randomness: "random source failed"
        case .library(let name): "crypto library error \(name)"
        }
    }
}
