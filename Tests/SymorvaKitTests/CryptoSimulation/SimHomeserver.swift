import Foundation
import SymorvaHTTP
import SymorvaRuntime
import Synchronization

/// An in-process Matrix homeserver for the crypto simulation: the client-server endpoints the
/// account stack uses (`/sync` with rooms, `to_device`, `device_lists`, one-time key counts and
/// fallback key types; `keys/upload`, `keys/query`, `keys/claim`; cross-signing:
/// `keys/device_signing/upload` (the first identity of an account without a password, as
/// Synapse) and `keys/signatures/upload` of devices; `sendToDevice`; room sends, room state,
/// filters), over ``SimTransport``.
///
/// It is the simulation's network: it drops, duplicates and delays (and so reorders) to-device
/// messages. Each fate is a pure function of the seed, the sending device, the receiving device
/// and the message's ordinal on that link (``fate(from:to:ordinal:)``), never of the order in
/// which concurrent requests happened to arrive. It holds `/sync` long polls until the device has
/// something new (no timer, no busy loop), and it watches what goes by: every Megolm (session,
/// index) and Olm (sender key, ratchet key, chain index) with its ciphertext, so that a message
/// key used for two different ciphertexts is seen (``violations``), and every request body, so
/// that a planted plaintext on the wire is seen too.
final class SimHomeserver: Sendable {
    static let baseURL = "https://sim.example.org"
    static let serverName = "sim.example.org"

    /// How often the network mistreats a to-device message, in percent of messages.
    struct NetworkFaults: Sendable {
        var dropPercent = 3
        var duplicatePercent = 6
        var delayPercent = 12
    }

    struct Room: Sendable {
        var id: String
        var members: [String]
        var state: [String]
        /// The position the room was created at: a device whose token is older gets its state.
        var createdAt: Int
        /// The room's events with the device that sent each and its transaction ID (the sender's
        /// own device gets it back in `unsigned.transaction_id`, as from a real server).
        var timeline: [(position: Int, json: String, device: String, transaction: String)] = []
    }

    struct Device: Sendable {
        var user: String
        var deviceID: String
        var deviceKeys: String?
        /// Signatures `keys/signatures/upload` added (signer → key ID → signature), kept apart
        /// from the device keys (as Synapse keeps them): a re-upload of the keys keeps them.
        var crossSignatures: [String: [String: String]] = [:]
        var oneTimeKeys: [(id: String, json: String)] = []
        var fallbackKey: (id: String, json: String, used: Bool)?
        var inbox: [(position: Int, json: String)] = []
        /// Messages sent to this device so far, per sending device (the fates' ordinals).
        var received: [String: Int] = [:]
    }

    enum Fate: Equatable, Sendable {
        case deliver
        case drop
        case duplicate
        case delay(steps: Int)
    }

    /// A to-device message held back until a later driver step.
    struct Delayed: Sendable {
        var releaseStep: Int
        var device: String
        var json: String
    }

    struct State: Sendable {
        var position = 1
        var step = 0
        var rooms: [String: Room] = [:]
        var roomOrder: [String] = []
        var devices: [String: Device] = [:]
        /// Each user's cross-signing keys as uploaded (`master_key`, `self_signing_key`,
        /// `user_signing_key`: JSON text).
        var identities: [String: [String: String]] = [:]
        var deviceListChanges: [(position: Int, user: String)] = []
        var delayed: [Delayed] = []
        var quietNetwork = false
        var roomSends: [String: String] = [:]
        var toDeviceSends: Set<String> = []
        var megolmKeys: [String: String] = [:]
        var olmKeys: [String: String] = [:]
        /// The keys already reported as reused (each is reported once).
        var reusedKeys: Set<String> = []
        var violations: [String] = []
        /// `sender>recipient` links on which a to-device message was dropped.
        var droppedLinks: Set<String> = []
        var unknownRoutes: Set<String> = []
        /// Parked `/sync` long polls.
        var polls: [UUID: CheckedContinuation<Void, Never>] = [:]
        /// Whoever waits for the next change (``nextChange(timeout:)``).
        var watchers: [UUID: CheckedContinuation<Void, Never>] = [:]
        var parked: [String: Int] = [:]
        /// Continuations to resume once the lock is released (``DeferringLock``): resuming one
        /// under the lock deadlocks against a cancellation handler, which takes the lock while
        /// the runtime holds the cancelled task's status lock, which a resume needs.
        var resumeLater: [CheckedContinuation<Void, Never>] = []
        var inFlight = 0
        var cut: Set<String> = []
        var counts = Counts()
    }

