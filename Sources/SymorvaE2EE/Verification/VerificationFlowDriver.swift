import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// One outgoing `m.key.verification.*` message: its type and content (to-device form, or the
/// room form for a flow in a room).
package struct VerificationOutgoing: Sendable, Hashable {
    package var kind: VerificationMessages.Kind
    package var content: JSONValue
    /// To the peer's devices other than the flow's (the `m.accepted` cancel after a request to
    /// every device), not to the flow's device.
    package var toOtherDevices = false
}

/// What a transport must do after a step of a flow: send these messages (in order), and, once
/// verified, sign these keys.
package struct VerificationWork: Sendable, Hashable {
    package var messages: [VerificationOutgoing] = []
    /// The keys proven by the flow (``VerificationMachine/Effect/crossSign(_:_:)``).
    package var sign: VerifiedKeys?
    /// The timers the flow asked for (the host schedules them and sends ``VerificationMachine/Event/timedOut(_:)``).
    package var timers: [(VerificationTimeout, Duration)] = []
    /// Timers to cancel.
    package var cancelledTimers: [EffectKey] = []

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.messages == rhs.messages && lhs.sign == rhs.sign && lhs.cancelledTimers == rhs.cancelledTimers
            && lhs.timers.map(\.0) == rhs.timers.map(\.0) && lhs.timers.map(\.1) == rhs.timers.map(\.1)
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(messages)
        hasher.combine(sign)
    }
}

