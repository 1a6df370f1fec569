import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaFeatureKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// The account's Olm account and what is done with it, behind one actor: libolm objects are
/// not thread-safe, and every use of the account (signing, generating keys, pickling) is
/// serialized here. The crypto machine's interpreter calls it; nothing else holds the account.
package actor CryptoEngine {
    /// The algorithms this device supports.
    static let algorithms = ["m.olm.v1.curve25519-aes-sha2", "m.megolm.v1.aes-sha2"]

    let driver: any CryptoDriver
    let store: CryptoStore
    let userID: UserID
    let deviceID: String
    private(set) var account: (any CryptoAccount)?
    private(set) var pickleKey: Secret<[UInt8]>?
    private var published = false
    /// When a fallback key that replaced another was published (wall clock, milliseconds): the
    /// old one is forgotten ``oldFallbackKeyLifetimeMilliseconds`` later.
    private var fallbackRotatedMilliseconds: Int64?
    /// Whether the upload in flight carries a fallback key.
    private var uploadCarriesFallbackKey = false
    /// How long a replaced fallback key still starts sessions: pre-key messages sent on it before
    /// the new one was published (delayed to-device messages) are still read, and then it is gone.
    static let oldFallbackKeyLifetimeMilliseconds: Int64 = 3_600_000
    /// Told whenever a room key is stored (chat tries its undecrypted events again).
    package let roomKeysStored = Notifier()
    /// Told of the users whose device lists (and their devices' trust) a `keys/query` just
    /// stored: chat tries again the messages of theirs it refused while their sending device was
    /// not cross-signed (the refusal is a state: the device may be cross-signed, or verified by
    /// us, since).
    package let devicesQueried = Lock<(@Sendable ([UserID]) -> Void)?>(nil)
    /// Where the key backup is (`AccountCrypto.backupState`).
    package let backupState = ObservableValue<KeyBackupState>.Publisher(.disabled)
    /// Told of each confirmed backup upload: how long each of its keys waited, from entering the
    /// outbox to the server's answer (milliseconds). The `backup-lag` benchmark listens.
    package let backupUploadLags = Lock<(@Sendable ([Int64]) -> Void)?>(nil)
    /// Inbound Megolm sessions already unpickled for decryption (``inboundSession(roomID:sessionID:)``).
    private var inboundSessions: [InboundKey: KeptInboundSession] = [:]
    /// An event was left undecrypted because its sender's device list could not be queried:
    /// the next `keys/query` that succeeds tells ``roomKeysStored`` so that chat tries again.
    let decryptionAwaitsDevices = Lock(false)
    /// When a decryption's own `keys/query` of a sender last failed in a way that can pass
    /// (wall clock, milliseconds): the sender's next events wait instead of asking again, until
    /// ``senderQueryRetryMilliseconds`` passed or a query of the sender succeeds.
    let failedSenderQueries = Lock<[UserID: Int64]>([:])
    /// How long after a failed query of a sender a decryption asks again.
    static let senderQueryRetryMilliseconds: Int64 = 30_000
    /// When a decryption last asked the server again about a sender whose device it lists as not
    /// cross-signed (strict policy, wall clock, milliseconds): before such a message is refused
    /// for good, the sender is queried once more, at most once per ``unverifiedRecheckMilliseconds``
    /// (the signature that cross-signs a new device may have been uploaded since the last query,
    /// its device-list change not synced yet).
    let unverifiedSenderRechecks = Lock<[UserID: Int64]>([:])
    /// How often a sender listed not cross-signed is asked about again.
    static let unverifiedRecheckMilliseconds: Int64 = 60_000
    /// The one critical section of every change to the account, an Olm session or a Megolm
    /// session: from reading it to its durable save, nothing else changes key material
    /// (``exclusively(_:)``). An actor alone does not give that: its methods interleave at every
    /// `await`, so a send and a receive on one session would each save their own advance and
    /// one would be lost (and its message key used again).
    private let sessionLock = AsyncLock()
    /// The account's cross-signing identity state (``refreshIdentityState()``).
    package let identityState = ObservableValue<IdentityState>.Publisher(.none)
    /// Secret requests of our other devices and the secrets they sent this device
    /// (`m.secret.request` / `m.secret.send`, `SecretSharing.swift`).
    package let secretSharing = SecretSharingState()
    /// `m.key.verification.*` to-device messages read from the inbox and not yet handed to the
    /// verification center (``takeVerificationMessages()``).
    private var verificationInbox: [VerificationInboxMessage] = []

    /// The verification messages read since the last call, in arrival order.
    package func takeVerificationMessages() -> [VerificationInboxMessage] {
        defer { verificationInbox = [] }
        return verificationInbox
    }

    /// Which devices get room keys, and whose requests and forwarded keys are taken.
    let roomKeyPolicy: SymorvaConfiguration.RoomKeyPolicy

    package init(
        driver: any CryptoDriver, store: CryptoStore, userID: UserID, deviceID: String,
        roomKeyPolicy: SymorvaConfiguration.RoomKeyPolicy = .crossSignedOnly
    ) {
        self.driver = driver
        self.store = store
        self.userID = userID
        self.deviceID = deviceID
        self.roomKeyPolicy = roomKeyPolicy
    }

    /// Whether the room key policy allows `device`: to receive room keys, and (one of this
    /// account's) to have its key requests answered and its forwarded keys taken. Under
    /// `crossSignedOnly`, a device of a user whose identity changed (or disappeared) since it
    /// was pinned is not allowed until the change is acknowledged.
    package nonisolated func policyAllows(_ device: CryptoStore.Device) async throws(CryptoStoreError) -> Bool {
        if device.keyChanged { return false }
        switch roomKeyPolicy {
        case .allDevices: return true
        case .crossSignedOnly:
            // A user whose identity changed (or disappeared), not acknowledged: nothing.
            guard device.trust != .unverified else { return false }
            return try await store.identity(of: device.userID)?.changedMasterKey == nil
        case .crossSignedWhenAvailable:
            // A user whose identity was never seen has no way to cross-sign: all their devices.
            if device.trust != .unverified { return true }
            return try await store.identity(of: device.userID) == nil
        }
    }

    /// Runs `body` inside the engine's critical section (``sessionLock``). Only the engine's
    /// entry points call it, never one another: the lock is not reentrant.
    func exclusively<T: Sendable>(_ body: () async throws(CryptoStoreError) -> T) async throws(CryptoStoreError)
        -> T
    {
        await sessionLock.lock()
        do {
            let value = try await body()
            await sessionLock.unlock()
            return value
        } catch {
            await sessionLock.unlock()
            throw error
        }
    }

    /// The device's identity keys, once the account is loaded.
    package var identityKeys: IdentityKeys? { account?.identityKeys }

    /// Loads the stored account, or creates and stores one; reports what the machine needs.
    package func load() async throws(CryptoStoreError) -> CryptoAccountStatus {
        try await exclusively { () async throws(CryptoStoreError) in try await loadAccount() }
        // Events that came before the account was loaded wait for keys: try them now.
        roomKeysStored.notify()
        // The account's own devices are tracked like everyone else's.
        _ = try await store.track([userID])
        try await refreshIdentityState()
        return CryptoAccountStatus(
            deviceKeysPublished: published, maxOneTimeKeys: account?.maxOneTimeKeys ?? 100,
            serverOneTimeKeyCount: try await store.serverOneTimeKeyCount(),
            outdatedUsers: try await store.outdatedUsers(), hasPendingToDevice: try await store.hasPendingToDevice(),
            hasKeyRequestsToSend: try await store.hasKeyRequestsToSend(),
            hasKeyRequestsToAnswer: try await store.hasKeyRequestsToAnswer(),
            hasWedgedSessions: try await store.hasWedgedDevices(),
            hasBackupKeysWaiting: try await store.backupWaitingCount() > 0)
    }

    /// Reads the stored account into memory, or creates and stores one. Inside the critical
    /// section; also how a change that could not be stored is undone (the account in memory is
    /// replaced by the stored one, so a one-time key spent on a pre-key message whose outcome was
    /// not stored is usable again when the message is processed again).
    private func loadAccount() async throws(CryptoStoreError) {
        if let stored = try await store.loadAccount() {
            do { account = try driver.account(pickle: stored.pickle, key: stored.pickleKey) } catch {
                throw .driver(error)
            }
            pickleKey = stored.pickleKey
            published = stored.published
            fallbackRotatedMilliseconds = stored.fallbackRotatedMilliseconds
            return
        }
        let key: Secret<[UInt8]>
        let created: any CryptoAccount
        let pickle: [UInt8]
        do { key = try SecretBox.generateKey() } catch { throw .secrets(error) }
        do {
            created = try driver.newAccount()
            pickle = try created.pickle(key: key)
        } catch {
            throw .driver(error)
        }
        try await store.createAccount(pickle: pickle, pickleKey: key, deviceID: deviceID)
        account = created
        pickleKey = key
        published = false
    }

    /// The `keys/upload` for `plan`, after generating what the account lacks and storing the
    /// account with it (so that a crash before the answer re-sends the same keys).
    package func prepareUpload(_ plan: KeyUploadPlan) async throws(CryptoStoreError) -> MatrixEndpoint {
        try await exclusively { () async throws(CryptoStoreError) -> MatrixEndpoint in
            guard let account, let pickleKey else { throw .driver(.library("account not loaded")) }
            do {
                var oneTimeKeys = try account.unpublishedOneTimeKeys()
                let wanted = min(plan.newOneTimeKeys, account.maxOneTimeKeys)
                if oneTimeKeys.count < wanted {
                    try account.generateOneTimeKeys(wanted - oneTimeKeys.count)
                    oneTimeKeys = try account.unpublishedOneTimeKeys()
                }
                var fallback = try account.unpublishedFallbackKey()
                if plan.rotateFallbackKey && fallback.isEmpty {
                    try account.generateFallbackKey()
                    fallback = try account.unpublishedFallbackKey()
                }
                uploadCarriesFallbackKey = !fallback.isEmpty
                try await store.saveAccount(
                    pickle: try account.pickle(key: pickleKey), published: published,
                    fallbackRotatedMilliseconds: fallbackRotatedMilliseconds)
                let deviceKeys = plan.deviceKeys ? try signed(deviceKeysObject(account.identityKeys), by: account) : nil
                let signedOneTimeKeys = try oneTimeKeys.reduce(into: [String: JSONValue]()) { result, entry in
                    result["signed_curve25519:\(entry.key)"] = try signed(
                        .object(["key": .string(entry.value)]), by: account)
                }
                let signedFallback = try fallback.reduce(into: [String: JSONValue]()) { result, entry in
                    result["signed_curve25519:\(entry.key)"] = try signed(
                        .object(["key": .string(entry.value), "fallback": .bool(true)]), by: account)
                }
                return try E2EEAPI.upload(
                    deviceKeys: deviceKeys, oneTimeKeys: signedOneTimeKeys, fallbackKeys: signedFallback)
            } catch let error as CryptoStoreError {
                throw error
            } catch let error as CryptoDriverError {
                throw .driver(error)
            } catch {
                throw .driver(.library("canonical JSON"))
            }
        }
    }

    /// The server accepted the upload: the keys are published (and the device keys with them).
    /// A fallback key it carried replaces the previous one, which is forgotten an hour later.
    package func uploadAnswered(includedDeviceKeys: Bool, nowMilliseconds: Int64) async throws(CryptoStoreError) {
        try await exclusively { () async throws(CryptoStoreError) -> Void in
            guard let account, let pickleKey else { return }
            account.markKeysAsPublished()
            if includedDeviceKeys { published = true }
            if uploadCarriesFallbackKey { fallbackRotatedMilliseconds = nowMilliseconds }
            uploadCarriesFallbackKey = false
            let pickle: [UInt8]
            do throws(CryptoDriverError) { pickle = try account.pickle(key: pickleKey) } catch {
                throw .driver(error)
            }
            try await store.saveAccount(
                pickle: pickle, published: published, fallbackRotatedMilliseconds: fallbackRotatedMilliseconds)
        }
    }

    /// Forgets the fallback key the current one replaced, once its hour is over (inside the
    /// critical section).
    private func forgetOldFallbackKeyIfDue(nowMilliseconds: Int64) async throws(CryptoStoreError) {
        guard let rotated = fallbackRotatedMilliseconds,
            nowMilliseconds - rotated >= Self.oldFallbackKeyLifetimeMilliseconds, let account, let pickleKey
        else { return }
        account.forgetOldFallbackKey()
        let pickle: [UInt8]
        do throws(CryptoDriverError) { pickle = try account.pickle(key: pickleKey) } catch { throw .driver(error) }
        try await store.saveAccount(pickle: pickle, published: published, fallbackRotatedMilliseconds: nil)
        fallbackRotatedMilliseconds = nil
    }

    /// This device's keys object (unsigned).
    func deviceKeysObject(_ keys: IdentityKeys) -> JSONValue {
        .object([
            "algorithms": .array(Self.algorithms.map { .string($0) }),
            "device_id": .string(deviceID),
            "keys": .object([
                "curve25519:\(deviceID)": .string(keys.curve25519), "ed25519:\(deviceID)": .string(keys.ed25519),
            ]),
            "user_id": .string(userID.rawValue),
        ])
    }

    /// `object` with this device's signature over its canonical JSON added under `signatures`.
    func signed(_ object: JSONValue, by account: any CryptoAccount) throws -> JSONValue {
        guard case .object(var members) = object else { return object }
        members["signatures"] = nil
        members["unsigned"] = nil
        let signature = account.sign(try JSONValue.object(members).canonicalEncoding())
        if case .object(let original) = object { members = original }
        members["signatures"] = .object([userID.rawValue: .object(["ed25519:\(deviceID)": .string(signature)])])
        return .object(members)
    }
}

