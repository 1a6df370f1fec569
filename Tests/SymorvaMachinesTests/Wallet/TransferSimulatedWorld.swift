import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting

/// A device (hosts and the account's store), a network that loses, delays and garbles, and a
/// wallet service that executes each command at most once, fences commands it is asked about
/// but never received, and answers queries truthfully.
struct SimulatedWorld {
    static let correctPIN = "4321"

    let machine = Fixture.machine
    var random: SeededGenerator
    var checker = WalkChecker()
    var hosts: [SimulatedHost] = [SimulatedHost()]
    var store: [CommandID: PendingCommand] = [:]
    var service = SimulatedService()
    /// Confirm requests still travelling: they reach the service later, or never.
    var delayed: [ConfirmRequest] = []
    var restarts = 0
    /// Confirm requests the service turned away for its rate limit (nothing recorded).
    var rateLimitedConfirms = 0
    var endViolation: String?
    private var faults = true
    private var nextCommand = 0
    private var nextDraft = 0

    init(seed: UInt64) { random = SeededGenerator(seed: seed) }

    mutating func run(events: Int) {
        for _ in 0..<Int.random(in: (events / 3)...events, using: &random) { step() }
        drain()
    }

    // MARK: - Steps

    private mutating func step() {
        // Crashes are most interesting while a command's fate is open, so they are likelier then.
        let open = hosts.contains { ["persisting", "confirming", "unknown", "querying"].contains($0.state.caseName) }
        if open && random.chance(12) { return restart() }
        let roll = Int.random(in: 0..<100, using: &random)
        switch roll {
        case 0..<3: restart()
        case 3..<8: arriveDelayed()
        case 8..<33: userAction()
        case 33..<38: noise()
        default: deliverAny()
        }
    }

    private mutating func restart() {
        restarts += 1
        // Work in flight at the crash may or may not have happened.
        for effect in hosts.flatMap(\.outstanding) {
            switch effect {
            case .sendConfirm(let commandID, let draftID, let verification) where random.chance(50):
                delayed.append(ConfirmRequest(commandID: commandID, draftID: draftID, verification: verification))
            case .persistPendingCommand(let pending) where random.chance(50):
                store[pending.commandID] = pending
            case .clearPendingCommand(let commandID) where random.chance(50):
                store[commandID] = nil
            default:
                break
            }
        }
        hosts = TransferRandomWalkTests.restart(store: store, machine: machine, checker: &checker)
        if hosts.isEmpty { hosts = [SimulatedHost()] }
    }

    private mutating func arriveDelayed() {
        guard !delayed.isEmpty else { return }
        let request = delayed.remove(at: Int.random(in: 0..<delayed.count, using: &random))
        _ = service.receive(request, random: &random)
    }

    private mutating func userAction() {
        if random.chance(5) { hosts.append(SimulatedHost()) }
        let index = Int.random(in: 0..<hosts.count, using: &random)
        switch hosts[index].state {
        case .idle:
            hosts[index].apply(.prepareRequested(Fixture.request), machine, &checker)
        case .drafted(let drafted):
            if random.chance(5) {
                hosts[index].apply(.cancelled, machine, &checker)
                return
            }
            confirm(host: index, reusing: random.chance(5) ? drafted.spentCommandIDs.first : nil)
        case .unknown:
            hosts[index].apply(.queryRequested, machine, &checker)
        default:
            break
        }
    }

    private mutating func confirm(host index: Int, reusing spent: CommandID? = nil) {
        let pin = random.chance(75) ? Self.correctPIN : "1111"
        nextCommand += 1
        let commandID = spent ?? Fixture.command(nextCommand)
        hosts[index].apply(.confirmRequested(.pin(Secret(pin)), commandID: commandID), machine, &checker)
    }

    /// Things that really happen out of order: double taps, late timers, impatient members.
    private mutating func noise() {
        let index = Int.random(in: 0..<hosts.count, using: &random)
        nextCommand += 1
        let event = random.pick([
            TransferMachine.Event.timerFired(.query), .queryRequested, .draftExpired, .cancelled,
            .confirmRequested(.pin(Secret(Self.correctPIN)), commandID: Fixture.command(nextCommand)),
        ])
        hosts[index].apply(event, machine, &checker)
    }

