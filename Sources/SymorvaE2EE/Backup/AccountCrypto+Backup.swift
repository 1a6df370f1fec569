import SymorvaCryptoDriver
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

extension AccountCrypto {
    /// Where the server-side key backup is: `disabled`, `uploading(remaining)`, `upToDate`, or
    /// `restoring` during ``restoreBackup()``.
    public var backupState: ObservableValue<KeyBackupState> { engine.backupState.observable }

    /// Creates a new backup version with a new key, uses it from now on (every room key this
    /// device holds is uploaded), and returns its version. The private key is kept sealed in the
    /// crypto store (secret storage takes it from there); nothing secret is returned or logged.
    public func createBackup() async throws(KeyBackupError) -> String {
        try await createBackup(masterKey: nil).version
    }

    /// ``createBackup()`` with `auth_data` also signed by the account's master cross-signing
    /// key when one is given; returns the version and the private key (for secret storage).
    package func createBackup(masterKey: (any SigningKey)?) async throws(KeyBackupError)
        -> (version: String, privateKey: Secret<[UInt8]>)
    {
        let key: any BackupDecryptionKey
        do { key = try engine.driver.newBackupDecryptionKey() } catch { throw .local(.driver(error.description)) }
        var authData = try await engine.backupAuthData(publicKey: key.publicKey)
        if let masterKey {
            do {
                authData = try SignedJSON.sign(
                    authData, user: userID, keyID: "ed25519:\(masterKey.publicKey)", with: masterKey.sign)
            } catch {
                throw .local(.driver("master key signature"))
            }
        }
        let endpoint: MatrixEndpoint
        do { endpoint = try E2EEAPI.createBackupVersion(authData: authData) } catch {
            throw .local(.driver("canonical JSON"))
        }
        let response = try await sendBackupRequest(endpoint)
        guard case .object(let top)? = try? JSONValue(parsing: response.body),
            case .string(let version)? = top["version"]
        else { throw .malformedResponse }
        try await use(version: version, publicKey: key.publicKey, privateKey: key.privateKey)
        logger.info("key backup created")
        return (version, key.privateKey)
    }

    /// Uses the server's current backup version with its private key `privateKey` (32 bytes,
    /// from secret storage or another device): checks that the key is the backup's, keeps it
    /// sealed, and uploads every room key this device holds that the backup may lack. Returns
    /// the version.
    ///
    /// The version's `auth_data` must be signed by the account: by its master key (the one this
    /// device holds, or pinned), by this device, or by another device of the account that the
    /// room key policy trusts (cross-signed, once the account has an identity) — a backup the
    /// server made up is not used, whatever key is given.
    ///
    /// - Throws: `.notFound` when the account has no backup, `.keyMismatch` when the key is not
    ///   the backup's, `.unsupportedAlgorithm` for another backup algorithm, `.untrusted` when no
    ///   signature of the account's vouches for it.
    public func enableBackup(privateKey: Secret<[UInt8]>) async throws(KeyBackupError) -> String {
        let key: any BackupDecryptionKey
        do { key = try engine.driver.backupDecryptionKey(privateKey: privateKey) } catch { throw .keyMismatch }
        let current = try await currentBackupVersion()
        guard current.algorithm == E2EEAPI.backupAlgorithm else { throw .unsupportedAlgorithm(current.algorithm) }
        guard current.publicKey == key.publicKey else { throw .keyMismatch }
        guard try await isSignedByAccount(current.authData) else {
            logger.warning("key backup refused: auth_data not signed by the account")
            throw .untrusted
        }
        try await use(version: current.version, publicKey: key.publicKey, privateKey: privateKey)
        logger.info("key backup enabled")
        return current.version
    }

