import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

// Room key requests between the devices of one account: a device that meets an event whose
// room key it lacks asks its siblings (`m.room_key_request` to every device of the account,
// unencrypted, as the spec has it); a sibling that holds the session answers over Olm with an
// `m.forwarded_room_key`; the asking device cancels its request once the key has arrived.

// MARK: - Engine: what the requests and answers carry

extension CryptoEngine {
    /// Takes in an `m.room_key_request` to-device event: a request or a cancellation from
    /// another device of this account (anyone else's, and this device's own, are dropped).
    func keyRequest(in row: CryptoStore.ToDeviceRow, into outcome: inout CryptoStore.ToDeviceOutcome) {
        guard row.sender == userID.rawValue, case .object(let event)? = try? JSONValue(parsing: row.raw),
            case .object(let content)? = event["content"], case .string(let action)? = content["action"],
            case .string(let requestID)? = content["request_id"],
            case .string(let device)? = content["requesting_device_id"], device != deviceID
        else { return }
        switch action {
        case "request":
            guard case .object(let body)? = content["body"], body["algorithm"] == .string(Self.megolmAlgorithm),
                case .string(let roomID)? = body["room_id"], case .string(let sessionID)? = body["session_id"]
            else { return }
            outcome.incomingRequest = CryptoStore.IncomingKeyRequest(
                deviceID: device, requestID: requestID, roomID: roomID, sessionID: sessionID)
        case "request_cancellation":
            outcome.cancelledRequest = (device, requestID)
        default:
            return
        }
    }

    /// A new request ID (random, 128 bits, hex; it names a request, it protects nothing).
    nonisolated func newRequestID() -> String {
        (0..<16).map { _ in String(UInt8.random(in: 0...255), radix: 16).leftPadded(to: 2) }.joined()
    }

    /// The `m.room_key_request` content of a request or its cancellation.
    func keyRequestContent(_ request: CryptoStore.OutgoingKeyRequest) -> JSONValue {
        guard !request.isCancellation else {
            return .object([
                "action": .string("request_cancellation"), "request_id": .string(request.requestID),
                "requesting_device_id": .string(deviceID),
            ])
        }
        return .object([
            "action": .string("request"),
            "body": .object([
                "algorithm": .string(Self.megolmAlgorithm), "room_id": .string(request.roomID),
                "sender_key": .string(request.senderKey), "session_id": .string(request.sessionID),
            ]),
            "request_id": .string(request.requestID), "requesting_device_id": .string(deviceID),
        ])
    }

    /// The `m.forwarded_room_key` for each request whose session this device holds (received
    /// from its sender, not itself forwarded), Olm-encrypted for the requesting device over a
    /// stored Olm session, as `sendToDevice` messages: one per device, so a device's further
    /// requests are `deferred` to another round. Returns the requests answered and those that
    /// cannot be (no such session here); the rest (no Olm session to the device) wait.
    package func forwardedKeyMessages(
        for requests: [(CryptoStore.IncomingKeyRequest, CryptoStore.Device)], nowMilliseconds: Int64
    ) async throws(CryptoStoreError) -> (
        messages: [String: [String: JSONValue]], answered: [CryptoStore.IncomingKeyRequest],
        unanswerable: [CryptoStore.IncomingKeyRequest], deferred: [(CryptoStore.IncomingKeyRequest, CryptoStore.Device)]
    ) {
        try await exclusively {
            () async throws(CryptoStoreError) -> (
                [String: [String: JSONValue]], [CryptoStore.IncomingKeyRequest], [CryptoStore.IncomingKeyRequest],
                [(CryptoStore.IncomingKeyRequest, CryptoStore.Device)]
            ) in
            guard let pickleKey else { return ([:], [], [], []) }
            var messages: [String: [String: JSONValue]] = [:]
            var answered: [CryptoStore.IncomingKeyRequest] = []
            var unanswerable: [CryptoStore.IncomingKeyRequest] = []
            var deferred: [(CryptoStore.IncomingKeyRequest, CryptoStore.Device)] = []
            var advanced: [(senderKey: String, sessionID: String, pickle: [UInt8])] = []
            for (request, device) in requests {
                guard let row = try await store.inboundSession(roomID: request.roomID, sessionID: request.sessionID),
                    !row.forwarded, let session = try? driver.inboundGroupSession(pickle: row.pickle, key: pickleKey),
                    let exported = try? session.export(from: session.firstKnownIndex)
                else {
                    unanswerable.append(request)
                    continue
                }
                // One message per device in a request (messages are keyed by device).
                guard messages[device.userID.rawValue]?[device.deviceID] == nil else {
                    deferred.append((request, device))
                    continue
                }
                let payload = JSONValue.object([
                    "type": .string("m.forwarded_room_key"),
                    "content": .object([
                        "algorithm": .string(Self.megolmAlgorithm), "room_id": .string(request.roomID),
                        "sender_key": .string(row.senderKey), "sender_claimed_ed25519_key": .string(row.signingKey),
                        "session_id": .string(request.sessionID), "session_key": .string(exported.exposedValue),
                        "forwarding_curve25519_key_chain": .array([]),
                    ]),
                ])
                guard let (content, pickle) = try await olmContent(payload, for: device) else { continue }
                advanced.append(pickle)
                messages[device.userID.rawValue, default: [:]][device.deviceID] = content
                answered.append(request)
            }
            try await store.saveOlmSessions(advanced, nowMilliseconds: nowMilliseconds)
            return (messages, answered, unanswerable, deferred)
        }
    }

