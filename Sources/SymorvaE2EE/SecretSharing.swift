import SymorvaCryptoDriver
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

// Secret sharing between the devices of one account (the spec's `m.secret.request` /
// `m.secret.send`): a device that has another of the account's devices online instead of the
// recovery key asks for the cross-signing private keys and the key backup's key. The request
// goes unencrypted (as the spec has it) to each of our other devices that is cross-signed by
// the account; a device answers, Olm-encrypted, only a request of another of our own devices
// cross-signed by the account, and the asking device takes a secret only from such a device,
// only as the answer to a request it made, and checks it against the identity (or backup) the
// server lists before keeping it. Both sides are machines whose work the crypto store keeps:
// the asking round (SecretRequest) and the requests to answer (SecretAnswer), so a restart
// resumes either.

/// Where the engine hands what it reads of secret sharing: the other devices' requests (and
/// their cancellations) to the account's SecretAnswer machine, the secrets that arrive to the
/// SecretRequest machine (through ``AccountCrypto``).
package final class SecretSharingState: Sendable {
    /// Told of every `m.secret.send` that reached this device over Olm (the request ID, whether
    /// it came from another own device the account cross-signed, the secret): the account's
    /// SecretRequest machine decides.
    private let arrivalHandler = Lock<(@Sendable (String, Bool, Secret<String>) -> Void)?>(nil)
    /// Told, in order, of each request and cancellation of another own device once stored: the
    /// account's SecretAnswer machine.
    private let incomingHandler = Lock<(@Sendable (SecretAnswerMachine.Event) async -> Void)?>(nil)

    package init() {}

    /// Sets (or clears) what is told of each secret that arrives.
    package func setArrivalHandler(_ handler: (@Sendable (String, Bool, Secret<String>) -> Void)?) {
        arrivalHandler.withLock { $0 = handler }
    }

    func arrived(requestID: String, fromOwnCrossSignedDevice: Bool, secret: Secret<String>) {
        arrivalHandler.withLock { $0 }?(requestID, fromOwnCrossSignedDevice, secret)
    }

    /// Sets (or clears) what is told of the other devices' requests and cancellations.
    package func setIncomingHandler(_ handler: (@Sendable (SecretAnswerMachine.Event) async -> Void)?) {
        incomingHandler.withLock { $0 = handler }
    }

    /// Hands a stored request or cancellation on (awaited: they reach the machine in order).
    func incoming(_ event: SecretAnswerMachine.Event) async {
        let handler = incomingHandler.withLock { $0 }
        await handler?(event)
    }
}

// MARK: - Engine: reading requests and answers

extension CryptoEngine {
    /// The secrets this SDK shares between the account's devices.
    static let sharedSecretNames = SecretName.crossSigning + [SecretName.megolmBackup]

    /// Takes in an `m.secret.request` to-device event: a request or its cancellation from another
    /// device of this account, stored with the event's removal (anyone else's, this device's own
    /// and unknown secrets are dropped).
    func secretRequest(in row: CryptoStore.ToDeviceRow, into outcome: inout CryptoStore.ToDeviceOutcome) {
        guard row.sender == userID.rawValue, case .object(let event)? = try? JSONValue(parsing: row.raw),
            case .object(let content)? = event["content"], case .string(let action)? = content["action"],
            case .string(let requestID)? = content["request_id"],
            case .string(let device)? = content["requesting_device_id"], device != deviceID
        else { return }
        switch action {
        case "request":
            guard case .string(let name)? = content["name"], Self.sharedSecretNames.contains(name) else { return }
            outcome.secretRequest = IncomingSecretRequest(deviceID: device, requestID: requestID, name: name)
        case "request_cancellation":
            outcome.cancelledSecretRequest = (device, requestID)
        default:
            return
        }
    }

    /// Whether an Olm plaintext is an `m.secret.send` (then used or dropped here, never taken
    /// for a room key). It is used only when it comes from another device of this account that
    /// the account cross-signed, whose keys it names, and answers a request this device made.
    func secretSent(in plaintext: Secret<[UInt8]>, sender: String, senderKey: String) async throws(CryptoStoreError)
        -> Bool
    {
        guard let account, case .object(let payload)? = try? JSONValue(parsing: plaintext.exposedValue),
            payload["type"] == .string("m.secret.send")
        else { return false }
        guard sender == userID.rawValue, payload["sender"] == .string(sender),
            payload["recipient"] == .string(userID.rawValue),
            case .object(let recipientKeys)? = payload["recipient_keys"],
            recipientKeys["ed25519"] == .string(account.identityKeys.ed25519),
            case .object(let senderKeys)? = payload["keys"], case .string(let signingKey)? = senderKeys["ed25519"],
            case .object(let content)? = payload["content"], case .string(let requestID)? = content["request_id"],
            case .string(let secret)? = content["secret"]
        else { return true }
        let device = try await store.devices(of: userID).first(where: { $0.curve25519 == senderKey })
        let crossSigned =
            device.map {
                $0.deviceID != deviceID && $0.ed25519 == signingKey && !$0.keyChanged && $0.trust != .unverified
            } ?? false
        secretSharing.arrived(requestID: requestID, fromOwnCrossSignedDevice: crossSigned, secret: Secret(secret))
        return true
    }

