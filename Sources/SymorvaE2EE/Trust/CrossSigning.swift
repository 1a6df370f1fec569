import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Why a cross-signing object could not be built or signed.
package enum CrossSigningError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The object to sign is not a JSON object, or has no canonical encoding.
    case notSignable
    /// The crypto driver refused (a seed of the wrong length, a library failure).
    case driver(CryptoDriverError)

    /// The case name.
    package var description: String {
        switch self {
        case .notSignable: "notSignable"
        case .driver(let error): "driver(\(error))"
        }
    }
}

/// Signed JSON (the spec's "Signing JSON"): a signature covers the canonical JSON of an object
/// without its `signatures` and `unsigned`, and is added under `signatures.<user>.<key ID>`
/// next to the signatures already there.
package enum SignedJSON {
    /// `object` with a signature by `keyID` of `user` added (the others kept).
    package static func sign(
        _ object: JSONValue, user: UserID, keyID: String, with sign: ([UInt8]) throws(CryptoDriverError) -> String
    ) throws(CrossSigningError) -> JSONValue {
        guard case .object(var members) = object else { throw .notSignable }
        let message = try canonicalSigningBytes(object)
        let signature: String
        do { signature = try sign(message) } catch { throw .driver(error) }
        var signatures: [String: JSONValue] = [:]
        if case .object(let existing)? = members["signatures"] { signatures = existing }
        var byUser: [String: JSONValue] = [:]
        if case .object(let existing)? = signatures[user.rawValue] { byUser = existing }
        byUser[keyID] = .string(signature)
        signatures[user.rawValue] = .object(byUser)
        members["signatures"] = .object(signatures)
        return .object(members)
    }

    /// Whether `object` carries a valid signature by `user`'s Ed25519 key `publicKey` (under the
    /// key ID `ed25519:<publicKey>` unless `keyID` is given).
    package static func isSigned(
        _ object: JSONValue, by user: UserID, publicKey: String, keyID: String? = nil, driver: any CryptoDriver
    ) -> Bool {
        guard case .object(let members) = object,
            case .object(let signatures)? = members["signatures"],
            case .object(let byUser)? = signatures[user.rawValue],
            case .string(let signature)? = byUser[keyID ?? "ed25519:\(publicKey)"],
            let message = try? canonicalSigningBytes(object)
        else { return false }
        return (try? driver.verifyEd25519(signature: signature, of: message, key: publicKey)) != nil
    }

    /// The bytes a signature of `object` covers.
    static func canonicalSigningBytes(_ object: JSONValue) throws(CrossSigningError) -> [UInt8] {
        guard case .object(var members) = object else { throw .notSignable }
        members["signatures"] = nil
        members["unsigned"] = nil
        do { return try JSONValue.object(members).canonicalEncoding() } catch { throw .notSignable }
    }
}

/// The three cross-signing keys of an account this device holds the private halves of:
/// master (signs the other two), self-signing (signs the account's devices) and user-signing
/// (signs other users' master keys once they are verified).
///
/// Not `Sendable`: the keys are driver objects owned by one caller.
package final class CrossSigningKeys {
    /// The master key.
    package let master: any SigningKey
    /// The self-signing key.
    package let selfSigning: any SigningKey
    /// The user-signing key.
    package let userSigning: any SigningKey
    /// The account the keys belong to.
    package let userID: UserID

    /// Three new keys for `userID`.
    package init(newFor userID: UserID, driver: any CryptoDriver) throws(CrossSigningError) {
        do {
            master = try driver.newSigningKey()
            selfSigning = try driver.newSigningKey()
            userSigning = try driver.newSigningKey()
        } catch {
            throw .driver(error)
        }
        self.userID = userID
    }

    /// The keys from their seeds (as secret storage keeps them).
    package init(
        userID: UserID, masterSeed: Secret<[UInt8]>, selfSigningSeed: Secret<[UInt8]>,
        userSigningSeed: Secret<[UInt8]>, driver: any CryptoDriver
    ) throws(CrossSigningError) {
        do {
            master = try driver.signingKey(seed: masterSeed)
            selfSigning = try driver.signingKey(seed: selfSigningSeed)
            userSigning = try driver.signingKey(seed: userSigningSeed)
        } catch {
            throw .driver(error)
        }
        self.userID = userID
    }

    /// The public key object of one key (`user_id`, `usage`, `keys`), unsigned.
    package static func keyObject(user: UserID, usage: String, publicKey: String) -> JSONValue {
        .object([
            "user_id": .string(user.rawValue), "usage": .array([.string(usage)]),
            "keys": .object(["ed25519:\(publicKey)": .string(publicKey)]),
        ])
    }

    /// The body of `keys/device_signing/upload`: the master key, and the self-signing and
    /// user-signing keys signed by the master key.
    package func uploadBody() throws(CrossSigningError) -> [String: JSONValue] {
        let masterID = "ed25519:\(master.publicKey)"
        return [
            "master_key": Self.keyObject(user: userID, usage: "master", publicKey: master.publicKey),
            "self_signing_key": try SignedJSON.sign(
                Self.keyObject(user: userID, usage: "self_signing", publicKey: selfSigning.publicKey), user: userID,
                keyID: masterID, with: master.sign),
            "user_signing_key": try SignedJSON.sign(
                Self.keyObject(user: userID, usage: "user_signing", publicKey: userSigning.publicKey), user: userID,
                keyID: masterID, with: master.sign),
        ]
    }

    /// The device keys object (as `keys/query` or this device publish it) signed by the
    /// self-signing key: what `keys/signatures/upload` takes to cross-sign a device.
    package func signDevice(_ deviceKeys: JSONValue) throws(CrossSigningError) -> JSONValue {
        try SignedJSON.sign(
            deviceKeys, user: userID, keyID: "ed25519:\(selfSigning.publicKey)", with: selfSigning.sign)
    }

    /// Another user's master key object (from `keys/query`) signed by the user-signing key:
    /// what `keys/signatures/upload` takes once that user is verified.
    package func signUser(masterKey: JSONValue) throws(CrossSigningError) -> JSONValue {
        try SignedJSON.sign(
            masterKey, user: userID, keyID: "ed25519:\(userSigning.publicKey)", with: userSigning.sign)
    }
}