    /// `payload` (`type` and `content`) with the sender and recipient fields Olm plaintexts
    /// carry, encrypted for `device` with its most recently used Olm session: the
    /// `m.room.encrypted` content and the session advanced (to store), or `nil` without a session.
    func olmContent(_ payload: JSONValue, for device: CryptoStore.Device) async throws(CryptoStoreError)
        -> (JSONValue, (senderKey: String, sessionID: String, pickle: [UInt8]))?
    {
        guard let account, let pickleKey, case .object(var members) = payload,
            let stored = try await store.olmSessions(senderKey: device.curve25519).first,
            let session = try? driver.session(pickle: stored.pickle, key: pickleKey)
        else { return nil }
        let own = account.identityKeys
        members["sender"] = .string(userID.rawValue)
        members["sender_device"] = .string(deviceID)
        members["recipient"] = .string(device.userID.rawValue)
        members["recipient_keys"] = .object(["ed25519": .string(device.ed25519)])
        members["keys"] = .object(["ed25519": .string(own.ed25519)])
        guard let plaintext = try? JSONValue.object(members).canonicalEncoding(),
            let message = try? session.encrypt(Secret(plaintext)), let pickle = try? session.pickle(key: pickleKey)
        else { return nil }
        let content = JSONValue.object([
            "algorithm": .string(Self.olmAlgorithm), "sender_key": .string(own.curve25519),
            "ciphertext": .object([
                device.curve25519: .object([
                    "type": .number(Double(message.kind.rawValue)), "body": .string(message.body),
                ])
            ]),
        ])
        return (content, (device.curve25519, stored.sessionID, pickle))
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}

// MARK: - Module: recording what is missing

extension AccountCrypto {
    /// Records a request for the session of an event whose room key is missing (unless the
    /// session is stored, at a later index, or already requested, or `sender` has
    /// ``CryptoStore/openKeyRequestsPerSender`` open in the room) and tells the machine.
    func requestMissingKey(roomID: RoomID, sender: UserID, content: [UInt8]) async {
        guard case .object(let members)? = try? JSONValue(parsing: content),
            members["algorithm"] == .string(CryptoEngine.megolmAlgorithm),
            case .string(let sessionID)? = members["session_id"], case .string(let senderKey)? = members["sender_key"]
        else { return }
        do throws(CryptoStoreError) {
            guard try await store.inboundSession(roomID: roomID.rawValue, sessionID: sessionID) == nil else { return }
            let recorded = try await store.recordKeyRequest(
                requestID: engine.newRequestID(), roomID: roomID.rawValue, sessionID: sessionID,
                senderKey: senderKey, sender: sender)
            if recorded { await host.send(.roomKeysMissing) }
        } catch {
            logger.error("room key request not recorded error=\(error)")
        }
    }

    /// Asks the account's other devices again for the keys this device requested for
    /// `roomID` and did not get (a device that did not know this one yet drops a request).
    ///
    /// - Returns: how many requests go out again.
    package func requestKeysAgain(roomID: RoomID) async throws(CryptoStoreError) -> Int {
        let engine = self.engine
        let count = try await store.resendKeyRequests(roomID: roomID.rawValue) { engine.newRequestID() }
        if count > 0 {
            logger.info("room key requests again count=\(count)")
            await host.send(.roomKeysMissing)
        }
        return count
    }

