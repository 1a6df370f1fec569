import SymorvaCrypto
import SymorvaCryptoDriver
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
    /// Told whenever a room key is stored (chat tries its undecrypted events again).
    package let roomKeysStored = Notifier()
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

    package init(driver: any CryptoDriver, store: CryptoStore, userID: UserID, deviceID: String) {
        self.driver = driver
        self.store = store
        self.userID = userID
        self.deviceID = deviceID
    }

    /// The device's identity keys, once the account is loaded.
    package var identityKeys: IdentityKeys? { account?.identityKeys }

    /// Loads the stored account, or creates and stores one; reports what the machine needs.
    package func load() async throws(CryptoStoreError) -> CryptoAccountStatus {
        if let stored = try await store.loadAccount() {
            do { account = try driver.account(pickle: stored.pickle, key: stored.pickleKey) } catch {
                throw .driver(error)
            }
            pickleKey = stored.pickleKey
            published = stored.published
        } else {
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
        // The account's own devices are tracked like everyone else's.
        _ = try await store.track([userID])
        return CryptoAccountStatus(
            deviceKeysPublished: published, maxOneTimeKeys: account?.maxOneTimeKeys ?? 100,
            serverOneTimeKeyCount: try await store.serverOneTimeKeyCount(),
            outdatedUsers: try await store.outdatedUsers(), hasPendingToDevice: try await store.hasPendingToDevice(),
            hasKeyRequestsToSend: try await store.hasKeyRequestsToSend(),
            hasKeyRequestsToAnswer: try await store.hasKeyRequestsToAnswer())
    }

    /// The `keys/upload` for `plan`, after generating what the account lacks and storing the
    /// account with it (so that a crash before the answer re-sends the same keys).
    package func prepareUpload(_ plan: KeyUploadPlan) async throws(CryptoStoreError) -> MatrixEndpoint {
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
            try await store.saveAccount(pickle: try account.pickle(key: pickleKey), published: published)
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

    /// The server accepted the upload: the keys are published (and the device keys with them).
    package func uploadAnswered(includedDeviceKeys: Bool) async throws(CryptoStoreError) {
        guard let account, let pickleKey else { return }
        account.markKeysAsPublished()
        if includedDeviceKeys { published = true }
        let pickle: [UInt8]
        do { pickle = try account.pickle(key: pickleKey) } catch { throw .driver(error) }
        try await store.saveAccount(pickle: pickle, published: published)
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
            if rows.isEmpty { return report }
            for row in rows {
                let outcome = try await handle(row)
                if try await store.apply(outcome, nowMilliseconds: nowMilliseconds) {
                    report.requestedKeysArrived = true
                }
                if outcome.incomingRequest != nil { report.keyRequestsReceived = true }
                report.processed += 1
                if outcome.inboundSession != nil { roomKeysStored.notify() }
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
            return outcome
        }
        do {
            outcome.olmSession = (senderKey, session.sessionID, try session.pickle(key: pickleKey))
            if isNew { outcome.accountPickle = try account.pickle(key: pickleKey) }
        } catch {
            throw .driver(error)
        }
        outcome.inboundSession = try await roomKey(in: plaintext, sender: row.sender, senderKey: senderKey)
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
        }
        guard message.kind == .preKey,
            let session = try? account.inboundSession(identityKey: senderKey, preKeyMessage: message.body),
            let plaintext = try? session.decrypt(message)
        else { return nil }
        return (session, plaintext, true)
    }

    /// The inbound session an Olm plaintext carries (`m.room_key`; `m.forwarded_room_key` only
    /// from this account's own devices), after checking who it is for and who it is from.
    private func roomKey(in plaintext: Secret<[UInt8]>, sender: String, senderKey: String)
        async throws(CryptoStoreError) -> CryptoStore.InboundSessionRow?
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
            guard senderUser == userID, known != nil,
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
            return CryptoStore.InboundSessionRow(
                roomID: roomID, sessionID: sessionID, senderKey: originalSenderKey, signingKey: originalSigningKey,
                forwarded: forwarded, pickle: pickle)
        default:
            return nil
        }
        guard session.sessionID == sessionID else { return nil }
        let pickle: [UInt8]
        do { pickle = try session.pickle(key: pickleKey) } catch { throw .driver(error) }
        return CryptoStore.InboundSessionRow(
            roomID: roomID, sessionID: sessionID, senderKey: senderKey, signingKey: claimedSigningKey,
            forwarded: forwarded, pickle: pickle)
    }
}