/// One verification flow end to end, without I/O: the ``VerificationMachine`` decides, the
/// ``SASExchange`` does the cryptography, ``VerificationMessages`` reads and writes the wire
/// contents. A transport (to-device, in a room) feeds it what arrived and sends what it returns.
/// Not thread-safe: one actor owns it.
package final class VerificationFlowDriver {
    private let machine = VerificationMachine()
    private let driver: any CryptoDriver
    /// Where the flow is.
    package private(set) var state: VerificationMachine.State = .idle
    private var exchange: SASExchange?
    /// The peer's start, kept as it came (the commitment hashes it).
    private var theirStart: JSONValue?
    /// Our device's Ed25519 key and (when we have one) our master key: what our MAC covers.
    private let ourKeys: [String: String]
    /// The peer device's Ed25519 key and the peer user's master key, as `keys/query` gave them.
    private var peerDeviceKeys: [DeviceID: String]
    private let peerMasterKey: String?
    private let clock: () -> Int64
    /// This device's Ed25519 key and the master key whose private half it holds (if any).
    private let ourDeviceKey: String
    private let ourMasterKey: String?
    /// The QR code this device shows in this flow (made once, on the first ask).
    private var shownCode: QRVerificationPayload?
    /// The secret of the peer's code this device scanned (sent back in `m.reciprocate.v1`).
    private var scannedSecret: [UInt8]?
    /// The methods the peer's device named in its request or ready (`nil` before either).
    private var peerMethods: [String]?
    /// Whether the flow runs in a room: what it sends is in the room form
    /// (``VerificationMessages/inRoom(_:)``), and the commitment hashes the start as sent there.
    package let inRoom: Bool

    /// - Parameters:
    ///   - ourDeviceKey: this device's Ed25519 key; `ourMasterKey` our master key, if any.
    ///   - peerDeviceKeys: the Ed25519 keys of the peer user's devices (a request may be
    ///     answered by any of them); `peerMasterKey` the peer user's master key, if known.
    ///   - nowMilliseconds: the wall clock, for the request's timestamp.
    package init(
        driver: any CryptoDriver, ourselves: VerificationParty, ourDeviceKey: String, ourMasterKey: String?,
        peerDeviceKeys: [DeviceID: String], peerMasterKey: String?, inRoom: Bool = false,
        nowMilliseconds: @escaping () -> Int64
    ) {
        self.inRoom = inRoom
        self.driver = driver
        var keys = ["ed25519:\(ourselves.deviceID.rawValue)": ourDeviceKey]
        if let ourMasterKey { keys["ed25519:\(ourMasterKey)"] = ourMasterKey }
        ourKeys = keys
        self.peerDeviceKeys = peerDeviceKeys
        self.peerMasterKey = peerMasterKey
        self.ourDeviceKey = ourDeviceKey
        self.ourMasterKey = ourMasterKey
        clock = nowMilliseconds
    }

    // MARK: - QR codes

    /// The bytes of the QR code this device shows in a ready flow (the app renders them), made
    /// once with a fresh secret: mode `0x00` for another user (our master key, theirs), `0x01`
    /// for our own device when this device holds the cross-signing keys (the master key, the
    /// other device's key), `0x02` when it does not (this device's key, the master key it was
    /// told). Shown once ready, or already while our request to one known device waits (the
    /// code is the same: the other device scans it once it answered). `nil` otherwise, when the
    /// peer's request or ready did not offer `m.qr_code.scan.v1`, or without the keys the mode
    /// needs.
    package func qrCode() -> [UInt8]? {
        let flow: VerificationFlow
        switch state {
        case .ready(let ready): flow = ready
        case .requested(let requested) where requested.peerDeviceID != nil: flow = requested
        default: return nil
        }
        guard let peerDevice = flow.peerDeviceID else { return nil }
        // A device that said it cannot scan gets no code (before its answer, the code is made).
        guard peerMethods?.contains(KeyVerificationMethod.qrCodeScan) ?? true else { return nil }
        if let shownCode { return shownCode.encoded }
        let mode: QRVerificationMode
        let keys: (String?, String?)
        if flow.peerUserID == flow.ourselves.userID {
            if let ourMasterKey {
                (mode, keys) = (.selfVerifyingTrustedMasterKey, (ourMasterKey, peerDeviceKeys[peerDevice]))
            } else {
                (mode, keys) = (.selfVerifyingUntrustedMasterKey, (ourDeviceKey, peerMasterKey))
            }
        } else {
            (mode, keys) = (.verifyingAnotherUser, (ourMasterKey, peerMasterKey))
        }
        guard let first = keys.0.flatMap(UnpaddedBase64.decode), let second = keys.1.flatMap(UnpaddedBase64.decode)
        else { return nil }
        var generator = SystemRandomNumberGenerator()  // the platform's CSPRNG (getrandom)
        let secret = (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        guard
            let code = try? QRVerificationPayload(
                mode: mode, flowID: flow.transactionID, firstKey: first, secondKey: second, sharedSecret: secret)
        else { return nil }
        shownCode = code
        return code.encoded
    }

    /// The person scanned the peer's code: its keys are compared with what this device knows;
    /// a match sends `m.reciprocate.v1`, a mismatch cancels the flow (`m.key_mismatch`, or
    /// `m.unknown_transaction` for another flow's code). Bytes that are no verification code
    /// throw and leave the flow as it was.
    package func scanned(_ bytes: [UInt8]) throws(QRVerificationPayloadError) -> VerificationWork {
        let payload = try QRVerificationPayload(parsing: bytes)
        guard case .ready(let flow) = state else { return VerificationWork() }
        let selfVerification = flow.peerUserID == flow.ourselves.userID
        let decode = { (key: String?) in key.flatMap(UnpaddedBase64.decode) }
        let known = QRKnownKeys(
            selfVerification: selfVerification, ourDeviceKey: decode(ourDeviceKey) ?? [],
            ourMasterKey: decode(selfVerification ? (ourMasterKey ?? peerMasterKey) : ourMasterKey),
            ourMasterKeyTrusted: ourMasterKey != nil, peerMasterKey: selfVerification ? nil : decode(peerMasterKey),
            peerDeviceKey: flow.peerDeviceID.flatMap { decode(peerDeviceKeys[$0]) })
        switch payload.scannerCheck(flowID: flow.transactionID, known: known) {
        case .match(let proof):
            scannedSecret = payload.sharedSecret
            return handle(.qrScanned(.proven(Self.keys(proven: proof))))
        case .mismatch(let mismatch):
            return handle(.qrScanned(.mismatch(mismatch.cancelCode)))
        }
    }

    /// The shower's check of an `m.reciprocate.v1` start.
    private func reciprocate(_ content: JSONValue) -> VerificationMachine.Event {
        guard let secret = VerificationMessages.parseReciprocateSecret(content) else { return .invalidMessageReceived }
        guard let shownCode else { return .reciprocateReceived(.mismatch(.keyMismatch)) }  // we showed nothing
        switch shownCode.reciprocateCheck(secret: secret) {
        case .match(let proof): return .reciprocateReceived(.proven(Self.keys(proven: proof)))
        case .mismatch(let mismatch): return .reciprocateReceived(.mismatch(mismatch.cancelCode))
        }
    }

    /// What a QR proof signs: the other user's master key, our other device's key, or (our own
    /// master key) nothing here — this device then trusts its identity and takes the secrets.
    private static func keys(proven proof: QRVerificationProof) -> VerifiedKeys {
        switch proof {
        case .peerMasterKey(let key): VerifiedKeys(deviceKey: nil, masterKey: UnpaddedBase64.encode(key))
        case .peerDeviceKey(let key): VerifiedKeys(deviceKey: UnpaddedBase64.encode(key), masterKey: nil)
        case .ourMasterKey(let key): VerifiedKeys(deviceKey: nil, masterKey: UnpaddedBase64.encode(key))
        }
    }

    /// Applies a local event (the person's: verify, accept, SAS, compare, cancel; or a timer).
    package func handle(_ event: VerificationMachine.Event) -> VerificationWork {
        let transition = machine.transition(from: state, on: event)
        state = transition.nextState(after: state)
        var work = VerificationWork()
        for effect in transition.effects { perform(effect, into: &work) }
        return wire(work)
    }

    /// The contents in this flow's transport form.
    private func wire(_ work: VerificationWork) -> VerificationWork {
        guard inRoom else { return work }
        var work = work
        for index in work.messages.indices { work.messages[index].content = wire(work.messages[index].content) }
        return work
    }

    private func wire(_ content: JSONValue) -> JSONValue { inRoom ? VerificationMessages.inRoom(content) : content }

    /// Applies a message that arrived for this flow (`kind`, `content`) from `sender`.
    package func receive(
        _ kind: VerificationMessages.Kind, _ content: JSONValue, from sender: VerificationParty?,
        opening flow: VerificationFlow? = nil, ageMilliseconds: Int64 = 0
    ) -> VerificationWork {
        handle(event(for: kind, content, opening: flow, ageMilliseconds: ageMilliseconds))
    }

    private func event(
        for kind: VerificationMessages.Kind, _ content: JSONValue, opening flow: VerificationFlow?,
        ageMilliseconds: Int64
    ) -> VerificationMachine.Event {
        switch kind {
        case .request:
            guard let flow, let request = VerificationMessages.parseRequest(content) else {
                return .invalidMessageReceived
            }
            peerMethods = request.methods
            return .requestReceived(flow, age: .milliseconds(ageMilliseconds))
        case .ready:
            guard let ready = VerificationMessages.parseReady(content) else { return .invalidMessageReceived }
            if state.flow?.peerDeviceID.map({ $0 == ready.fromDevice }) ?? true { peerMethods = ready.methods }
            return .readyReceived(ready)
        case .start:
            guard let start = VerificationMessages.parseStart(content), let opened = flow ?? state.flow else {
                return .invalidMessageReceived
            }
            if start.method == KeyVerificationMethod.reciprocate, flow == nil,
                opened.peerDeviceID == nil || opened.peerDeviceID == start.fromDevice
            {
                return reciprocate(content)
            }
            theirStart = content
            return .startReceived(opened, start)
        case .accept:
            return VerificationMessages.parseAccept(content).map { .acceptReceived($0) } ?? .invalidMessageReceived
        case .key:
            guard let key = VerificationMessages.parseKey(content) else { return .invalidMessageReceived }
            switch state {
            case .accepted(let progress), .keySent(let progress):
                guard let exchange, let facts = try? exchange.keyReceived(key, progress: progress) else {
                    return .invalidMessageReceived
                }
                return .keyReceived(facts)
            default:
                // Not expected now: the machine cancels (m.unexpected_message) on any key.
                return SASCode(bytes: [UInt8](repeating: 0, count: 6)).map {
                    .keyReceived(SASKeyFacts(commitment: "", code: $0))
                } ?? .invalidMessageReceived
            }
        case .mac:
            switch state {
            case .comparing(let progress), .macSent(let progress):
                guard let exchange, let peer = progress.flow.peerDeviceID else { return .invalidMessageReceived }
                return .macReceived(
                    exchange.check(
                        content, progress: progress, deviceKey: peerDeviceKeys[peer], masterKey: peerMasterKey))
            default: return .macReceived(.mismatch)
            }
        case .done: return .doneReceived
        case .cancel: return .cancelReceived(VerificationMessages.parseCancel(content))
        }
    }

    private func perform(_ effect: VerificationMachine.Effect, into work: inout VerificationWork) {
        switch effect {
        case .sendRequest(let flow, let methods):
            work.messages.append(
                .init(
                    kind: .request,
                    content: VerificationMessages.request(flow, methods: methods, timestampMilliseconds: clock())))
        case .sendReady(let flow, let methods):
            work.messages.append(.init(kind: .ready, content: VerificationMessages.ready(flow, methods: methods)))
        case .sendStart(let flow, let offer):
            let content = wire(VerificationMessages.start(flow, offer: offer))
            guard let exchange = try? SASExchange(driver: driver) else { return cancelLocally(flow, into: &work) }
            exchange.startContent = content
            self.exchange = exchange
            work.messages.append(.init(kind: .start, content: content))
        case .sendAccept(let flow, let agreement):
            guard let exchange = try? SASExchange(driver: driver) else { return cancelLocally(flow, into: &work) }
            exchange.startContent = theirStart
            self.exchange = exchange
            guard let commitment = try? exchange.commitment(to: exchange.publicKey) else {
                return cancelLocally(flow, into: &work)
            }
            work.messages.append(
                .init(
                    kind: .accept,
                    content: VerificationMessages.accept(flow, agreement: agreement, commitment: commitment)))
        case .sendKey(let flow):
            guard let exchange else { return cancelLocally(flow, into: &work) }
            work.messages.append(
                .init(kind: .key, content: VerificationMessages.key(flow, publicKey: exchange.publicKey)))
        case .sendMAC(let flow, let method):
            guard let exchange, let content = try? exchange.macContent(flow, method: method, keys: ourKeys) else {
                return cancelLocally(flow, into: &work)
            }
            work.messages.append(.init(kind: .mac, content: content))
        case .sendDone(let flow):
            work.messages.append(.init(kind: .done, content: VerificationMessages.done(flow)))
        case .sendCancel(let flow, let code):
            work.messages.append(.init(kind: .cancel, content: VerificationMessages.cancel(flow, code: code)))
        case .sendReciprocate(let flow):
            guard let scannedSecret else { return cancelLocally(flow, into: &work) }
            work.messages.append(
                .init(kind: .start, content: VerificationMessages.reciprocate(flow, secret: scannedSecret)))
        case .sendAcceptedToOtherDevices(let flow):
            work.messages.append(
                .init(
                    kind: .cancel, content: VerificationMessages.cancel(flow, code: .accepted), toOtherDevices: true))
        case .crossSign(_, let keys):
            work.sign = keys
        case .scheduleTimeout(let timeout, let delay):
            work.timers.append((timeout, delay))
        case .cancel(let key):
            work.cancelledTimers.append(key)
        }
    }

    /// Our own side failed (no SAS key pair, a start without canonical JSON): the flow is
    /// cancelled as an invalid message, and what that sends is added.
    private func cancelLocally(_ flow: VerificationFlow, into work: inout VerificationWork) {
        let transition = machine.transition(from: state, on: .invalidMessageReceived)
        state = transition.nextState(after: state)
        for effect in transition.effects { perform(effect, into: &work) }
    }
}
