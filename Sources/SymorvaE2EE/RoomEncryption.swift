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
    /// Encrypts an event for `room` (`m.megolm.v1.aes-sha2`) and returns the `m.room.encrypted`
    /// content. First the machine makes sure every device of every recipient (the joined
    /// members, and the invited ones unless the history is visible to joined members only) has
    /// the room's current Megolm session (``CryptoMachine/Event/roomKeyNeeded(_:_:)``: it
    /// queries outdated device lists, replaces the session by the room's rotation settings,
    /// claims one-time keys and sends the key in batches — ``RoomKeySharing``); then the event
    /// is encrypted with the session the round ended with. Concurrent sends of one room share
    /// one round at a time; a restart never rotates the session.
    package func encryptEvent(room: EncryptedRoom, eventType: String, content: [UInt8])
        async throws(RoomEncryptionError)
        -> [UInt8]
    {
        var attempts = 0
        while true {
            let sessionID = try await shareRoomKey(room)
            do throws(CryptoStoreError) {
                return try await engine.megolmEncrypt(
                    roomID: room.roomID.rawValue, sessionID: sessionID, eventType: eventType, content: content)
            } catch {
                // Another round replaced the session between this one's end and the encryption
                // (a member left meanwhile): share again.
                guard error == .outboundSessionReplaced, attempts < 3 else {
                    let failure = CryptoInterpreter.requestError(error)
                    if failure.isRetryable { throw .transient(failure) }
                    throw .failed(error.description)
                }
                attempts += 1
            }
        }
    }

    /// Asks the machine to share the room's key and waits for the round's outcome: the session
    /// to encrypt with.
    func shareRoomKey(_ room: EncryptedRoom) async throws(RoomEncryptionError) -> String {
        let ticket = ShareTicket(
            shareTickets.withLock { count in
                count += 1
                return count
            })
        enum Answer: Sendable {
            case outcome(ShareOutcome)
            case notReady
            case stopped
        }
        let answer: Answer? = await host.send(
            .roomKeyNeeded(room, ticket),
            ignored: { state -> Answer? in
                switch state {
                case .idle, .failed: .stopped
                // The device's keys are on their way, or a request is backing off: the send
                // queue retries with its own backoff.
                case .loading, .publishing, .backingOff, .ready: .notReady
                }
            },
            until: { state -> Answer? in
                switch state {
                case .idle, .failed: .stopped
                default: state.work?.shareOutcomes[ticket].map(Answer.outcome)
                }
            })
        switch answer {
        case .outcome(let outcome)?:
            host.post(.shareOutcomeTaken(ticket))
            switch outcome {
            case .shared(let sessionID): return sessionID
            case .failed(let error) where error.isRetryable: throw .transient(error)
            case .failed(let error): throw .failed("room key not shared: \(error)")
            }
        case .notReady?: throw .transient(.network)
        case .stopped?, nil: throw .failed("crypto not running")
        }
    }
}

extension CryptoInterpreter {
    /// How ``RoomKeySharing`` sees a stored device.
    static func shareDevice(_ device: CryptoStore.Device) -> ShareDevice {
        ShareDevice(userID: device.userID, deviceID: device.deviceID, curve25519: device.curve25519)
    }

    /// Tracks the room's recipients and reads what sharing its key depends on.
    func roomKeyFacts(_ room: EncryptedRoom) async throws(CryptoStoreError) -> RoomKeyFacts {
        let store = engine.store
        let members = room.recipients
        _ = try await store.track(members)
        let outdated = Set(try await store.outdatedUsers()).intersection(members)
        var devices: [CryptoStore.Device] = []
        // Under the strict policy a member whose identity changed (or disappeared) and is not
        // acknowledged gets nothing: one read for the room, not one per member.
        let changed = engine.roomKeyPolicy == .crossSignedOnly ? Set(try await store.changedIdentities()) : []
        for member in members where !changed.contains(member) {
            let memberDevices = try await store.devices(of: member).filter {
                !$0.keyChanged && !($0.userID == engine.userID && $0.deviceID == engine.deviceID)
            }
            // The room key policy: a device the owner did not cross-sign may get nothing (the
            // store is asked about the owner's identity only when one of them is not cross-signed).
            if engine.roomKeyPolicy == .allDevices || memberDevices.allSatisfy({ $0.trust != .unverified }) {
                devices += memberDevices
            } else {
                for device in memberDevices where try await engine.policyAllows(device) { devices.append(device) }
            }
        }
        let withoutSession = try await engine.devicesWithoutSession(devices)
        let outbound = try await store.outboundSession(roomID: room.roomID.rawValue).map { row in
            OutboundSessionFacts(
                sessionID: row.sessionID, createdMilliseconds: row.createdMilliseconds, messageCount: row.messageCount,
                sharedWith: Set(row.sharedWith.compactMap(CryptoEngine.shareDevice(line:))))
        }
        return RoomKeyFacts(
            devices: devices.map(Self.shareDevice).sorted(),
            withoutOlmSession: Set(withoutSession.map(Self.shareDevice)),
            outdatedUsers: outdated.sorted(), outbound: outbound, nowMilliseconds: wallClock.now.millisecondsSince1970)
    }