    private mutating func deliverAny() {
        let busy = hosts.indices.filter { !hosts[$0].outstanding.isEmpty }
        guard !busy.isEmpty else { return }
        let index = random.pick(busy)
        deliver(host: index, effect: Int.random(in: 0..<hosts[index].outstanding.count, using: &random))
    }

    /// Performs one outstanding effect the way an interpreter over this world would.
    private mutating func deliver(host index: Int, effect position: Int) {
        let effect = hosts[index].outstanding.remove(at: position)
        if let event = perform(effect) { hosts[index].apply(event, machine, &checker) }
    }

    private mutating func perform(_ effect: TransferMachine.Effect) -> TransferMachine.Event? {
        switch effect {
        case .sendPrepare(let request):
            if faults && random.chance(10) { return .prepareResponse(.transportError(.timeout)) }
            if faults && random.chance(5) { return .prepareResponse(.failed(.recipientUnknown)) }
            nextDraft += 1
            _ = request
            return .prepareResponse(.drafted(Fixture.draft(id: DraftID("draft-\(nextDraft)"))))
        case .scheduleDraftExpiry:
            return .draftExpired
        case .sealVerification(let verification, let context):
            guard case .pin(let pin) = verification, !(faults && random.chance(5)) else {
                return .verificationSealed(.failure(.sealingFailed))
            }
            // Sealing is the identity here: the service "opens" the payload as is.
            return .verificationSealed(.success(SealedVerification(method: .pin, sealedBytes: context.pinPayload(pin))))
        case .persistPendingCommand(let pending):
            if faults && random.chance(8) { return .persistenceFailed }
            store[pending.commandID] = pending
            return .commandPersisted
        case .sendConfirm(let commandID, let draftID, let verification):
            return .confirmResponse(
                confirm(ConfirmRequest(commandID: commandID, draftID: draftID, verification: verification)))
        case .sendQuery(let commandID):
            if faults && random.chance(20) { return .queryResponse(.transportError(randomProblem())) }
            if faults && random.chance(5) { return .queryResponse(.rateLimited(retryAfter: .seconds(2))) }
            return .queryResponse(service.query(commandID))
        case .scheduleQuery:
            return .timerFired(.query)
        case .clearPendingCommand(let commandID):
            store[commandID] = nil
            return nil
        case .cancel:
            return nil
        }
    }

    private mutating func confirm(_ request: ConfirmRequest) -> ConfirmResult {
        guard faults else { return service.receive(request, random: &random) }
        if random.chance(6) {
            // Turned away by the rate limit before the service recorded anything.
            rateLimitedConfirms += 1
            return .failed(.rateLimited(retryAfter: .seconds(1)))
        }
        if random.chance(8) { return .transportError(random.pick([.timeout, .unreachable, .connectionReset])) }
        if random.chance(8) {
            delayed.append(request)
            return .transportError(.timeout)
        }
        let answer = service.receive(request, random: &random)
        // The service committed; the answer may still be lost on the way back.
        return random.chance(35) ? .transportError(randomProblem()) : answer
    }

    private mutating func randomProblem() -> TransportProblem {
        random.pick([
            .timeout, .connectionReset, .serverError(status: 500), .serverError(status: 503), .responseDropped,
        ])
    }

    // MARK: - The end

    /// The network stays faulty for a while, then becomes reliable: deliver everything except
    /// draft expiry (the member walked away from open drafts), then check the device against
    /// the service.
    private mutating func drain() {
        for delivery in 0..<2_000 {
            if delivery == 60 { faults = false }
            let busy = hosts.indices.filter { index in
                hosts[index].outstanding.contains { $0 != .scheduleDraftExpiry(at: Fixture.expiry) }
            }
            if busy.isEmpty, faults, let drafted = hosts.indices.first(where: { hosts[$0].state.caseName == "drafted" })
            {
                // The member comes back to an open draft while the network is still unreliable.
                confirm(host: drafted)
                continue
            }
            guard let index = busy.first else { break }
            let position = hosts[index].outstanding.firstIndex { $0 != .scheduleDraftExpiry(at: Fixture.expiry) }!
            deliver(host: index, effect: position)
        }
        while !delayed.isEmpty { _ = service.receive(delayed.removeFirst(), random: &random) }
        checkEnd()
    }

