import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Where the account's server-side key backup is (`AccountCrypto.backupState`).
public enum KeyBackupState: Sendable, Equatable, CaseNamed {
    /// No backup is in use on this device: none was created or enabled, or the one in use was
    /// deleted or replaced on the server (``KeyBackupStatus/stopReason`` says which).
    case disabled
    /// Room keys wait to be uploaded: how many.
    case uploading(remaining: Int)
    /// Every room key this device holds is in the backup.
    case upToDate
    /// A restore is running: how many of the backup's keys are imported, of how many.
    case restoring(imported: Int, total: Int)
}

/// What `backup status` shows: the backup version in use and how many keys wait.
public struct KeyBackupStatus: Sendable, Equatable {
    /// The backup version this device uploads to, if any.
    public var version: String?
    /// Room keys stored and not yet in the backup.
    public var waiting: Int
    /// Why this device stopped using its backup, if it did.
    public var stopReason: KeyBackupStopReason?
}

/// Why this device stopped uploading to its backup version.
public enum KeyBackupStopReason: String, Sendable, Hashable, CaseNamed {
    /// The version is gone from the server and none replaced it.
    case deleted
    /// Another device made a newer version the current one (`M_WRONG_ROOM_KEYS_VERSION`).
    case replaced

    public var caseNameLiteral: StaticString? {
        switch self {
        case .deleted: "deleted"
        case .replaced: "replaced"
        }
    }
}

/// Why a key backup operation failed.
public enum KeyBackupError: Error, Sendable, Hashable, CaseNamed {
    /// The server has no backup (or not the version asked for): `M_NOT_FOUND`.
    case notFound
    /// The version named is no longer the current one: `M_WRONG_ROOM_KEYS_VERSION`.
    case wrongVersion
    /// The backup uses an algorithm this SDK does not read.
    case unsupportedAlgorithm(String)
    /// The private key given is not the key of the backup (its public key differs), or is not
    /// 32 bytes.
    case keyMismatch
    /// The server's answer could not be read.
    case malformedResponse
    /// The server could not be reached or could not answer now (offline, 5xx, rate limited, the
    /// token being refreshed): try again later.
    case unavailable
    /// The server refused the request for good.
    case rejected(status: Int, errorCode: String)
    /// The crypto store or the driver failed.
    case local(CryptoError)
    /// The crypto account is not loaded yet (the crypto machine has not started).
    case notReady
    /// The backup's `auth_data` carries no valid signature by this account's master key (held
    /// or pinned), this device, or another device of the account the room key policy trusts:
    /// it may be the server's, not the account's, and is not used.
    case untrusted

    public var caseNameLiteral: StaticString? {
        switch self {
        case .notFound: "notFound"
        case .wrongVersion: "wrongVersion"
        case .unsupportedAlgorithm: "unsupportedAlgorithm"
        case .keyMismatch: "keyMismatch"
        case .malformedResponse: "malformedResponse"
        case .unavailable: "unavailable"
        case .rejected: "rejected"
        case .local: "local"
        case .notReady: "notReady"
        case .untrusted: "untrusted"
        }
    }
}

/// A backup version as `GET /room_keys/version` describes it.
package struct KeyBackupVersion: Sendable, Equatable {
    package var version: String
    package var algorithm: String
    /// `auth_data` as given (with its signatures).
    package var authData: JSONValue
    /// How many keys the backup holds.
    package var count: Int
    /// Changes whenever the backup's keys change.
    package var etag: String

    /// `auth_data.public_key`.
    package var publicKey: String? {
        if case .object(let members) = authData, case .string(let key)? = members["public_key"] { return key }
        return nil
    }

    /// The version described by `body`, or `nil` when it is not such an object.
    package init?(parsing body: [UInt8]) {
        guard case .object(let top)? = try? JSONValue(parsing: body),
            case .string(let version)? = top["version"], case .string(let algorithm)? = top["algorithm"],
            let authData = top["auth_data"], case .object = authData
        else { return nil }
        self.version = version
        self.algorithm = algorithm
        self.authData = authData
        count = top["count"]?.integerValue ?? 0
        if case .string(let etag)? = top["etag"] { self.etag = etag } else { etag = "" }
    }

    package init(version: String, algorithm: String, authData: JSONValue, count: Int = 0, etag: String = "") {
        self.version = version
        self.algorithm = algorithm
        self.authData = authData
        self.count = count
        self.etag = etag
    }
}