    /// The stored devices behind `devices` (with their signing keys), those still known.
    func storedDevices(_ devices: [ShareDevice]) async throws(CryptoStoreError) -> [CryptoStore.Device] {
        let wanted = Set(devices)
        var found: [CryptoStore.Device] = []
        for user in Set(devices.map(\.userID)).sorted() {
            found += try await engine.store.devices(of: user).filter { wanted.contains(Self.shareDevice($0)) }
        }
        return found
    }

    /// `keys/claim` for `devices` in one request; an Olm session from each signed one-time key
    /// that verifies. Returns the devices that have a session now.
    func claimOneTimeKeys(for devices: [ShareDevice]) async -> Result<[ShareDevice], CryptoRequestError> {
        do throws(CryptoStoreError) {
            let stored = try await storedDevices(devices)
            guard !stored.isEmpty else { return .success([]) }
            let wanted = Dictionary(grouping: stored, by: \.userID).mapValues { $0.map(\.deviceID) }
            let endpoint: MatrixEndpoint
            do { endpoint = try E2EEAPI.claim(wanted) } catch { return .failure(.local(.driver("canonical JSON"))) }
            let response: HTTPResponse
            do throws(MatrixRequestError) {
                response = try await requester.send(endpoint)
            } catch {
                logger.info("keys claim failed error=\(error)")
                return .failure(Self.requestError(error, now: wallClock.now))
            }
            let claimed = Self.claimedKeys(in: response.body, for: stored)
            let created = try await engine.createSessions(claimed, nowMilliseconds: wallClock.now.millisecondsSince1970)
            if created < stored.count {
                logger.notice("devices without a usable one-time key count=\(stored.count - created)")
            }
            let still = Set(try await engine.devicesWithoutSession(stored).map(Self.shareDevice))
            return .success(stored.map(Self.shareDevice).filter { !still.contains($0) }.sorted())
        } catch {
            return .failure(Self.requestError(error))
        }
    }

    /// One batch of the room's key: the session (new or current), its `m.room_key`
    /// Olm-encrypted for each device of the batch with a session, one `sendToDevice`, then the
    /// record of who has it.
    func sendRoomKey(roomID: RoomID, batch: RoomKeyBatch) async -> Result<RoomKeySent, CryptoRequestError> {
        let now = wallClock.now.millisecondsSince1970
        do throws(CryptoStoreError) {
            let (sessionID, key) = try await engine.outboundSession(
                roomID: roomID.rawValue, choice: batch.session, nowMilliseconds: now)
            let devices = try await storedDevices(batch.devices)
            let (messages, sent) = try await engine.roomKeyMessages(
                roomID: roomID.rawValue, sessionID: sessionID, key: key, for: devices, nowMilliseconds: now)
            if !messages.isEmpty {
                // The transaction ID is the batch's content: a retry of this request reuses it,
                // and sharing the same session with the same device again (it started a new Olm
                // session with us) is new content, so the server never takes it for a retry of
                // the first sharing and drops it.
                let content =
                    (try? JSONValue.object(messages.mapValues { JSONValue.object($0) }).canonicalEncoding()) ?? []
                let transactionID = TransactionID(
                    "rk-\(engine.driver.sha256(Array(sessionID.utf8) + content).prefix(24))")
                if let failure = await sendToDevice("m.room.encrypted", messages, transactionID: transactionID) {
                    return .failure(failure)
                }
            }
            try await engine.markShared(roomID: roomID.rawValue, sessionID: sessionID, with: sent)
            logger.info("room key shared devices=\(sent.count) new_session=\(batch.session == .new)")
            return .success(
                RoomKeySent(
                    sessionID: sessionID, devices: sent.map(Self.shareDevice).sorted(),
                    newSessionStored: batch.session == .new))
        } catch {
            logger.error("room key not shared error=\(error)")
            return .failure(Self.requestError(error))
        }
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
}

extension AccountCrypto {
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

