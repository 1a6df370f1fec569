/// A feature's behaviour as a pure function: `(State, Event) -> (State, [Effect])`.
///
/// A machine performs no I/O, reads no clock and holds no mutable state. Everything that
/// touches the world is an ``MachineEffect`` returned from ``transition(from:on:)`` and
/// performed by an ``EffectInterpreter``; results come back as events. This is what makes
/// every machine testable exhaustively and checkable against its chart in `StateCharts/`.
public protocol StateMachine: Sendable {
    /// Where the feature is. Case names are the state ids of the machine's chart.
    associatedtype State: Sendable & CaseNamed
    /// What happened. Case names are the event names of the machine's chart.
    associatedtype Event: Sendable & CaseNamed
    /// What the interpreter must do next.
    associatedtype Effect: MachineEffect

    /// The machine's name in traces and the file name of its chart (`StateCharts/<name>.scxml`).
    static var name: String { get }

    /// Decides the outcome of `event` in `state`. Synchronous, pure and total.
    func transition(from state: State, on event: Event) -> Transition<State, Effect>

    /// The event a timer effect (one whose directive is ``EffectDirective/timer(_:_:)``)
    /// delivers when it fires. The default, `nil`, fires nothing: a machine that declares timers
    /// implements it.
    func event(firing timer: Effect) -> Event?

    /// The event a host in an account scope applies when that scope moves on (sign-out, switch,
    /// cache clear), after the scope's end cancelled its effects: how a machine whose work
    /// belongs to the account ends it (a media session disconnects). The effects it asks for
    /// still run; their results are stale. The default, `nil`, applies nothing: the effects are
    /// cancelled and the state stays.
    func event(scopeMovedOn reason: AccountScope.Reason) -> Event?
}

extension StateMachine {
    public func event(firing timer: Effect) -> Event? { nil }
    public func event(scopeMovedOn reason: AccountScope.Reason) -> Event? { nil }
}

/// The outcome of one event in one state.
public enum Transition<State: Sendable, Effect: Sendable>: Sendable {
    /// The machine moves to a new state (possibly the same case with new data) and asks for
    /// effects. Moving cancels the current state timeout.
    case move(to: State, effects: [Effect])
    /// The machine keeps its state and asks for effects.
    case stay(effects: [Effect])
    /// The event has no meaning in this state. The host traces it; it is never an error.
    case ignored

    /// A move without effects.
    @inlinable
    public static func move(to state: State) -> Self { .move(to: state, effects: []) }
    /// Staying without effects: the event was understood but changes nothing.
    @inlinable
    public static var stay: Self { .stay(effects: []) }

    /// The state after this transition, given the state before it.
    @inlinable
    public func nextState(after state: State) -> State {
        switch self {
        case .move(let next, _): next
        case .stay, .ignored: state
        }
    }

    /// The effects this transition asks for.
    @inlinable
    public var effects: [Effect] {
        switch self {
        case .move(_, let effects), .stay(let effects): effects
        case .ignored: []
        }
    }

    /// Whether the event was ignored.
    @inlinable
    public var isIgnored: Bool {
        if case .ignored = self { return true }
        return false
    }
}

/// A value that can name its enum case without revealing its payload.
///
/// Traces, logs and the chart checker use only these names, so a state or event that carries
/// a token or a message body is safe to trace.
///
/// Implement **one** of the two requirements:
/// - ``caseNameLiteral``, a `switch` returning string literals. The best choice for a machine's
///   `State`, `Event` and `Effect`: a host tracing a burst keeps a literal without copying or
///   retaining anything, and ``caseName`` is derived from it.
/// - ``caseName``, for names that are computed. A host then keeps a `String` per traced name.
///
/// With neither, ``caseName`` reads the case label through reflection (never touching associated
/// values): correct, but about 20,000 instructions per name, some 60,000 per traced event
/// (`symorva-bench runtime`, `docs/benchmarks.md`). `ChartChecker` fails when a type gives both
/// and they disagree.
public protocol CaseNamed {
    /// The enum case's name, without associated values: `authenticating`, `loginResponse`.
    var caseName: String { get }
    /// The enum case's name as a string literal, or `nil` when names are computed (the default).
    var caseNameLiteral: StaticString? { get }
}

extension CaseNamed {
    public var caseName: String {
        if let literal = caseNameLiteral { return literal.description }
        return caseLabel(of: self)
    }

    public var caseNameLiteral: StaticString? { nil }
}

/// The case label of an enum value, or its type name for anything that is not an enum.
/// Associated values are never formatted.
public func caseLabel(of value: some Any) -> String {
    let mirror = Mirror(reflecting: value)
    guard mirror.displayStyle == .enum else { return String(describing: type(of: value)) }
    if let label = mirror.children.first?.label { return label }
    // A case without payload: its description is the case name unless the type customises it.
    if value is any CustomStringConvertible || value is any CustomDebugStringConvertible {
        return String(describing: type(of: value)) + ".<case>"
    }
    return String(describing: value)
}