    /// How many of this device's room key requests are not finished (to send, sent and not
    /// answered, or answered and their cancellation still to send).
    package func openKeyRequestCount() async throws(CryptoStoreError) -> Int {
        try await store.openKeyRequestCount()
    }
}

// MARK: - Interpreter: sending and answering

extension CryptoInterpreter {
    /// Sends the requests not sent yet and the cancellations of those whose key arrived, to
    /// every device of the account, each marked in the store once the server took it. The
    /// transaction ID is the request's and its action's: a retry reuses it.
    func sendKeyRequests() async -> Result<Int, CryptoRequestError> {
        var requests: [CryptoStore.OutgoingKeyRequest]
        do throws(CryptoStoreError) {
            // The key backup first: a session it holds is not asked of the other devices. Each
            // open request is looked up once per backup version (a backup enabled after the
            // request left is looked in too).
            if let backup = try await engine.store.storedBackup(), backup.stopped == nil {
                for request in try await engine.store.keyRequestsToLookUp(inBackup: backup.version) {
                    _ = await fetchFromBackup(roomID: request.roomID, sessionID: request.sessionID)
                    try await engine.store.keyRequestLookedUp(
                        roomID: request.roomID, sessionID: request.sessionID, inBackup: backup.version)
                }
            }
            requests = try await engine.store.keyRequestsToSend()
        } catch {
            return .failure(Self.requestError(error))
        }
        for request in requests {
            let content = await engine.keyRequestContent(request)
            let transactionID = TransactionID("\(request.isCancellation ? "krc" : "krq")-\(request.requestID)")
            if let failure = await sendToDevice(
                "m.room_key_request", [engine.userID.rawValue: ["*": content]], transactionID: transactionID)
            {
                return .failure(failure)
            }
            do throws(CryptoStoreError) {
                try await engine.store.keyRequestLeft(request)
            } catch {
                return .failure(Self.requestError(error))
            }
        }
        if !requests.isEmpty {
            let cancellations = requests.filter(\.isCancellation).count
            logger.info(
                "room key requests sent requests=\(requests.count - cancellations) cancellations=\(cancellations)")
        }
        return .success(requests.count)
    }