// MARK: - To-device messages

extension CryptoEngine {
    static let olmAlgorithm = "m.olm.v1.curve25519-aes-sha2"
    static let megolmAlgorithm = "m.megolm.v1.aes-sha2"

    /// Processes the stored to-device events in arrival order, each removed in the transaction
    /// that stores what it brought (an Olm session, a room key, another own device's key
    /// request). Returns how many were processed and what key request work follows.
    package func processToDevice(nowMilliseconds: Int64) async throws(CryptoStoreError) -> ToDeviceReport {
        var report = ToDeviceReport(processed: 0)
        while true {
            let rows = try await store.toDeviceBatch(limit: 50)
            if rows.isEmpty {
                // What arrived was read first: then a replaced fallback key past its hour goes.
                try await exclusively { () async throws(CryptoStoreError) in
                    try await forgetOldFallbackKeyIfDue(nowMilliseconds: nowMilliseconds)
                }
                return report
            }
            for row in rows {
                let (outcome, arrived) = try await exclusively {
                    () async throws(CryptoStoreError) -> (
                        CryptoStore.ToDeviceOutcome, (requestedKeyArrived: Bool, wedged: Bool)
                    ) in
                    let outcome = try await handle(row)
                    do throws(CryptoStoreError) {
                        return (outcome, try await store.apply(outcome, nowMilliseconds: nowMilliseconds))
                    } catch {
                        // What the event changed in memory (a one-time key spent) is undone: the
                        // event stays stored and is processed again with the stored account.
                        if outcome.accountPickle != nil { try? await loadAccount() }
                        throw error
                    }
                }
                if arrived.requestedKeyArrived { report.requestedKeysArrived = true }
                if outcome.wedgedSender != nil, arrived.wedged { report.sessionsWedged = true }
                if let held = outcome.heldRoomKey?.senderUser, !report.heldForUsers.contains(held) {
                    report.heldForUsers.append(held)
                }
                if outcome.incomingRequest != nil { report.keyRequestsReceived = true }
                // Stored with the event: now the SecretAnswer machine hears of it, in order.
                if let request = outcome.secretRequest {
                    await secretSharing.incoming(.requestReceived(request))
                }
                if let cancelled = outcome.cancelledSecretRequest {
                    await secretSharing.incoming(
                        .cancellationReceived(deviceID: cancelled.deviceID, requestID: cancelled.requestID))
                }
                report.processed += 1
                if let stored = outcome.inboundSession {
                    report.roomKeysStored = true
                    // A better key may have replaced the one kept unpickled.
                    inboundSessions[InboundKey(roomID: stored.roomID, sessionID: stored.sessionID)] = nil
                    roomKeysStored.notify()
                }
            }
        }
    }