/// One backed-up room key (`KeyBackupData`): its metadata in the clear and the encrypted
/// session.
package struct BackedUpRoomKey: Sendable, Equatable {
    /// The first message index the stored session decrypts.
    package var firstMessageIndex: Int
    /// How many times the key was forwarded between devices before it reached the device that
    /// backed it up.
    package var forwardedCount: Int
    /// Whether the device that backed it up had verified the device the key came from.
    package var isVerified: Bool
    /// The encrypted `BackedUpSessionData`.
    package var sessionData: BackupCiphertext

    package init(firstMessageIndex: Int, forwardedCount: Int, isVerified: Bool, sessionData: BackupCiphertext) {
        self.firstMessageIndex = firstMessageIndex
        self.forwardedCount = forwardedCount
        self.isVerified = isVerified
        self.sessionData = sessionData
    }

    /// The key described by `json`, or `nil`.
    package init?(json: JSONValue) {
        guard case .object(let members) = json, let first = members["first_message_index"]?.integerValue,
            let forwarded = members["forwarded_count"]?.integerValue,
            case .bool(let verified)? = members["is_verified"],
            case .object(let data)? = members["session_data"], case .string(let ciphertext)? = data["ciphertext"],
            case .string(let mac)? = data["mac"], case .string(let ephemeral)? = data["ephemeral"]
        else { return nil }
        self.init(
            firstMessageIndex: first, forwardedCount: forwarded, isVerified: verified,
            sessionData: BackupCiphertext(ciphertext: ciphertext, mac: mac, ephemeral: ephemeral))
    }

    /// The JSON the server stores.
    package var json: JSONValue {
        .object([
            "first_message_index": .number(Double(firstMessageIndex)),
            "forwarded_count": .number(Double(forwardedCount)), "is_verified": .bool(isVerified),
            "session_data": .object([
                "ciphertext": .string(sessionData.ciphertext), "mac": .string(sessionData.mac),
                "ephemeral": .string(sessionData.ephemeral),
            ]),
        ])
    }

    /// The spec's rule for two keys of one session: a verified key beats an unverified one,
    /// then the lower first message index wins, then the lower forwarded count. Equal keys are
    /// not better (the stored one stays).
    package func isBetter(than other: BackedUpRoomKey) -> Bool {
        if isVerified != other.isVerified { return isVerified }
        if firstMessageIndex != other.firstMessageIndex { return firstMessageIndex < other.firstMessageIndex }
        return forwardedCount < other.forwardedCount
    }
}

/// The plaintext of a backed-up session (`BackedUpSessionData`), as encrypted into
/// ``BackedUpRoomKey/sessionData``.
package struct BackedUpSession: Sendable {
    /// `m.megolm.v1.aes-sha2`.
    package var algorithm: String
    /// The Curve25519 key of the device that started the session.
    package var senderKey: String
    /// The Ed25519 key that device claimed.
    package var claimedSigningKey: String
    /// The exported session (`olm_export_inbound_group_session`).
    package var sessionKey: Secret<String>
    /// The Curve25519 keys of the devices that forwarded it, in order.
    package var forwardingChain: [String]

    package init(
        algorithm: String = "m.megolm.v1.aes-sha2", senderKey: String, claimedSigningKey: String,
        sessionKey: Secret<String>, forwardingChain: [String] = []
    ) {
        self.algorithm = algorithm
        self.senderKey = senderKey
        self.claimedSigningKey = claimedSigningKey
        self.sessionKey = sessionKey
        self.forwardingChain = forwardingChain
    }

    /// The plaintext's JSON bytes (secret: they hold the session key).
    package func plaintext() throws(JSONValue.CanonicalJSONError) -> Secret<[UInt8]> {
        Secret(
            try JSONValue.object([
                "algorithm": .string(algorithm), "sender_key": .string(senderKey),
                "sender_claimed_keys": .object(["ed25519": .string(claimedSigningKey)]),
                "session_key": .string(sessionKey.exposedValue),
                "forwarding_curve25519_key_chain": .array(forwardingChain.map { .string($0) }),
            ]).canonicalEncoding())
    }

    /// The session described by a decrypted plaintext, or `nil` when it is not one.
    package init?(plaintext: Secret<[UInt8]>) {
        guard case .object(let members)? = try? JSONValue(parsing: plaintext.exposedValue),
            case .string(let algorithm)? = members["algorithm"], case .string(let senderKey)? = members["sender_key"],
            case .object(let claimed)? = members["sender_claimed_keys"],
            case .string(let ed25519)? = claimed["ed25519"],
            case .string(let sessionKey)? = members["session_key"]
        else { return nil }
        var chain: [String] = []
        if case .array(let keys)? = members["forwarding_curve25519_key_chain"] {
            for case .string(let key) in keys { chain.append(key) }
        }
        self.init(
            algorithm: algorithm, senderKey: senderKey, claimedSigningKey: ed25519, sessionKey: Secret(sessionKey),
            forwardingChain: chain)
    }
}