    /// The `m.secret.send` answers, Olm-encrypted for each asking device over a stored Olm
    /// session, as `sendToDevice` messages: one per device, the device's further answers
    /// `deferred` to another round. Answers to a device without an Olm session are dropped.
    func secretMessages(
        _ answers: [(IncomingSecretRequest, CryptoStore.Device, Secret<String>)], nowMilliseconds: Int64
    ) async throws(CryptoStoreError) -> (
        messages: [String: [String: JSONValue]], answered: Int,
        deferred: [(IncomingSecretRequest, CryptoStore.Device, Secret<String>)]
    ) {
        try await exclusively {
            () async throws(CryptoStoreError) -> (
                [String: [String: JSONValue]], Int,
                [(IncomingSecretRequest, CryptoStore.Device, Secret<String>)]
            ) in
            var messages: [String: [String: JSONValue]] = [:]
            var answered = 0
            var deferred: [(IncomingSecretRequest, CryptoStore.Device, Secret<String>)] = []
            var advanced: [(senderKey: String, sessionID: String, pickle: [UInt8])] = []
            for (request, device, secret) in answers {
                guard messages[device.userID.rawValue]?[device.deviceID] == nil else {
                    deferred.append((request, device, secret))
                    continue
                }
                let payload = JSONValue.object([
                    "type": .string("m.secret.send"),
                    "content": .object([
                        "request_id": .string(request.requestID), "secret": .string(secret.exposedValue),
                    ]),
                ])
                guard let (content, pickle) = try await olmContent(payload, for: device) else { continue }
                advanced.append(pickle)
                messages[device.userID.rawValue, default: [:]][device.deviceID] = content
                answered += 1
            }
            try await store.saveOlmSessions(advanced, nowMilliseconds: nowMilliseconds)
            return (messages, answered, deferred)
        }
    }
}

// MARK: - Product: asking and answering

/// What ``AccountCrypto/requestSecretsFromOwnDevices(timeout:)`` received and did with it.
public struct SharedSecretsOutcome: Sendable, Hashable {
    /// The cross-signing private keys arrived, matched the identity the server lists, are kept,
    /// and this device is cross-signed with them.
    public var crossSigning: Bool
    /// The key backup's key arrived and the backup is in use: how many room keys its restore
    /// stored, of how many (`nil` when no backup key arrived).
    public var backupRestore: KeyBackupRestoreCount?
}

/// How many room keys a backup restore stored, of how many the backup holds.
public struct KeyBackupRestoreCount: Sendable, Hashable {
    /// Keys stored (new or better than what this device had).
    public var imported: Int
    /// Keys the backup holds.
    public var total: Int
}

