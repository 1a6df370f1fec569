import SymorvaCryptoDriver
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import Synchronization

/// Performs the crypto machine's effects: the store and the driver through the
/// ``CryptoEngine``, the requests through the account's requester.
struct CryptoInterpreter: EffectInterpreter {
    typealias Machine = CryptoMachine

    let engine: CryptoEngine
    let requester: any MatrixRequester
    let wallClock: any WallClock
    let logger: Logger
    /// Where `m.key.verification.*` messages go once read.
    var verifications: VerificationCenter? = nil

    func perform(_ effect: CryptoMachine.Effect, context: EffectContext<CryptoMachine.Event>) async
        -> CryptoMachine.Event?
    {
        switch effect {
        case .loadAccount:
            do throws(CryptoStoreError) {
                return .accountLoaded(.success(try await engine.load()))
            } catch {
                logger.error("crypto account not loaded error=\(error)")
                return .accountLoaded(.failure(Self.cryptoError(error)))
            }
        case .uploadKeys(let plan):
            return .keysUploaded(await upload(plan))
        case .queryKeys(let users):
            return .keysQueried(await query(users))
        case .processToDevice:
            do throws(CryptoStoreError) {
                let report = try await engine.processToDevice(nowMilliseconds: wallClock.now.millisecondsSince1970)
                if let verifications {
                    let messages = await engine.takeVerificationMessages()
                    if !messages.isEmpty { await verifications.deliver(messages) }
                }
                return .toDeviceProcessed(.success(report))
            } catch {
                logger.error("to-device processing failed error=\(error)")
                return .toDeviceProcessed(.failure(Self.cryptoError(error)))
            }
        case .sendKeyRequests:
            return .keyRequestsSent(await sendKeyRequests())
        case .answerKeyRequests:
            return .keyRequestsAnswered(await answerKeyRequests())
        case .unwedgeSessions:
            return .sessionsUnwedged(await unwedgeSessions())
        case .loadRoomKeyFacts(let room, let round):
            do throws(CryptoStoreError) {
                return .roomKeyFactsLoaded(room.roomID, round: round, .success(try await roomKeyFacts(room)))
            } catch {
                logger.error("room key facts not read error=\(error)")
                return .roomKeyFactsLoaded(room.roomID, round: round, .failure(Self.cryptoError(error)))
            }
        case .claimOneTimeKeys(let roomID, let round, let devices):
            return .oneTimeKeysClaimed(roomID, round: round, await claimOneTimeKeys(for: devices))
        case .sendRoomKey(let roomID, let round, let batch):
            return .roomKeySent(roomID, round: round, await sendRoomKey(roomID: roomID, batch: batch))
        case .uploadBackup:
            return .backupUploaded(await uploadBackup())
        case .scheduleRetry, .cancel:
            // Timers and cancellations are performed by the host.
            return nil
        }
    }

    private func upload(_ plan: KeyUploadPlan) async -> Result<Int, CryptoRequestError> {
        let endpoint: MatrixEndpoint
        do throws(CryptoStoreError) {
            endpoint = try await engine.prepareUpload(plan)
        } catch {
            logger.error("keys not prepared for upload error=\(error)")
            return .failure(Self.requestError(error))
        }
        let response: HTTPResponse
        do throws(MatrixRequestError) {
            response = try await requester.send(endpoint)
        } catch {
            logger.info("keys upload failed error=\(error)")
            return .failure(Self.requestError(error, now: wallClock.now))
        }
        // The server has the keys; this process has not recorded that yet.
        FaultPoint.keysUploadAnswered.reach()
        let count = Self.oneTimeKeyCount(in: response.body)
        do throws(CryptoStoreError) {
            try await engine.uploadAnswered(
                includedDeviceKeys: plan.deviceKeys, nowMilliseconds: wallClock.now.millisecondsSince1970)
        } catch {
            // The keys stay unpublished in the store: the next upload sends the same ones again.
            logger.error("keys upload not recorded error=\(error)")
            return .failure(Self.requestError(error))
        }
        logger.info(
            "keys uploaded device_keys=\(plan.deviceKeys) one_time_keys_on_server=\(count.map(String.init) ?? "?")")
        return .success(count ?? 0)
    }