    /// Whether `authData` carries a valid signature by this account's master key (held or
    /// pinned), this device, or another own device the room key policy trusts (the stored
    /// devices first, then after a `keys/query` of the account).
    func isSignedByAccount(_ authData: JSONValue) async throws(KeyBackupError) -> Bool {
        let driver = engine.driver
        do throws(CryptoStoreError) {
            let masterKeys = [
                try await store.crossSigningMasterKey(), try await store.identity(of: userID)?.pinnedMasterKey,
            ].compactMap { $0 }
            if masterKeys.contains(where: { SignedJSON.isSigned(authData, by: userID, publicKey: $0, driver: driver) })
            {
                return true
            }
            if let own = await engine.identityKeys,
                SignedJSON.isSigned(
                    authData, by: userID, publicKey: own.ed25519, keyID: "ed25519:\(deviceID.rawValue)", driver: driver)
            {
                return true
            }
            for attempt in 0..<2 {
                if attempt == 1, case .failure = await interpreter.query([userID]) { return false }
                for device in try await store.devices(of: userID) where !device.keyChanged {
                    guard
                        SignedJSON.isSigned(
                            authData, by: userID, publicKey: device.ed25519, keyID: "ed25519:\(device.deviceID)",
                            driver: driver)
                    else { continue }
                    if try await engine.policyAllows(device) { return true }
                }
            }
            return false
        } catch {
            throw .local(CryptoInterpreter.cryptoError(error))
        }
    }

    /// The backup version this device uses and how many room keys wait to be uploaded.
    public func backupStatus() async throws(KeyBackupError) -> KeyBackupStatus {
        do throws(CryptoStoreError) {
            let stored = try await store.storedBackup()
            return KeyBackupStatus(
                version: stored?.version, waiting: try await store.backupWaitingCount(), stopReason: stored?.stopped)
        } catch {
            throw .local(CryptoInterpreter.cryptoError(error))
        }
    }

    /// Checks the server's current backup version against the one in use (another device may
    /// have replaced or deleted it): when it changed, stops uploading and says why. Returns the
    /// status after the check.
    public func checkBackup() async throws(KeyBackupError) -> KeyBackupStatus {
        let status = try await backupStatus()
        guard let version = status.version, status.stopReason == nil else { return status }
        var current: KeyBackupVersion?
        do throws(KeyBackupError) { current = try await currentBackupVersion() } catch .notFound { current = nil }
        guard current?.version != version else { return status }
        // Another version is current, or none: ours was replaced, unless it is gone.
        let reason: KeyBackupStopReason
        do throws(KeyBackupError) {
            _ = try await sendBackupRequest(E2EEAPI.backupVersion(version))
            reason = .replaced
        } catch .notFound {
            reason = .deleted
        }
        do throws(CryptoStoreError) { try await store.stopBackup(reason) } catch {
            throw .local(CryptoInterpreter.cryptoError(error))
        }
        engine.backupState.publish(.disabled)
        logger.warning("key backup no longer in use reason=\(reason.rawValue)")
        return try await backupStatus()
    }

    /// Restores every room key of the backup in use: downloads them, decrypts them with the
    /// stored private key and stores those this device lacks (or holds worse), as forwarded and
    /// from the backup (not verified). ``backupState`` shows the progress. Returns how many keys
    /// were stored, of how many the backup holds.
    public func restoreBackup() async throws(KeyBackupError) -> (imported: Int, total: Int) {
        let backup: CryptoStore.StoredBackup?
        let privateKey: Secret<[UInt8]>?
        do throws(CryptoStoreError) {
            backup = try await store.storedBackup()
            privateKey = try await store.backupPrivateKey()
        } catch {
            throw .local(CryptoInterpreter.cryptoError(error))
        }
        guard let backup, backup.stopped == nil, let privateKey else { throw .notFound }
        let stored = (version: backup.version, privateKey: privateKey)
        let entries = try await backupEntries(version: stored.version)
        let total = entries.count
        var imported = 0
        var done = 0
        engine.backupState.publish(.restoring(imported: 0, total: total))
        for start in stride(from: 0, to: total, by: Self.restoreBatchSize) {
            let batch = Array(entries[start..<min(start + Self.restoreBatchSize, total)])
            let rows = try await engine.restoredSessions(batch, privateKey: stored.privateKey)
            do throws(CryptoStoreError) {
                imported += try await engine.importBackedUp(rows)
            } catch {
                throw .local(CryptoInterpreter.cryptoError(error))
            }
            done += batch.count
            engine.backupState.publish(.restoring(imported: done, total: total))
        }
        let waiting = (try? await store.backupWaitingCount()) ?? 0
        engine.backupState.publish(waiting == 0 ? .upToDate : .uploading(remaining: waiting))
        logger.info("key backup restored keys=\(imported) of=\(total)")
        return (imported, total)
    }