    /// Calls `action` with the users whose devices a `keys/query` just stored: a message of
    /// theirs refused `senderNotCrossSigned` is worth decrypting again (its device may be
    /// cross-signed, or verified by this account, since).
    package func onDevicesQueried(_ action: @escaping @Sendable ([UserID]) -> Void) {
        engine.devicesQueried.withLock { $0 = action }
    }

    /// Decrypts an `m.room.encrypted` event of `roomID` sent by `sender`: the plaintext type
    /// and content with the sending device (known when `sender` has a verified device with the
    /// session's keys) and its trust level at this moment (an unknown device, or one whose keys
    /// changed, is ``DeviceTrustLevel/unverified``), a refusal (`replayed`, `unsupportedAlgorithm`, `mismatched`;
    /// `senderNotCrossSigned` under the `crossSignedOnly` policy for another device that is
    /// unverified), or `nil`
    /// while its room key has not arrived.
    package func decrypt(content: [UInt8], roomID: RoomID, eventID: EventID, sender: UserID) async
        -> Result<
            (event: CryptoEngine.DecryptedEvent, deviceID: String?, isKnown: Bool, trust: DeviceTrustLevel),
            CryptoEngine.DecryptionRefusal
        >?
    {
        await decrypt([EncryptedRoomEvent(content: content, roomID: roomID, eventID: eventID, sender: sender)])[0]
    }

    /// An `m.room.encrypted` event to decrypt.
    package struct EncryptedRoomEvent: Sendable {
        package var content: [UInt8]
        package var roomID: RoomID
        package var eventID: EventID
        package var sender: UserID

        package init(content: [UInt8], roomID: RoomID, eventID: EventID, sender: UserID) {
            self.content = content
            self.roomID = roomID
            self.eventID = eventID
            self.sender = sender
        }
    }

    /// Decrypts a batch of events, as ``decrypt(content:roomID:eventID:sender:)`` does each, in
    /// order: their message indexes are recorded in one transaction (an index met twice in the
    /// batch counts for its first event), and each sender's devices are read once.
    package func decrypt(_ events: [EncryptedRoomEvent]) async
        -> [Result<
            (event: CryptoEngine.DecryptedEvent, deviceID: String?, isKnown: Bool, trust: DeviceTrustLevel),
            CryptoEngine.DecryptionRefusal
        >?]
    {
        var results:
            [Result<
                (event: CryptoEngine.DecryptedEvent, deviceID: String?, isKnown: Bool, trust: DeviceTrustLevel),
                CryptoEngine.DecryptionRefusal
            >?] = Array(repeating: nil, count: events.count)
        var decrypted: [(position: Int, decryption: CryptoEngine.UnrecordedDecryption)] = []
        let first = await engine.decryptRoomEventsUnrecorded(
            events.map { (roomID: $0.roomID.rawValue, sender: $0.sender, content: $0.content) })
        for (position, (event, result)) in zip(events, first).enumerated() {
            switch result {
            case .success(nil):
                // The key is missing: the account's other devices may hold it.
                await requestMissingKey(roomID: event.roomID, sender: event.sender, content: event.content)
            case .success(.failure(let refusal)?): results[position] = .failure(refusal)
            case .success(.success(let decryption)?): decrypted.append((position, decryption))
            case .failure(let error): logger.error("decryption failed error=\(error)")
            }
        }
        let accepted: [Bool]
        do throws(CryptoStoreError) {
            accepted = try await store.recordMessageIndexes(
                decrypted.map {
                    (
                        sessionID: $0.decryption.sessionID, index: $0.decryption.messageIndex,
                        eventID: events[$0.position].eventID.rawValue
                    )
                })
        } catch {
            // Nothing recorded: the events wait, and the next pass decrypts them again.
            logger.error("message indexes not recorded error=\(error)")
            return results
        }
        // Each sending device is looked up once a batch: its events come together.
        var lookups: [DeviceLookupKey: DeviceLookup] = [:]
        for ((position, decryption), isFirst) in zip(decrypted, accepted) {
            guard isFirst else {
                results[position] = .failure(.replayed)
                continue
            }
            let event = decryption.event
            do throws(CryptoStoreError) {
                let key = DeviceLookupKey(
                    sender: events[position].sender, senderKey: event.senderKey, signingKey: event.signingKey)
                let lookup: DeviceLookup
                if let known = lookups[key] {
                    lookup = known
                } else {
                    lookup = try await sendingDevice(
                        of: key.sender, senderKey: event.senderKey, signingKey: event.signingKey)
                    lookups[key] = lookup
                }
                guard case .settled(let device) = lookup else {
                    // Whether the device is known is recorded with the event: decrypt it again
                    // once the sender's device list can be brought up to date (the next
                    // successful keys/query asks chat to try again).
                    continue
                }
                let trust = device.map { $0.keyChanged ? .unverified : $0.trust } ?? DeviceTrustLevel.unverified
                // MSC4153: a message from a device its owner did not cross-sign is not shown.
                // This device's own messages are always its own to read.
                let isThisDevice = key.sender == userID && device?.deviceID == deviceID.rawValue
                if engine.roomKeyPolicy == .crossSignedOnly, trust == .unverified, !isThisDevice {
                    results[position] = .failure(.senderNotCrossSigned)
                    continue
                }
                results[position] = .success(
                    (event, device?.deviceID, device.map { !$0.keyChanged } ?? false, trust))
            } catch {
                logger.error("sending device not read error=\(error)")
            }
        }
        return results
    }

