import SymorvaCryptoDriver
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore

// Server-side key backup (`m.megolm_backup.v1.curve25519-aes-sha2`, `docs/e2ee.md`, "Key
// backup"): the engine encrypts entries, the interpreter uploads the outbox in batches, the
// product creates, enables and restores.

extension CryptoEngine {
    /// `auth_data` for a backup of `publicKey`, signed by this device.
    package func backupAuthData(publicKey: String) throws(KeyBackupError) -> JSONValue {
        guard let account else { throw .notReady }
        do {
            return try signed(.object(["public_key": .string(publicKey)]), by: account)
        } catch {
            throw .local(.driver("canonical JSON"))
        }
    }

    /// The backup entry of a stored session: exported at its first known index, encrypted for
    /// `publicKey`. Sessions of this device are verified; a forwarded one counts one forward.
    func backupEntry(_ row: CryptoStore.InboundSessionRow, publicKey: String) throws(CryptoStoreError)
        -> BackedUpRoomKey
    {
        guard let pickleKey else { throw .driver(.badPickle) }
        let ciphertext: BackupCiphertext
        do throws(CryptoDriverError) {
            let session = try driver.inboundGroupSession(pickle: row.pickle, key: pickleKey)
            let exported = try session.export(from: session.firstKnownIndex)
            let plaintext: Secret<[UInt8]>
            do {
                plaintext = try BackedUpSession(
                    senderKey: row.senderKey, claimedSigningKey: row.signingKey, sessionKey: exported
                ).plaintext()
            } catch {
                throw CryptoDriverError.badMessage
            }
            ciphertext = try driver.backupEncrypt(plaintext, for: publicKey)
        } catch {
            throw .driver(error)
        }
        let own = row.senderKey == account?.identityKeys.curve25519
        return BackedUpRoomKey(
            firstMessageIndex: row.firstKnownIndex, forwardedCount: row.forwarded ? 1 : 0,
            isVerified: own && !row.forwarded,
            sessionData: ciphertext)
    }
}

extension CryptoInterpreter {
    /// How many room keys one `PUT room_keys/keys` carries.
    static let backupBatchSize = 100

    /// Uploads the oldest batch of the outbox to the backup in use (``CryptoMachine/Effect/uploadBackup``).
    func uploadBackup() async -> Result<BackupUploadReport, CryptoRequestError> {
        let store = engine.store
        let backup: CryptoStore.StoredBackup
        let entries: [CryptoStore.BackupOutboxEntry]
        var body: [String: [String: JSONValue]] = [:]
        do throws(CryptoStoreError) {
            guard let stored = try await store.storedBackup(), stored.stopped == nil else {
                engine.backupState.publish(.disabled)
                return .success(BackupUploadReport(uploaded: 0, remaining: 0, stopped: true))
            }
            backup = stored
            entries = try await store.backupOutbox(limit: Self.backupBatchSize)
            guard !entries.isEmpty else {
                engine.backupState.publish(.upToDate)
                return .success(BackupUploadReport(uploaded: 0, remaining: 0))
            }
            engine.backupState.publish(.uploading(remaining: try await store.backupWaitingCount()))
            for entry in entries {
                let key = try await engine.backupEntry(entry.session, publicKey: backup.publicKey)
                body[entry.session.roomID, default: [:]][entry.session.sessionID] = key.json
            }
        } catch {
            logger.error("key backup batch not prepared error=\(error)")
            return .failure(Self.requestError(error))
        }
        let rooms = JSONValue.object(["rooms": .object(body.mapValues { .object(["sessions": .object($0)]) })])
        do throws(MatrixRequestError) {
            let endpoint: MatrixEndpoint
            do { endpoint = try E2EEAPI.putRoomKeys(version: backup.version, scope: .all, body: rooms) } catch {
                return .failure(.local(.driver("canonical JSON")))
            }
            _ = try await requester.send(endpoint)
        } catch {
            if var reason = Self.backupStopReason(error) {
                // Not the current version: replaced, unless it is gone altogether.
                if reason == .replaced, await isDeleted(version: backup.version) { reason = .deleted }
                logger.warning("key backup no longer in use reason=\(reason.rawValue)")
                do throws(CryptoStoreError) { try await store.stopBackup(reason) } catch {
                    return .failure(Self.requestError(error))
                }
                engine.backupState.publish(.disabled)
                return .success(BackupUploadReport(uploaded: 0, remaining: 0, stopped: true))
            }
            logger.info("key backup upload failed error=\(error)")
            return .failure(Self.requestError(error, now: wallClock.now))
        }
        // The server has the keys; this process has not removed them from the outbox yet (a kill
        // here uploads them again, which the server's merge rules make harmless).
        FaultPoint.backupUploadAnswered.reach()
        if let report = engine.backupUploadLags.withLock({ $0 }) {
            let now = wallClock.now.millisecondsSince1970
            report(entries.map { now - $0.queuedMilliseconds })
        }
        do throws(CryptoStoreError) {
            let remaining = try await store.backupUploaded(
                entries.map { ($0.session.roomID, $0.session.sessionID, $0.seq) })
            engine.backupState.publish(remaining == 0 ? .upToDate : .uploading(remaining: remaining))
            logger.info("key backup uploaded keys=\(entries.count) remaining=\(remaining)")
            return .success(BackupUploadReport(uploaded: entries.count, remaining: remaining))
        } catch {
            return .failure(Self.requestError(error))
        }
    }

