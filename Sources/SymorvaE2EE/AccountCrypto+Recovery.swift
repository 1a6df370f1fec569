import SymorvaCryptoDriver
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Why setting up, restoring or resetting the account's identity and recovery failed. Never
/// carries key material.
public enum RecoveryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The account already has a cross-signing identity this device does not hold: restore it
    /// with the recovery key, or reset it (with the password).
    case identityExists
    /// The account has no cross-signing identity or no secret storage to restore from.
    case nothingToRestore
    /// The recovery key is not one (wrong characters, length, prefix or parity).
    case malformedRecoveryKey
    /// The recovery key or passphrase is not the secret storage key's.
    case wrongRecoveryKey
    /// Secret storage is not readable: a secret or the key description is missing or malformed,
    /// or uses an algorithm this SDK does not know (the name says which).
    case secretStorage(String)
    /// The private keys in secret storage are not those of the identity the server lists.
    case identityMismatch
    /// The password stage failed (the session's error, by name).
    case authorization(String)
    /// The server refused a signature or a key (`keys/signatures/upload` failures, a 4xx).
    case rejected(status: Int, errorCode: String)
    /// The homeserver could not be reached or answered with a server error: try again.
    case unavailable
    /// The crypto store failed.
    case store
    /// The crypto account is not loaded yet.
    case notReady
    /// The key backup could not be created, enabled or restored (the identity part succeeded).
    case backup(KeyBackupError)
    /// Secret sharing: the account has no other device it cross-signed to ask.
    case noTrustedDevice
    /// Secret sharing: no other device of the account answered in time.
    case secretsNotReceived

    /// The case name (and its field); never a key.
    public var description: String {
        switch self {
        case .identityExists: "identityExists"
        case .nothingToRestore: "nothingToRestore"
        case .malformedRecoveryKey: "malformedRecoveryKey"
        case .wrongRecoveryKey: "wrongRecoveryKey"
        case .secretStorage(let field): "secretStorage(\(field))"
        case .identityMismatch: "identityMismatch"
        case .authorization(let reason): "authorization(\(reason))"
        case .rejected(let status, let code): "rejected(\(status) \(code))"
        case .unavailable: "unavailable"
        case .store: "store"
        case .notReady: "notReady"
        case .backup(let error): "backup(\(error))"
        case .noTrustedDevice: "noTrustedDevice"
        case .secretsNotReceived: "secretsNotReceived"
        }
    }
}

/// Sends a request that may need user-interactive authentication with the account's password
/// (the session's ``/SymorvaSession/SessionClient/authorize(method:path:body:password:)``) and
/// returns the answer's body.
package typealias PasswordAuthorizer = @Sendable (MatrixEndpoint) async throws(RecoveryError) -> [UInt8]

/// The secret names secret storage keeps the cross-signing private keys and the key backup's
/// private key under.
enum SecretName {
    static let master = "m.cross_signing.master"
    static let selfSigning = "m.cross_signing.self_signing"
    static let userSigning = "m.cross_signing.user_signing"
    static let crossSigning = [master, selfSigning, userSigning]
    static let megolmBackup = "m.megolm_backup.v1"
    static let defaultKey = "m.secret_storage.default_key"
    static func keyDescription(_ keyID: String) -> String { "m.secret_storage.key.\(keyID)" }
}

extension AccountCrypto {
    /// PBKDF2 iterations for a new passphrase (the value other clients use).
    static let passphraseIterations = 500_000