    private mutating func checkEnd() {
        for host in hosts {
            switch host.state {
            case .idle, .drafted, .settled, .failed, .expired, .cancelled: break
            default: endViolation = "a host did not come to rest: \(host.state.caseName)"
            }
        }
        if !store.isEmpty { endViolation = "pending commands left in the store: \(store.keys)" }
        let executed = Set(service.settledCommands)
        if executed != checker.settled {
            endViolation = "service settled \(executed.count), device saw \(checker.settled.count) settle"
        }
        if !checker.notReceived.isDisjoint(with: service.records.keys) {
            endViolation = "a command resolved as not received was executed"
        }
        if let draft = service.settlementsPerDraft.first(where: { $0.value > 1 }) {
            endViolation = "draft \(draft.key) settled \(draft.value) times"
        }
    }
}

/// A confirm request as it travels.
struct ConfirmRequest {
    let commandID: CommandID
    let draftID: DraftID
    let verification: SealedVerification
}

/// The wallet service's side of confirm and query: at most one execution per command ID,
/// fencing of queried-but-unknown IDs, and truthful answers.
struct SimulatedService {
    enum Record {
        case processing(queriesLeft: Int)
        case settled(Transfer)
        case refused(TransferFailure)
    }

    private(set) var records: [CommandID: Record] = [:]
    private(set) var fenced: Set<CommandID> = []
    private(set) var settlementsPerDraft: [DraftID: Int] = [:]
    /// Confirm requests that arrived after their command was fenced by a query, and were refused.
    private(set) var fencedArrivals = 0
    private var drafts: [CommandID: DraftID] = [:]

    var settledCommands: [CommandID] {
        records.compactMap { id, record in
            if case .settled = record { return id }
            return nil
        }
    }

    mutating func receive(_ request: ConfirmRequest, random: inout SeededGenerator) -> ConfirmResult {
        let id = request.commandID
        if let record = records[id] { return answer(record) }
        if fenced.contains(id) {
            fencedArrivals += 1
            return .failed(.rejected(code: "command_fenced"))
        }
        let lines = String(decoding: request.verification.sealedBytes.exposedValue, as: UTF8.self).split(
            separator: "\n")
        guard lines.count == 4, lines[0] == SealingContext.payloadVersion, lines[1] == id.rawValue,
            lines[2] == request.draftID.rawValue
        else { return record(.refused(.rejected(code: "binding_mismatch")), for: request) }
        if lines[3] != SimulatedWorld.correctPIN { return record(.refused(.wrongPIN(attemptsLeft: 2)), for: request) }
        if random.chance(10) { return record(.refused(.insufficientFunds), for: request) }
        if random.chance(20) {
            return record(.processing(queriesLeft: Int.random(in: 1...3, using: &random)), for: request)
        }
        return record(.settled(transfer(request)), for: request)
    }

    mutating func query(_ id: CommandID) -> QueryResult {
        guard let record = records[id] else {
            fenced.insert(id)
            return .unknownCommand
        }
        switch record {
        case .processing(let left) where left <= 1:
            let settled = Record.settled(Transfer(id: TransferID("tx-\(id)"), commandID: id, summary: Fixture.summary))
            records[id] = settled
            if let draft = drafts[id] { settlementsPerDraft[draft, default: 0] += 1 }
            return .settled(Transfer(id: TransferID("tx-\(id)"), commandID: id, summary: Fixture.summary))
        case .processing(let left):
            records[id] = .processing(queriesLeft: left - 1)
            return .pending
        case .settled(let transfer):
            return .settled(transfer)
        case .refused(let failure):
            return .failed(failure)
        }
    }

    private mutating func record(_ record: Record, for request: ConfirmRequest) -> ConfirmResult {
        records[request.commandID] = record
        drafts[request.commandID] = request.draftID
        if case .settled = record { settlementsPerDraft[request.draftID, default: 0] += 1 }
        return answer(record)
    }

    private func answer(_ record: Record) -> ConfirmResult {
        switch record {
        case .processing: .pending
        case .settled(let transfer): .settled(transfer)
        case .refused(let failure): .failed(failure)
        }
    }

    private func transfer(_ request: ConfirmRequest) -> Transfer {
        Transfer(id: TransferID("tx-\(request.commandID)"), commandID: request.commandID, summary: Fixture.summary)
    }
}