extension AccountCrypto {
    /// Asks this account's other devices that the account cross-signed for its secrets — the
    /// cross-signing private keys and the key backup's key — instead of the recovery key: the
    /// way to finish a new device's set-up after another device verified it (an interactive
    /// self-verification) and cross-signed it.
    ///
    /// Each secret is requested (`m.secret.request`) of every other own device the account
    /// cross-signed; answers (`m.secret.send`, Olm-encrypted) are taken only from those devices
    /// and only for these requests; the requests are then cancelled. The cross-signing keys are
    /// kept only when they are those of the identity the server lists (then this device is
    /// cross-signed with them and the identity pinned); the backup key only when it is the
    /// current backup's (then the backup is enabled and restored, ``backupState`` showing the
    /// progress). Waits at most `timeout` for the answers (a little past the cross-signing keys
    /// for the backup's, which a device without a backup never sends).
    ///
    /// - Throws: ``RecoveryError/noTrustedDevice`` when the account has no other device it
    ///   cross-signed, ``RecoveryError/secretsNotReceived`` when none answered in time,
    ///   ``RecoveryError/identityMismatch`` when the keys received are not the listed identity's,
    ///   ``RecoveryError/backup(_:)`` when the backup key could not be used (the cross-signing
    ///   part is done by then), or a request's or the store's error.
    public func requestSecretsFromOwnDevices(timeout: Duration = .seconds(60)) async throws(RecoveryError)
        -> SharedSecretsOutcome
    {
        let (crossSigning, backupKey) = try await recoveryLock.withLock {
            () async throws(RecoveryError) -> (Bool, Secret<[UInt8]>?) in
            let devices = try await trustedOwnDevices()
            guard !devices.isEmpty else { throw .noTrustedDevice }
            // The backup's key is asked for only when the account has a backup: a device without
            // one never sends it, and the round would wait for it until its deadline.
            var names = SecretName.crossSigning
            if (try? await currentBackupVersion()) != nil { names.append(SecretName.megolmBackup) }
            let round = SecretRequestRound(
                requests: names.map { SecretRequest(requestID: engine.newRequestID(), name: $0) },
                deviceIDs: devices.map(\.deviceID), deadline: wallClock.now.advanced(by: timeout))
            logger.info("secrets requested devices=\(devices.count) secrets=\(names.count)")
            // The machine takes the answers, cancels the requests and keeps what it accepted in
            // the store; a round already in flight is waited for instead.
            let end = await secretRequests.send(.requested(round)) { state -> SecretRequestEnd? in
                if case .finished(_, let end) = state { return end }
                return nil
            }
            guard let end else { throw .unavailable }
            let received: [String: Secret<String>]
            do { received = try await store.takeReceivedSecrets() } catch { throw .store }
            logger.info("secrets received count=\(received.count)")
            if received.isEmpty, end == .sendFailed { throw .unavailable }
            guard !received.isEmpty else { throw .secretsNotReceived }
            var crossSigning = false
            let seeds = SecretName.crossSigning.compactMap { received[$0].flatMap(Self.seed) }
            if seeds.count == 3 {
                let keys = try Self.recovery { () throws(CrossSigningError) in
                    try CrossSigningKeys(
                        userID: userID, masterSeed: seeds[0], selfSigningSeed: seeds[1], userSigningSeed: seeds[2],
                        driver: engine.driver)
                }
                let answer = try await queryOwnKeys()
                guard
                    let listed = CrossSigningChain.identities(
                        in: answer, ownUser: userID, ownMasterKey: nil, driver: engine.driver)[userID],
                    listed.masterKey == keys.master.publicKey, listed.selfSigningKey == keys.selfSigning.publicKey
                else { throw .identityMismatch }
                try await keep(keys)
                try await signThisDevice(with: keys, answer: answer)
                try await pinOwnIdentity(keys)
                // The device list may not change (another device signed this one already): the
                // stored trust levels are read again with the master key now held.
                _ = await interpreter.query([userID])
                crossSigning = true
            }
            return (crossSigning, received[SecretName.megolmBackup].flatMap(Self.seed))
        }
        guard let backupKey else { return SharedSecretsOutcome(crossSigning: crossSigning, backupRestore: nil) }
        do throws(KeyBackupError) {
            _ = try await enableBackup(privateKey: backupKey)
            let (imported, total) = try await restoreBackup()
            return SharedSecretsOutcome(
                crossSigning: crossSigning, backupRestore: KeyBackupRestoreCount(imported: imported, total: total))
        } catch {
            throw .backup(error)
        }
    }

    /// Cross-signs another device of this account with the self-signing key this device holds
    /// (what a device does once an interactive verification showed the other device is the
    /// member's). The other device can then ask for the secrets
    /// (``requestSecretsFromOwnDevices(timeout:)``).
    ///
    /// - Throws: ``RecoveryError/notReady`` when this device holds no cross-signing keys or the
    ///   server does not list the device, or a request's error.
    package func crossSignOwnDevice(_ otherDevice: String) async throws(RecoveryError) {
        try await recoveryLock.withLock { () async throws(RecoveryError) in
            guard let keys = try await heldKeys() else { throw .notReady }
            let answer = try await queryOwnKeys()
            guard let deviceKeys = CrossSigningChain.deviceKeys(in: answer, user: userID, deviceID: otherDevice)
            else { throw .notReady }
            let signed = try Self.recovery { () throws(CrossSigningError) in try keys.signDevice(deviceKeys) }
            let endpoint = try Self.endpoint { () throws(JSONValue.CanonicalJSONError) in
                try E2EEAPI.uploadSignatures([userID.rawValue: [otherDevice: signed]])
            }
            let body: [UInt8]
            do throws(MatrixRequestError) { body = try await requester.send(endpoint).body } catch {
                throw Self.recoveryError(error)
            }
            if case .object(let members)? = try? JSONValue(parsing: body),
                case .object(let failures)? = members["failures"], !failures.isEmpty
            {
                throw .rejected(status: 400, errorCode: "signature_failures")
            }
            // This device's view of the signed device follows at once.
            _ = await interpreter.query([userID])
        }
    }

