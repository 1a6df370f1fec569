import Foundation
import SymorvaE2EE
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaChat
@testable import SymorvaKit
@testable import SymorvaSession

/// The shape of one simulated run.
struct SimConfiguration: Sendable, CustomStringConvertible {
    var accounts = 4
    var devicesPerAccount = 3
    var rooms = 6
    /// Driver steps before the quiet phase.
    var steps = 24
    /// Sends per step at most (each step draws 1…this many, started together).
    var sendsPerStep = 4
    var restartPercent = 8
    var killPercent = 8
    var faults = SimHomeserver.NetworkFaults()
    /// How long one step waits for the network to settle before the next (a bound, not a pause:
    /// a step ends as soon as every device is parked in a long poll with nothing in flight).
    var stepSettle: Duration = .seconds(3)
    /// How long the final phase waits for every message to become readable.
    var finalDeadline: Duration = .seconds(20)
    /// Multiplies every wall-clock bound of a seed: the settles, the final deadline, how many
    /// looks "nothing moves" takes, the waits for a device. Under ThreadSanitizer a task can
    /// wait many seconds for a core while the whole unit tier starts at once, so `Scripts/test`
    /// runs that tier with 4 (`SYMORVA_CRYPTO_SIM_TIME_SCALE`). They are bounds, not pauses: a
    /// seed that settles early ends as early, and the seed's decisions do not change.
    var timeScale = 1.0

    /// `bound` stretched by ``timeScale``.
    func scaled(_ bound: Duration) -> Duration { bound * timeScale }

    /// The issue's shape: 4 accounts × 3 devices, 6 rooms.
    static let standard = SimConfiguration()

    /// The `Scripts/test` tier's shape: small enough for a few hundred seeds in its budget.
    static let quick = SimConfiguration(
        accounts: 2, devicesPerAccount: 2, rooms: 2, steps: 6, sendsPerStep: 3, stepSettle: .seconds(2),
        finalDeadline: .seconds(10))

    var description: String {
        "\(accounts)×\(devicesPerAccount) devices, \(rooms) rooms, \(steps) steps"
    }
}

/// The invariants the simulation checks.
enum SimInvariant: String, Sendable, CaseIterable {
    /// No Olm or Megolm message key is used for two different ciphertexts.
    case messageKeyReuse = "message key used twice"
    /// Every message becomes readable by every device that was a member when it was sent, or
    /// shows a typed reason that the network explains (a to-device message on the link dropped).
    case eventuallyReadable = "message not readable"
    /// After the quiet phase and one round in which unwedging had its chance, a new room key
    /// reaches every device from every device.
    case wedged = "pair of devices wedged"
    /// No planted body in any store file (databases, WAL, keys) or on the wire.
    case plaintextAtRest = "plaintext in a store"
}

/// One broken invariant.
struct SimFailure: Sendable, CustomStringConvertible {
    var invariant: SimInvariant
    var step: Int
    var detail: String

    var description: String { "[\(invariant.rawValue)] step \(step): \(detail)" }
}

/// What one seed did and found.
struct SimReport: Sendable, CustomStringConvertible {
    var seed: UInt64
    var configuration: SimConfiguration
    var failures: [SimFailure] = []
    var messages = 0
    var readable = 0
    var undecryptable = 0
    var restarts = 0
    var kills: [String] = []
    var network = SimHomeserver.Counts()
    var unknownRoutes: [String] = []
    var seconds = 0.0
    /// When each phase ended, from the start.
    var phases: [(String, Duration)] = []

    func failed(_ invariant: SimInvariant) -> [SimFailure] { failures.filter { $0.invariant == invariant } }

    var description: String {
        var lines = [
            "seed \(seed) (\(configuration)): \(failures.isEmpty ? "ok" : "\(failures.count) failure(s)") in "
                + String(format: "%.1f", seconds) + " s",
            "  messages=\(messages) readable=\(readable) undecryptable=\(undecryptable) restarts=\(restarts) "
                + "kills=\(kills) \(network)",
            "  phases: " + phases.map { "\($0.0) \($0.1)" }.joined(separator: ", "),
        ]
        if !unknownRoutes.isEmpty { lines.append("  unsimulated routes: \(unknownRoutes)") }
        lines += failures.prefix(12).map { "  \($0)" }
        if failures.count > 12 { lines.append("  … \(failures.count - 12) more") }
        return lines.joined(separator: "\n")
    }
}

