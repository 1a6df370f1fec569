import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Why an event could not be encrypted for its room.
package enum RoomEncryptionError: Error, Sendable, Hashable {
    /// A request failed for a reason that passes (network, 5xx, 429, token, a busy store).
    case transient(CryptoRequestError)
    /// The account is not ready, or the store or the driver failed for good.
    case failed(String)
}

extension AccountCrypto {
    /// How many to-device messages one `sendToDevice` request carries at most.
    static let toDeviceBatchSize = 250

    /// Encrypts an event for `room` (`m.megolm.v1.aes-sha2`): makes sure every device of every
    /// recipient (the joined members, and the invited ones unless the history is visible to
    /// joined members only) has the room's current Megolm session — querying outdated device
    /// lists, claiming one-time keys in one request for the devices without an Olm session,
    /// sending the `m.room_key` Olm-encrypted in batched `sendToDevice` requests — and returns the
    /// `m.room.encrypted` content. The session rotates after the room's `rotation_period_msgs`
    /// or `rotation_period_ms` (100 messages and a week by default, ``CryptoEngine/RotationPolicy``),
    /// and when a device it was shared with is gone; a restart never rotates it.
    package func encryptEvent(room: EncryptedRoom, eventType: String, content: [UInt8])
        async throws(RoomEncryptionError)
        -> [UInt8]
    {
        let roomID = room.roomID
        let rotation = CryptoEngine.RotationPolicy(room: room)
        switch host.states.value {
        case .ready: break
        case .idle, .failed: throw .failed("crypto not running")
        case .loading, .publishing, .backingOff:
            // The device's keys are on their way: the send queue retries with its backoff.
            throw .transient(.network)
        }
        let now = wallClock.now.millisecondsSince1970
        do {
            let members = room.recipients
            _ = try await store.track(members)
            let outdated = Set(try await store.outdatedUsers()).intersection(members)
            if !outdated.isEmpty, case .failure(let error) = await interpreter.query(outdated.sorted()),
                error.isRetryable
            {
                throw RoomEncryptionError.transient(error)
            }
            var devices: [CryptoStore.Device] = []
            for member in members {
                devices += try await store.devices(of: member).filter {
                    !$0.keyChanged && !($0.userID == userID && $0.deviceID == deviceID.rawValue)
                }
            }
            // A concurrent send may rotate the session between sharing and encrypting: then the
            // new session is shared before this event is encrypted with it.
            var attempts = 0
            while true {
                let (sessionID, key, missing) = try await engine.prepareOutbound(
                    roomID: roomID.rawValue, for: devices, nowMilliseconds: now, policy: rotation)
                if !missing.isEmpty {
                    try await share(roomID: roomID, sessionID: sessionID, key: key, with: missing, now: now)
                }
                do throws(CryptoStoreError) {
                    return try await engine.megolmEncrypt(
                        roomID: roomID.rawValue, sessionID: sessionID, eventType: eventType, content: content)
                } catch {
                    guard error == .outboundSessionReplaced, attempts < 3 else { throw error }
                    attempts += 1
                }
            }
        } catch let error as RoomEncryptionError {
            throw error
        } catch let error as CryptoStoreError {
            let failure = CryptoInterpreter.requestError(error)
            if failure.isRetryable { throw .transient(failure) }
            throw .failed(error.description)
        } catch {
            throw .failed("unexpected")
        }
    }