    /// What one event brings; an event that cannot be used brings nothing (and is removed).
    private func handle(_ row: CryptoStore.ToDeviceRow) async throws(CryptoStoreError) -> CryptoStore.ToDeviceOutcome {
        var outcome = CryptoStore.ToDeviceOutcome(rowID: row.id)
        if row.type == "m.room_key_request" {
            keyRequest(in: row, into: &outcome)
            return outcome
        }
        if row.type == "m.secret.request" {
            secretRequest(in: row, into: &outcome)
            return outcome
        }
        if row.type.hasPrefix("m.key.verification.") {
            // Interactive verification: handed to the verification center after this batch.
            verificationInbox.append(VerificationInboxMessage(type: row.type, sender: row.sender, raw: row.raw))
            return outcome
        }
        guard row.type == "m.room.encrypted", let account, let pickleKey,
            case .object(let event)? = try? JSONValue(parsing: row.raw),
            case .object(let content)? = event["content"],
            content["algorithm"] == .string(Self.olmAlgorithm),
            case .string(let senderKey)? = content["sender_key"],
            case .object(let ciphertexts)? = content["ciphertext"],
            case .object(let mine)? = ciphertexts[account.identityKeys.curve25519],
            let typeNumber = mine["type"]?.integerValue, let kind = OlmMessage.Kind(rawValue: typeNumber),
            case .string(let body)? = mine["body"]
        else { return outcome }
        let message = OlmMessage(kind: kind, body: body)
        guard let (session, plaintext, isNew) = try await decrypt(message, from: senderKey, account: account) else {
            // No session of ours reads it: the sender's session with this device is wedged (we
            // lost ours, or it used a one-time key we no longer have). A new one is started.
            if let sender = UserID(row.sender) { outcome.wedgedSender = (sender, senderKey) }
            return outcome
        }
        do {
            outcome.olmSession = (senderKey, session.sessionID, try session.pickle(key: pickleKey))
            if isNew { outcome.accountPickle = try account.pickle(key: pickleKey) }
        } catch {
            throw .driver(error)
        }
        if try await secretSent(in: plaintext, sender: row.sender, senderKey: senderKey) { return outcome }
        if let (key, isHeld) = try await roomKey(in: plaintext, sender: row.sender, senderKey: senderKey) {
            if isHeld { outcome.heldRoomKey = key } else { outcome.inboundSession = key }
        }
        return outcome
    }