/// One planted message.
struct SimMessage: Sendable {
    var body: String
    var room: String
    var sender: String
    /// The devices that were members when it was sent (the sender included).
    var recipients: [String]
    var step: Int
    /// A probe of the final phase: round 1 lets unwedging happen, round 2 must reach everyone.
    var probeRound: Int?
}

/// The seeded simulation (`docs/e2ee.md`, "Simulation"): accounts with several devices each,
/// encrypted rooms, and a driver whose every decision is drawn from one ``SimRandom`` — who sends
/// where, how many at once, whom to restart, whom to kill at which ``FaultPoint`` — while the
/// ``SimHomeserver`` mistreats to-device messages by a function of the seed. Invariants are
/// checked after every step and after a final quiet phase.
final class CryptoSimulation {
    let seed: UInt64
    let configuration: SimConfiguration
    let server: SimHomeserver
    let folder: String
    private(set) var devices: [SimDevice] = []
    /// Room ID → member user IDs.
    private(set) var rooms: [(id: String, members: [String])] = []
    private var random: SimRandom
    private var messages: [SimMessage] = []
    private var report: SimReport
    private var step = 0
    private var seenViolations = 0
    private var canaries = 0

    init(seed: UInt64, configuration: SimConfiguration) {
        self.seed = seed
        self.configuration = configuration
        server = SimHomeserver(seed: seed, faults: configuration.faults)
        folder = NSTemporaryDirectory() + "symorva-crypto-sim-\(seed)-\(UUID().uuidString)"
        random = SimRandom(seed: seed)
        report = SimReport(seed: seed, configuration: configuration)
    }

    /// Runs the seed and removes its folder.
    func run() async -> SimReport {
        let started = ContinuousClock.now
        defer { try? FileManager.default.removeItem(atPath: folder) }
        do {
            try await setUp()
            report.phases.append(("setup", ContinuousClock.now - started))
            for step in 1...configuration.steps { await runStep(step) }
            report.phases.append(("steps", ContinuousClock.now - started))
            await finalPhase()
            report.phases.append(("final", ContinuousClock.now - started))
        } catch {
            report.failures.append(SimFailure(invariant: .eventuallyReadable, step: step, detail: "setup: \(error)"))
        }
        for device in devices { await device.stop() }
        report.network = server.counts
        report.unknownRoutes = server.unknownRoutes.sorted()
        report.restarts = devices.map { $0.history.restarts }.reduce(0, +)
        report.kills = devices.flatMap { device in device.history.kills.map { "\(device.deviceID)@\($0.rawValue)" } }
        let elapsed = ContinuousClock.now - started
        report.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return report
    }

    // MARK: Setup

    private func setUp() async throws {
        let users = (0..<configuration.accounts).map { "@u\($0):\(SimHomeserver.serverName)" }
        for (index, user) in users.enumerated() {
            for device in 0..<configuration.devicesPerAccount {
                let deviceID = "D\(index)\(Character(UnicodeScalar(UInt8(65 + device))))"
                server.register(user: user, deviceID: deviceID)
                devices.append(
                    SimDevice(
                        user: user, deviceID: deviceID, directory: "\(folder)/\(deviceID)", server: server))
            }
        }
        for number in 0..<configuration.rooms {
            // Every room has two to all accounts, drawn from the seed.
            var members = users.filter { _ in random.chance(60) }
            while members.count < 2 {
                let user = users[random.below(users.count)]
                if !members.contains(user) { members.append(user) }
            }
            members.sort()
            let id = "!r\(number):\(SimHomeserver.serverName)"
            server.createRoom(id: id, members: members)
            rooms.append((id, members))
        }
        for device in devices { try await device.create() }
        await settle(.seconds(10))
        try await crossSignDevices()
        await settle(.seconds(10))
    }