    /// Answers the stored requests of the account's other devices: those of a known device (a
    /// verified self-signature, keys never changed) get the session over Olm, after a
    /// `keys/claim` for devices without an Olm session; requests for sessions this device does
    /// not hold, and those of devices whose keys changed, are dropped; those of devices not
    /// known yet wait, a day at most.
    func answerKeyRequests() async -> Result<KeyRequestAnswers, CryptoRequestError> {
        let store = engine.store
        let now = wallClock.now.millisecondsSince1970
        do throws(CryptoStoreError) {
            let expired = try await store.removeIncomingKeyRequests(
                receivedBefore: now - CryptoStore.incomingKeyRequestLifetimeMilliseconds)
            if expired > 0 { logger.info("room key requests expired=\(expired)") }
            let requests = try await store.incomingKeyRequests()
            guard !requests.isEmpty else { return .success(KeyRequestAnswers(answered: 0)) }
            let ownDevices = try await store.devices(of: engine.userID)
            var answerable: [(CryptoStore.IncomingKeyRequest, CryptoStore.Device)] = []
            var dropped: [CryptoStore.IncomingKeyRequest] = []
            var waiting = 0
            for request in requests {
                guard let device = ownDevices.first(where: { $0.deviceID == request.deviceID }) else {
                    waiting += 1
                    continue
                }
                if !(try await engine.policyAllows(device)) {
                    dropped.append(request)
                } else {
                    answerable.append((request, device))
                }
            }
            let devices = Array(Set(answerable.map(\.1)))
            let withoutSession = try await engine.devicesWithoutSession(devices)
            if !withoutSession.isEmpty {
                let wanted = Dictionary(grouping: withoutSession, by: \.userID).mapValues { $0.map(\.deviceID) }
                let response: HTTPResponse
                do throws(MatrixRequestError) {
                    let endpoint: MatrixEndpoint
                    do { endpoint = try E2EEAPI.claim(wanted) } catch {
                        return .failure(.local(.driver("canonical JSON")))
                    }
                    response = try await requester.send(endpoint)
                } catch {
                    return .failure(Self.requestError(error, now: wallClock.now))
                }
                _ = try await engine.createSessions(
                    CryptoInterpreter.claimedKeys(in: response.body, for: withoutSession), nowMilliseconds: now)
            }
            // Rounds of one forwarded key per device, each removed once the server took it.
            var remaining = answerable
            var answeredCount = 0
            var unanswerableCount = dropped.count
            try await store.removeIncomingKeyRequests(dropped)
            while !remaining.isEmpty {
                let (messages, answered, unanswerable, deferred) = try await engine.forwardedKeyMessages(
                    for: remaining, nowMilliseconds: now)
                if !messages.isEmpty {
                    let ids = answered.map { "\($0.deviceID)|\($0.requestID)" }.sorted().joined(separator: ",")
                    let transactionID = TransactionID("fk-\(engine.driver.sha256(Array(ids.utf8)).prefix(24))")
                    if let failure = await sendToDevice("m.room.encrypted", messages, transactionID: transactionID) {
                        return .failure(failure)
                    }
                }
                try await store.removeIncomingKeyRequests(answered + unanswerable)
                answeredCount += answered.count
                unanswerableCount += unanswerable.count
                // A round that answered nothing (no Olm session to these devices) ends it.
                remaining = answered.isEmpty ? [] : deferred
                if answered.isEmpty { break }
            }
            let answered = answeredCount
            let unreachable = answerable.count - answered - (unanswerableCount - dropped.count)
            logger.info(
                "room key requests answered=\(answered) unanswerable=\(unanswerableCount) waiting=\(waiting + unreachable)"
            )
            return .success(KeyRequestAnswers(answered: answered, waitingForDevices: waiting + unreachable))
        } catch {
            return .failure(Self.requestError(error))
        }
    }
}

// MARK: - Unwedging

extension CryptoInterpreter {
    /// Starts a new Olm session with every device whose messages no session of ours could read:
    /// one `keys/claim` for all of them, a session from each claimed key whose signature by the
    /// device verifies, and an `m.dummy` over it in one `sendToDevice`, so that the device has the
    /// new session and uses it from its next message on. A device not known (no `keys/query`
    /// lists its key) or without a one-time key is given up until it is found wedged again.
    func unwedgeSessions() async -> Result<Int, CryptoRequestError> {
        let store = engine.store
        let now = wallClock.now.millisecondsSince1970
        do throws(CryptoStoreError) {
            let wedged = try await store.wedgedDevices()
            guard !wedged.isEmpty else { return .success(0) }
            var devices: [CryptoStore.Device] = []
            for (user, curveKey) in wedged {
                if let device = try await store.devices(of: user).first(where: {
                    $0.curve25519 == curveKey && !$0.keyChanged
                }) {
                    devices.append(device)
                }
            }
            if !devices.isEmpty {
                let wanted = Dictionary(grouping: devices, by: \.userID).mapValues { $0.map(\.deviceID) }
                let endpoint: MatrixEndpoint
                do { endpoint = try E2EEAPI.claim(wanted) } catch { return .failure(.local(.driver("canonical JSON"))) }
                let response: HTTPResponse
                do throws(MatrixRequestError) {
                    response = try await requester.send(endpoint)
                } catch {
                    return .failure(Self.requestError(error, now: wallClock.now))
                }
                let claimed = CryptoInterpreter.claimedKeys(in: response.body, for: devices)
                _ = try await engine.createSessions(claimed, nowMilliseconds: now)
                let started = Set(claimed.map { $0.0.curve25519 })
                let dummy = JSONValue.object(["type": .string("m.dummy"), "content": .object([:])])
                let (messages, sent) = try await engine.olmMessages(
                    dummy, for: devices.filter { started.contains($0.curve25519) }, nowMilliseconds: now)
                if !messages.isEmpty {
                    let lines = sent.map { "\($0.userID.rawValue)|\($0.deviceID)" }.sorted().joined(separator: ",")
                    let transactionID = TransactionID(
                        "uw-\(engine.driver.sha256(Array("\(lines)#\(now)".utf8)).prefix(24))")
                    if let failure = await sendToDevice("m.room.encrypted", messages, transactionID: transactionID) {
                        return .failure(failure)
                    }
                }
                logger.info("olm sessions unwedged devices=\(sent.count) of=\(wedged.count)")
            }
            try await store.markUnwedged(wedged.map(\.curveKey), nowMilliseconds: now)
            return .success(devices.count)
        } catch {
            logger.error("olm sessions not unwedged error=\(error)")
            return .failure(Self.requestError(error))
        }
    }
}