    /// Decrypts with a stored session of `senderKey`, or starts one from a pre-key message.
    private func decrypt(_ message: OlmMessage, from senderKey: String, account: any CryptoAccount)
        async throws(CryptoStoreError) -> (any CryptoSession, Secret<[UInt8]>, Bool)?
    {
        guard let pickleKey else { return nil }
        for stored in try await store.olmSessions(senderKey: senderKey) {
            guard let session = try? driver.session(pickle: stored.pickle, key: pickleKey) else { continue }
            if message.kind == .preKey && !session.matches(preKeyMessage: message.body, from: senderKey) { continue }
            if let plaintext = try? session.decrypt(message) { return (session, plaintext, false) }
            // A pre-key message of a session this device holds that does not decrypt is a
            // replay (its message key is spent): starting the session again from it — possible
            // while the fallback key it used is kept — would replace the advanced session.
            if message.kind == .preKey { return nil }
        }
        guard message.kind == .preKey,
            let session = try? account.inboundSession(identityKey: senderKey, preKeyMessage: message.body),
            let plaintext = try? session.decrypt(message)
        else { return nil }
        return (session, plaintext, true)
    }

    /// The inbound session an Olm plaintext carries (`m.room_key`; `m.forwarded_room_key` only
    /// from this account's own devices), after checking who it is for and who it is from.
    ///
    /// A room key from a device not known yet is returned `held`: it is kept aside, its sender
    /// queried, and it is used only if the answer lists the device (``CryptoStore/releaseHeldRoomKeys(of:)``).
    private func roomKey(in plaintext: Secret<[UInt8]>, sender: String, senderKey: String)
        async throws(CryptoStoreError) -> (CryptoStore.InboundSessionRow, held: Bool)?
    {
        guard let account, let pickleKey,
            case .object(let payload)? = try? JSONValue(parsing: plaintext.exposedValue),
            payload["sender"] == .string(sender), payload["recipient"] == .string(userID.rawValue),
            case .object(let recipientKeys)? = payload["recipient_keys"],
            recipientKeys["ed25519"] == .string(account.identityKeys.ed25519),
            case .object(let senderKeys)? = payload["keys"],
            case .string(let claimedSigningKey)? = senderKeys["ed25519"],
            case .string(let type)? = payload["type"], case .object(let content)? = payload["content"],
            content["algorithm"] == .string(Self.megolmAlgorithm),
            case .string(let roomID)? = content["room_id"], case .string(let sessionID)? = content["session_id"],
            let senderUser = UserID(sender)
        else { return nil }
        // A known device must be the one that holds both keys.
        let known = try await store.devices(of: senderUser).first { $0.curve25519 == senderKey }
        if let known, known.ed25519 != claimedSigningKey || known.keyChanged { return nil }
        let session: any InboundGroupSession
        let forwarded: Bool
        switch type {
        case "m.room_key":
            guard case .string(let key)? = content["session_key"],
                let created = try? driver.inboundGroupSession(sessionKey: Secret(key))
            else { return nil }
            session = created
            forwarded = false
        case "m.forwarded_room_key":
            // Only from another known device of this account, and only as the answer to a
            // request this device made. The session is the original sender's: its keys are the
            // ones the content names, not those of the device that forwarded it.
            guard senderUser == userID, let known, try await policyAllows(known),
                try await store.hasOpenKeyRequest(roomID: roomID, sessionID: sessionID),
                case .string(let key)? = content["session_key"],
                case .string(let originalSenderKey)? = content["sender_key"],
                case .string(let originalSigningKey)? = content["sender_claimed_ed25519_key"],
                let imported = try? driver.inboundGroupSession(exportedKey: Secret(key))
            else { return nil }
            session = imported
            forwarded = true
            guard session.sessionID == sessionID else { return nil }
            let pickle: [UInt8]
            do { pickle = try session.pickle(key: pickleKey) } catch { throw .driver(error) }
            return (
                CryptoStore.InboundSessionRow(
                    roomID: roomID, sessionID: sessionID, senderKey: originalSenderKey, signingKey: originalSigningKey,
                    forwarded: forwarded, pickle: pickle, firstKnownIndex: session.firstKnownIndex), false
            )
        default:
            return nil
        }
        guard session.sessionID == sessionID else { return nil }
        let pickle: [UInt8]
        do { pickle = try session.pickle(key: pickleKey) } catch { throw .driver(error) }
        let key = CryptoStore.InboundSessionRow(
            roomID: roomID, sessionID: sessionID, senderKey: senderKey, signingKey: claimedSigningKey,
            forwarded: forwarded, pickle: pickle, senderUser: senderUser, firstKnownIndex: session.firstKnownIndex)
        return (key, known == nil)
    }
}