    /// Every entry of backup `version` as the server holds it, sorted by room and session.
    package func backupEntries(version: String) async throws(KeyBackupError)
        -> [(roomID: String, sessionID: String, key: BackedUpRoomKey)]
    {
        let response = try await sendBackupRequest(E2EEAPI.roomKeys(version: version, scope: .all))
        guard case .object(let top)? = try? JSONValue(parsing: response.body), case .object(let rooms)? = top["rooms"]
        else { throw .malformedResponse }
        var entries: [(roomID: String, sessionID: String, key: BackedUpRoomKey)] = []
        for (roomID, room) in rooms {
            guard case .object(let members) = room, case .object(let sessions)? = members["sessions"] else { continue }
            for (sessionID, json) in sessions {
                if let key = BackedUpRoomKey(json: json) { entries.append((roomID, sessionID, key)) }
            }
        }
        entries.sort { ($0.roomID, $0.sessionID) < ($1.roomID, $1.sessionID) }
        return entries
    }

    /// Puts entries into backup `version` as they are (another implementation's, in the
    /// interoperability tests); the server keeps a stored key unless the new one is better.
    package func putBackupEntries(
        _ entries: [(roomID: String, sessionID: String, key: BackedUpRoomKey)], version: String
    )
        async throws(KeyBackupError)
    {
        var rooms: [String: [String: JSONValue]] = [:]
        for entry in entries { rooms[entry.roomID, default: [:]][entry.sessionID] = entry.key.json }
        let body = JSONValue.object(["rooms": .object(rooms.mapValues { .object(["sessions": .object($0)]) })])
        let endpoint: MatrixEndpoint
        do { endpoint = try E2EEAPI.putRoomKeys(version: version, scope: .all, body: body) } catch {
            throw .local(.driver("canonical JSON"))
        }
        _ = try await sendBackupRequest(endpoint)
    }

    /// How many entries a restore decrypts and stores at a time.
    static let restoreBatchSize = 200

    /// Deletes the backup version in use on the server and forgets it here.
    public func deleteBackup() async throws(KeyBackupError) {
        let version: String?
        do throws(CryptoStoreError) { version = try await store.storedBackup()?.version } catch {
            throw .local(CryptoInterpreter.cryptoError(error))
        }
        if let version { _ = try await sendBackupRequest(E2EEAPI.deleteBackupVersion(version)) }
        do throws(CryptoStoreError) { try await store.forgetBackup() } catch {
            throw .local(CryptoInterpreter.cryptoError(error))
        }
        engine.backupState.publish(.disabled)
    }

    /// Calls `body` after each confirmed backup upload with how long each key waited, from
    /// entering the outbox to the server's answer, in milliseconds (the `backup-lag` benchmark).
    package func observeBackupUploads(_ body: @escaping @Sendable ([Int64]) -> Void) {
        engine.backupUploadLags.withLock { $0 = body }
    }

    // MARK: Helpers

    /// The private key of the backup in use (package: secret storage keeps it).
    package func backupPrivateKey() async throws(KeyBackupError) -> Secret<[UInt8]>? {
        do throws(CryptoStoreError) { return try await store.backupPrivateKey() } catch {
            throw .local(CryptoInterpreter.cryptoError(error))
        }
    }

    package func currentBackupVersion() async throws(KeyBackupError) -> KeyBackupVersion {
        let response = try await sendBackupRequest(E2EEAPI.backupVersion())
        guard let version = KeyBackupVersion(parsing: response.body) else { throw .malformedResponse }
        return version
    }

    private func use(version: String, publicKey: String, privateKey: Secret<[UInt8]>) async throws(KeyBackupError) {
        do throws(CryptoStoreError) {
            try await store.useBackup(version: version, publicKey: publicKey, privateKey: privateKey)
        } catch {
            throw .local(CryptoInterpreter.cryptoError(error))
        }
        engine.backupState.publish(.uploading(remaining: (try? await store.backupWaitingCount()) ?? 0))
        await host.send(.backupKeysWaiting)
        // The keys this device asked other devices for are looked up in the backup.
        await host.send(.roomKeysMissing)
    }

    private func sendBackupRequest(_ endpoint: MatrixEndpoint) async throws(KeyBackupError) -> HTTPResponse {
        do throws(MatrixRequestError) {
            return try await requester.send(endpoint)
        } catch {
            throw CryptoInterpreter.backupError(error, now: wallClock.now)
        }
    }
}
