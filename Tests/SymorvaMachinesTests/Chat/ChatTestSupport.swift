import SymorvaRuntime
import Testing

// Test support for the chat machines: one step of a machine, asserted as a whole (next state,
// effect list, ignored or not). Chart conformance uses `ChartChecker` from SymorvaTesting.

/// The outcome of one event in one state, as a machine test asserts it.
struct ChatStep<Machine: StateMachine> where Machine.State: Equatable, Machine.Effect: Equatable {
    /// The state after the event.
    let state: Machine.State
    /// The effects asked for.
    let effects: [Machine.Effect]
    /// Whether the machine ignored the event.
    let isIgnored: Bool

    init(_ machine: Machine, from state: Machine.State, on event: Machine.Event) {
        let transition = machine.transition(from: state, on: event)
        self.state = transition.nextState(after: state)
        self.effects = transition.effects
        self.isIgnored = transition.isIgnored
    }
}

/// Runs `events` in order from `state` and returns the final state and every effect.
func run<Machine: StateMachine>(
    _ machine: Machine, from state: Machine.State, _ events: [Machine.Event]
) -> (state: Machine.State, effects: [Machine.Effect]) {
    var current = state
    var effects: [Machine.Effect] = []
    for event in events {
        let transition = machine.transition(from: current, on: event)
        current = transition.nextState(after: current)
        effects += transition.effects
    }
    return (current, effects)
}

extension ChatStep {
    /// Whether the machine understood the event and changed nothing: no move, no effect.
    func isUnchanged(from state: Machine.State) -> Bool {
        !isIgnored && self.state == state && effects.isEmpty
    }
}
