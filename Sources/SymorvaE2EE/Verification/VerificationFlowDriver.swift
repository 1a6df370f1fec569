import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// One outgoing `m.key.verification.*` message: its type and content (to-device form).
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

    /// - Parameters:
    ///   - ourDeviceKey: this device's Ed25519 key; `ourMasterKey` our master key, if any.
    ///   - peerDeviceKeys: the Ed25519 keys of the peer user's devices (a request may be
    ///     answered by any of them); `peerMasterKey` the peer user's master key, if known.
    ///   - nowMilliseconds: the wall clock, for the request's timestamp.
    package init(
        driver: any CryptoDriver, ourselves: VerificationParty, ourDeviceKey: String, ourMasterKey: String?,
        peerDeviceKeys: [DeviceID: String], peerMasterKey: String?, nowMilliseconds: @escaping () -> Int64
    ) {
        self.driver = driver
        var keys = ["ed25519:\(ourselves.deviceID.rawValue)": ourDeviceKey]
        if let ourMasterKey { keys["ed25519:\(ourMasterKey)"] = ourMasterKey }
        ourKeys = keys
        self.peerDeviceKeys = peerDeviceKeys
        self.peerMasterKey = peerMasterKey
        clock = nowMilliseconds
    }

    /// Applies a local event (the person's: verify, accept, SAS, compare, cancel; or a timer).
    package func handle(_ event: VerificationMachine.Event) -> VerificationWork {
        let transition = machine.transition(from: state, on: event)
        state = transition.nextState(after: state)
        var work = VerificationWork()
        for effect in transition.effects { perform(effect, into: &work) }
        return work
    }

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
            guard let flow, VerificationMessages.parseRequest(content) != nil else { return .invalidMessageReceived }
            return .requestReceived(flow, age: .milliseconds(ageMilliseconds))
        case .ready:
            return VerificationMessages.parseReady(content).map { .readyReceived($0) } ?? .invalidMessageReceived
        case .start:
            guard let start = VerificationMessages.parseStart(content), let opened = flow ?? state.flow else {
                return .invalidMessageReceived
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
            let content = VerificationMessages.start(flow, offer: offer)
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
