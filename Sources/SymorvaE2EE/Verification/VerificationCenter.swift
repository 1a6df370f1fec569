import SymorvaCryptoDriver
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// A `m.key.verification.*` to-device message as the inbox held it.
package struct VerificationInboxMessage: Sendable, Hashable {
    package var type: String
    package var sender: String
    package var raw: [UInt8]
}

/// An `m.key.verification.*` event of a room (or the request, an `m.room.message`), decrypted
/// when the room is encrypted: what chat hands the center from its timelines.
package struct VerificationRoomEvent: Sendable, Hashable {
    package var roomID: RoomID
    package var eventID: String
    package var sender: UserID
    package var type: String
    /// The (plaintext) content's JSON.
    package var content: [UInt8]
    /// `origin_server_ts`, in milliseconds: what dates an in-room request.
    package var originServerTS: Int64

    package init(roomID: RoomID, eventID: String, sender: UserID, type: String, content: [UInt8], originServerTS: Int64)
    {
        self.roomID = roomID
        self.eventID = eventID
        self.sender = sender
        self.type = type
        self.content = content
        self.originServerTS = originServerTS
    }
}

/// Sends one event of `type` with `content` into a room (encrypted when the room is) and
/// returns its event ID: chat's send path, set by the bridge.
package typealias VerificationRoomSender =
    @Sendable (_ room: RoomID, _ type: String, _ content: [UInt8]) async throws(KeyVerificationError) -> String