    /// `keys/query` for `users`, their verified devices stored and their outdated marks cleared.
    func query(_ users: [UserID]) async -> Result<KeyQueryReport, CryptoRequestError> {
        let response: HTTPResponse
        do throws(MatrixRequestError) {
            let endpoint: MatrixEndpoint
            // Our own user always goes in the query: only an answer about ourselves lists our
            // user-signing key, and without it the chain cannot see that we verified a user
            // (a query of another user alone would turn its `verified` devices `crossSigned`).
            let queried = users.contains(engine.userID) ? users : users + [engine.userID]
            do { endpoint = try E2EEAPI.query(users: queried) } catch {
                return .failure(.local(.driver("canonical JSON")))
            }
            response = try await requester.send(endpoint)
        } catch {
            logger.info("keys query failed error=\(error)")
            return .failure(Self.requestError(error, now: wallClock.now))
        }
        guard let answer = try? JSONValue(parsing: response.body) else { return .failure(.server(status: 502)) }
        let answered = DeviceKeys.answeredUsers(in: answer, among: users)
        let unanswered = users.filter { !answered.contains($0) }
        var (devices, invalid) = DeviceKeys.verifiedDevices(in: answer, driver: engine.driver)
        devices = devices.filter { users.contains($0.key) }  // what was asked for is stored, no more
        do throws(CryptoStoreError) {
            // The signature chain: each answered user's identity (checked master → self-signing,
            // our user-signing → theirs) and each device's trust level, stored with the devices.
            let identities = CrossSigningChain.identities(
                in: answer, ownUser: engine.userID, ownMasterKey: try await engine.store.crossSigningMasterKey(),
                driver: engine.driver
            ).filter { answered.contains($0.key) }
            for (user, userDevices) in devices {
                devices[user] = userDevices.map { device in
                    var device = device
                    if let keys = CrossSigningChain.deviceKeys(in: answer, user: user, deviceID: device.deviceID) {
                        device.trust = CrossSigningChain.trust(
                            ofDevice: keys, owner: identities[user], driver: engine.driver)
                    }
                    return device
                }
            }
            let changed = try await engine.store.storeQueried(
                devices.filter { answered.contains($0.key) }, users: answered, identities: identities)
            engine.failedSenderQueries.withLock { failed in
                for user in answered { failed[user] = nil }
            }
            let released = try await engine.releaseHeldRoomKeys(of: answered)
            if !unanswered.isEmpty {
                logger.info("keys query left users outdated unanswered=\(unanswered.count)")
            }
            if invalid + changed > 0 {
                logger.warning("devices refused bad_signature=\(invalid) keys_changed=\(changed)")
            }
            if engine.decryptionAwaitsDevices.withLock({ waiting in
                defer { waiting = false }
                return waiting
            }) {
                engine.roomKeysStored.notify()
            }
            if !answered.isEmpty { engine.devicesQueried.withLock { $0 }?(answered) }
            // Last: what the devices and held keys need is done whatever this says.
            do throws(CryptoStoreError) {
                try await engine.refreshIdentityState()
            } catch {
                logger.error("identity state not read error=\(error)")
            }
            return .success(
                KeyQueryReport(
                    users: answered, refusedDevices: invalid + changed, unanswered: unanswered,
                    roomKeysReleased: released > 0))
        } catch {
            return .failure(Self.requestError(error))
        }
    }

    /// One `PUT sendToDevice` of `eventType` under `transactionID` (the caller derives it from
    /// the content, so a retry reuses it): `nil` once the server took it, else why not.
    func sendToDevice(
        _ eventType: String, _ messages: [String: [String: JSONValue]], transactionID: TransactionID
    ) async -> CryptoRequestError? {
        let endpoint: MatrixEndpoint
        do {
            endpoint = try E2EEAPI.sendToDevice(eventType: eventType, transactionID: transactionID, messages: messages)
        } catch {
            return .local(.driver("canonical JSON"))
        }
        do throws(MatrixRequestError) {
            _ = try await requester.send(endpoint)
            return nil
        } catch {
            logger.info("to-device messages not sent type=\(eventType) error=\(error)")
            return Self.requestError(error, now: wallClock.now)
        }
    }

    // MARK: Mapping

    static func oneTimeKeyCount(in body: [UInt8]) -> Int? {
        guard case .object(let top)? = try? JSONValue(parsing: body),
            case .object(let counts)? = top["one_time_key_counts"]
        else { return nil }
        return counts["signed_curve25519"]?.integerValue ?? 0
    }

    static func requestError(_ error: MatrixRequestError, now: Timestamp) -> CryptoRequestError {
        switch error {
        case .transport: return .network
        case .notSignedIn: return .unauthorized
        case .invalidRequest: return .rejected(status: 0, errorCode: "invalid_request")
        case .matrix(let matrix):
            switch matrix.code {
            case .unknownToken, .missingToken: return .unauthorized
            case .limitExceeded: return .rateLimited(retryAfter: matrix.retryAfter?.wait(from: now))
            default:
                if matrix.status >= 500 || matrix.status == 408 { return .server(status: matrix.status) }
                return .rejected(status: matrix.status, errorCode: matrix.code.errcode)
            }
        }
    }

    static func requestError(_ error: CryptoStoreError) -> CryptoRequestError {
        let failure = cryptoError(error)
        if case .store(let store) = failure, store == .full || store == .busy { return .storeUnavailable(store) }
        return .local(failure)
    }

    static func cryptoError(_ error: CryptoStoreError) -> CryptoError {
        switch error {
        case .store(let store): .store(store.storeFailure)
        case .secrets: .accountUnreadable
        case .driver(.badPickle): .accountUnreadable
        case .driver(let driver): .driver(driver.description)
        case .outboundSessionReplaced: .driver("outbound session replaced")
        case .notMigrated: .store(.database)
        }
    }
}