extension CryptoEngine {
    /// Uses the held room keys of `users` whose devices a `keys/query` just listed (and drops
    /// the others); tells chat when any was stored. Returns how many were stored.
    @discardableResult
    package func releaseHeldRoomKeys(of users: [UserID]) async throws(CryptoStoreError) -> Int {
        let released = try await exclusively {
            () async throws(CryptoStoreError) -> [(roomID: String, sessionID: String)] in
            try await store.releaseHeldRoomKeys(of: users)
        }
        guard !released.isEmpty else { return 0 }
        for session in released {
            inboundSessions[InboundKey(roomID: session.roomID, sessionID: session.sessionID)] = nil
        }
        roomKeysStored.notify()
        return released.count
    }
}

// MARK: - Sending

extension CryptoEngine {
    /// A device a room key goes to, as the outbound session's record of sharing keeps it
    /// (`user device curve25519`).
    static func line(_ device: CryptoStore.Device) -> String {
        "\(device.userID.rawValue) \(device.deviceID) \(device.curve25519)"
    }

    /// The device of a ``line(_:)``; `nil` when it does not read as one.
    static func shareDevice(line: String) -> ShareDevice? {
        let parts = line.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count >= 3, let user = UserID(String(parts[0])) else { return nil }
        return ShareDevice(
            userID: user, deviceID: parts[1..<(parts.count - 1)].joined(separator: " "),
            curve25519: String(parts[parts.count - 1]))
    }

    /// The room's outbound session to share: a new one (``SessionChoice/new``, stored before
    /// anyone gets its key, and kept as an inbound session so that this device reads its own
    /// messages), or the current one by ID — refused with `outboundSessionReplaced` when the
    /// room's session is another one by now. The machine decides which (``RoomKeySharing``).
    package func outboundSession(roomID: String, choice: SessionChoice, nowMilliseconds: Int64)
        async throws(CryptoStoreError) -> (sessionID: String, key: Secret<String>)
    {
        try await exclusively { () async throws(CryptoStoreError) -> (sessionID: String, key: Secret<String>) in
            guard let pickleKey else { throw .driver(.library("account not loaded")) }
            do {
                if case .current(let sessionID) = choice {
                    guard let row = try await store.outboundSession(roomID: roomID), row.sessionID == sessionID else {
                        throw CryptoStoreError.outboundSessionReplaced
                    }
                    let session = try driver.outboundGroupSession(pickle: row.pickle, key: pickleKey)
                    return (row.sessionID, try session.sessionKey())
                }
                let session = try driver.newOutboundGroupSession()
                let created = CryptoStore.OutboundSessionRow(
                    sessionID: session.sessionID, pickle: try session.pickle(key: pickleKey),
                    createdMilliseconds: nowMilliseconds, messageCount: 0, sharedWith: [])
                try await store.saveOutboundSession(created, roomID: roomID)
                let key = try session.sessionKey()
                if let account {
                    let own = try driver.inboundGroupSession(sessionKey: key)
                    try await store.saveInboundSession(
                        CryptoStore.InboundSessionRow(
                            roomID: roomID, sessionID: session.sessionID, senderKey: account.identityKeys.curve25519,
                            signingKey: account.identityKeys.ed25519, forwarded: false,
                            pickle: try own.pickle(key: pickleKey), senderUser: userID))
                }
                return (session.sessionID, key)
            } catch let error as CryptoStoreError {
                throw error
            } catch let error as CryptoDriverError {
                throw .driver(error)
            } catch {
                throw .driver(.library("outbound session"))
            }
        }
    }