    /// A sending device as a batch looks it up.
    struct DeviceLookupKey: Hashable {
        var sender: UserID
        var senderKey: String
        var signingKey: String
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
    /// queried first, by the machine: the decrypted event records whether its device is known, so that must not
    /// depend on whether the machine's own query of the new member happened to answer before
    /// the event was decrypted, nor be settled by a query that failed.
    func sendingDevice(of sender: UserID, senderKey: String, signingKey: String) async throws(CryptoStoreError)
        -> DeviceLookup
    {
        func find() async throws(CryptoStoreError) -> CryptoStore.Device? {
            try await store.devices(of: sender).first { $0.curve25519 == senderKey && $0.ed25519 == signingKey }
        }
        // A device not cross-signed is looked up again when its owner's list is outdated: the
        // signature that cross-signs it may have come with the sync that brought the event.
        if let device = try await find() {
            if device.trust != .unverified { return .settled(device) }
            if !(try await store.isOutdated(sender)) {
                // Under the strict policy its message is about to be refused for good: ask the
                // server again first, once a minute at most per sender.
                let now = interpreter.wallClock.now.millisecondsSince1970
                let recheck =
                    engine.roomKeyPolicy == .crossSignedOnly
                    && engine.unverifiedSenderRechecks.withLock { rechecks in
                        if let last = rechecks[sender], now - last < CryptoEngine.unverifiedRecheckMilliseconds {
                            return false
                        }
                        rechecks[sender] = now
                        return true
                    }
                guard recheck else { return .settled(device) }
                try await store.markOutdated(sender)
            }
        }
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
        // The machine's one `keys/query` asks for the sender (after a running query, together
        // with users changed meanwhile); this waits for it to answer. While the machine backs
        // off, the event waits with the others instead (a successful query asks chat to try
        // again).
        let asked: Bool? = await host.send(.usersTracked([sender])) { state -> Bool? in
            switch state {
            case .ready(let work):
                work.outdated.contains(sender) || work.querying?.contains(sender) == true ? nil : true
            case .idle, .failed, .backingOff: false
            case .loading, .publishing: nil
            }
        }
        guard asked == true, !(try await store.isOutdated(sender)) else {
            // Not answered (the sender's server is in `failures`, or the query failed): nothing
            // is settled, and the sender is not asked again for a while.
            logger.info("sender's devices not answered")
            engine.failedSenderQueries.withLock { $0[sender] = now }
            engine.decryptionAwaitsDevices.withLock { $0 = true }
            return .unsettled
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