    /// Under the default room key policy (`crossSignedOnly`, MSC4153) a device gets room keys
    /// only once its owner cross-signed it: the account's devices bootstrapped at their first
    /// start (one of them made the identity, the others found it made), and the one that made it
    /// now signs the others, as a verification between them would.
    private func crossSignDevices() async throws {
        var holders: [String: AccountCrypto] = [:]
        for device in devices {
            let crypto = try #require(device.community?.module(AccountCrypto.self))
            let outcome = try await crypto.automaticBootstrap.observable.wait(
                timeout: configuration.scaled(.seconds(60))
            ) {
                $0 != .pending
            }
            if outcome == .finished(created: true) { holders[device.user] = crypto }
        }
        for device in devices {
            let holder = try #require(holders[device.user], "no device of \(device.user) made its identity")
            guard holder.deviceID.rawValue != device.deviceID else { continue }
            try await holder.crossSignOwnDevice(device.deviceID)
        }
    }

    // MARK: Steps

    private func runStep(_ step: Int) async {
        self.step = step
        server.advance(toStep: step)
        if random.chance(configuration.restartPercent) {
            let device = devices[random.below(devices.count)]
            if !device.isDead { await device.restart() }
        }
        var kill: (device: SimDevice, point: FaultPoint)?
        if random.chance(configuration.killPercent) {
            let points: [FaultPoint] = [.toDeviceCommitted, .messagePersisted, .syncIngest, .keysUploadAnswered]
            kill = (devices[random.below(devices.count)], points[random.below(points.count)])
        }
        let count = 1 + random.below(configuration.sendsPerStep)
        var sends: [(SimDevice, String)] = []
        for _ in 0..<count {
            let device = devices[random.below(devices.count)]
            let candidates = rooms.filter { $0.members.contains(device.user) }
            guard !candidates.isEmpty else { continue }
            sends.append((device, candidates[random.below(candidates.count)].id))
        }
        if let kill {
            // `message.persisted` is reached only by a device that sends: the step's first sender.
            let device = kill.point == .messagePersisted ? sends.first?.0 ?? kill.device : kill.device
            device.arm(kill.point)
        }
        await send(sends, probeRound: nil)
        await settle(configuration.stepSettle)
        await restartTheDead()
        checkEveryStep()
    }