// MARK: - Sending

extension CryptoEngine {
    /// How long an outbound session lives and how many messages it carries (the defaults of
    /// `m.room.encryption`: one week, 100 messages).
    package struct RotationPolicy: Sendable {
        package var messages = 100
        package var milliseconds: Int64 = 7 * 24 * 3600 * 1000
        package init() {}
    }

    /// A device a room key goes to.
    static func line(_ device: CryptoStore.Device) -> String {
        "\(device.userID.rawValue) \(device.deviceID) \(device.curve25519)"
    }

    /// The room's outbound session ready to encrypt with: the current one, or a new one when
    /// the current one is too old or used too often, or a device it was shared with is gone
    /// (a member left, a device was removed). Returns its ID and key and the devices that do
    /// not have it yet. A new session is stored before anyone gets its key.
    package func prepareOutbound(
        roomID: String, for devices: [CryptoStore.Device], nowMilliseconds: Int64, policy: RotationPolicy
    ) async throws(CryptoStoreError) -> (sessionID: String, key: Secret<String>, missing: [CryptoStore.Device]) {
        guard let pickleKey else { throw .driver(.library("account not loaded")) }
        let wanted = Set(devices.map(Self.line))
        var row = try await store.outboundSession(roomID: roomID)
        if let current = row {
            let expired =
                current.messageCount >= policy.messages
                || nowMilliseconds - current.createdMilliseconds >= policy.milliseconds
            let someoneLeft = !current.sharedWith.isSubset(of: wanted)
            if expired || someoneLeft { row = nil }
        }
        do {
            if let row {
                let session = try driver.outboundGroupSession(pickle: row.pickle, key: pickleKey)
                let missing = devices.filter { !row.sharedWith.contains(Self.line($0)) }
                return (row.sessionID, try session.sessionKey(), missing)
            }
            let session = try driver.newOutboundGroupSession()
            let created = CryptoStore.OutboundSessionRow(
                sessionID: session.sessionID, pickle: try session.pickle(key: pickleKey),
                createdMilliseconds: nowMilliseconds, messageCount: 0, sharedWith: [])
            try await store.saveOutboundSession(created, roomID: roomID)
            // This device reads its own messages with the same session.
            let key = try session.sessionKey()
            if let account {
                let own = try driver.inboundGroupSession(sessionKey: key)
                try await store.saveInboundSession(
                    CryptoStore.InboundSessionRow(
                        roomID: roomID, sessionID: session.sessionID, senderKey: account.identityKeys.curve25519,
                        signingKey: account.identityKeys.ed25519, forwarded: false,
                        pickle: try own.pickle(key: pickleKey)))
            }
            return (session.sessionID, key, devices)
        } catch let error as CryptoStoreError {
            throw error
        } catch let error as CryptoDriverError {
            throw .driver(error)
        } catch {
            throw .driver(.library("outbound session"))
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

    /// The `m.room_key` for each device that has an Olm session, Olm-encrypted for it, as
    /// `sendToDevice` messages (user → device → content); the sessions are stored advanced.
    package func roomKeyMessages(
        roomID: String, sessionID: String, key: Secret<String>, for devices: [CryptoStore.Device],
        nowMilliseconds: Int64
    ) async throws(CryptoStoreError) -> (messages: [String: [String: JSONValue]], sent: [CryptoStore.Device]) {
        guard let account, let pickleKey else { return ([:], []) }
        let own = account.identityKeys
        var messages: [String: [String: JSONValue]] = [:]
        var sent: [CryptoStore.Device] = []
        var advanced: [(senderKey: String, sessionID: String, pickle: [UInt8])] = []
        for device in devices {
            guard let stored = try await store.olmSessions(senderKey: device.curve25519).first,
                let session = try? driver.session(pickle: stored.pickle, key: pickleKey)
            else { continue }
            let payload = JSONValue.object([
                "type": .string("m.room_key"),
                "content": .object([
                    "algorithm": .string(Self.megolmAlgorithm), "room_id": .string(roomID),
                    "session_id": .string(sessionID), "session_key": .string(key.exposedValue),
                ]),
                "sender": .string(userID.rawValue), "sender_device": .string(deviceID),
                "recipient": .string(device.userID.rawValue),
                "recipient_keys": .object(["ed25519": .string(device.ed25519)]),
                "keys": .object(["ed25519": .string(own.ed25519)]),
            ])
            guard let plaintext = try? payload.canonicalEncoding(),
                let message = try? session.encrypt(Secret(plaintext)),
                let pickle = try? session.pickle(key: pickleKey)
            else { continue }
            advanced.append((device.curve25519, stored.sessionID, pickle))
            messages[device.userID.rawValue, default: [:]][device.deviceID] = .object([
                "algorithm": .string(Self.olmAlgorithm), "sender_key": .string(own.curve25519),
                "ciphertext": .object([
                    device.curve25519: .object([
                        "type": .number(Double(message.kind.rawValue)), "body": .string(message.body),
                    ])
                ]),
            ])
            sent.append(device)
        }
        try await store.saveOlmSessions(advanced, nowMilliseconds: nowMilliseconds)
        return (messages, sent)
    }

    /// Records that `devices` have the room's current session.
    package func markShared(roomID: String, sessionID: String, with devices: [CryptoStore.Device])
        async throws(CryptoStoreError)
    {
        guard var row = try await store.outboundSession(roomID: roomID), row.sessionID == sessionID else { return }
        row.sharedWith.formUnion(devices.map(Self.line))
        try await store.saveOutboundSession(row, roomID: roomID)
    }

    /// Encrypts an event with the room's outbound session: the `m.room.encrypted` content. The
    /// session is stored advanced before the content is returned.
    package func megolmEncrypt(roomID: String, eventType: String, content: [UInt8]) async throws(CryptoStoreError)
        -> [UInt8]
    {
        guard let account, let pickleKey, var row = try await store.outboundSession(roomID: roomID) else {
            throw .driver(.library("no outbound session"))
        }
        do {
            let session = try driver.outboundGroupSession(pickle: row.pickle, key: pickleKey)
            guard let parsed = try? JSONValue(parsing: content),
                let plaintext = try? JSONValue.object([
                    "type": .string(eventType), "content": parsed, "room_id": .string(roomID),
                ]).canonicalEncoding()
            else { throw CryptoDriverError.badMessage }
            let ciphertext = try session.encrypt(Secret(plaintext))
            row.pickle = try session.pickle(key: pickleKey)
            row.messageCount += 1
            try await store.saveOutboundSession(row, roomID: roomID)
            let encrypted = JSONValue.object([
                "algorithm": .string(Self.megolmAlgorithm), "ciphertext": .string(ciphertext),
                "device_id": .string(deviceID), "sender_key": .string(account.identityKeys.curve25519),
                "session_id": .string(row.sessionID),
            ])
            guard let bytes = try? encrypted.canonicalEncoding() else { throw CryptoDriverError.badMessage }
            return bytes
        } catch let error as CryptoStoreError {
            throw error
        } catch let error as CryptoDriverError {
            throw .driver(error)
        } catch {
            throw .driver(.library("megolm"))
        }
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

    /// Why a Megolm event is refused for good.
    package enum DecryptionRefusal: String, Error, Sendable {
        case replayed, unsupportedAlgorithm, mismatched
    }

    /// Decrypts an event of `roomID`: `nil` while the key is missing. The message index is
    /// recorded with the event: the same index for another event of the session is a replay.
    package func decryptRoomEvent(roomID: String, eventID: String, content: [UInt8]) async throws(CryptoStoreError)
        -> Result<DecryptedEvent, DecryptionRefusal>?
    {
        guard pickleKey != nil, case .object(let members)? = try? JSONValue(parsing: content) else {
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
        guard try await store.recordMessageIndex(sessionID: sessionID, index: decrypted.messageIndex, eventID: eventID)
        else { return .failure(.replayed) }
        guard case .object(let payload)? = try? JSONValue(parsing: decrypted.plaintext.exposedValue),
            payload["room_id"] == .string(roomID), case .string(let type)? = payload["type"],
            let inner = payload["content"], let innerBytes = try? inner.canonicalEncoding()
        else { return .failure(.mismatched) }
        return .success(
            DecryptedEvent(type: type, content: innerBytes, senderKey: row.senderKey, signingKey: row.signingKey))
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

        init(row: CryptoStore.InboundSessionRow, session: any InboundGroupSession) {
            self.row = row
            self.session = session
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
