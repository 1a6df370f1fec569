import Synchronization

/// The actor that runs one machine instance.
///
/// A host owns the machine's state and processes one ordered mailbox: events sent by callers
/// and results of the effects it launched. For each event it asks the machine for a
/// transition, publishes the new state to ``states``, records one ``TraceRecord`` and hands
/// the effects to its interpreter, each in its own task. It never awaits while it holds the
/// state: a transition is synchronous, and effects run outside the actor.
///
/// Results are applied only if they are still wanted: a result of an effect that was
/// cancelled or replaced under its key, of a stopped host, or of an ended scope epoch is
/// dropped and traced, never applied.
///
/// Observers see each state the host settles on between two mailbox turns: an event sent with
/// ``send(_:)`` publishes its state; a burst sent with ``send(contentsOf:)``, or events that
/// queue up while the host is busy, publish once with the state they lead to.
public actor MachineHost<Machine: StateMachine> {
    /// The machine this host runs.
    public nonisolated let machine: Machine
    /// A label for this instance in traces (an account, a room ID); empty for singletons.
    public nonisolated let instance: String
    /// The machine's state as observers see it.
    public nonisolated var states: ObservableValue<Machine.State> { publisher.observable }

    private nonisolated let publisher: ObservableValue<Machine.State>.Publisher
    private nonisolated let inbox = Mutex(Inbox())
    private let interpreter: any EffectInterpreter<Machine>
    private let scope: AccountScope?
    private let clock: any RuntimeClock
    private let tracer: Tracer

    private var state: Machine.State
    private var keyed: [EffectKey: Running] = [:]
    private var anonymous: [UInt64: Task<Void, Never>] = [:]
    private var nextToken: UInt64 = 0
    private var isStopped = false
    private var needsPublish = false
    private var unregisterFromScope: (@Sendable () -> Void)?

    private struct Running {
        let token: UInt64
        let task: Task<Void, Never>
    }

    private enum Entry: Sendable {
        case event(Machine.Event)
        case result(Machine.Event?, token: UInt64, key: EffectKey?, epoch: Epoch, isFinal: Bool)
    }

    private struct Inbox: ~Copyable {
        var entries: [Entry] = []
        var drainScheduled = false
    }

    /// Creates a host in `initial` state. Nothing runs until the first event.
    ///
    /// - Parameters:
    ///   - scope: the account scope the host belongs to; its end cancels the host's effects and
    ///     makes their late results stale. `nil` for hosts above accounts (the app flow).
    public init(
        machine: Machine,
        initial: Machine.State,
        interpreter: any EffectInterpreter<Machine>,
        instance: String = "",
        scope: AccountScope? = nil,
        clock: any RuntimeClock = SystemClock(),
        tracer: Tracer = .shared
    ) {
        self.machine = machine
        self.instance = instance
        self.state = initial
        self.publisher = ObservableValue.Publisher(initial)
        self.interpreter = interpreter
        self.scope = scope
        self.clock = clock
        self.tracer = tracer
    }

    /// The current state (inside the actor; observers use ``states``).
    public var currentState: Machine.State { state }

    /// The keys of the effects running now, for tests and diagnostics.
    public var runningKeys: Set<EffectKey> { Set(keyed.keys) }

    /// How many effects are running now.
    public var runningEffectCount: Int { keyed.count + anonymous.count }

    // MARK: - Mailbox

    /// Processes `event` after everything already in the mailbox, then returns.
    public func send(_ event: Machine.Event) {
        drainInbox()
        process(.event(event))
        publishIfNeeded()
    }

    /// Processes a burst of events in order, publishing once at the end.
    public func send(contentsOf events: some Sequence<Machine.Event>) {
        drainInbox()
        for event in events { process(.event(event)) }
        publishIfNeeded()
    }

    /// Queues `event` without waiting; it is processed in order with every other event.
    public nonisolated func post(_ event: Machine.Event) {
        enqueue(.event(event))
    }

    private nonisolated func enqueue(_ entry: Entry) {
        let mustSchedule = inbox.withLock { inbox -> Bool in
            inbox.entries.append(entry)
            guard !inbox.drainScheduled else { return false }
            inbox.drainScheduled = true
            return true
        }
        if mustSchedule {
            Task { await self.drainScheduledInbox() }
        }
    }

    private func drainScheduledInbox() {
        drainInbox()
        publishIfNeeded()
    }

    private func drainInbox() {
        while true {
            let entries = inbox.withLock { inbox -> [Entry] in
                if inbox.entries.isEmpty {
                    inbox.drainScheduled = false
                    return []
                }
                defer { inbox.entries = [] }
                return inbox.entries
            }
            if entries.isEmpty { return }
            for entry in entries { process(entry) }
        }
    }

    private func publishIfNeeded() {
        guard needsPublish else { return }
        needsPublish = false
        publisher.publish(state)
    }

    // MARK: - Processing

    private func process(_ entry: Entry) {
        switch entry {
        case .event(let event):
            guard !isStopped else { return }
            apply(event)
        case .result(let event, let token, let key, let epoch, let isFinal):
            // A stopped host has no running effects, so every late result is unwanted: it is
            // traced below (stale or cancelled) and never applied.
            let isWanted = isCurrent(token: token, key: key)
            if isFinal && isWanted { retire(token: token, key: key) }
            guard let event else { return }
            // Staleness is checked first: ending a scope cancels the host's effects on a later
            // turn, so a result of an ended epoch must read as stale whichever came first.
            if let scope, !scope.isCurrent(epoch) {
                trace(.stale, event: event)
            } else if !isWanted {
                trace(.cancelled, event: event)
            } else {
                apply(event)
            }
        }
    }

    private func apply(_ event: Machine.Event) {
        let transition = machine.transition(from: state, on: event)
        let from = state
        switch transition {
        case .ignored:
            if tracer.isEnabled { trace(.ignored, from: from, event: event, to: from, effects: []) }
            return
        case .stay(let effects):
            if tracer.isEnabled { trace(.transition, from: from, event: event, to: from, effects: effects) }
            launch(effects)
        case .move(let next, let effects):
            state = next
            needsPublish = true
            if let timeout = keyed.removeValue(forKey: .stateTimeout) { timeout.task.cancel() }
            if tracer.isEnabled { trace(.transition, from: from, event: event, to: next, effects: effects) }
            launch(effects)
        }
    }

    private func isCurrent(token: UInt64, key: EffectKey?) -> Bool {
        if let key { return keyed[key]?.token == token }
        return anonymous[token] != nil
    }

    private func retire(token: UInt64, key: EffectKey?) {
        if let key { keyed[key] = nil } else { anonymous[token] = nil }
    }

    // MARK: - Effects

    private func launch(_ effects: [Machine.Effect]) {
        for effect in effects {
            switch effect.directive {
            case .cancel(let key):
                keyed.removeValue(forKey: key)?.task.cancel()
            case .perform:
                let token = makeToken()
                anonymous[token] = start(effect, token: token, key: nil)
            case .keyed(let key):
                startKeyed(effect, key: key)
            case .stateTimeout:
                startKeyed(effect, key: .stateTimeout)
            }
        }
        registerWithScopeIfNeeded()
    }

    private func startKeyed(_ effect: Machine.Effect, key: EffectKey) {
        keyed.removeValue(forKey: key)?.task.cancel()
        let token = makeToken()
        keyed[key] = Running(token: token, task: start(effect, token: token, key: key))
    }

    private func makeToken() -> UInt64 {
        nextToken &+= 1
        return nextToken
    }

    private func start(_ effect: Machine.Effect, token: UInt64, key: EffectKey?) -> Task<Void, Never> {
        let epoch = scope?.epoch ?? Epoch(0)
        let interpreter = self.interpreter
        let context = EffectContext<Machine.Event>(epoch: epoch, clock: clock) { [weak self] event in
            self?.enqueue(.result(event, token: token, key: key, epoch: epoch, isFinal: false))
        }
        return Task { [weak self] in
            let event = await interpreter.perform(effect, context: context)
            self?.enqueue(.result(event, token: token, key: key, epoch: epoch, isFinal: true))
        }
    }

    private func registerWithScopeIfNeeded() {
        guard unregisterFromScope == nil, let scope else { return }
        unregisterFromScope = scope.onAdvance { [weak self] _ in
            guard let self else { return }
            Task { await self.cancelAllEffects() }
        }
    }

    /// Cancels every running effect; their results will never be applied.
    public func cancelAllEffects() {
        for running in keyed.values { running.task.cancel() }
        for task in anonymous.values { task.cancel() }
        keyed.removeAll()
        anonymous.removeAll()
    }

    /// Stops the host: cancels its effects and ignores every later event and result.
    public func stop() {
        guard !isStopped else { return }
        isStopped = true
        cancelAllEffects()
        unregisterFromScope?()
        unregisterFromScope = nil
    }

    // MARK: - Tracing

    private func trace(
        _ kind: TraceRecord.Kind, from: Machine.State, event: Machine.Event, to: Machine.State,
        effects: [Machine.Effect]
    ) {
        tracer.record(
            TraceRecord(
                kind: kind, machine: Machine.name, instance: instance, from: from.caseName,
                event: event.caseName, to: to.caseName, effects: effects.map(\.caseName),
                epoch: scope?.epoch.value ?? 0))
    }

    private func trace(_ kind: TraceRecord.Kind, event: Machine.Event) {
        // Dropped results are always worth a trace line: they prove isolation worked.
        guard tracer.isEnabled else { return }
        trace(kind, from: state, event: event, to: state, effects: [])
    }
}