    /// The SecretAnswer machine's check of `requests`: whether each asking device is another
    /// device of this account that the account cross-signed (keys not changed) — after a fresh
    /// `keys/query` of the account when the stored list does not say so for one of them (the
    /// stored list when the query fails) — and whether this device holds the secret. A store
    /// failure checks nothing: nothing is answered.
    func checkSecretRequests(_ requests: [IncomingSecretRequest]) async -> [SecretRequestCheck] {
        func trusted(_ request: IncomingSecretRequest, in devices: [CryptoStore.Device]) -> Bool {
            request.deviceID != deviceID.rawValue
                && devices.contains { $0.deviceID == request.deviceID && !$0.keyChanged && $0.trust != .unverified }
        }
        do throws(RecoveryError) {
            var devices = try await ownDeviceList(refresh: false)
            if requests.contains(where: { !trusted($0, in: devices) }) {
                do throws(RecoveryError) { devices = try await ownDeviceList(refresh: true) } catch .unavailable {
                    logger.info("secret requests checked on the stored device list: keys query failed")
                }
            }
            var checks: [SecretRequestCheck] = []
            for request in requests {
                let fromTrusted = trusted(request, in: devices)
                let held = fromTrusted ? try await heldSecret(request.name) != nil : false
                checks.append(
                    SecretRequestCheck(request: request, fromOwnCrossSignedDevice: fromTrusted, secretHeld: held))
            }
            let refused = checks.filter { !$0.fromOwnCrossSignedDevice }.count
            if refused > 0 { logger.info("secret requests refused=\(refused) of=\(requests.count)") }
            return checks
        } catch {
            logger.error("secret requests not checked error=\(error)")
            return []
        }
    }

    /// The SecretAnswer machine's answers: each request's secret, read now, Olm-encrypted to its
    /// device as stored (a `keys/claim` first for a device without an Olm session). Returns
    /// `nil` once sent, or why not.
    func sendSecretAnswers(_ requests: [IncomingSecretRequest]) async -> TransportProblem? {
        do throws(RecoveryError) {
            let devices = try await ownDeviceList(refresh: false)
            var answers: [(IncomingSecretRequest, CryptoStore.Device, Secret<String>)] = []
            for request in requests {
                guard
                    let device = devices.first(where: {
                        $0.deviceID == request.deviceID && !$0.keyChanged && $0.trust != .unverified
                    }), let secret = try await heldSecret(request.name)
                else { continue }
                answers.append((request, device, secret))
            }
            let answered = try await sendSecrets(answers)
            logger.info("secret requests answered=\(answered) of=\(requests.count)")
            return nil
        } catch {
            logger.error("secret requests not answered error=\(error)")
            return .unreachable
        }
    }

    // MARK: Steps

    /// The account's other devices it cross-signed, after a `keys/query` of this account.
    private func trustedOwnDevices() async throws(RecoveryError) -> [CryptoStore.Device] {
        try await ownDeviceList(refresh: true).filter {
            $0.deviceID != deviceID.rawValue && !$0.keyChanged && $0.trust != .unverified
        }
    }

    private func ownDeviceList(refresh: Bool) async throws(RecoveryError) -> [CryptoStore.Device] {
        if refresh, case .failure = await interpreter.query([userID]) { throw .unavailable }
        do { return try await store.devices(of: userID) } catch { throw .store }
    }

    /// The secret `name` as this device holds it (the unpadded base64 of the key), or `nil`.
    private func heldSecret(_ name: String) async throws(RecoveryError) -> Secret<String>? {
        let key: Secret<[UInt8]>?
        switch name {
        case SecretName.master: key = try await heldKeys()?.master.seed
        case SecretName.selfSigning: key = try await heldKeys()?.selfSigning.seed
        case SecretName.userSigning: key = try await heldKeys()?.userSigning.seed
        case SecretName.megolmBackup:
            do throws(KeyBackupError) {
                let status = try await backupStatus()
                key = status.version != nil && status.stopReason == nil ? try await backupPrivateKey() : nil
            } catch {
                throw .backup(error)
            }
        default: key = nil
        }
        return key.map { $0.map { UnpaddedBase64.encode($0) } }
    }