    /// Devices among `devices` with no Olm session yet (by their Curve25519 key).
    package func devicesWithoutSession(_ devices: [CryptoStore.Device]) async throws(CryptoStoreError)
        -> [CryptoStore.Device]
    {
        var missing: [CryptoStore.Device] = []
        for device in devices {
            if try await store.olmSessions(senderKey: device.curve25519).isEmpty { missing.append(device) }
        }
        return missing
    }

    /// Creates and stores Olm sessions from claimed one-time keys whose signature by the
    /// device's Ed25519 key verifies; returns how many were created.
    package func createSessions(_ claimed: [(CryptoStore.Device, JSONValue)], nowMilliseconds: Int64)
        async throws(CryptoStoreError) -> Int
    {
        try await exclusively { () async throws(CryptoStoreError) -> Int in
            guard let account, let pickleKey else { return 0 }
            var created: [(senderKey: String, sessionID: String, pickle: [UInt8])] = []
            for (device, signedKey) in claimed {
                guard case .object(var members) = signedKey, case .string(let key)? = members["key"],
                    case .object(let signatures)? = members["signatures"],
                    case .object(let byUser)? = signatures[device.userID.rawValue],
                    case .string(let signature)? = byUser["ed25519:\(device.deviceID)"]
                else { continue }
                members["signatures"] = nil
                members["unsigned"] = nil
                guard let canonical = try? JSONValue.object(members).canonicalEncoding(),
                    (try? driver.verifyEd25519(signature: signature, of: canonical, key: device.ed25519)) != nil,
                    let session = try? account.outboundSession(identityKey: device.curve25519, oneTimeKey: key),
                    let pickle = try? session.pickle(key: pickleKey)
                else { continue }
                created.append((device.curve25519, session.sessionID, pickle))
            }
            try await store.saveOlmSessions(created, nowMilliseconds: nowMilliseconds)
            return created.count
        }
    }

    /// The `m.room_key` for each device that has an Olm session, Olm-encrypted for it, as
    /// `sendToDevice` messages (user → device → content); the sessions are stored advanced.
    package func roomKeyMessages(
        roomID: String, sessionID: String, key: Secret<String>, for devices: [CryptoStore.Device],
        nowMilliseconds: Int64
    ) async throws(CryptoStoreError) -> (messages: [String: [String: JSONValue]], sent: [CryptoStore.Device]) {
        let payload = JSONValue.object([
            "type": .string("m.room_key"),
            "content": .object([
                "algorithm": .string(Self.megolmAlgorithm), "room_id": .string(roomID),
                "session_id": .string(sessionID), "session_key": .string(key.exposedValue),
            ]),
        ])
        return try await olmMessages(payload, for: devices, nowMilliseconds: nowMilliseconds)
    }

    /// `payload` (`type` and `content`) Olm-encrypted for each of `devices` that has a session,
    /// as `sendToDevice` messages (user → device → content); the sessions are stored advanced.
    package func olmMessages(_ payload: JSONValue, for devices: [CryptoStore.Device], nowMilliseconds: Int64)
        async throws(CryptoStoreError) -> (messages: [String: [String: JSONValue]], sent: [CryptoStore.Device])
    {
        try await exclusively {
            () async throws(CryptoStoreError) -> ([String: [String: JSONValue]], [CryptoStore.Device]) in
            var messages: [String: [String: JSONValue]] = [:]
            var sent: [CryptoStore.Device] = []
            var advanced: [(senderKey: String, sessionID: String, pickle: [UInt8])] = []
            for device in devices {
                guard let (content, pickle) = try await olmContent(payload, for: device) else { continue }
                advanced.append(pickle)
                messages[device.userID.rawValue, default: [:]][device.deviceID] = content
                sent.append(device)
            }
            try await store.saveOlmSessions(advanced, nowMilliseconds: nowMilliseconds)
            return (messages, sent)
        }
    }

    /// Records that `devices` have the room's current session.
    package func markShared(roomID: String, sessionID: String, with devices: [CryptoStore.Device])
        async throws(CryptoStoreError)
    {
        try await exclusively { () async throws(CryptoStoreError) -> Void in
            guard var row = try await store.outboundSession(roomID: roomID), row.sessionID == sessionID else { return }
            row.sharedWith.formUnion(devices.map(Self.line))
            try await store.saveOutboundSession(row, roomID: roomID)
        }
    }