    /// Starts every send at once (sends and the receives they trigger interleave on the same
    /// Olm and Megolm sessions) and records the ones queued before any kill of their device.
    private func send(_ sends: [(SimDevice, String)], probeRound: Int?) async {
        var planned: [SimMessage] = []
        for (device, room) in sends {
            canaries += 1
            let members = rooms.first { $0.id == room }!.members
            planned.append(
                SimMessage(
                    body: SimCanary.body(seed: seed, number: canaries), room: room, sender: device.key,
                    recipients: devices.filter { members.contains($0.user) }.map(\.key), step: step,
                    probeRound: probeRound))
        }
        let byKey = Dictionary(devices.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        let queued = await withTaskGroup(of: SimMessage?.self) { group in
            for message in planned {
                let device = byKey[message.sender]!
                group.addTask {
                    guard !device.isDead else { return nil }
                    let queued = await device.inProcess { community -> Bool? in
                        do {
                            let conversation = try await community.chat.conversation(id: RoomID(message.room))
                            _ = try await conversation.send(.text(message.body))
                            return true
                        } catch { return nil }
                    }
                    // Queued before a kill: the crash image holds it. After one: it may not.
                    return queued == true && !device.isDead ? message : nil
                }
            }
            var queued: [SimMessage] = []
            for await message in group { if let message { queued.append(message) } }
            return queued
        }
        messages += queued.sorted { $0.body < $1.body }
    }

    /// Waits until the network is quiet (every live device parked in a long poll, nothing in
    /// flight or held back) twice in a row, or `bound` passes.
    private func settle(_ bound: Duration) async {
        let deadline = ContinuousClock.now + configuration.scaled(bound)
        var quietTimes = 0
        while ContinuousClock.now < deadline {
            let alive = Set(devices.filter { !$0.isDead && $0.community != nil }.map(\.key))
            if server.isQuiet(alive: alive) {
                quietTimes += 1
                if quietTimes >= 2 { return }
                // Work that follows a sync without the network (decryption, the crypto machine's
                // turn) may start a request right after: look again after the next change or a
                // short while.
                await server.nextChange(timeout: .milliseconds(60))
            } else {
                quietTimes = 0
                await server.nextChange(timeout: .milliseconds(250))
            }
        }
    }

    private func restartTheDead() async {
        for device in devices where device.isDead { await device.restart() }
    }

    // MARK: Invariants after every step

    private func checkEveryStep() {
        let violations = server.violations
        for violation in violations.dropFirst(seenViolations) {
            let invariant: SimInvariant =
                violation.hasPrefix("plaintext") ? .plaintextAtRest : .messageKeyReuse
            report.failures.append(SimFailure(invariant: invariant, step: step, detail: violation))
        }
        seenViolations = violations.count
        scanStores()
    }

    /// Looks for the canary marker in every file of every device.
    private func scanStores() {
        let marker = Data(SimCanary.marker.utf8)
        for device in devices {
            for (path, bytes) in device.storeBytes() where Self.contains(bytes, marker) {
                report.failures.append(
                    SimFailure(invariant: .plaintextAtRest, step: step, detail: "\(device.name): \(path)"))
            }
        }
    }

    /// Whether `needle` is in `haystack`: `memchr` for its first byte (a rare one: the marker
    /// starts with `q`), then `memcmp` (a byte loop is too slow in a debug build).
    static func contains(_ haystack: Data, _ needle: Data) -> Bool {
        guard let first = needle.first, haystack.count >= needle.count else { return false }
        return haystack.withUnsafeBytes { hay in
            needle.withUnsafeBytes { pattern in
                guard let base = hay.baseAddress, let wanted = pattern.baseAddress else { return false }
                var offset = 0
                let last = hay.count - pattern.count
                while offset <= last {
                    guard let found = memchr(base + offset, Int32(first), last - offset + 1) else { return false }
                    let index = base.distance(to: UnsafeRawPointer(found))
                    if memcmp(base + index, wanted, pattern.count) == 0 { return true }
                    offset = index + 1
                }
                return false
            }
        }
    }

    // MARK: The final phase

    private func finalPhase() async {
        step = configuration.steps + 1
        for device in devices { device.disarm() }
        server.quietNetwork()
        await restartTheDead()
        await settle(.seconds(10))
        for round in 1...2 {
            // A new room of every account: each device's probe needs a new Megolm session shared
            // over Olm with every other device, so a wedged Olm session shows.
            let id = "!probe\(round):\(SimHomeserver.serverName)"
            let members = Array(Set(devices.map(\.user))).sorted()
            server.createRoom(id: id, members: members)
            rooms.append((id, members))
            await settle(.seconds(10))
            await send(devices.map { ($0, id) }, probeRound: round)
            await settle(.seconds(10))
            step += 1
        }
        checkEveryStep()
        await checkReadable()
    }

    /// What a device's timeline shows for a message.
    enum Seen: Equatable {
        case readable
        case undecryptable(String)
        case absent
        case wrongBody
    }

    /// Checks invariants 2 and 3 on what every device's timelines show, once every message is
    /// readable or excused, or when the final deadline passes.
    private func checkReadable() async {
        let observed = await observeTimelines()
        defer { for (_, _, unsubscribe) in observed { unsubscribe() } }
        let dropped = server.droppedLinks
        let deadline = ContinuousClock.now + configuration.scaled(configuration.finalDeadline)
        let stableLooksNeeded = Int((3 * configuration.timeScale).rounded(.up))
        var outcome: [String: Seen] = [:]
        var eventIDs: [String: EventID] = [:]
        var failures: [SimFailure] = []
        var stableLooks = 0
        repeat {
            let previous = outcome
            (outcome, eventIDs) = look(observed)
            failures = judge(outcome, eventIDs, dropped: dropped)
            if failures.isEmpty && outcome.values.allSatisfy({ $0 == .readable || Self.isTyped($0) }) { break }
            // Nothing moves any more: the network is quiet, no outbox holds a message and what
            // the devices show has not changed over three looks a settle apart.
            // A message still in an outbox (a send backing off after a restart) is on its way.
            let sending = observed.contains { !$0.1.outbox.value.isEmpty }
            stableLooks = outcome == previous && !sending ? stableLooks + 1 : 0
            if stableLooks >= stableLooksNeeded { break }
            await settle(.milliseconds(500))
            await server.nextChange(timeout: .milliseconds(100))
        } while ContinuousClock.now < deadline
        if ProcessInfo.processInfo.environment["SYMORVA_CRYPTO_SIM_DEBUG"] != nil {
            for (key, conversation, _) in observed {
                let rows = conversation.timeline.value.map { "\($0.eventID?.rawValue ?? "-") \($0.content)" }
                print("timeline \(key): \(rows) outbox: \(conversation.outbox.value)")
            }
        }
        report.messages = messages.count
        report.readable = outcome.values.filter { $0 == .readable }.count
        report.undecryptable = outcome.values.filter(Self.isTyped).count
        report.failures += failures
    }

    static func isTyped(_ seen: Seen) -> Bool {
        if case .undecryptable = seen { return true }
        return false
    }

    /// The failures of invariants 2 and 3 in what the devices show now.
    private func judge(_ outcome: [String: Seen], _ eventIDs: [String: EventID], dropped: Set<String>) -> [SimFailure] {
        var failures: [SimFailure] = []
        for message in messages {
            // Round 1 of the probes lets unwedging start; only round 2 must reach everyone.
            guard message.probeRound != 1 else { continue }
            let invariant: SimInvariant = message.probeRound == 2 ? .wedged : .eventuallyReadable
            guard eventIDs[message.body] != nil else {
                failures.append(
                    SimFailure(
                        invariant: invariant, step: message.step,
                        detail: "\(message.body) from \(message.sender) not in its sender's timeline"))
                continue
            }
            for recipient in message.recipients {
                let seen = outcome["\(message.body)|\(recipient)"] ?? .absent
                switch seen {
                case .readable: continue
                case .undecryptable(let reason):
                    // A room key the network dropped on the way is a typed reason with an excuse
                    // (a missing key; never a sender not cross-signed: every device is).
                    if message.probeRound == nil, reason == UnableToDecryptReason.missingKey.rawValue,
                        dropped.contains("\(message.sender)>\(recipient)")
                    {
                        continue
                    }
                case .absent, .wrongBody: break
                }
                failures.append(
                    SimFailure(
                        invariant: invariant, step: message.step,
                        detail: "\(message.sender) → \(recipient): \(seen) in \(message.room)"))
            }
        }
        return failures
    }

    /// Every device's every room, observed (so that the timeline follows the store) and paged
    /// back to its start.
    private func observeTimelines() async -> [(String, Conversation, @Sendable () -> Void)] {
        var observed: [(String, Conversation, @Sendable () -> Void)] = []
        for device in devices {
            for room in rooms where room.members.contains(device.user) {
                guard
                    let conversation = await device.inProcess({ community in
                        try? await community.chat.conversation(id: RoomID(room.id))
                    })
                else { continue }
                let unsubscribe = conversation.timeline.subscribe { _ in }
                // The first page is read once the timeline is observed.
                _ = try? await conversation.timeline.wait(timeout: configuration.scaled(.seconds(5))) { !$0.isEmpty }
                for _ in 0..<20 {
                    let pagination = await conversation.paginateBackwards(50)
                    if pagination.hasReachedStart || pagination.lastError != nil { break }
                }
                observed.append(("\(device.key)|\(room.id)", conversation, unsubscribe))
            }
        }
        return observed
    }

    /// Every device's view of every message it should read (`body|device` → what it shows), and
    /// each message's event ID (from its sender's timeline).
    private func look(_ observed: [(String, Conversation, @Sendable () -> Void)]) -> ([String: Seen], [String: EventID])
    {
        var timelines: [String: [TimelineItem]] = [:]
        for (key, conversation, _) in observed { timelines[key] = conversation.timeline.value }
        var eventIDs: [String: EventID] = [:]
        for message in messages {
            let rows = timelines["\(message.sender)|\(message.room)"] ?? []
            if let row = rows.first(where: { $0.content == .message(.text, body: message.body) }), let id = row.eventID
            {
                eventIDs[message.body] = id
            }
        }
        var outcome: [String: Seen] = [:]
        for message in messages {
            for recipient in message.recipients {
                let rows = timelines["\(recipient)|\(message.room)"] ?? []
                let seen: Seen
                if rows.contains(where: { $0.content == .message(.text, body: message.body) }) {
                    seen = .readable
                } else if let id = eventIDs[message.body], let row = rows.first(where: { $0.eventID == id }) {
                    if case .unableToDecrypt(let reason) = row.content {
                        seen = .undecryptable(reason.rawValue)
                    } else {
                        seen = .wrongBody
                    }
                } else {
                    seen = .absent
                }
                outcome["\(message.body)|\(recipient)"] = seen
            }
        }
        return (outcome, eventIDs)
    }
}