    /// Shares the session with `devices`: Olm sessions first (one `keys/claim` for all that lack
    /// one), then the key in batched `sendToDevice` requests, then records who has it.
    private func share(
        roomID: RoomID, sessionID: String, key: Secret<String>, with devices: [CryptoStore.Device], now: Int64
    ) async throws {
        let withoutSession = try await engine.devicesWithoutSession(devices)
        if !withoutSession.isEmpty {
            let wanted = Dictionary(grouping: withoutSession, by: \.userID).mapValues { $0.map(\.deviceID) }
            let endpoint: MatrixEndpoint
            do { endpoint = try E2EEAPI.claim(wanted) } catch { throw RoomEncryptionError.failed("canonical JSON") }
            let response: HTTPResponse
            do throws(MatrixRequestError) {
                response = try await requester.send(endpoint)
            } catch {
                throw RoomEncryptionError.transient(CryptoInterpreter.requestError(error, now: wallClock.now))
            }
            let claimed = Self.claimedKeys(in: response.body, for: withoutSession)
            let created = try await engine.createSessions(claimed, nowMilliseconds: now)
            if created < withoutSession.count {
                logger.notice("devices without a usable one-time key count=\(withoutSession.count - created)")
            }
        }
        let (messages, sent) = try await engine.roomKeyMessages(
            roomID: roomID.rawValue, sessionID: sessionID, key: key, for: devices, nowMilliseconds: now)
        // Batches of whole users' devices, up to the batch size each (a user larger than that
        // goes alone). The transaction ID is the batch's content key: a retry reuses it.
        var batch: [String: [String: JSONValue]] = [:]
        var count = 0
        var batches: [[String: [String: JSONValue]]] = []
        for user in messages.keys.sorted() {
            let userMessages = messages[user]!
            if count > 0 && count + userMessages.count > Self.toDeviceBatchSize {
                batches.append(batch)
                batch = [:]
                count = 0
            }
            batch[user] = userMessages
            count += userMessages.count
        }
        if count > 0 { batches.append(batch) }
        for messages in batches {
            // The transaction ID is the batch's content: sharing the same session with the same
            // device again (it started a new Olm session with us) is new content, so the server
            // never takes it for a retry of the first sharing and drops it.
            let content = (try? JSONValue.object(messages.mapValues { JSONValue.object($0) }).canonicalEncoding()) ?? []
            let transactionID = TransactionID("rk-\(engine.driver.sha256(Array(sessionID.utf8) + content).prefix(24))")
            let endpoint: MatrixEndpoint
            do {
                endpoint = try E2EEAPI.sendToDevice(
                    eventType: "m.room.encrypted", transactionID: transactionID, messages: messages)
            } catch {
                throw RoomEncryptionError.failed("canonical JSON")
            }
            do throws(MatrixRequestError) {
                _ = try await requester.send(endpoint)
            } catch {
                throw RoomEncryptionError.transient(CryptoInterpreter.requestError(error, now: wallClock.now))
            }
        }
        try await engine.markShared(roomID: roomID.rawValue, sessionID: sessionID, with: sent)
        logger.info("room key shared devices=\(sent.count) requests=\(batches.count)")
    }

    /// The signed one-time key claimed for each device, from a `keys/claim` answer.
    static func claimedKeys(in body: [UInt8], for devices: [CryptoStore.Device]) -> [(CryptoStore.Device, JSONValue)] {
        guard case .object(let top)? = try? JSONValue(parsing: body), case .object(let users)? = top["one_time_keys"]
        else { return [] }
        return devices.compactMap { device in
            guard case .object(let byDevice)? = users[device.userID.rawValue],
                case .object(let keys)? = byDevice[device.deviceID],
                let signed = keys.first(where: { $0.key.hasPrefix("signed_curve25519:") })?.value
            else { return nil }
            return (device, signed)
        }
    }

    /// Decrypts a Megolm event content of `roomID` with a stored room key: the plaintext event
    /// JSON (`{type, content, room_id}`), or `nil` when the key has not arrived.
    package func decryptEvent(roomID: RoomID, content: [UInt8]) async throws(CryptoStoreError) -> Secret<[UInt8]>? {
        guard let value = try? JSONValue(parsing: content) else { return nil }
        return try await engine.megolmDecrypt(roomID: roomID.rawValue, content: value)
    }
}

extension AccountCrypto {
    /// Calls `action` whenever a room key is stored.
    package func onRoomKeysStored(_ action: @escaping @Sendable () -> Void) {
        engine.roomKeysStored.set(action)
    }

    /// Decrypts an `m.room.encrypted` event of `roomID` sent by `sender`: the plaintext type
    /// and content with the sending device (known when `sender` has a verified device with the
    /// session's keys), a refusal (`replayed`, `unsupportedAlgorithm`, `mismatched`), or `nil`
    /// while its room key has not arrived.
    package func decrypt(content: [UInt8], roomID: RoomID, eventID: EventID, sender: UserID) async
        -> Result<
            (event: CryptoEngine.DecryptedEvent, deviceID: String?, isKnown: Bool), CryptoEngine.DecryptionRefusal
        >?
    {
        do throws(CryptoStoreError) {
            guard
                let result = try await engine.decryptRoomEvent(
                    roomID: roomID.rawValue, eventID: eventID.rawValue, sender: sender, content: content)
            else {
                // The key is missing: the account's other devices may hold it.
                await requestMissingKey(roomID: roomID, sender: sender, content: content)
                return nil
            }
            switch result {
            case .failure(let refusal): return .failure(refusal)
            case .success(let event):
                guard
                    case .settled(let device) = try await sendingDevice(
                        of: sender, senderKey: event.senderKey, signingKey: event.signingKey)
                else {
                    // Whether the device is known is recorded with the event: decrypt it again
                    // once the sender's device list can be brought up to date (the next
                    // successful keys/query asks chat to try again).
                    return nil
                }
                return .success((event, device?.deviceID, device.map { !$0.keyChanged } ?? false))
            }
        } catch {
            logger.error("decryption failed error=\(error)")
            return nil
        }
    }