    /// Creates the account's cross-signing identity when it has none (master, self-signing and
    /// user-signing keys, uploaded with `keys/device_signing/upload`), cross-signs this device,
    /// and keeps the private keys in a new secret storage (account data) under a new key: the
    /// recovery key returned, shown to the member once, never logged. With a `passphrase`, the
    /// key is derived from it instead (PBKDF2-SHA-512, a random salt), and the recovery key is
    /// that key's encoding.
    ///
    /// The key backup: when the account has none, one is created (its `auth_data` signed by this
    /// device and the master key) and its private key kept in secret storage too
    /// (`m.megolm_backup.v1`); when this device uses the current backup, its key is kept there;
    /// a backup whose key this device lacks is left alone (not in the new secret storage).
    ///
    /// When this device already holds the account's identity (set up before), only a new secret
    /// storage key is made.
    ///
    /// Called right after sign-in, it first waits until this device's keys are published.
    ///
    /// - Throws: ``RecoveryError/identityExists`` when the account has an identity this device
    ///   does not hold (restore or reset instead), ``RecoveryError/unavailable`` while the device
    ///   keys' upload backs off, or a request's or the store's error.
    public func setUpRecovery(passphrase: Secret<String>? = nil) async throws(RecoveryError) -> Secret<String> {
        try await untilDeviceKeysPublished()
        return try await recoveryLock.withLock { () async throws(RecoveryError) -> Secret<String> in
            let answer = try await queryOwnKeys()
            let listed = CrossSigningChain.identities(
                in: answer, ownUser: userID, ownMasterKey: nil, driver: engine.driver)[userID]
            let keys: CrossSigningKeys
            if let held = try await heldKeys() {
                keys = held
                if let listed, listed.masterKey != held.master.publicKey { throw .identityExists }
                if listed == nil { try await uploadIdentity(keys, authorize: nil) }
            } else {
                if listed != nil { throw .identityExists }
                keys = try Self.recovery { () throws(CrossSigningError) in
                    try CrossSigningKeys(newFor: userID, driver: engine.driver)
                }
                // Kept before the upload: a crash in between uploads the same keys next time
                // (the first identity of an account needs no password, and re-uploading it neither).
                try await keep(keys)
                try await uploadIdentity(keys, authorize: nil)
            }
            try await signThisDevice(with: keys)
            let backupKey = try await backupKeyForSecretStorage(keys)
            let recoveryKey = try await writeSecretStorage(keys, backupKey: backupKey, passphrase: passphrase)
            try await pinOwnIdentity(keys)
            logger.info("recovery set up backup=\(backupKey != nil)")
            return recoveryKey
        }
    }

    /// Restores the account's identity on this device from secret storage with the recovery key
    /// (or, when `isPassphrase` is true, the passphrase the key was derived from): the private
    /// keys are read, checked against the identity the server lists, kept (sealed), and this
    /// device is cross-signed. When secret storage holds the key backup's private key
    /// (`m.megolm_backup.v1`), the backup is then enabled and every room key in it restored
    /// (``backupState`` shows the progress): returns how many keys were stored, of how many, or
    /// `nil` when there is no backup key in secret storage.
    ///
    /// - Throws: ``RecoveryError/backup(_:)`` when the backup could not be enabled or restored
    ///   (the identity is restored by then; calling again restores the backup).
    @discardableResult
    public func restore(recoveryKey text: Secret<String>, isPassphrase: Bool = false) async throws(RecoveryError)
        -> (imported: Int, total: Int)?
    {
        let backupKey = try await recoveryLock.withLock { () async throws(RecoveryError) -> Secret<[UInt8]>? in
            let keyID = try await defaultKeyID()
            let description = try await keyDescription(keyID)
            let key: Secret<[UInt8]>
            if isPassphrase {
                guard let parameters = description.passphrase else { throw .wrongRecoveryKey }
                key = try Self.secrets { () throws(SecretStorageError) in
                    try SecretStorage.key(passphrase: text, parameters: parameters)
                }
            } else {
                do { key = try RecoveryKey.decode(text) } catch { throw .malformedRecoveryKey }
            }
            try Self.secrets { () throws(SecretStorageError) in try SecretStorage.check(key, against: description) }
            var seeds: [Secret<[UInt8]>] = []
            for name in SecretName.crossSigning {
                seeds.append(try await readSecret(name, keyID: keyID, key: key))
            }
            let keys = try Self.recovery { () throws(CrossSigningError) in
                try CrossSigningKeys(
                    userID: userID, masterSeed: seeds[0], selfSigningSeed: seeds[1], userSigningSeed: seeds[2],
                    driver: engine.driver)
            }
            let answer = try await queryOwnKeys()
            guard
                let listed = CrossSigningChain.identities(
                    in: answer, ownUser: userID, ownMasterKey: nil, driver: engine.driver)[userID]
            else { throw .nothingToRestore }
            guard listed.masterKey == keys.master.publicKey, listed.selfSigningKey == keys.selfSigning.publicKey
            else { throw .identityMismatch }
            try await keep(keys)
            try await signThisDevice(with: keys, answer: answer)
            try await pinOwnIdentity(keys)
            logger.info("recovery restored")
            return try await readOptionalSecret(SecretName.megolmBackup, keyID: keyID, key: key)
        }
        guard let backupKey else { return nil }
        do throws(KeyBackupError) {
            _ = try await enableBackup(privateKey: backupKey)
            return try await restoreBackup()
        } catch {
            throw .backup(error)
        }
    }

