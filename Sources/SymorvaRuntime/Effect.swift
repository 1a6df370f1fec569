/// An effect a machine asks for, and how the runtime should treat it.
///
/// Most effects are simply performed by the machine's ``EffectInterpreter``. Some are keyed so
/// that a later effect can cancel them, some are the machine's state timeout, and timers and
/// `cancel` are effects that the host performs itself without bothering the interpreter.
public protocol MachineEffect: Sendable, CaseNamed {
    /// How the host schedules this effect. Defaults to ``EffectDirective/perform``.
    var directive: EffectDirective { get }
}

extension MachineEffect {
    public var directive: EffectDirective { .perform }
}

/// The identity of a running effect, used to cancel it and to recognise its late results.
public struct EffectKey: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The key's name, e.g. `timer.retry` or `request.login`. Safe to log: never put data here.
    public let name: String
    /// Creates a key.
    public init(_ name: String) { self.name = name }
    public init(stringLiteral value: String) { self.name = value }
    public var description: String { name }

    /// The reserved key of a machine's state timeout.
    public static let stateTimeout = EffectKey("runtime.stateTimeout")
}

/// How the host schedules one effect.
public enum EffectDirective: Sendable, Hashable {
    /// Perform it concurrently; it cannot be cancelled except by stopping the host or ending the scope.
    case perform
    /// Perform it under a key. Starting another effect under the same key cancels the first;
    /// a result from a cancelled run never reaches the machine.
    case keyed(EffectKey)
    /// Perform it as the state timeout: a keyed effect under ``EffectKey/stateTimeout`` that the
    /// host cancels as soon as the machine moves to another state.
    case stateTimeout
    /// Cancel the effect running under this key. The interpreter never sees this effect.
    case cancel(EffectKey)
    /// A timer that the host performs itself, under a key, on its ``RuntimeClock``: when the
    /// deadline is reached the machine receives ``StateMachine/event(firing:)`` for the effect.
    /// Like a keyed effect, a later effect under the same key (or `.cancel(key)`) replaces it,
    /// and an event of a cancelled timer, a stopped host or an ended scope epoch is dropped and
    /// traced, never applied. Under ``EffectKey/stateTimeout`` it is the state timeout and the
    /// host cancels it when the machine moves. The interpreter never sees this effect.
    case timer(EffectKey, TimerDeadline)

    /// The key the effect runs under (`nil` for ``perform`` and ``cancel(_:)``).
    public var runningKey: EffectKey? {
        switch self {
        case .perform, .cancel: nil
        case .keyed(let key), .timer(let key, _): key
        case .stateTimeout: .stateTimeout
        }
    }
}

/// When a timer fires.
public enum TimerDeadline: Sendable, Hashable {
    /// This long after the host starts it (at once for zero or less).
    case after(Duration)
    /// At this instant of the host's ``RuntimeClock`` (at once if it has passed).
    case at(Duration)
    /// At this instant of the host's ``WallClock`` (at once if it has passed). The host turns it
    /// into a delay when it starts the timer.
    case atWallTime(Timestamp)
}