    /// Encrypts an event with the room's outbound session `sessionID` (the one the machine's
    /// round of sharing ended with, ``ShareOutcome/shared(sessionID:)``):
    /// the `m.room.encrypted` content. The session is stored advanced before the content is
    /// returned. When the room's session is another one by now (a concurrent send rotated it),
    /// nothing is encrypted: the caller prepares again.
    package func megolmEncrypt(roomID: String, sessionID: String, eventType: String, content: [UInt8])
        async throws(CryptoStoreError) -> [UInt8]
    {
        try await exclusively { () async throws(CryptoStoreError) -> [UInt8] in
            guard let account, let pickleKey, var row = try await store.outboundSession(roomID: roomID),
                row.sessionID == sessionID
            else { throw .outboundSessionReplaced }
            do {
                let session = try driver.outboundGroupSession(pickle: row.pickle, key: pickleKey)
                // The relation goes in the clear (the spec's rule for encrypted events): the server
                // aggregates edits, replies and reactions, and other clients find them.
                guard case .object(var members)? = try? JSONValue(parsing: content) else {
                    throw CryptoDriverError.badMessage
                }
                let relation = members.removeValue(forKey: "m.relates_to")
                guard
                    let plaintext = try? JSONValue.object([
                        "type": .string(eventType), "content": .object(members), "room_id": .string(roomID),
                    ]).canonicalEncoding()
                else { throw CryptoDriverError.badMessage }
                let ciphertext = try session.encrypt(Secret(plaintext))
                row.pickle = try session.pickle(key: pickleKey)
                row.messageCount += 1
                try await store.saveOutboundSession(row, roomID: roomID)
                var encrypted: [String: JSONValue] = [
                    "algorithm": .string(Self.megolmAlgorithm), "ciphertext": .string(ciphertext),
                    "device_id": .string(deviceID), "sender_key": .string(account.identityKeys.curve25519),
                    "session_id": .string(row.sessionID),
                ]
                encrypted["m.relates_to"] = relation
                guard let bytes = try? JSONValue.object(encrypted).canonicalEncoding() else {
                    throw CryptoDriverError.badMessage
                }
                return bytes
            } catch let error as CryptoStoreError {
                throw error
            } catch let error as CryptoDriverError {
                throw .driver(error)
            } catch {
                throw .driver(.library("megolm"))
            }
        }
    }

    /// Stores sessions restored from the key backup (each unless stored as well or better),
    /// forgets the unpickled copies they replace, and tells chat to try its events again.
    /// Returns how many were stored.
    package func importBackedUp(_ rows: [CryptoStore.InboundSessionRow]) async throws(CryptoStoreError) -> Int {
        guard !rows.isEmpty else { return 0 }
        let stored = try await store.importFromBackup(rows)
        for session in stored {
            inboundSessions[InboundKey(roomID: session.roomID, sessionID: session.sessionID)] = nil
        }
        if !stored.isEmpty { roomKeysStored.notify() }
        return stored.count
    }

    /// Decrypts a `m.megolm.v1.aes-sha2` event content with a stored inbound session: the
    /// plaintext event JSON (`{type, content, room_id}`), or `nil` without the session's key.
    package func megolmDecrypt(roomID: String, content: JSONValue) async throws(CryptoStoreError) -> Secret<[UInt8]>? {
        guard case .object(let members) = content, members["algorithm"] == .string(Self.megolmAlgorithm),
            case .string(let sessionID)? = members["session_id"], case .string(let ciphertext)? = members["ciphertext"],
            let stored = try await inboundSession(roomID: roomID, sessionID: sessionID),
            let decrypted = try? stored.session.decrypt(ciphertext)
        else { return nil }
        return decrypted.plaintext
    }
}

/// A callback slot, called from the crypto work when something happened.
package final class Notifier: Sendable {
    private let handler = Lock<(@Sendable () -> Void)?>(nil)

    package init() {}

    /// Sets what to call.
    package func set(_ action: @escaping @Sendable () -> Void) { handler.withLock { $0 = action } }

    /// Calls it, if set.
    package func notify() { handler.withLock { $0 }?() }
}

// MARK: - Decrypting

extension CryptoEngine {
    /// A decrypted Megolm event: the plaintext and who sent it.
    package struct DecryptedEvent: Sendable {
        package var type: String
        package var content: [UInt8]
        package var senderKey: String
        package var signingKey: String
    }

    /// Why a Megolm event is refused for good. `senderNotCrossSigned`: under the room key policy
    /// `crossSignedOnly`, the sending device is not cross-signed by its owner (nor verified).
    package enum DecryptionRefusal: String, Error, Sendable {
        case replayed, unsupportedAlgorithm, mismatched, senderNotCrossSigned
    }

    /// Decrypts an event of `roomID` sent by `sender`: `nil` while the key is missing. An event
    /// whose session belongs to another user is `mismatched`; otherwise the message index is
    /// recorded with the event, and the same index for another event of the session is a replay.
    package func decryptRoomEvent(roomID: String, eventID: String, sender: UserID, content: [UInt8])
        async throws(CryptoStoreError) -> Result<DecryptedEvent, DecryptionRefusal>?
    {
        guard let result = try await decryptRoomEventUnrecorded(roomID: roomID, sender: sender, content: content)
        else { return nil }
        switch result {
        case .failure(let refusal): return .failure(refusal)
        case .success(let decrypted):
            let recorded = try await store.recordMessageIndexes([
                (sessionID: decrypted.sessionID, index: decrypted.messageIndex, eventID: eventID)
            ])
            return recorded == [true] ? .success(decrypted.event) : .failure(.replayed)
        }
    }

    /// An event decrypted whose message index is not recorded yet: it counts once
    /// `CryptoStore.recordMessageIndexes` accepts its index (a batch records all of its events'
    /// indexes in one transaction).
    package struct UnrecordedDecryption: Sendable {
        package var event: DecryptedEvent
        package var sessionID: String
        package var messageIndex: Int
    }

