/// Performs a machine's effects: the only place where a feature touches the world.
///
/// The host calls ``perform(_:context:)`` concurrently, one task per effect; each task is
/// cancelled when its key is cancelled, its scope ends or the host stops. An interpreter
/// returns the event that reports the outcome, or `nil` when the effect has none.
public protocol EffectInterpreter<Machine>: Sendable {
    /// The machine whose effects this interpreter performs.
    associatedtype Machine: StateMachine

    /// Performs one effect and reports its outcome as an event.
    func perform(_ effect: Machine.Effect, context: EffectContext<Machine.Event>) async -> Machine.Event?
}

/// What an effect's task knows about where it runs.
public struct EffectContext<Event: Sendable>: Sendable {
    /// The scope epoch the effect was launched in.
    public let epoch: Epoch
    /// The host's clock (timers are the host's own: see ``EffectDirective/timer(_:_:)``).
    public let clock: any RuntimeClock
    let emitter: @Sendable (Event) -> Void

    /// Creates a context (hosts do this; tests may too).
    public init(epoch: Epoch, clock: any RuntimeClock, emit: @escaping @Sendable (Event) -> Void) {
        self.epoch = epoch
        self.clock = clock
        self.emitter = emit
    }

    /// Sends an extra event before the effect finishes (progress, a stream of updates). Like the
    /// returned event, it is dropped if the effect has been cancelled or its epoch has ended.
    public func emit(_ event: Event) { emitter(event) }
}

/// An interpreter made of a closure: handy for tests, benchmarks and small hosts.
public struct ClosureInterpreter<Machine: StateMachine>: EffectInterpreter {
    let body: @Sendable (Machine.Effect, EffectContext<Machine.Event>) async -> Machine.Event?
    /// Wraps `body`.
    public init(
        _ body: @escaping @Sendable (Machine.Effect, EffectContext<Machine.Event>) async -> Machine.Event?
    ) {
        self.body = body
    }
    public func perform(_ effect: Machine.Effect, context: EffectContext<Machine.Event>) async -> Machine.Event? {
        await body(effect, context)
    }
}