    /// What went by, for the run's report.
    struct Counts: Sendable, CustomStringConvertible {
        var roomEvents = 0
        var toDevice = 0
        var dropped = 0
        var duplicated = 0
        var delayed = 0
        var claims = 0
        var fallbackClaims = 0

        var description: String {
            "roomEvents=\(roomEvents) toDevice=\(toDevice) dropped=\(dropped) duplicated=\(duplicated) "
                + "delayed=\(delayed) claims=\(claims) fallbackClaims=\(fallbackClaims)"
        }
    }

    let seed: UInt64
    let faults: NetworkFaults
    private let state = DeferringLock(State())

    init(seed: UInt64, faults: NetworkFaults) {
        self.seed = seed
        self.faults = faults
    }

    static func key(_ user: String, _ deviceID: String) -> String { "\(user)|\(deviceID)" }

    // MARK: Setup and driver hooks

    /// Registers a device (its access token is ``SimTransport``'s business).
    func register(user: String, deviceID: String) {
        state.withLock { $0.devices[Self.key(user, deviceID)] = Device(user: user, deviceID: deviceID) }
    }

    /// Creates an encrypted room every member is joined to.
    func createRoom(id: String, members: [String]) {
        state.withLock { state in
            let creator = members[0]
            var events = [
                Self.event(
                    type: "m.room.create", stateKey: "", sender: creator, id: "$create-\(id)", position: 0,
                    content: #"{"room_version":"10","creator":"\#(creator)"}"#)
            ]
            for member in members {
                events.append(
                    Self.event(
                        type: "m.room.member", stateKey: member, sender: member, id: "$join-\(member)-\(id)",
                        position: 0, content: #"{"membership":"join"}"#))
            }
            events.append(
                Self.event(
                    type: "m.room.encryption", stateKey: "", sender: creator, id: "$encryption-\(id)", position: 0,
                    content:
                        #"{"algorithm":"m.megolm.v1.aes-sha2","rotation_period_ms":604800000,"rotation_period_msgs":100}"#
                ))
            state.position += 1
            state.rooms[id] = Room(id: id, members: members, state: events, createdAt: state.position)
            state.roomOrder.append(id)
            Self.wake(&state)
        }
    }

    /// The driver's clock: delayed to-device messages due by `step` are delivered.
    func advance(toStep step: Int) {
        state.withLock { state in
            state.step = step
            Self.release(&state) { $0.releaseStep <= step }
        }
    }

    /// The final quiet phase: every held message is delivered and nothing is mistreated any more.
    func quietNetwork() {
        state.withLock { state in
            state.quietNetwork = true
            Self.release(&state) { _ in true }
        }
    }

    /// Cuts a device's network for good (it was killed): every request of `incarnation` fails.
    func cut(_ incarnation: String) {
        state.withLock { state in
            state.cut.insert(incarnation)
            Self.wake(&state)
        }
    }

    var violations: [String] { state.withLock { $0.violations } }
    var unknownRoutes: Set<String> { state.withLock { $0.unknownRoutes } }
    var droppedLinks: Set<String> { state.withLock { $0.droppedLinks } }
    var counts: Counts { state.withLock { $0.counts } }
    /// Every room event: (room, event ID, sender, content JSON), in order.
    var roomEvents: [(room: String, position: Int, json: String)] {
        state.withLock { state in
            state.roomOrder.flatMap { id in state.rooms[id]!.timeline.map { (id, $0.position, $0.json) } }
        }
    }

    /// Whether the network is quiet: no request in flight, every device in `alive` parked in a
    /// long poll with nothing to deliver (messages held back for a later step do not count).
    func isQuiet(alive: Set<String>) -> Bool {
        state.withLock { state in
            state.inFlight == 0 && alive.allSatisfy { state.parked[$0] != nil }
        }
    }

    /// Returns after the next change of the server's state (a request, a park, a release), or
    /// after `timeout` at the latest.
    func nextChange(timeout: Duration) async {
        let id = UUID()
        let timer = Task {
            try? await Task.sleep(for: timeout)
            self.state.withLock { state in
                if let watcher = state.watchers.removeValue(forKey: id) { state.resumeLater.append(watcher) }
            }
        }
        await withCheckedContinuation { continuation in
            state.withLock { state in state.watchers[id] = continuation }
        }
        timer.cancel()
    }

    // MARK: Requests

    func handle(_ request: HTTPRequest, device: String, incarnation: String) async throws(TransportError)
        -> HTTPResponse
    {
        let path = request.url.path
        let prefix = "/_matrix/client/v3/"
        let isCut = state.withLock { $0.cut.contains(incarnation) }
        if isCut { throw .connectionLost }
        if String(decoding: request.body, as: UTF8.self).contains(SimCanary.marker) {
            state.withLock { $0.violations.append("plaintext on the wire: \(request.method) \(path)") }
        }
        guard path.hasPrefix(prefix) else { return unknown(request) }
        let route = String(path.dropFirst(prefix.count))
        if request.method == .get, route == "sync" {
            return try await sync(request, device: device, incarnation: incarnation)
        }
        state.withLock { state in
            state.inFlight += 1
            Self.wake(&state)
        }
        defer {
            state.withLock { state in
                state.inFlight -= 1
                Self.wake(&state)
            }
        }
        let body = (try? JSONSerialization.jsonObject(with: Data(request.body))) as? [String: Any] ?? [:]
        // Segments split on the encoded path: a transaction ID may hold an encoded "/".
        let encodedRoute = request.url.path(percentEncoded: true).dropFirst(prefix.count)
        let parts = encodedRoute.split(separator: "/", omittingEmptySubsequences: false).map {
            String($0).removingPercentEncoding ?? String($0)
        }
        switch (request.method, parts.first ?? "") {
        case (.post, "keys") where parts.count == 2 && parts[1] == "upload": return upload(body, device: device)
        case (.post, "keys") where parts.count == 2 && parts[1] == "query": return query(body, device: device)
        case (.post, "keys") where parts == ["keys", "device_signing", "upload"]:
            return uploadSigningKeys(body, device: device)
        case (.post, "keys") where parts == ["keys", "signatures", "upload"]: return uploadSignatures(body)
        case (.post, "keys") where parts.count == 2 && parts[1] == "claim": return claim(body)
        case (.put, "sendToDevice") where parts.count == 3:
            return sendToDevice(body, type: parts[1], transaction: parts[2], device: device)
        case (.post, "user") where parts.count == 3 && parts[2] == "filter": return .json(200, #"{"filter_id":"1"}"#)
        case (.put, "rooms") where parts.count == 5 && parts[2] == "send":
            return send(
                request.body, room: parts[1], type: parts[3], transaction: parts[4], device: device)
        case (.get, "rooms") where parts.count >= 4 && parts[2] == "state":
            return roomState(room: parts[1], type: parts[3])
        case (.get, "rooms") where parts.count == 3 && parts[2] == "members": return members(room: parts[1])
        default: return unknown(request)
        }
    }

    private func unknown(_ request: HTTPRequest) -> HTTPResponse {
        state.withLock { _ = $0.unknownRoutes.insert("\(request.method) \(request.url.path)") }
        return .json(404, #"{"errcode":"M_UNRECOGNIZED","error":"not simulated"}"#)
    }

    // MARK: Sync

    private func sync(_ request: HTTPRequest, device: String, incarnation: String) async throws(TransportError)
        -> HTTPResponse
    {
        let components = URLComponents(url: request.url, resolvingAgainstBaseURL: false)
        let since = components?.queryItems?.first { $0.name == "since" }?.value.flatMap { Int($0) }
        let waiter = UUID()
        while true {
            if Task.isCancelled { throw .cancelled }
            let body: String? = state.withLock { state in
                if state.cut.contains(incarnation) { return "" }
                guard since == nil || Self.hasNews(state, device: device, since: since!) else { return nil }
                return Self.syncBody(&state, device: device, since: since)
            }
            if let body {
                guard !body.isEmpty else { throw .connectionLost }
                return .json(200, body)
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    state.withLock { state in
                        let news = state.cut.contains(incarnation) || Self.hasNews(state, device: device, since: since!)
                        if news || Task.isCancelled {
                            state.resumeLater.append(continuation)
                        } else {
                            state.parked[device] = since!
                            state.polls[waiter] = continuation
                            Self.wakeWatchers(&state)
                        }
                    }
                }
            } onCancel: {
                state.withLock { state in
                    if let poll = state.polls.removeValue(forKey: waiter) { state.resumeLater.append(poll) }
                    state.parked.removeValue(forKey: device)
                }
            }
            state.withLock { _ = $0.parked.removeValue(forKey: device) }
        }
    }

    private static func rooms(of user: String, in state: State) -> [Room] {
        state.roomOrder.compactMap { state.rooms[$0] }.filter { $0.members.contains(user) }
    }

    private static func sharesRoom(_ user: String, _ other: String, in state: State) -> Bool {
        user == other || rooms(of: user, in: state).contains { $0.members.contains(other) }
    }

    private static func hasNews(_ state: State, device: String, since: Int) -> Bool {
        guard let record = state.devices[device] else { return false }
        if record.inbox.contains(where: { $0.position > since }) { return true }
        if state.deviceListChanges.contains(where: {
            $0.position > since && sharesRoom(record.user, $0.user, in: state)
        }) {
            return true
        }
        return rooms(of: record.user, in: state).contains { room in
            room.createdAt > since || room.timeline.contains { $0.position > since }
        }
    }

    private static func syncBody(_ state: inout State, device: String, since: Int?) -> String {
        let position = state.position
        var record = state.devices[device]!
        if let since { record.inbox.removeAll { $0.position <= since } }
        state.devices[device] = record
        var rooms: [String] = []
        for room in Self.rooms(of: record.user, in: state) {
            let timeline = room.timeline.filter { $0.position > (since ?? 0) }.map { entry in
                guard entry.device == device else { return entry.json }
                return String(entry.json.dropLast())
                    + #","unsigned":{"transaction_id":\#(json(entry.transaction))}}"#
            }
            let stateEvents = room.createdAt > (since ?? 0) ? room.state : []
            guard !timeline.isEmpty || !stateEvents.isEmpty else { continue }
            rooms.append(
                #"\#(json(room.id)):{"state":{"events":[\#(stateEvents.joined(separator: ","))]},"#
                    + #""timeline":{"events":[\#(timeline.joined(separator: ","))],"limited":false}}"#)
        }
        let toDevice = record.inbox.filter { $0.position > (since ?? 0) }.map(\.json)
        let changed = Set(
            state.deviceListChanges.filter {
                $0.position > (since ?? Int.max) && sharesRoom(record.user, $0.user, in: state)
            }.map(\.user)
        ).sorted()
        let unusedFallback = record.fallbackKey.map { $0.used ? "" : #""signed_curve25519""# } ?? ""
        return #"{"next_batch":"\#(position)","rooms":{"join":{\#(rooms.joined(separator: ","))}},"#
            + #""to_device":{"events":[\#(toDevice.joined(separator: ","))]},"#
            + #""device_lists":{"changed":[\#(changed.map(json).joined(separator: ","))],"left":[]},"#
            + #""device_one_time_keys_count":{"signed_curve25519":\#(record.oneTimeKeys.count)},"#
            + #""device_unused_fallback_key_types":[\#(unusedFallback)]}"#
    }

    // MARK: Keys

    private func upload(_ body: [String: Any], device: String) -> HTTPResponse {
        state.withLock { state in
            guard var record = state.devices[device] else { return .json(401, #"{"errcode":"M_UNKNOWN_TOKEN"}"#) }
            if let keys = body["device_keys"] {
                let text = Self.jsonText(keys)
                if record.deviceKeys != text {
                    record.deviceKeys = text
                    state.position += 1
                    state.deviceListChanges.append((state.position, record.user))
                }
            }
            if let keys = body["one_time_keys"] as? [String: Any] {
                for (id, value) in keys.sorted(by: { $0.key < $1.key })
                where !record.oneTimeKeys.contains(where: { $0.id == id }) {
                    record.oneTimeKeys.append((id, Self.jsonText(value)))
                }
            }
            if let keys = body["fallback_keys"] as? [String: Any], let (id, value) = keys.first {
                if record.fallbackKey?.id != id { record.fallbackKey = (id, Self.jsonText(value), false) }
            }
            state.devices[device] = record
            Self.wake(&state)
            return .json(200, #"{"one_time_key_counts":{"signed_curve25519":\#(record.oneTimeKeys.count)}}"#)
        }
    }

    private func query(_ body: [String: Any], device: String) -> HTTPResponse {
        let users = (body["device_keys"] as? [String: Any])?.keys.sorted() ?? []
        return state.withLock { state in
            let asker = state.devices[device]?.user
            var answer: [String] = []
            var masters: [String] = []
            var selfSigning: [String] = []
            var userSigning: [String] = []
            for user in users {
                let devices = state.devices.values.filter { $0.user == user && $0.deviceKeys != nil }
                    .sorted { $0.deviceID < $1.deviceID }
                    .map { "\(Self.json($0.deviceID)):\(Self.withCrossSignatures($0))" }
                answer.append("\(Self.json(user)):{\(devices.joined(separator: ","))}")
                guard let identity = state.identities[user] else { continue }
                if let key = identity["master_key"] { masters.append("\(Self.json(user)):\(key)") }
                if let key = identity["self_signing_key"] { selfSigning.append("\(Self.json(user)):\(key)") }
                if user == asker, let key = identity["user_signing_key"] {
                    userSigning.append("\(Self.json(user)):\(key)")
                }
            }
            return .json(
                200,
                #"{"device_keys":{\#(answer.joined(separator: ","))},"failures":{},"#
                    + #""master_keys":{\#(masters.joined(separator: ","))},"#
                    + #""self_signing_keys":{\#(selfSigning.joined(separator: ","))},"#
                    + #""user_signing_keys":{\#(userSigning.joined(separator: ","))}}"#)
        }
    }

    /// A device's keys as `keys/query` lists them: with the signatures added by
    /// `keys/signatures/upload`.
    private static func withCrossSignatures(_ device: Device) -> String {
        guard !device.crossSignatures.isEmpty, let text = device.deviceKeys,
            var keys = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
        else { return device.deviceKeys ?? "{}" }
        var signatures = keys["signatures"] as? [String: [String: Any]] ?? [:]
        for (signer, byKey) in device.crossSignatures {
            signatures[signer, default: [:]].merge(byKey) { old, _ in old }
        }
        keys["signatures"] = signatures
        return jsonText(keys)
    }

    /// `keys/device_signing/upload`: an account's first identity (or the same one again) needs
    /// no password, as on Synapse (MSC3967); replacing one answers 401 (no password stage here).
    private func uploadSigningKeys(_ body: [String: Any], device: String) -> HTTPResponse {
        state.withLock { state in
            guard let user = state.devices[device]?.user else { return .json(401, #"{"errcode":"M_UNKNOWN_TOKEN"}"#) }
            var uploaded: [String: String] = [:]
            for name in ["master_key", "self_signing_key", "user_signing_key"] {
                if let key = body[name] { uploaded[name] = Self.jsonText(key) }
            }
            if let existing = state.identities[user], existing != uploaded {
                return .json(401, #"{"flows":[{"stages":["m.login.password"]}],"params":{},"session":"sim"}"#)
            }
            if state.identities[user] == nil {
                state.identities[user] = uploaded
                state.position += 1
                state.deviceListChanges.append((state.position, user))
                Self.wake(&state)
            }
            return .json(200, "{}")
        }
    }

    /// `keys/signatures/upload` of devices: each signature is added to the device's keys
    /// (other signed objects are ignored: the simulation signs no other user's master key).
    private func uploadSignatures(_ body: [String: Any]) -> HTTPResponse {
        state.withLock { state in
            for (user, objects) in body {
                guard let objects = objects as? [String: Any] else { continue }
                for (keyID, object) in objects {
                    guard let signed = object as? [String: Any],
                        let added = signed["signatures"] as? [String: [String: String]],
                        var record = state.devices[Self.key(user, keyID)], record.deviceKeys != nil
                    else { continue }
                    for (signer, byKey) in added {
                        // The device's own signature is in its keys already.
                        let others = byKey.filter { $0.key != "ed25519:\(keyID)" }
                        record.crossSignatures[signer, default: [:]].merge(others) { _, new in new }
                    }
                    state.devices[Self.key(user, keyID)] = record
                    state.position += 1
                    state.deviceListChanges.append((state.position, user))
                }
            }
            Self.wake(&state)
            return .json(200, #"{"failures":{}}"#)
        }
    }

    private func claim(_ body: [String: Any]) -> HTTPResponse {
        let wanted = body["one_time_keys"] as? [String: [String: Any]] ?? [:]
        return state.withLock { state in
            var answer: [String] = []
            for (user, devices) in wanted.sorted(by: { $0.key < $1.key }) {
                var claimed: [String] = []
                for deviceID in devices.keys.sorted() {
                    let key = Self.key(user, deviceID)
                    guard var record = state.devices[key] else { continue }
                    if !record.oneTimeKeys.isEmpty {
                        let one = record.oneTimeKeys.removeFirst()
                        claimed.append(#"\#(Self.json(deviceID)):{\#(Self.json(one.id)):\#(one.json)}"#)
                        state.counts.claims += 1
                    } else if let fallback = record.fallbackKey {
                        record.fallbackKey?.used = true
                        claimed.append(#"\#(Self.json(deviceID)):{\#(Self.json(fallback.id)):\#(fallback.json)}"#)
                        state.counts.fallbackClaims += 1
                    }
                    state.devices[key] = record
                }
                answer.append("\(Self.json(user)):{\(claimed.joined(separator: ","))}")
            }
            return .json(200, #"{"one_time_keys":{\#(answer.joined(separator: ","))},"failures":{}}"#)
        }
    }

    // MARK: To-device

    /// What the network does with the `ordinal`-th message from `sender` to `recipient`: a
    /// pure function of the seed and the link.
    func fate(from sender: String, to recipient: String, ordinal: Int) -> Fate {
        var hasher = SimRandom(seed: seed ^ Self.stableHash("\(sender)>\(recipient)#\(ordinal)"), stream: 7)
        let roll = hasher.below(100)
        if roll < faults.dropPercent { return .drop }
        if roll < faults.dropPercent + faults.duplicatePercent { return .duplicate }
        if roll < faults.dropPercent + faults.duplicatePercent + faults.delayPercent {
            return .delay(steps: 1 + hasher.below(3))
        }
        return .deliver
    }

    /// FNV-1a: a hash that is the same in every process (`Hasher` is seeded per process).
    static func stableHash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        return hash
    }

    private func sendToDevice(_ body: [String: Any], type: String, transaction: String, device: String)
        -> HTTPResponse
    {
        let messages = body["messages"] as? [String: [String: Any]] ?? [:]
        let sender = state.withLock { $0.devices[device]?.user } ?? ""
        var outgoing: [(recipient: String, json: String)] = []
        var olm: [(key: String, ciphertext: String)] = []
        for (user, devices) in messages.sorted(by: { $0.key < $1.key }) {
            for (target, content) in devices.sorted(by: { $0.key < $1.key }) {
                let event =
                    #"{"type":\#(Self.json(type)),"sender":\#(Self.json(sender)),"content":\#(Self.jsonText(content))}"#
                let recipients =
                    target == "*"
                    ? state.withLock { state in
                        state.devices.values.filter { $0.user == user }.map { Self.key(user, $0.deviceID) }.sorted()
                    } : [Self.key(user, target)]
                for recipient in recipients { outgoing.append((recipient, event)) }
                olm += Self.olmKeys(content)
            }
        }
        return state.withLock { state in
            guard state.toDeviceSends.insert("\(device)|\(transaction)").inserted else { return .json(200, "{}") }
            for (key, ciphertext) in olm {
                if let seen = state.olmKeys[key], seen != ciphertext, state.reusedKeys.insert(key).inserted {
                    state.violations.append("Olm message key used twice: \(key)")
                }
                state.olmKeys[key] = ciphertext
            }
            for (recipient, json) in outgoing {
                guard var record = state.devices[recipient] else { continue }
                let ordinal = record.received[device, default: 0]
                record.received[device] = ordinal + 1
                state.devices[recipient] = record
                state.counts.toDevice += 1
                let fate = state.quietNetwork ? .deliver : fate(from: device, to: recipient, ordinal: ordinal)
                switch fate {
                case .deliver: Self.enqueue(&state, recipient, json)
                case .drop:
                    state.counts.dropped += 1
                    state.droppedLinks.insert("\(device)>\(recipient)")
                case .duplicate:
                    state.counts.duplicated += 1
                    Self.enqueue(&state, recipient, json)
                    state.delayed.append(Delayed(releaseStep: state.step + 1, device: recipient, json: json))
                case .delay(let steps):
                    state.counts.delayed += 1
                    state.delayed.append(Delayed(releaseStep: state.step + steps, device: recipient, json: json))
                }
            }
            Self.wake(&state)
            return .json(200, "{}")
        }
    }

    /// The message keys of an Olm-encrypted content: `olm|<sender key>|<ratchet key>|<index>`.
    private static func olmKeys(_ content: Any) -> [(String, String)] {
        guard let content = content as? [String: Any], let senderKey = content["sender_key"] as? String,
            let ciphertexts = content["ciphertext"] as? [String: Any]
        else { return [] }
        return ciphertexts.compactMap { _, value in
            guard let message = value as? [String: Any], let type = message["type"] as? Int,
                let body = message["body"] as? String, let key = SimWire.olmKey(type: type, body: body)
            else { return nil }
            return ("\(senderKey)|\(key.ratchetKey)|\(key.chainIndex)", body)
        }
    }

    private static func enqueue(_ state: inout State, _ device: String, _ json: String) {
        state.position += 1
        state.devices[device]?.inbox.append((state.position, json))
    }

    private static func release(_ state: inout State, where due: (Delayed) -> Bool) {
        let ready = state.delayed.filter(due)
        state.delayed.removeAll(where: due)
        for message in ready { enqueue(&state, message.device, message.json) }
        wake(&state)
    }

    // MARK: Rooms

    private func send(_ content: [UInt8], room: String, type: String, transaction: String, device: String)
        -> HTTPResponse
    {
        state.withLock { state in
            guard let user = state.devices[device]?.user, var record = state.rooms[room],
                record.members.contains(user)
            else { return .json(403, #"{"errcode":"M_FORBIDDEN"}"#) }
            if let eventID = state.roomSends["\(device)|\(transaction)"] {
                return .json(200, #"{"event_id":\#(Self.json(eventID))}"#)
            }
            state.position += 1
            let eventID = "$e\(state.position)"
            let text = String(decoding: content, as: UTF8.self)
            if type == "m.room.encrypted",
                let object = (try? JSONSerialization.jsonObject(with: Data(content))) as? [String: Any],
                let session = object["session_id"] as? String, let ciphertext = object["ciphertext"] as? String,
                let index = SimWire.megolmIndex(ciphertext)
            {
                let key = "megolm|\(session)|\(index)"
                if let seen = state.megolmKeys[key], seen != ciphertext, state.reusedKeys.insert(key).inserted {
                    state.violations.append("Megolm message index used twice: \(key) (\(room))")
                }
                state.megolmKeys[key] = ciphertext
            }
            record.timeline.append(
                (
                    state.position,
                    Self.event(
                        type: type, stateKey: nil, sender: user, id: eventID, position: state.position, content: text),
                    device, transaction
                ))
            state.rooms[room] = record
            state.roomSends["\(device)|\(transaction)"] = eventID
            state.counts.roomEvents += 1
            Self.wake(&state)
            return .json(200, #"{"event_id":\#(Self.json(eventID))}"#)
        }
    }

    private func roomState(room: String, type: String) -> HTTPResponse {
        state.withLock { state in
            guard let record = state.rooms[room], type == "m.room.encryption" else {
                return .json(404, #"{"errcode":"M_NOT_FOUND"}"#)
            }
            _ = record
            return .json(200, #"{"algorithm":"m.megolm.v1.aes-sha2"}"#)
        }
    }

    /// `GET /rooms/{roomId}/members`: the room's member events (members never change here).
    private func members(room: String) -> HTTPResponse {
        state.withLock { state in
            guard let record = state.rooms[room] else { return .json(404, #"{"errcode":"M_NOT_FOUND"}"#) }
            let members = record.state.filter { $0.contains(#""type":"m.room.member""#) }
            return .json(200, #"{"chunk":[\#(members.joined(separator: ","))]}"#)
        }
    }

    // MARK: JSON

    static func json(_ text: String) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: text, options: [.fragmentsAllowed]), as: UTF8.self)
    }

    static func jsonText(_ value: Any) -> String {
        String(
            decoding: (try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys]))
                ?? Data("null".utf8), as: UTF8.self)
    }

    static func event(type: String, stateKey: String?, sender: String, id: String, position: Int, content: String)
        -> String
    {
        let state = stateKey.map { #""state_key":\#(json($0)),"# } ?? ""
        return #"{"type":\#(json(type)),\#(state)"sender":\#(json(sender)),"event_id":\#(json(id)),"#
            + #""origin_server_ts":\#(1_760_000_000_000 + position),"content":\#(content)}"#
    }

    private static func wake(_ state: inout State) {
        let waiting = Array(state.polls.values) + Array(state.watchers.values)
        state.polls = [:]
        state.watchers = [:]
        state.parked = [:]
        state.resumeLater += waiting
    }

    /// Tells the watchers that a device parked, without waking the parked polls.
    private static func wakeWatchers(_ state: inout State) {
        let waiting = state.watchers.values
        state.watchers = [:]
        state.resumeLater += waiting
    }
}

/// The simulated homeserver's lock: ``withLock`` resumes the continuations the body queued in
/// `resumeLater` after the lock is released, never under it.
private final class DeferringLock: Sendable {
    private let lock: Lock<SimHomeserver.State>

    init(_ state: SimHomeserver.State) { lock = Lock(state) }

    func withLock<Result: Sendable>(_ body: (inout SimHomeserver.State) -> Result) -> Result {
        let (result, resumes) = lock.withLock { state in
            let result = body(&state)
            let resumes = state.resumeLater
            state.resumeLater = []
            return (result, resumes)
        }
        for continuation in resumes { continuation.resume() }
        return result
    }
}
