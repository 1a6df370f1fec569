/// The actor that runs one machine instance.
///
/// A host owns the machine's state and processes one ordered mailbox: events sent by callers
/// and results of the effects it launched. For each event it asks the machine for a
/// transition, traces it (one ``TraceRecord`` per step; the steps of a mailbox turn are handed
/// to the tracer's sinks as one ``TraceRecords`` batch when the turn ends, before a step's
/// effects start and before observers see its state), publishes the new state to ``states`` and hands the
/// effects to its interpreter, each in its own task. It never awaits while it holds the
/// state: a transition is synchronous, and effects run outside the actor.
///
/// Results are applied only if they are still wanted: a result of an effect that was
/// cancelled or replaced under its key, of a stopped host, or of an ended scope epoch is
/// dropped and traced, never applied.
///
/// Observers see each state the host settles on between two mailbox turns: an event sent with
/// ``send(_:)`` publishes its state; a burst sent with ``send(contentsOf:)``, or events that
/// queue up while the host is busy, publish once with the state they lead to.
///
/// Performance: the mailbox, transition and publication path is `@inlinable`, so the module
/// that creates a host gets it specialized for its machine; a burst costs about as much per
/// event as calling the transition in a loop. To keep it that way, give hot machines a
/// `switch`-based ``CaseNamed/caseNameLiteral`` and `State`/`Event` payloads of frozen or in-package
/// types (`Duration`, not `ContinuousClock.Instant`, whose resilient layout makes every copy of
/// the state go through the runtime's generic enum functions: eight times slower here).
public final actor MachineHost<Machine: StateMachine> {
    /// The machine this host runs.
    public nonisolated let machine: Machine
    /// A label for this instance in traces (an account, a room ID); empty for singletons.
    public nonisolated let instance: String
    /// The machine's state as observers see it.
    public nonisolated var states: ObservableValue<Machine.State> { publisher.observable }

    // The hot path (sending, posting, draining, applying, publishing, tracing) is `@inlinable`
    // so that it is specialized for the concrete machine in the module that creates the host:
    // unspecialized, every event pays for generic metadata lookups and value-witness copies of
    // the state (about 4,000 instructions per event instead of a few hundred).

    @usableFromInline nonisolated let publisher: ObservableValue<Machine.State>.Publisher
    @usableFromInline nonisolated let inbox = Lock(Inbox())
    @usableFromInline let interpreter: any EffectInterpreter<Machine>
    @usableFromInline let scope: AccountScope?
    @usableFromInline let clock: any RuntimeClock
    @usableFromInline let wallClock: any WallClock
    @usableFromInline let tracer: Tracer
    /// Publishes `true` once the host has stopped: waits (``wait(until:)``) end with it.
    @usableFromInline nonisolated let stopPublisher = ObservableValue<Bool>.Publisher(false)

    // Dynamic exclusivity checks are off for the state the hot path touches: they cost about
    // 40 instructions per access (a thread-local lookup and an access-set insert), several
    // times per event, and cannot be removed by the optimizer because the inlinable code that
    // makes the accesses is compiled in other modules. They can never fire here: every access
    // is on the actor's executor, in synchronous code whose only callouts are the machine's
    // pure transition, trace sinks, publication listeners, `Task` creation and cancellation,
    // none of which can reach this actor's state synchronously (isolation checking forbids it).
    // The compiler's static exclusivity diagnostics still apply.
    @exclusivity(unchecked) @usableFromInline var state: Machine.State
    @exclusivity(unchecked) @usableFromInline var keyed: [EffectKey: Running] = [:]
    @exclusivity(unchecked) @usableFromInline var anonymous: [UInt64: Task<Void, Never>] = [:]
    @exclusivity(unchecked) @usableFromInline var nextToken: UInt64 = 0
    @exclusivity(unchecked) @usableFromInline var isStopped = false
    @exclusivity(unchecked) @usableFromInline var needsPublish = false
    @usableFromInline var unregisterFromScope: (@Sendable () -> Void)?
    /// The drain's second buffer: swapped with the inbox's under the lock, so that posting
    /// and draining reuse two arrays instead of allocating one per drain.
    @exclusivity(unchecked) @usableFromInline var draining: [Entry] = []
    /// The tracer's sinks as this host last saw them.
    @exclusivity(unchecked) @usableFromInline var traceCache = Tracer.Cache()
    /// The traced steps of the current mailbox turn, delivered to the sinks when it ends (``flushTrace()``).
    @exclusivity(unchecked) @usableFromInline var traceBatch: TraceBatch
    /// `traceBatch`'s entry buffer, capacity and count, mirrored here so that appending a step
    /// touches no reference (loading the batch retained and released it: 30 instructions a step).
    @exclusivity(unchecked) @usableFromInline var traceEntries: UnsafeMutablePointer<TraceEntry>
    @exclusivity(unchecked) @usableFromInline var traceCapacity: Int
    @exclusivity(unchecked) @usableFromInline var traceCount = 0

    @usableFromInline
    struct Running {
        @usableFromInline let token: UInt64
        @usableFromInline let task: Task<Void, Never>
        @inlinable init(token: UInt64, task: Task<Void, Never>) {
            self.token = token
            self.task = task
        }
    }

    @usableFromInline
    enum Entry: Sendable {
        case event(Machine.Event)
        case result(Machine.Event?, token: UInt64, key: EffectKey?, epoch: Epoch, isFinal: Bool)
    }

    @usableFromInline
    struct Inbox: ~Copyable {
        @usableFromInline var entries: [Entry] = []
        @usableFromInline var drainScheduled = false
        @usableFromInline init() {}
    }

    /// Buffers larger than this are released after a drain rather than kept for reuse.
    @usableFromInline static var retainedBufferCapacity: Int { 4_096 }

    /// Creates a host in `initial` state. Nothing runs until the first event.
    ///
    /// - Parameters:
    ///   - scope: the account scope the host belongs to; its end cancels the host's effects and
    ///     makes their late results stale. `nil` for hosts above accounts (the app flow).
    ///   - clock: the clock effects and timers run on.
    ///   - wallClock: the clock that turns wall-clock timers (``TimerDeadline/atWallTime(_:)``)
    ///     into delays.
    public init(
        machine: Machine,
        initial: Machine.State,
        interpreter: any EffectInterpreter<Machine>,
        instance: String = "",
        scope: AccountScope? = nil,
        clock: any RuntimeClock = SystemClock(),
        wallClock: any WallClock = SystemWallClock(),
        tracer: Tracer = .shared
    ) {
        self.machine = machine
        self.instance = instance
        self.state = initial
        self.publisher = ObservableValue.Publisher(initial)
        self.interpreter = interpreter
        self.scope = scope
        self.clock = clock
        self.wallClock = wallClock
        self.tracer = tracer
        let traceBatch = TraceBatch(machine: Machine.name, instance: instance)
        self.traceBatch = traceBatch
        self.traceEntries = traceBatch.entries
        self.traceCapacity = traceBatch.capacity
    }

    /// The current state (inside the actor; observers use ``states``).
    public var currentState: Machine.State { state }

    /// The keys of the effects running now, for tests and diagnostics.
    public var runningKeys: Set<EffectKey> { Set(keyed.keys) }

    /// How many effects are running now.
    public var runningEffectCount: Int { keyed.count + anonymous.count }

    // MARK: - Mailbox

    /// Processes `event` after everything already in the mailbox, then returns.
    @inlinable
    public func send(_ event: Machine.Event) {
        drainInbox()
        if !isStopped { apply(event) }
        endTurn()
    }

    /// Processes a burst of events in order, publishing once at the end.
    ///
    /// Traced steps of the burst reach sinks in batches (of up to 512 steps), the last when it ends.
    @inlinable
    public func send(contentsOf events: some Sequence<Machine.Event>) {
        drainInbox()
        for event in events where !isStopped { apply(event) }
        endTurn()
    }

    /// Queues `event` without waiting; it is processed in order with every other event.
    @inlinable
    public nonisolated func post(_ event: Machine.Event) {
        if enqueue(.event(event)) {
            Task { await self.drainScheduledInbox() }
        }
    }

    /// Appends `entry` to the inbox; returns whether the caller must schedule a drain (no drain
    /// was scheduled yet).
    @inlinable
    nonisolated func enqueue(_ entry: Entry) -> Bool {
        inbox.withLock { inbox -> Bool in
            inbox.entries.append(entry)
            guard !inbox.drainScheduled else { return false }
            inbox.drainScheduled = true
            return true
        }
    }

    @inlinable
    func drainScheduledInbox() {
        drainInbox()
        endTurn()
    }

    /// Ends a mailbox turn: buffered trace records go to the sinks, then observers see the
    /// state.
    @inlinable
    func endTurn() {
        flushTrace()
        publishIfNeeded()
    }

    @inlinable
    func drainInbox() {
        while true {
            // Swap the inbox's buffer with the (empty) drain buffer: no allocation while both
            // stay below `retainedBufferCapacity`.
            let isEmpty = inbox.withLock { inbox -> Bool in
                if inbox.entries.isEmpty {
                    inbox.drainScheduled = false
                    return true
                }
                swap(&inbox.entries, &draining)
                return false
            }
            if isEmpty { return }
            for entry in draining { process(entry) }
            if draining.capacity > Self.retainedBufferCapacity {
                draining = []
            } else {
                draining.removeAll(keepingCapacity: true)
            }
        }
    }

    @inlinable
    func publishIfNeeded() {
        guard needsPublish else { return }
        needsPublish = false
        publisher.publish(state)
    }

    // MARK: - Processing

    @inlinable
    func process(_ entry: Entry) {
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

    /// Applies `event`; returns whether the machine took it (moved or stayed) rather than ignoring it.
    @inlinable @discardableResult
    func apply(_ event: Machine.Event) -> Bool {
        // Switching on the call itself consumes the transition: its payload is moved out, not
        // copied and destroyed.
        switch machine.transition(from: state, on: event) {
        case .ignored:
            if tracer.isEnabled { trace(.ignored, from: state, event: event, to: state, effects: []) }
            return false
        case .stay(let effects):
            if tracer.isEnabled { trace(.transition, from: state, event: event, to: state, effects: effects) }
            if !effects.isEmpty {
                // Sinks see a step before any effect it starts can run.
                flushTrace()
                launch(effects)
            }
            return true
        case .move(let next, let effects):
            if tracer.isEnabled { trace(.transition, from: state, event: event, to: next, effects: effects) }
            state = next
            needsPublish = true
            // Moving cancels the state timeout; no keyed effect at all means no timeout to look up.
            if !keyed.isEmpty, let timeout = keyed.removeValue(forKey: .stateTimeout) { timeout.task.cancel() }
            if !effects.isEmpty {
                flushTrace()
                launch(effects)
            }
            return true
        }
    }

    @usableFromInline
    func isCurrent(token: UInt64, key: EffectKey?) -> Bool {
        if let key { return keyed[key]?.token == token }
        return anonymous[token] != nil
    }

    @usableFromInline
    func retire(token: UInt64, key: EffectKey?) {
        if let key { keyed[key] = nil } else { anonymous[token] = nil }
    }

    // MARK: - Effects

    @inlinable
    func launch(_ effects: [Machine.Effect]) {
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
            case .timer(let key, let deadline):
                startTimer(effect, key: key, deadline: deadline)
            }
        }
        registerWithScopeIfNeeded()
    }

    @inlinable
    func startKeyed(_ effect: Machine.Effect, key: EffectKey) {
        keyed.removeValue(forKey: key)?.task.cancel()
        let token = makeToken()
        keyed[key] = Running(token: token, task: start(effect, token: token, key: key))
    }

    /// Starts a timer under `key`: a task that sleeps on the host's clock and then delivers the
    /// machine's event for `effect` through the mailbox, as a result under the key, so that a
    /// replaced, cancelled or stale timer is dropped like any other result.
    @usableFromInline
    func startTimer(_ effect: Machine.Effect, key: EffectKey, deadline: TimerDeadline) {
        keyed.removeValue(forKey: key)?.task.cancel()
        let token = makeToken()
        let delay: Duration =
            switch deadline {
            case .after(let delay): delay
            case .at(let instant): instant - clock.now
            case .atWallTime(let instant): instant.duration(since: wallClock.now)
            }
        let event = machine.event(firing: effect)
        let epoch = scope?.epoch ?? Epoch(0)
        let clock = self.clock
        let task = Task { [weak self] in
            // A cancelled sleep ends the timer quietly. A sleep that ends anyway (a cancellation
            // that came too late) delivers, and the mailbox drops the event as it drops any
            // unwanted result: its token is no longer current or its epoch has ended.
            if delay > .zero {
                do { try await clock.sleep(for: delay) } catch { return }
            }
            guard let self else { return }
            if self.enqueue(.result(event, token: token, key: key, epoch: epoch, isFinal: true)) {
                await self.drainScheduledInbox()
            }
        }
        keyed[key] = Running(token: token, task: task)
    }

    @inlinable
    func makeToken() -> UInt64 {
        nextToken &+= 1
        return nextToken
    }

    @inlinable
    func start(_ effect: Machine.Effect, token: UInt64, key: EffectKey?) -> Task<Void, Never> {
        let epoch = scope?.epoch ?? Epoch(0)
        let interpreter = self.interpreter
        let context = EffectContext<Machine.Event>(epoch: epoch, clock: clock) { [weak self] event in
            guard let self else { return }
            if self.enqueue(.result(event, token: token, key: key, epoch: epoch, isFinal: false)) {
                Task { await self.drainScheduledInbox() }
            }
        }
        return Task { [weak self] in
            let event = await interpreter.perform(effect, context: context)
            guard let self else { return }
            // The effect's own task drains the inbox when no drain is scheduled: one task
            // instead of two per round trip, with the same mailbox order.
            if self.enqueue(.result(event, token: token, key: key, epoch: epoch, isFinal: true)) {
                await self.drainScheduledInbox()
            }
        }
    }

    @usableFromInline
    func registerWithScopeIfNeeded() {
        guard unregisterFromScope == nil, let scope else { return }
        unregisterFromScope = scope.onAdvance { [weak self] reason in
            guard let self else { return }
            Task { await self.scopeMovedOn(reason) }
        }
    }

    /// Cancels every running effect, then applies the machine's event for a scope that moved on, if any.
    func scopeMovedOn(_ reason: AccountScope.Reason) {
        cancelAllEffects()
        guard !isStopped, let event = machine.event(scopeMovedOn: reason) else { return }
        send(event)
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
        stopPublisher.publish(true)
    }

    // MARK: - Waiting

    /// Sends `event`, then waits for the first state that `answer` maps to an answer, and
    /// returns that answer.
    ///
    /// The state this send settles on is checked first (so an answer reached in the same turn
    /// is never missed), then every state the host publishes after it. Returns `nil` when the
    /// host stops, when its scope moves on (ends or advances) or when the calling task is
    /// cancelled before an answer. This is how a caller learns the outcome of its event: it
    /// never reads the state first and decides for the machine.
    ///
    /// - Parameters:
    ///   - ignored: when given, the answer if the machine ignores `event` (called with the
    ///     unchanged state) instead of waiting; `nil` waits as for an event that was taken.
    ///   - answer: maps a state to the caller's answer, `nil` to keep waiting. Runs on the
    ///     thread that publishes; it must be quick and must not block.
    public func send<Answer: Sendable>(
        _ event: Machine.Event, ignored: (@Sendable (Machine.State) -> Answer?)? = nil,
        until answer: @escaping @Sendable (Machine.State) -> Answer?
    ) async -> Answer? {
        drainInbox()
        let taken = !isStopped && apply(event)
        endTurn()
        if !taken, !isStopped, let ignored { return ignored(state) }
        // Registered on this actor, before any later turn can move the state on.
        return await StateWait.first(of: states, stopped: stopPublisher.observable, scope: scope, until: answer)
    }

    /// Waits for the first state, the current one or a later one, that `answer` maps to an
    /// answer; `nil` when the host stops, its scope moves on or the calling task is cancelled
    /// first. ``send(_:ignored:until:)`` without an event.
    public nonisolated func wait<Answer: Sendable>(
        until answer: @escaping @Sendable (Machine.State) -> Answer?
    ) async -> Answer? {
        await StateWait.first(of: states, stopped: stopPublisher.observable, scope: scope, until: answer)
    }

    // MARK: - Tracing

    /// Traces one step into the turn's batch, by case names; the batch goes to the sinks when the
    /// turn ends, a step starts effects or the batch is full (``flushTrace()``).
    ///
    /// One record built and delivered per step (five strings and an array built and destroyed, a
    /// sink existential copied per call) cost three to four times what a burst costs untraced.
    /// A buffered entry is trivial: it holds its case names as literals
    /// (``CaseNamed/caseNameLiteral``) or as positions in the batch's computed names, and a range
    /// of effect names kept aside, so appending and emptying retain and release nothing. The
    /// records are built only if a sink reads them.
    @inlinable
    func trace(
        _ kind: TraceRecord.Kind, from: Machine.State, event: Machine.Event, to: Machine.State,
        effects: [Machine.Effect]
    ) {
        var effectRange = 0..<0
        if !effects.isEmpty {
            let start = traceBatch.effectNames.count
            for effect in effects { traceBatch.effectNames.append(traceName(effect)) }
            effectRange = start..<traceBatch.effectNames.count
        }
        let entry = TraceEntry(
            kind: kind, from: traceName(from), event: traceName(event), to: traceName(to), effects: effectRange,
            epoch: scope?.epoch.value ?? 0)
        if traceCount == traceCapacity { growTrace() }
        (traceEntries + traceCount).initialize(to: entry)
        traceCount += 1
        // A long drain (a producer posting faster than the host applies) hands its steps over in
        // batches of bounded size: a batch that grew with the drain cost more in page faults and
        // cache misses than its steps (post was twice as slow traced, for 17 % more instructions).
        if traceCount == Self.traceBatchLimit { flushTrace() }
    }

    /// The most steps a trace batch holds before it goes to the sinks.
    @usableFromInline static var traceBatchLimit: Int { 512 }

    @usableFromInline
    func growTrace() {
        traceBatch.count = traceCount
        traceBatch.grow()
        traceEntries = traceBatch.entries
        traceCapacity = traceBatch.capacity
    }

    /// `value`'s name as a buffered entry keeps it: its literal, or a computed name stored aside.
    @inlinable
    func traceName(_ value: some CaseNamed) -> TraceName {
        if let literal = value.caseNameLiteral { return .literal(literal) }
        traceBatch.strings.append(value.caseName)
        return .stored(traceBatch.strings.count - 1)
    }

    /// Hands the steps buffered so far to the tracer's sinks, as one ``TraceRecords`` batch.
    @inlinable
    func flushTrace() {
        if traceCount == 0 { return }
        traceBatch.count = traceCount
        tracer.record(contentsOf: TraceRecords(traceBatch), cache: &traceCache)
        traceCount = 0
        // Unless a sink kept the batch, it is the host's alone again and is emptied in place.
        if isKnownUniquelyReferenced(&traceBatch) {
            traceBatch.removeAll()
        } else {
            renewTraceBatch()
        }
    }

    @usableFromInline
    func renewTraceBatch() {
        traceBatch = TraceBatch(machine: traceBatch.machine, instance: traceBatch.instance)
        traceEntries = traceBatch.entries
        traceCapacity = traceBatch.capacity
    }

    @inlinable
    func trace(_ kind: TraceRecord.Kind, event: Machine.Event) {
        // Dropped results are always worth a trace line: they prove isolation worked.
        guard tracer.isEnabled else { return }
        trace(kind, from: state, event: event, to: state, effects: [])
    }
}