/// The account's interactive verifications over to-device messages and in rooms: one
/// ``VerificationFlowDriver`` per transaction, what arrives routed to it, what it asks for
/// sent, and the keys a flow proves signed with our cross-signing keys and uploaded.
package actor VerificationCenter {
    private let userID: UserID
    private let deviceID: DeviceID
    private let engine: CryptoEngine
    private let store: CryptoStore
    private let requester: any MatrixRequester
    private let wallClock: any WallClock
    /// The flows' timers run on it (10 minutes overall, 2 for a request).
    private let clock: any RuntimeClock
    private let logger: Logger
    /// The running timers, by transaction and key.
    private var timers: [String: [EffectKey: Task<Void, Never>]] = [:]
    private var flows: [String: (driver: VerificationFlowDriver, verification: SASVerification)] = [:]
    /// Re-queries users' keys after a signature upload (the trust levels follow).
    private var refresh: (@Sendable ([UserID]) async -> Void)?
    /// Told when a flow with another device of this account ends verified (that device's ID):
    /// the account then takes the secrets when this device lacks them.
    private var ownDeviceVerified: (@Sendable (DeviceID) async -> Void)?
    /// The flows already reported verified (each reported once).
    private var reportedVerified: Set<String> = []
    private var sendCounter: UInt64 = 0
    /// The room of each flow that runs in one (by transaction, the request event's ID).
    private var rooms: [String: RoomID] = [:]
    /// The room events already routed (a sync may bring an event again: sliding sync resends a
    /// room's timeline when it is subscribed), so none reaches a flow twice.
    private var routedRoomEvents: Set<String> = []
    /// Sends an event into a room (chat's path), once connected.
    private var roomSender: VerificationRoomSender?
    /// The last incoming verification (a request or a start from another device).
    nonisolated let incoming = ObservableValue<SASVerification?>.Publisher(nil)

    init(
        userID: UserID, deviceID: DeviceID, engine: CryptoEngine, store: CryptoStore, requester: any MatrixRequester,
        wallClock: any WallClock, clock: any RuntimeClock, logger: Logger
    ) {
        self.clock = clock
        self.userID = userID
        self.deviceID = deviceID
        self.engine = engine
        self.store = store
        self.requester = requester
        self.wallClock = wallClock
        self.logger = logger
    }

    func setRefresh(_ refresh: @escaping @Sendable ([UserID]) async -> Void) { self.refresh = refresh }

    func setOwnDeviceVerified(_ report: @escaping @Sendable (DeviceID) async -> Void) { ownDeviceVerified = report }

    func setRoomSender(_ sender: @escaping VerificationRoomSender) { roomSender = sender }

    // MARK: - Starting

    /// Starts a verification of `user` (this account for one of its own devices): a request to
    /// `device`, or to every device of the user when `device` is `nil`; with `startDirectly`, a
    /// `start` at once (the way matrix-nio and older clients begin), which needs a device.
    func request(user: UserID, device: DeviceID?, startDirectly: Bool) async throws(KeyVerificationError)
        -> SASVerification
    {
        sendCounter += 1
        let transactionID = "symorva-\(deviceID.rawValue)-\(wallClock.now.millisecondsSince1970)-\(sendCounter)"
        let flow = VerificationFlow(
            transactionID: transactionID, ourselves: VerificationParty(userID: userID, deviceID: deviceID),
            peerUserID: user, peerDeviceID: device, usesRequest: !startDirectly || device == nil)
        let driver = try await makeDriver(peer: user, device: device)
        let verification = SASVerification(
            transactionID: transactionID, otherUserID: user, initial: .requested, center: self)
        flows[transactionID] = (driver, verification)
        await apply(driver.handle(.verifyAsked(flow)), transactionID: transactionID)
        return verification
    }

    /// Starts a verification of another `user` in `room` (a room shared with them, a DM): the
    /// request goes as an `m.room.message` whose event ID becomes the flow's transaction ID,
    /// and every later step as a room event related to it.
    func request(user: UserID, inRoom room: RoomID) async throws(KeyVerificationError) -> SASVerification {
        guard user != userID else { throw .unknownDevice }  // our own devices verify over to-device
        guard let roomSender else { throw .notReady }
        let driver = try await makeDriver(peer: user, device: nil, inRoom: true)
        let request = VerificationMessages.roomRequest(
            fromDevice: deviceID, to: user, methods: KeyVerificationMethod.ours)
        let transactionID = try await roomSender(room, "m.room.message", Self.bytes(request))
        let flow = VerificationFlow(
            transactionID: transactionID, ourselves: VerificationParty(userID: userID, deviceID: deviceID),
            peerUserID: user, peerDeviceID: nil, usesRequest: true)
        let verification = SASVerification(
            transactionID: transactionID, otherUserID: user, initial: .requested, center: self)
        flows[transactionID] = (driver, verification)
        rooms[transactionID] = room
        var work = driver.handle(.verifyAsked(flow))
        work.messages.removeAll { $0.kind == .request }  // sent already: its ID is the flow's
        await apply(work, transactionID: transactionID)
        return verification
    }

    // MARK: - The person's answers

    func handle(_ event: VerificationMachine.Event, in transactionID: String) async {
        guard let entry = flows[transactionID] else { return }
        await apply(entry.driver.handle(event), transactionID: transactionID)
    }

    /// The QR code the flow shows (bytes to render), once ready.
    func qrCode(in transactionID: String) -> [UInt8]? { flows[transactionID]?.driver.qrCode() }

    /// The person scanned the peer's code.
    func scanned(_ bytes: [UInt8], in transactionID: String) async throws(KeyVerificationError) {
        guard let entry = flows[transactionID] else { throw .unknownDevice }
        let work: VerificationWork
        do { work = try entry.driver.scanned(bytes) } catch { throw .invalidQRCode }
        await apply(work, transactionID: transactionID)
    }

    // MARK: - Incoming

    /// Routes messages read from the to-device inbox, in arrival order.
    func deliver(_ messages: [VerificationInboxMessage]) async {
        for message in messages {
            guard let kind = VerificationMessages.Kind(rawValue: message.type), let sender = UserID(message.sender),
                case .object(let event)? = try? JSONValue(parsing: message.raw), let content = event["content"],
                let transactionID = VerificationMessages.transactionID(of: content)
            else { continue }
            if let entry = flows[transactionID] {
                guard sender == entry.verification.otherUserID else { continue }  // not the flow's user
                await apply(entry.driver.receive(kind, content, from: nil), transactionID: transactionID)
                continue
            }
            switch kind {
            case .request, .start: await open(kind, content, sender: sender, transactionID: transactionID)
            case .cancel: continue  // a cancel is never answered (no cancel ping-pong)
            default: await answerUnknown(content, sender: sender, transactionID: transactionID)
            }
        }
    }

    /// Routes verification events of rooms, in timeline order. An event of a flow goes to it
    /// only from the flow's room and user; a request opens a flow when it is for us (`to`) and
    /// recent; an event seen before is ignored; steps of flows we have no part in are ignored — in a room, nothing is answered
    /// `m.unknown_transaction`. Our own events are our echo (ignored), or another device of
    /// ours answering a request this device shows (``ownRoomEvent(_:_:transactionID:room:)``).
    func deliver(room events: [VerificationRoomEvent]) async {
        for event in events {
            guard let content = try? JSONValue(parsing: event.content),
                let (kind, transactionID) = VerificationMessages.roomMessage(
                    type: event.type, content: content, eventID: event.eventID),
                routedRoomEvents.insert(event.eventID).inserted
            else { continue }
            if event.sender == userID {
                await ownRoomEvent(kind, content, transactionID: transactionID, room: event.roomID)
                continue
            }
            if let entry = flows[transactionID] {
                guard rooms[transactionID] == event.roomID, event.sender == entry.verification.otherUserID else {
                    continue  // another room's or another user's event naming this flow
                }
                await apply(entry.driver.receive(kind, content, from: nil), transactionID: transactionID)
                continue
            }
            guard kind == .request, VerificationMessages.requestRecipient(content) == userID else { continue }
            await open(
                kind, content, sender: event.sender, transactionID: transactionID,
                room: (event.roomID, age: wallClock.now.millisecondsSince1970 - event.originServerTS))
        }
    }

    /// An event of this account in a room: our own echo (ignored), or another device of ours
    /// that answered (`ready`) or cancelled a request this device was shown and has not
    /// answered: the request is no longer this device's to answer — it ends
    /// `cancelled(m.accepted)`, or with the other device's cancel, and nothing is sent.
    private func ownRoomEvent(
        _ kind: VerificationMessages.Kind, _ content: JSONValue, transactionID: String, room: RoomID
    ) async {
        guard let entry = flows[transactionID], rooms[transactionID] == room,
            entry.verification.state.value == .incoming
        else { return }
        switch kind {
        case .ready where VerificationMessages.fromDevice(of: content) != deviceID:
            let accepted = VerificationMessages.cancel(transactionID: transactionID, code: .accepted)
            await apply(entry.driver.receive(.cancel, accepted, from: nil), transactionID: transactionID)
        case .cancel:
            await apply(entry.driver.receive(.cancel, content, from: nil), transactionID: transactionID)
        default: return
        }
    }

    /// A message of a transaction this device has no flow for (never begun here, or forgotten
    /// with a restart): the sender hears `m.unknown_transaction`, at the device the message
    /// names (`from_device`) or at every device of the sender.
    private func answerUnknown(_ content: JSONValue, sender: UserID, transactionID: String) async {
        let device = VerificationMessages.fromDevice(of: content)
        guard sender != userID || device != deviceID else { return }  // our own echo
        logger.info("verification message of an unknown transaction answered user=\(sender)")
        await sendToDevice(
            .cancel, VerificationMessages.cancel(transactionID: transactionID, code: .unknownTransaction),
            user: sender, devices: [device?.rawValue ?? "*"], transactionID: transactionID)
    }

    /// A request or a start with a new transaction opens a flow; anything else of an unknown
    /// transaction is dropped.
    /// In a room (`room`), the request's age is its event's.
    private func open(
        _ kind: VerificationMessages.Kind, _ content: JSONValue, sender: UserID, transactionID: String,
        room: (id: RoomID, age: Int64)? = nil
    ) async {
        let device: DeviceID
        var age: Int64 = 0
        switch kind {
        case .request:
            guard let request = VerificationMessages.parseRequest(content) else { return }
            device = request.device
            if let room {
                age = room.age
            } else {
                guard let timestamp = request.timestamp else { return }
                age = wallClock.now.millisecondsSince1970 - timestamp
            }
        case .start:
            guard let start = VerificationMessages.parseStart(content) else { return }
            device = start.fromDevice
        default: return
        }
        guard sender != userID || device != deviceID else { return }  // our own echo
        let driver: VerificationFlowDriver
        do { driver = try await makeDriver(peer: sender, device: device, inRoom: room != nil) } catch {
            logger.info("verification from an unknown user or device dropped user=\(sender)")
            return
        }
        guard flows[transactionID] == nil else { return }  // opened meanwhile (the actor is reentrant)
        let flow = VerificationFlow(
            transactionID: transactionID, ourselves: VerificationParty(userID: userID, deviceID: deviceID),
            peerUserID: sender, peerDeviceID: device, usesRequest: kind == .request)
        let verification = SASVerification(
            transactionID: transactionID, otherUserID: sender, initial: .incoming, center: self)
        flows[transactionID] = (driver, verification)
        if let room { rooms[transactionID] = room.id }
        await apply(
            driver.receive(kind, content, from: nil, opening: flow, ageMilliseconds: age), transactionID: transactionID)
        if case .incoming = verification.state.value { incoming.publish(verification) }
    }

    // MARK: - Work

    private func apply(_ work: VerificationWork, transactionID: String) async {
        guard let entry = flows[transactionID] else { return }
        let state = entry.driver.state
        for key in work.cancelledTimers { timers[transactionID]?.removeValue(forKey: key)?.cancel() }
        for (timeout, delay) in work.timers { schedule(timeout, after: delay, transactionID: transactionID) }
        if state.isFinished {
            for timer in timers.removeValue(forKey: transactionID)?.values ?? [:].values { timer.cancel() }
        }
        if let flow = state.flow {
            // The signature is uploaded before our `done` leaves: once the peer sees the flow
            // verified, the server already lists its device (or user) as signed by us, so our
            // own new device asking for the secrets next is answered.
            for message in work.messages where message.kind != .done { await send(message, flow: flow) }
            if let keys = work.sign { await crossSign(keys, flow: flow) }
            for message in work.messages where message.kind == .done { await send(message, flow: flow) }
        }
        if let device = state.flow?.peerDeviceID { entry.verification.device.withLock { $0 = device } }
        entry.verification.publisher.publish(SASVerification.appState(state))
        if case .verified(let flow, _) = state, flow.peerUserID == userID, let device = flow.peerDeviceID,
            reportedVerified.insert(transactionID).inserted
        {
            await ownDeviceVerified?(device)
        }
    }

    /// Starts `timeout`'s timer (replacing one under the same key): when it fires, the flow gets
    /// ``VerificationMachine/Event/timedOut(_:)``. A timer that fires after its flow moved on
    /// changes nothing (the machine ignores it, or stays).
    private func schedule(_ timeout: VerificationTimeout, after delay: Duration, transactionID: String) {
        let key = VerificationMachine.Keys.key(timeout)
        timers[transactionID]?[key]?.cancel()
        let clock = clock
        timers[transactionID, default: [:]][key] = Task { [weak self] in
            do { try await clock.sleep(for: delay) } catch { return }
            await self?.handle(.timedOut(timeout), in: transactionID)
        }
    }

    private func send(_ message: VerificationOutgoing, flow: VerificationFlow) async {
        if let room = rooms[flow.transactionID] {
            // In a room every device of the peer sees the answer: no `m.accepted` to the others.
            guard !message.toOtherDevices, let roomSender else { return }
            do {
                _ = try await roomSender(room, message.kind.rawValue, Self.bytes(message.content))
            } catch {
                logger.info("verification event not sent type=\(message.kind.rawValue) error=\(error)")
            }
            return
        }
        var devices = [flow.peerDeviceID?.rawValue ?? "*"]
        if message.toOtherDevices {
            // Every other device of the peer this device knows of (not this one, for our own).
            let known = (try? await store.devices(of: flow.peerUserID)) ?? []
            devices = known.map(\.deviceID).filter {
                $0 != flow.peerDeviceID?.rawValue && !(flow.peerUserID == userID && $0 == deviceID.rawValue)
            }
            guard !devices.isEmpty else { return }
        }
        await sendToDevice(
            message.kind, message.content, user: flow.peerUserID, devices: devices,
            transactionID: flow.transactionID)
    }

    private func sendToDevice(
        _ kind: VerificationMessages.Kind, _ content: JSONValue, user: UserID, devices: [String],
        transactionID: String
    ) async {
        sendCounter += 1
        let transaction = TransactionID("verify-\(transactionID)-\(sendCounter)")
        do {
            let endpoint = try E2EEAPI.sendToDevice(
                eventType: kind.rawValue, transactionID: transaction,
                messages: [user.rawValue: Dictionary(uniqueKeysWithValues: devices.map { ($0, content) })])
            _ = try await requester.send(endpoint)
        } catch {
            logger.info("verification message not sent type=\(kind.rawValue) error=\(error)")
        }
    }

    private func makeDriver(peer: UserID, device: DeviceID?, inRoom: Bool = false) async throws(KeyVerificationError)
        -> VerificationFlowDriver
    {
        guard let keys = await engine.identityKeys else { throw .notReady }
        var devices: [CryptoStore.Device]
        let ourMaster: String?
        var peerMaster: String?
        do {
            devices = try await store.devices(of: peer)
            let deviceUnknown = device.map { device in !devices.contains { $0.deviceID == device.rawValue } } ?? false
            if devices.isEmpty || deviceUnknown, let refresh {
                // A user this account does not track yet (no encrypted room loaded its members),
                // or a device newer than the last query (our own new device): its keys are
                // queried first.
                await refresh([peer])
                devices = try await store.devices(of: peer)
            }
            ourMaster = try await store.crossSigningMasterKey()
            peerMaster = try await store.identity(of: peer)?.pinnedMasterKey
        } catch {
            throw .notReady
        }
        let known = devices.filter { !$0.keyChanged }
        guard !known.isEmpty else { throw .unknownDevice }
        let clock = wallClock
        return VerificationFlowDriver(
            driver: engine.driver, ourselves: VerificationParty(userID: userID, deviceID: deviceID),
            ourDeviceKey: keys.ed25519, ourMasterKey: ourMaster,
            peerDeviceKeys: Dictionary(
                known.map { (DeviceID($0.deviceID), $0.ed25519) }, uniquingKeysWith: { a, _ in a }),
            peerMasterKey: peerMaster, inRoom: inRoom, nowMilliseconds: { clock.now.millisecondsSince1970 })
    }

    // MARK: - Signing

    /// Signs what the flow proved: our own device with our self-signing key, another user's
    /// master key with our user-signing key; uploads the signature and re-queries the user.
    private func crossSign(_ keys: VerifiedKeys, flow: VerificationFlow) async {
        guard let peerDevice = flow.peerDeviceID else { return }
        do {
            guard let stored = try await store.crossSigningKeys() else {
                logger.info("verified without a cross-signing identity: nothing signed user=\(flow.peerUserID)")
                return
            }
            let signer = try CrossSigningKeys(
                userID: userID, masterSeed: stored.masterSeed, selfSigningSeed: stored.selfSigningSeed,
                userSigningSeed: stored.userSigningSeed, driver: engine.driver)
            let body = try await requester.send(try E2EEAPI.query(users: [flow.peerUserID])).body
            let answer = try JSONValue(parsing: body)
            var upload: [String: [String: JSONValue]] = [:]
            if flow.peerUserID == userID {
                // A QR code that proved our own master key to this device signs nothing here:
                // this device then takes the secrets (the account's own-device report).
                guard keys.deviceKey != nil else { return }
                guard
                    let deviceKeys = CrossSigningChain.deviceKeys(
                        in: answer, user: userID, deviceID: peerDevice.rawValue),
                    Self.ed25519(of: deviceKeys, keyID: "ed25519:\(peerDevice.rawValue)") == keys.deviceKey
                else {
                    logger.warning("verified device's keys differ from the server's: not signed")
                    return
                }
                upload[userID.rawValue] = [peerDevice.rawValue: try signer.signDevice(deviceKeys)]
            } else {
                guard let masterKey = keys.masterKey, case .object(let top) = answer,
                    case .object(let masters)? = top["master_keys"], let master = masters[flow.peerUserID.rawValue],
                    Self.ed25519(of: master, keyID: "ed25519:\(masterKey)") == masterKey
                else {
                    logger.info("verified user has no proven master key: nothing signed user=\(flow.peerUserID)")
                    return
                }
                upload[flow.peerUserID.rawValue] = [masterKey: try signer.signUser(masterKey: master)]
            }
            let answerBody = try await requester.send(try E2EEAPI.uploadSignatures(upload)).body
            if case .object(let members)? = try? JSONValue(parsing: answerBody),
                case .object(let failures)? = members["failures"], !failures.isEmpty
            {
                logger.warning("verification signature refused user=\(flow.peerUserID)")
            }
            logger.info("verification signature uploaded user=\(flow.peerUserID) device=\(peerDevice)")
            // Our own identity goes in the query too: the chain checks the new signature with our
            // user-signing key, which only an answer about ourselves lists.
            await refresh?(flow.peerUserID == userID ? [userID] : [flow.peerUserID, userID])
        } catch {
            logger.warning("verification signature not uploaded user=\(flow.peerUserID) error=\(error)")
        }
    }

    /// A content's JSON (canonical; the contents have no non-integer number).
    private static func bytes(_ content: JSONValue) -> [UInt8] { (try? content.canonicalEncoding()) ?? [] }

    private static func ed25519(of keyObject: JSONValue, keyID: String) -> String? {
        guard case .object(let object) = keyObject, case .object(let keys)? = object["keys"],
            case .string(let key)? = keys[keyID]
        else { return nil }
        return key
    }
}