    /// "I lost my recovery key": replaces the account's identity with a new one (which needs the
    /// password: `authorize` completes the stage) and secret storage with a new key, and
    /// cross-signs this device. Every other device of the account, and every user who verified
    /// this account, sees a changed identity; what the old secret storage held is unreadable.
    /// A new key backup is created (the old one's key went with the old secret storage) and its
    /// key kept in the new secret storage. Returns the new recovery key.
    package func resetRecovery(passphrase: Secret<String>? = nil, authorize: @escaping PasswordAuthorizer)
        async throws(RecoveryError) -> Secret<String>
    {
        try await recoveryLock.withLock { () async throws(RecoveryError) -> Secret<String> in
            let keys = try Self.recovery { () throws(CrossSigningError) in
                try CrossSigningKeys(newFor: userID, driver: engine.driver)
            }
            // Uploaded first: a refused password leaves the old keys as they were.
            try await uploadIdentity(keys, authorize: authorize)
            try await keep(keys)
            try await signThisDevice(with: keys)
            let backupKey: Secret<[UInt8]>
            do throws(KeyBackupError) { backupKey = try await createBackup(masterKey: keys.master).privateKey } catch {
                throw .backup(error)
            }
            let recoveryKey = try await writeSecretStorage(keys, backupKey: backupKey, passphrase: passphrase)
            try await pinOwnIdentity(keys)
            logger.info("recovery reset")
            return recoveryKey
        }
    }

    // MARK: Steps

    func heldKeys() async throws(RecoveryError) -> CrossSigningKeys? {
        let stored: CryptoStore.StoredCrossSigningKeys?
        do { stored = try await store.crossSigningKeys() } catch { throw .store }
        guard let stored else { return nil }
        return try Self.recovery { () throws(CrossSigningError) in
            try CrossSigningKeys(
                userID: userID, masterSeed: stored.masterSeed, selfSigningSeed: stored.selfSigningSeed,
                userSigningSeed: stored.userSigningSeed, driver: engine.driver)
        }
    }

    /// The key backup's private key to keep in secret storage: a new backup's when the account
    /// has none, the current one's when this device uses it, else `nil` (a backup whose key this
    /// device lacks).
    private func backupKeyForSecretStorage(_ keys: CrossSigningKeys) async throws(RecoveryError) -> Secret<[UInt8]>? {
        do throws(KeyBackupError) {
            let current: KeyBackupVersion
            do throws(KeyBackupError) {
                current = try await currentBackupVersion()
            } catch .notFound {
                return try await createBackup(masterKey: keys.master).privateKey
            }
            let status = try await backupStatus()
            guard status.version == current.version, status.stopReason == nil else {
                logger.warning("key backup in use by the account is not this device's: not in secret storage")
                return nil
            }
            return try await backupPrivateKey()
        } catch {
            throw .backup(error)
        }
    }

    func keep(_ keys: CrossSigningKeys) async throws(RecoveryError) {
        do {
            try await store.saveCrossSigningKeys(
                .init(
                    masterKey: keys.master.publicKey, masterSeed: keys.master.seed,
                    selfSigningSeed: keys.selfSigning.seed, userSigningSeed: keys.userSigning.seed))
        } catch {
            throw .store
        }
    }

    func pinOwnIdentity(_ keys: CrossSigningKeys) async throws(RecoveryError) {
        do {
            try await store.pinOwnIdentity(masterKey: keys.master.publicKey)
            try await engine.refreshIdentityState()
        } catch {
            throw .store
        }
    }

    func queryOwnKeys() async throws(RecoveryError) -> JSONValue {
        let body = try await send(
            try Self.endpoint { () throws(JSONValue.CanonicalJSONError) in
                try E2EEAPI.query(users: [userID])
            })
        guard let answer = try? JSONValue(parsing: body) else { throw .unavailable }
        return answer
    }