    /// Whether the device that sent an event is known.
    enum DeviceLookup {
        /// The sender's device list is up to date: the device, or `nil` when it is not in it.
        case settled(CryptoStore.Device?)
        /// The sender's device list could not be brought up to date (the query failed in a way
        /// that can pass).
        case unsettled
    }

    /// The device of `sender` that holds the session's keys. A sender whose device list is not
    /// up to date (not tracked yet, or outdated: a room just joined, a device just added) is
    /// queried first: the decrypted event records whether its device is known, so that must not
    /// depend on whether the machine's own query of the new member happened to answer before
    /// the event was decrypted, nor be settled by a query that failed.
    func sendingDevice(of sender: UserID, senderKey: String, signingKey: String) async throws(CryptoStoreError)
        -> DeviceLookup
    {
        func find() async throws(CryptoStoreError) -> CryptoStore.Device? {
            try await store.devices(of: sender).first { $0.curve25519 == senderKey && $0.ed25519 == signingKey }
        }
        if let device = try await find() { return .settled(device) }
        _ = try await store.track([sender])
        // Up to date: look again, since a query that answered since the first look (the
        // machine's own, of a new member) may have just stored the device.
        guard try await store.isOutdated(sender) else { return .settled(try await find()) }
        // A query of this sender failed moments ago: the event waits with the others rather
        // than ask again for each (the machine's own queries back off; one that succeeds asks
        // chat to decrypt again).
        let now = interpreter.wallClock.now.millisecondsSince1970
        if let failedAt = engine.failedSenderQueries.withLock({ $0[sender] }),
            now - failedAt < CryptoEngine.senderQueryRetryMilliseconds
        {
            engine.decryptionAwaitsDevices.withLock { $0 = true }
            return .unsettled
        }
        switch await interpreter.query([sender]) {
        case .success(let report) where report.unanswered.contains(sender):
            // The sender's server could not answer: nothing is settled, as after a failure.
            logger.info("sender's devices not answered")
            engine.failedSenderQueries.withLock { $0[sender] = now }
            engine.decryptionAwaitsDevices.withLock { $0 = true }
            return .unsettled
        case .success: break
        case .failure(let error):
            logger.info("sender's devices not queried error=\(error)")
            // A query refused for good settles it as unknown (no retry could do better).
            if error.isRetryable {
                engine.failedSenderQueries.withLock { $0[sender] = now }
                engine.decryptionAwaitsDevices.withLock { $0 = true }
                return .unsettled
            }
        }
        return .settled(try await find())
    }
}

extension AccountCrypto {
    private func associatedData(_ eventID: EventID) -> [UInt8] {
        SecretBox.associatedData(account: userID.rawValue, field: "e2ee.decrypted:\(eventID.rawValue)")
    }

    /// Seals a decrypted content for the store with the account's secrets-at-rest key, bound
    /// to its event.
    package func sealDecrypted(_ content: [UInt8], eventID: EventID) -> [UInt8]? {
        try? store.secrets.seal(Secret(content), associatedData: associatedData(eventID))
    }

    /// Opens what ``sealDecrypted(_:eventID:)`` sealed.
    package func openDecrypted(_ sealed: [UInt8], eventID: EventID) -> [UInt8]? {
        (try? store.secrets.open(sealed, associatedData: associatedData(eventID)))?.exposedValue
    }

    private func queuedAssociatedData(_ transactionID: String) -> [UInt8] {
        SecretBox.associatedData(account: userID.rawValue, field: "e2ee.queued:\(transactionID)")
    }

    /// Seals the content of a message queued for an encrypted room, bound to its transaction
    /// ID, so that what the user wrote is not in the clear on disk while it waits to be sent.
    package func sealQueued(_ content: [UInt8], transactionID: String) -> [UInt8]? {
        try? store.secrets.seal(Secret(content), associatedData: queuedAssociatedData(transactionID))
    }

    /// Opens what ``sealQueued(_:transactionID:)`` sealed.
    package func openQueued(_ sealed: [UInt8], transactionID: String) -> [UInt8]? {
        (try? store.secrets.open(sealed, associatedData: queuedAssociatedData(transactionID)))?.exposedValue
    }
}
