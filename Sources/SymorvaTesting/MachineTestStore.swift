import SymorvaRuntime

/// An exhaustive test driver for a pure machine, in the style of TCA's `TestStore`: the one
/// harness of the package's machine tests.
///
/// A store holds one state and feeds it events. Each step asserts the whole outcome: whether the
/// machine moved, stayed or ignored the event, the exact next state and the exact, ordered list
/// of effects — an effect the test did not expect (effects left out mean none), or one it
/// expected but the machine did not ask for, fails the step. A move to a state equal to the
/// current one is not a stay: the runtime cancels the state timeout on a move and keeps it on a
/// stay, so each is asserted with its own method. Ignored events are
/// asserted explicitly with ``assertIgnored(_:fileID:line:)-(Machine.Event,_,_)``, so a pair that silently stops
/// doing anything is caught too. There is no host, clock or I/O: a store step is one call to
/// ``/SymorvaRuntime/StateMachine/transition(from:on:)``.
///
/// ```swift
/// let store = MachineTestStore(AppFlowMachine(), initial: .launching)
/// try store.send(.launched, expecting: .restoring, effects: [.restoreAccounts])
/// try store.assertIgnored(.signOutRequested)
/// ```
///
/// Failures are thrown as ``TestFailure`` naming the machine, the state, the event, and the
/// expected and actual outcomes. After a failed step the store holds the actual state.
public final class MachineTestStore<Machine: StateMachine> {
    /// The machine under test.
    public let machine: Machine
    /// The state the next event will be sent in.
    public private(set) var state: Machine.State
    /// How many events the store has sent.
    public private(set) var stepCount = 0

    /// A store whose machine starts in `initial`.
    public init(_ machine: Machine, initial: Machine.State) {
        self.machine = machine
        self.state = initial
    }

    /// Sends `event` without asserting anything and returns the machine's transition; the
    /// store moves to the transition's next state. For machines whose states or effects are not
    /// `Equatable`, assert on the returned value yourself.
    @discardableResult
    public func step(_ event: Machine.Event) -> Transition<Machine.State, Machine.Effect> {
        let transition = machine.transition(from: state, on: event)
        state = transition.nextState(after: state)
        stepCount += 1
        return transition
    }

    /// Replaces the store's state, for a test that starts from a state reached elsewhere.
    public func reset(to state: Machine.State) {
        self.state = state
    }
}

extension MachineTestStore where Machine.State: Equatable, Machine.Effect: Equatable {
    /// Sends `event` and asserts that the machine moves to exactly `expected` asking for
    /// exactly `effects`, in order.
    ///
    /// A `.stay` fails this assertion even when `expected` equals the current state: staying
    /// and moving differ at runtime (a move cancels the state timeout), so a stay is asserted
    /// with ``send(_:stayingWith:fileID:line:)``.
    public func send(
        _ event: Machine.Event, expecting expected: Machine.State, effects: [Machine.Effect] = [],
        fileID: String = #fileID, line: Int = #line
    ) throws(TestFailure) {
        let before = state
        let transition = step(event)
        let outcome = Outcome<Machine>(transition: transition)
        let wanted = Outcome<Machine>.move(expected, effects)
        guard outcome == wanted else {
            throw failure(before: before, event: event, expected: wanted, actual: outcome, fileID: fileID, line: line)
        }
    }

    /// Sends `event` and asserts that the machine stays in its state asking for exactly
    /// `effects`, in order.
    public func send(
        _ event: Machine.Event, stayingWith effects: [Machine.Effect],
        fileID: String = #fileID, line: Int = #line
    ) throws(TestFailure) {
        let before = state
        let transition = step(event)
        let outcome = Outcome<Machine>(transition: transition)
        let wanted = Outcome<Machine>.stay(effects)
        guard outcome == wanted else {
            throw failure(before: before, event: event, expected: wanted, actual: outcome, fileID: fileID, line: line)
        }
    }

    /// Sends `event` and asserts that the machine ignores it: no new state, no effects.
    public func assertIgnored(
        _ event: Machine.Event, fileID: String = #fileID, line: Int = #line
    ) throws(TestFailure) {
        let before = state
        let transition = step(event)
        let outcome = Outcome<Machine>(transition: transition)
        guard outcome == .ignored else {
            throw failure(
                before: before, event: event, expected: .ignored, actual: outcome, fileID: fileID, line: line)
        }
    }

    /// Asserts that every event in `events` is ignored in the current state.
    public func assertIgnored(
        _ events: [Machine.Event], fileID: String = #fileID, line: Int = #line
    ) throws(TestFailure) {
        for event in events { try assertIgnored(event, fileID: fileID, line: line) }
    }

    /// Asserts the store's current state without sending anything.
    public func assertState(
        _ expected: Machine.State, fileID: String = #fileID, line: Int = #line
    ) throws(TestFailure) {
        guard state == expected else {
            throw TestFailure(
                "\(Machine.name): state is \(state), expected \(expected)", fileID: fileID, line: line)
        }
    }

    private func failure(
        before: Machine.State, event: Machine.Event, expected: Outcome<Machine>, actual: Outcome<Machine>,
        fileID: String, line: Int
    ) -> TestFailure {
        var lines = [
            "\(Machine.name): event \(event.caseName) in state \(before.caseName) — outcome differs",
            "  event:    \(event)",
            "  from:     \(before)",
            "  expected: \(expected)",
            "  actual:   \(actual)",
        ]
        let (missing, unexpected) = Self.difference(expected: expected.effects, actual: actual.effects)
        if !missing.isEmpty { lines.append("  missing effects:    \(missing)") }
        if !unexpected.isEmpty { lines.append("  unexpected effects: \(unexpected)") }
        if missing.isEmpty && unexpected.isEmpty && expected.effects != actual.effects {
            lines.append("  effects differ in order")
        }
        return TestFailure(lines.joined(separator: "\n"), fileID: fileID, line: line)
    }

    /// The effects expected but not performed and performed but not expected, as multisets.
    static func difference(
        expected: [Machine.Effect], actual: [Machine.Effect]
    ) -> (missing: [Machine.Effect], unexpected: [Machine.Effect]) {
        var unexpected = actual
        var missing: [Machine.Effect] = []
        for effect in expected {
            if let index = unexpected.firstIndex(of: effect) {
                unexpected.remove(at: index)
            } else {
                missing.append(effect)
            }
        }
        return (missing, unexpected)
    }
}

/// A transition reduced to what a store step compares.
enum Outcome<Machine: StateMachine>: Equatable, CustomStringConvertible
where Machine.State: Equatable, Machine.Effect: Equatable {
    case move(Machine.State, [Machine.Effect])
    case stay([Machine.Effect])
    case ignored

    init(transition: Transition<Machine.State, Machine.Effect>) {
        switch transition {
        case .move(let state, let effects): self = .move(state, effects)
        case .stay(let effects): self = .stay(effects)
        case .ignored: self = .ignored
        }
    }

    var effects: [Machine.Effect] {
        switch self {
        case .move(_, let effects), .stay(let effects): effects
        case .ignored: []
        }
    }

    var description: String {
        switch self {
        case .move(let state, let effects): "move to \(state), effects \(effects)"
        case .stay(let effects): "stay, effects \(effects)"
        case .ignored: "ignored"
        }
    }
}