    /// Whether `error` says the backup version is gone: replaced by another version
    /// (`M_WRONG_ROOM_KEYS_VERSION`) or deleted (`M_NOT_FOUND`).
    static func backupStopReason(_ error: MatrixRequestError) -> KeyBackupStopReason? {
        guard case .matrix(let matrix) = error else { return nil }
        if matrix.code == .other(E2EEAPI.wrongRoomKeysVersion) { return .replaced }
        if matrix.code == .notFound, matrix.status == 404 { return .deleted }
        return nil
    }

    /// Whether the server no longer has backup `version` at all.
    func isDeleted(version: String) async -> Bool {
        do throws(MatrixRequestError) {
            _ = try await requester.send(E2EEAPI.backupVersion(version))
            return false
        } catch {
            if case .matrix(let matrix) = error, matrix.code == .notFound { return true }
            return false
        }
    }

    /// The stored session `sessionID` of `roomID` fetched from the backup in use, when this
    /// device has its key: `true` when it was stored.
    func fetchFromBackup(roomID: String, sessionID: String) async -> Bool {
        let room = RoomID(roomID)
        guard let backup = try? await engine.store.storedBackup(), backup.stopped == nil,
            let privateKey = try? await engine.store.backupPrivateKey()
        else { return false }
        let response: HTTPResponse
        do throws(MatrixRequestError) {
            response = try await requester.send(
                E2EEAPI.roomKeys(version: backup.version, scope: .session(room, sessionID: sessionID)))
        } catch {
            if case .matrix(let matrix) = error, matrix.code == .other(E2EEAPI.wrongRoomKeysVersion) {
                try? await engine.store.stopBackup(.replaced)
                engine.backupState.publish(.disabled)
            }
            logger.info("room key not in the key backup error=\(error)")
            return false
        }
        guard let json = try? JSONValue(parsing: response.body), let entry = BackedUpRoomKey(json: json),
            let rows = try? await engine.restoredSessions([(roomID, sessionID, entry)], privateKey: privateKey),
            !rows.isEmpty
        else {
            logger.warning("room key from the key backup unreadable")
            return false
        }
        do throws(CryptoStoreError) {
            let stored = try await engine.importBackedUp(rows)
            if stored > 0 { logger.info("room key restored from the key backup") }
            return stored > 0
        } catch {
            return false
        }
    }

    static func backupError(_ error: MatrixRequestError, now: Timestamp) -> KeyBackupError {
        if case .matrix(let matrix) = error {
            if matrix.code == .other(E2EEAPI.wrongRoomKeysVersion) { return .wrongVersion }
            if matrix.code == .notFound { return .notFound }
        }
        switch requestError(error, now: now) {
        case .rejected(let status, let code): return .rejected(status: status, errorCode: code)
        case .local(let local): return .local(local)
        default: return .unavailable
        }
    }
}

extension CryptoEngine {
    /// The inbound session rows of backup entries decrypted with the backup key `privateKey`
    /// (stored as forwarded and from the backup: not verified). An entry that does not decrypt,
    /// is not a Megolm session, or is another session than its place says is left out.
    package func restoredSessions(
        _ entries: [(roomID: String, sessionID: String, key: BackedUpRoomKey)], privateKey: Secret<[UInt8]>
    ) throws(KeyBackupError) -> [CryptoStore.InboundSessionRow] {
        guard let pickleKey else { throw .notReady }
        let key: any BackupDecryptionKey
        do { key = try driver.backupDecryptionKey(privateKey: privateKey) } catch { throw .keyMismatch }
        return entries.compactMap { entry in
            guard let plaintext = try? key.decrypt(entry.key.sessionData),
                let session = BackedUpSession(plaintext: plaintext), session.algorithm == Self.megolmAlgorithm,
                let imported = try? driver.inboundGroupSession(exportedKey: session.sessionKey),
                imported.sessionID == entry.sessionID, let pickle = try? imported.pickle(key: pickleKey)
            else { return nil }
            return CryptoStore.InboundSessionRow(
                roomID: entry.roomID, sessionID: entry.sessionID, senderKey: session.senderKey,
                signingKey: session.claimedSigningKey, forwarded: true, pickle: pickle, senderUser: nil,
                firstKnownIndex: imported.firstKnownIndex, fromBackup: true)
        }
    }
}