    /// Decrypts events as ``decryptRoomEventUnrecorded(roomID:sender:content:)`` does each, in
    /// one turn of the engine (a pass of chat's decryption hops to the engine once, not once per
    /// event). A store failure leaves the event `nil` (it waits, and is tried again).
    package func decryptRoomEventsUnrecorded(_ events: [(roomID: String, sender: UserID, content: [UInt8])])
        async -> [Result<Result<UnrecordedDecryption, DecryptionRefusal>?, CryptoStoreError>]
    {
        var results: [Result<Result<UnrecordedDecryption, DecryptionRefusal>?, CryptoStoreError>] = []
        results.reserveCapacity(events.count)
        for event in events {
            do throws(CryptoStoreError) {
                results.append(
                    .success(
                        try await decryptRoomEventUnrecorded(
                            roomID: event.roomID, sender: event.sender, content: event.content)))
            } catch {
                results.append(.failure(error))
            }
        }
        return results
    }

    /// Decrypts an event of `roomID` sent by `sender` without recording its message index:
    /// `nil` while the key is missing; `mismatched` when the session belongs to another user or
    /// the plaintext names another room.
    package func decryptRoomEventUnrecorded(roomID: String, sender: UserID, content: [UInt8])
        async throws(CryptoStoreError) -> Result<UnrecordedDecryption, DecryptionRefusal>?
    {
        // Before the account is loaded (the first syncs after a start) no key can be read yet:
        // the event waits like one whose key has not arrived, and the load tells chat to try
        // again. It is never refused for good for that.
        guard pickleKey != nil else { return nil }
        guard case .object(let members)? = try? JSONValue(parsing: content) else {
            return .failure(.unsupportedAlgorithm)
        }
        guard members["algorithm"] == .string(Self.megolmAlgorithm) else { return .failure(.unsupportedAlgorithm) }
        guard case .string(let sessionID)? = members["session_id"],
            case .string(let ciphertext)? = members["ciphertext"]
        else { return .failure(.mismatched) }
        guard let kept = try await inboundSession(roomID: roomID, sessionID: sessionID) else { return nil }
        let row = kept.row
        let decrypted: MegolmPlaintext
        do { decrypted = try kept.session.decrypt(ciphertext) } catch {
            // A later index than the session starts at cannot fail like this; an earlier one is
            // a key we do not have (a later forwarded key may bring it).
            return error == .unknownMessageIndex ? nil : .failure(.mismatched)
        }
        // Only the session's owner sends with it: a member who reposts someone else's ciphertext
        // is refused before the index is recorded, so the real event is not taken for a replay.
        if kept.owner == nil, !kept.ownerLookedUp {
            // A forwarded session: its owner is the user of the known device with its key. Looked
            // up once per unpickled session (not per event); a device learnt later counts after
            // the kept sessions are dropped.
            kept.owner = try await store.owner(ofCurveKey: row.senderKey)
            kept.ownerLookedUp = true
        }
        if let owner = kept.owner, owner != sender { return .failure(.mismatched) }
        guard case .object(let payload)? = try? JSONValue(parsing: decrypted.plaintext.exposedValue),
            payload["room_id"] == .string(roomID), case .string(let type)? = payload["type"],
            case .object(var inner)? = payload["content"]
        else { return .failure(.mismatched) }
        // A relation sent in the clear (as the spec asks) belongs to the decrypted event too.
        if inner["m.relates_to"] == nil, let relation = members["m.relates_to"] { inner["m.relates_to"] = relation }
        guard let innerBytes = try? JSONValue.object(inner).canonicalEncoding() else { return .failure(.mismatched) }
        return .success(
            UnrecordedDecryption(
                event: DecryptedEvent(
                    type: type, content: innerBytes, senderKey: row.senderKey, signingKey: row.signingKey),
                sessionID: sessionID, messageIndex: decrypted.messageIndex))
    }
}

extension CryptoEngine {
    /// A room's Megolm session, as the key of the unpickled sessions.
    struct InboundKey: Hashable {
        var roomID: String
        var sessionID: String
    }

    /// A stored inbound session and its unpickled libolm object (used on the engine only).
    final class KeptInboundSession {
        let row: CryptoStore.InboundSessionRow
        let session: any InboundGroupSession
        /// The user the session belongs to: who shared it, or for a forwarded one the owner of
        /// the known device with its sender key, once known.
        var owner: UserID?
        /// Whether the owner of a forwarded session was looked up.
        var ownerLookedUp = false

        init(row: CryptoStore.InboundSessionRow, session: any InboundGroupSession) {
            self.row = row
            self.session = session
            owner = row.senderUser
        }
    }

    /// How many unpickled inbound sessions are kept; beyond it they are all dropped (and
    /// unpickled again when needed).
    static let inboundSessionLimit = 256

    /// The stored inbound session of `roomID` and `sessionID`, unpickled once and kept: a stored
    /// session never changes (the first key received for a session is kept), and a kept one
    /// ratchets on from the last message it decrypted, where one unpickled for every event
    /// ratcheted from its stored index each time (`docs/benchmarks.md`, "End-to-end
    /// encryption"). `nil` while the key has not arrived.
    private func inboundSession(roomID: String, sessionID: String) async throws(CryptoStoreError)
        -> KeptInboundSession?
    {
        let key = InboundKey(roomID: roomID, sessionID: sessionID)
        if let kept = inboundSessions[key] { return kept }
        guard let pickleKey, let row = try await store.inboundSession(roomID: roomID, sessionID: sessionID),
            let session = try? driver.inboundGroupSession(pickle: row.pickle, key: pickleKey)
        else { return nil }
        if let kept = inboundSessions[key] { return kept }  // unpickled by another call meanwhile
        if inboundSessions.count >= Self.inboundSessionLimit { inboundSessions.removeAll() }
        let kept = KeptInboundSession(row: row, session: session)
        inboundSessions[key] = kept
        return kept
    }
}
