import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// How far this device trusts another device (MSC4153's levels).
public enum DeviceTrustLevel: String, Sendable, Hashable {
    /// Cross-signed by its owner, whose identity we verified: our user-signing key signed the
    /// owner's master key (or the owner is this account and its master key is the one we hold).
    case verified
    /// Cross-signed by its owner: the owner's self-signing key, itself signed by the owner's
    /// master key, signed the device.
    case crossSigned
    /// Not cross-signed (or its owner has no cross-signing identity): the server alone vouches
    /// for it, and a device the server injects looks exactly like this.
    case unverified
}

/// One user's cross-signing identity as a `keys/query` answer lists it, after every check: the
/// master key is the user's, has the `master` usage and exactly one Ed25519 key; the
/// self-signing and user-signing keys count only when the master key signed them.
package struct UserIdentity: Sendable, Hashable {
    /// Whose identity.
    package var userID: UserID
    /// The master key (unpadded base64 Ed25519).
    package var masterKey: String
    /// The self-signing key, when present and signed by the master key.
    package var selfSigningKey: String?
    /// The user-signing key (listed for this account only), when signed by the master key.
    package var userSigningKey: String?
    /// The master key object as listed (what our user-signing key signs to verify the user).
    package var masterKeyObject: JSONValue
    /// Whether this device trusts the identity: our own, with the master key we hold; another
    /// user's, with a valid signature by our (checked) user-signing key on its master key.
    package var isVerified: Bool
}

/// Reading and checking the cross-signing signature chain of a `keys/query` answer: master →
/// self-signing → devices, and our user-signing key → other users' master keys.
package enum CrossSigningChain {
    /// The checked identity of every user the answer lists a valid master key for.
    ///
    /// - Parameters:
    ///   - ownUser: this account.
    ///   - ownMasterKey: the master key this device holds the private half of (or pinned for this
    ///     account), `nil` when none: our own identity counts as verified only when the
    ///     answer's master key is this one, and only then does our user-signing key verify others.
    package static func identities(
        in answer: JSONValue, ownUser: UserID, ownMasterKey: String?, driver: any CryptoDriver
    ) -> [UserID: UserIdentity] {
        guard case .object(let top) = answer, case .object(let masters)? = top["master_keys"] else { return [:] }
        let selfSigning = objects(top["self_signing_keys"])
        let userSigning = objects(top["user_signing_keys"])
        var result: [UserID: UserIdentity] = [:]
        for (userText, masterObject) in masters {
            guard let user = UserID(userText), let master = key(masterObject, user: user, usage: "master") else {
                continue
            }
            var identity = UserIdentity(
                userID: user, masterKey: master, selfSigningKey: nil, userSigningKey: nil,
                masterKeyObject: masterObject, isVerified: false)
            if let object = selfSigning[userText], let key = key(object, user: user, usage: "self_signing"),
                SignedJSON.isSigned(object, by: user, publicKey: master, driver: driver)
            {
                identity.selfSigningKey = key
            }
            if let object = userSigning[userText], let key = key(object, user: user, usage: "user_signing"),
                SignedJSON.isSigned(object, by: user, publicKey: master, driver: driver)
            {
                identity.userSigningKey = key
            }
            result[user] = identity
        }
        // Our own identity first: its user-signing key verifies the others only when it is ours.
        if var own = result[ownUser] {
            own.isVerified = ownMasterKey != nil && own.masterKey == ownMasterKey
            result[ownUser] = own
            if own.isVerified, let ourUserSigning = own.userSigningKey {
                for (user, var identity) in result where user != ownUser {
                    identity.isVerified = SignedJSON.isSigned(
                        identity.masterKeyObject, by: ownUser, publicKey: ourUserSigning, driver: driver)
                    result[user] = identity
                }
            }
        }
        return result
    }

    /// The trust level of one device (its keys object as `keys/query` lists it, already checked
    /// for its own self-signature) given its owner's identity.
    package static func trust(
        ofDevice deviceKeys: JSONValue, owner: UserIdentity?, driver: any CryptoDriver
    ) -> DeviceTrustLevel {
        guard let owner, let selfSigning = owner.selfSigningKey,
            SignedJSON.isSigned(deviceKeys, by: owner.userID, publicKey: selfSigning, driver: driver)
        else { return .unverified }
        return owner.isVerified ? .verified : .crossSigned
    }

    /// The device keys object of `deviceID` of `user` in a `keys/query` answer.
    package static func deviceKeys(in answer: JSONValue, user: UserID, deviceID: String) -> JSONValue? {
        guard case .object(let top) = answer, case .object(let users)? = top["device_keys"],
            case .object(let devices)? = users[user.rawValue]
        else { return nil }
        return devices[deviceID]
    }

    /// The public key of a cross-signing key object when it belongs to `user`, has `usage` and
    /// exactly one well-formed Ed25519 key whose ID names it.
    static func key(_ object: JSONValue, user: UserID, usage: String) -> String? {
        guard case .object(let members) = object, members["user_id"] == .string(user.rawValue),
            case .array(let usages)? = members["usage"], usages.contains(.string(usage)),
            case .object(let keys)? = members["keys"], keys.count == 1,
            let (keyID, value) = keys.first, case .string(let publicKey) = value,
            keyID == "ed25519:\(publicKey)", (try? Ed25519Check.keyBytes(publicKey)) != nil
        else { return nil }
        return publicKey
    }

    private static func objects(_ value: JSONValue?) -> [String: JSONValue] {
        guard case .object(let members)? = value else { return [:] }
        return members
    }
}

/// What comparing a user's master key with the one pinned for them says.
package enum IdentityPinOutcome: Sendable, Hashable {
    /// No pin yet: pin this key (trust on first use).
    case firstSeen
    /// The pinned key.
    case unchanged
    /// Another key than the pinned one: the identity changed (a reset, or an attack); the user
    /// and their conversations show it until it is acknowledged, and the new key is pinned then.
    case changed(previous: String)

    /// The outcome for `current` against `pinned`.
    package static func compare(pinned: String?, current: String) -> IdentityPinOutcome {
        guard let pinned else { return .firstSeen }
        return pinned == current ? .unchanged : .changed(previous: pinned)
    }
}