    func uploadIdentity(_ keys: CrossSigningKeys, authorize: PasswordAuthorizer?) async throws(RecoveryError) {
        let body = try Self.recovery { () throws(CrossSigningError) in try keys.uploadBody() }
        let endpoint = try Self.endpoint { () throws(JSONValue.CanonicalJSONError) in
            try E2EEAPI.uploadSigningKeys(body)
        }
        if let authorize {
            _ = try await authorize(endpoint)
        } else {
            do throws(RecoveryError) {
                _ = try await send(endpoint)
            } catch .rejected(status: 401, _) {
                // The server wants the password: the account has an identity already.
                throw .identityExists
            }
        }
    }

    /// Returns once this device's keys are published (the crypto machine is ready), so that a
    /// recovery set up right after sign-in finds this device listed to sign it. Throws
    /// ``RecoveryError/unavailable`` while the upload backs off (the server cannot be reached:
    /// try again) and ``RecoveryError/notReady`` when crypto is stopped or failed.
    func untilDeviceKeysPublished() async throws(RecoveryError) {
        for await state in host.states.values {
            if Task.isCancelled { throw .notReady }
            switch state {
            case .ready: return
            case .backingOff: throw .unavailable
            case .loading, .publishing: continue
            case .idle, .failed: throw .notReady
            }
        }
        throw .notReady
    }

    /// Signs this device's keys (as the server lists them) with the self-signing key and uploads
    /// the signature.
    func signThisDevice(with keys: CrossSigningKeys, answer: JSONValue? = nil) async throws(RecoveryError) {
        var listed = answer
        if listed == nil { listed = try await queryOwnKeys() }
        guard let answer = listed,
            let deviceKeys = CrossSigningChain.deviceKeys(in: answer, user: userID, deviceID: deviceID.rawValue)
        else { throw .notReady }
        let signed = try Self.recovery { () throws(CrossSigningError) in try keys.signDevice(deviceKeys) }
        let body = try await send(
            try Self.endpoint { () throws(JSONValue.CanonicalJSONError) in
                try E2EEAPI.uploadSignatures([userID.rawValue: [deviceID.rawValue: signed]])
            })
        if case .object(let members)? = try? JSONValue(parsing: body),
            case .object(let failures)? = members["failures"],
            !failures.isEmpty
        {
            throw .rejected(status: 400, errorCode: "signature_failures")
        }
    }

    /// A new secret storage key (random, or from `passphrase`), its description, the three
    /// private keys (and the key backup's, when given) encrypted under it, and the default key,
    /// in account data. Returns the key's recovery key encoding.
    private func writeSecretStorage(
        _ keys: CrossSigningKeys, backupKey: Secret<[UInt8]>?, passphrase: Secret<String>?
    )
        async throws(RecoveryError) -> Secret<String>
    {
        var generator = SystemRandomNumberGenerator()
        let keyID = String((0..<32).map { _ in Self.idAlphabet.randomElement(using: &generator)! })
        let key: Secret<[UInt8]>
        var parameters: SecretStorageKeyDescription.Passphrase?
        if let passphrase {
            let salt = String((0..<32).map { _ in Self.idAlphabet.randomElement(using: &generator)! })
            parameters = .init(salt: salt, iterations: Self.passphraseIterations)
            key = try Self.secrets { () throws(SecretStorageError) in
                try SecretStorage.key(passphrase: passphrase, parameters: parameters!)
            }
        } else {
            key = try Self.secrets { () throws(SecretStorageError) in try SecretStorage.newKey() }
        }
        let description = try Self.secrets { () throws(SecretStorageError) in
            try SecretStorage.describe(key, passphrase: parameters)
        }
        try await putAccountData(SecretName.keyDescription(keyID), description.json)
        var secrets = zip(SecretName.crossSigning, [keys.master, keys.selfSigning, keys.userSigning]).map {
            ($0, $1.seed)
        }
        if let backupKey { secrets.append((SecretName.megolmBackup, backupKey)) }
        for (name, seed) in secrets {
            // The secret is the unpadded base64 of the key's seed (the backup's private key).
            let secret = seed.map { Array(UnpaddedBase64.encode($0).utf8) }
            let encrypted = try Self.secrets { () throws(SecretStorageError) in
                try SecretStorage.encrypt(secret, name: name, key: key)
            }
            try await putAccountData(name, .object(["encrypted": .object([keyID: encrypted.json])]))
        }
        try await putAccountData(SecretName.defaultKey, .object(["key": .string(keyID)]))
        return RecoveryKey.encode(key)
    }

