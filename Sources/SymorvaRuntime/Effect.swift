/// An effect a machine asks for, and how the runtime should treat it.
///
/// Most effects are simply performed by the machine's ``EffectInterpreter``. Some are keyed so
/// that a later effect can cancel them, some are the machine's state timeout, and `cancel` is
/// itself an effect that the host performs without bothering the interpreter.
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
}