    /// Takes in a secret that arrived over Olm: finds what it claims to be (the open request it
    /// answers) and whether it matches the public key the server lists, then lets the machine
    /// decide. The lookup of the name is for that check only; the machine checks the request.
    func secretArrived(requestID: String, fromOwnCrossSignedDevice: Bool, secret: Secret<String>) async {
        let name: String?
        switch secretRequests.states.value {
        case .sending(let round), .waiting(let round): name = round.open.first { $0.requestID == requestID }?.name
        case .idle, .cancelling, .finished: name = nil
        }
        guard let name else { return }  // no open request of ours: nothing to decide
        let matches = fromOwnCrossSignedDevice ? await secretMatchesServer(name, secret) : false
        await secretRequests.send(
            .secretArrived(
                SecretArrival(
                    requestID: requestID, overOlm: true, fromOwnCrossSignedDevice: fromOwnCrossSignedDevice,
                    matchesPublicKey: matches, secret: secret)))
    }

    /// Whether `secret` is the private key of what the server lists: the account's cross-signing
    /// key of that name (`keys/query`), or the current backup version's key.
    private func secretMatchesServer(_ name: String, _ secret: Secret<String>) async -> Bool {
        guard let seed = Self.seed(secret) else { return false }
        switch name {
        case SecretName.master, SecretName.selfSigning, SecretName.userSigning:
            guard let key = try? engine.driver.signingKey(seed: seed), let answer = try? await queryOwnKeys(),
                let listed = CrossSigningChain.identities(
                    in: answer, ownUser: userID, ownMasterKey: nil, driver: engine.driver)[userID]
            else { return false }
            let expected =
                switch name {
                case SecretName.master: listed.masterKey
                case SecretName.selfSigning: listed.selfSigningKey
                default: listed.userSigningKey
                }
            return key.publicKey == expected
        case SecretName.megolmBackup:
            guard let key = try? engine.driver.backupDecryptionKey(privateKey: seed),
                let current = try? await currentBackupVersion()
            else { return false }
            return current.publicKey == key.publicKey
        default:
            return false
        }
    }

    /// A 32-byte key from its secret text (unpadded base64; padding tolerated), or `nil`.
    static func seed(_ secret: Secret<String>) -> Secret<[UInt8]>? {
        guard let bytes = UnpaddedBase64.decode(secret.exposedValue), bytes.count == 32 else { return nil }
        return Secret(bytes)
    }

    /// Sends each answer over Olm, claiming one-time keys for devices without a session;
    /// returns how many were sent.
    private func sendSecrets(_ answers: [(IncomingSecretRequest, CryptoStore.Device, Secret<String>)])
        async throws(RecoveryError) -> Int
    {
        guard !answers.isEmpty else { return 0 }
        let now = wallClock.now.millisecondsSince1970
        let withoutSession: [CryptoStore.Device]
        do { withoutSession = try await engine.devicesWithoutSession(Array(Set(answers.map(\.1)))) } catch {
            throw .store
        }
        if !withoutSession.isEmpty {
            let wanted = Dictionary(grouping: withoutSession, by: \.userID).mapValues { $0.map(\.deviceID) }
            let endpoint = try Self.endpoint { () throws(JSONValue.CanonicalJSONError) in try E2EEAPI.claim(wanted) }
            let body: [UInt8]
            do throws(MatrixRequestError) { body = try await requester.send(endpoint).body } catch {
                throw Self.recoveryError(error)
            }
            do {
                _ = try await engine.createSessions(
                    CryptoInterpreter.claimedKeys(in: body, for: withoutSession), nowMilliseconds: now)
            } catch {
                throw .store
            }
        }
        var remaining = answers
        var sent = 0
        while !remaining.isEmpty {
            let round:
                (
                    messages: [String: [String: JSONValue]], answered: Int,
                    deferred: [(IncomingSecretRequest, CryptoStore.Device, Secret<String>)]
                )
            do { round = try await engine.secretMessages(remaining, nowMilliseconds: now) } catch { throw .store }
            guard round.answered > 0 else { break }
            let ids = remaining.map { "\($0.0.deviceID)|\($0.0.requestID)" }.sorted().joined(separator: ",")
            let transactionID = TransactionID("ss-\(engine.driver.sha256(Array(ids.utf8)).prefix(24))")
            if await interpreter.sendToDevice("m.room.encrypted", round.messages, transactionID: transactionID) != nil {
                throw .unavailable
            }
            sent += round.answered
            remaining = round.deferred
        }
        return sent
    }
}