    private func defaultKeyID() async throws(RecoveryError) -> String {
        guard case .object(let members)? = try await accountData(SecretName.defaultKey),
            case .string(let keyID)? = members["key"]
        else { throw .nothingToRestore }
        return keyID
    }

    private func keyDescription(_ keyID: String) async throws(RecoveryError) -> SecretStorageKeyDescription {
        guard let content = try await accountData(SecretName.keyDescription(keyID)) else {
            throw .secretStorage("key description")
        }
        return try Self.secrets { () throws(SecretStorageError) in try SecretStorageKeyDescription(json: content) }
    }

    private func readSecret(_ name: String, keyID: String, key: Secret<[UInt8]>) async throws(RecoveryError)
        -> Secret<[UInt8]>
    {
        guard let secret = try await readOptionalSecret(name, keyID: keyID, key: key) else {
            throw .secretStorage(name)
        }
        return secret
    }

    /// The 32-byte secret `name` encrypted under `keyID`, or `nil` when secret storage has none
    /// under that key.
    private func readOptionalSecret(_ name: String, keyID: String, key: Secret<[UInt8]>) async throws(RecoveryError)
        -> Secret<[UInt8]>?
    {
        guard case .object(let members)? = try await accountData(name),
            case .object(let encrypted)? = members["encrypted"], let object = encrypted[keyID]
        else { return nil }
        let secret = try Self.secrets { () throws(SecretStorageError) in
            try SecretStorage.decrypt(try EncryptedSecret(json: object), name: name, key: key)
        }
        guard let text = String(validating: secret.exposedValue, as: UTF8.self),
            let seed = UnpaddedBase64.decode(text), seed.count == 32
        else { throw .secretStorage(name) }
        return Secret(seed)
    }

    // MARK: Requests

    private func accountData(_ type: String) async throws(RecoveryError) -> JSONValue? {
        do throws(MatrixRequestError) {
            let response = try await requester.send(E2EEAPI.accountData(user: userID, type: type))
            return try? JSONValue(parsing: response.body)
        } catch {
            if case .matrix(let matrix) = error, matrix.code == .notFound { return nil }
            throw Self.recoveryError(error)
        }
    }

    private func putAccountData(_ type: String, _ content: JSONValue) async throws(RecoveryError) {
        _ = try await send(
            try Self.endpoint { () throws(JSONValue.CanonicalJSONError) in
                try E2EEAPI.setAccountData(user: userID, type: type, content: content)
            })
    }

    private func send(_ endpoint: MatrixEndpoint) async throws(RecoveryError) -> [UInt8] {
        do throws(MatrixRequestError) {
            return try await requester.send(endpoint).body
        } catch {
            throw Self.recoveryError(error)
        }
    }

    static let idAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")

    static func recoveryError(_ error: MatrixRequestError) -> RecoveryError {
        switch error {
        case .transport: return .unavailable
        case .notSignedIn: return .authorization("notSignedIn")
        case .invalidRequest: return .rejected(status: 0, errorCode: "invalid_request")
        case .matrix(let matrix):
            if matrix.status >= 500 || matrix.status == 408 || matrix.code == .limitExceeded { return .unavailable }
            return .rejected(status: matrix.status, errorCode: matrix.code.errcode)
        }
    }

    static func endpoint(_ body: () throws(JSONValue.CanonicalJSONError) -> MatrixEndpoint) throws(RecoveryError)
        -> MatrixEndpoint
    {
        do { return try body() } catch { throw .secretStorage("canonical JSON") }
    }

    static func recovery<T>(_ body: () throws(CrossSigningError) -> T) throws(RecoveryError) -> T {
        do { return try body() } catch { throw .secretStorage("cross-signing: \(error)") }
    }

    static func secrets<T>(_ body: () throws(SecretStorageError) -> T) throws(RecoveryError) -> T {
        do {
            return try body()
        } catch {
            switch error {
            case .wrongKey, .badMAC: throw .wrongRecoveryKey
            case .recoveryKey: throw .malformedRecoveryKey
            default: throw .secretStorage(error.description)
            }
        }
    }
}
