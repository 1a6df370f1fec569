import Foundation
import SymorvaMachines
import SymorvaRuntime
import Testing

// Test support for the chat machines: one step of a machine, repository files, and a small
// reader for the SCXML subset of `StateCharts/`.
//
// The shared `ChartChecker` of SymorvaTesting is being written in parallel; once it is merged
// these chart tests can move to it. The rule checked here is the charts' documented one:
// a transition with a target moves to that state case, a transition without one stays in the
// same case, an event a state does not list is ignored, and a transition with a `cond` may
// also be ignored when its condition is false (a stale or duplicate result).

/// The outcome of one event in one state, as a machine test asserts it.
struct Step<Machine: StateMachine> where Machine.State: Equatable, Machine.Effect: Equatable {
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

/// The repository root: the nearest directory above this file that holds `Package.swift`.
func repositoryRoot(file: String = #filePath) -> URL {
    var directory = URL(fileURLWithPath: file).deletingLastPathComponent()
    while directory.path != "/" {
        if FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path) {
            return directory
        }
        directory = directory.deletingLastPathComponent()
    }
    Issue.record("No Package.swift above \(file)")
    return directory
}

/// What a chart allows for one (state, event) pair.
enum ChartOutcome: Hashable, CustomStringConvertible {
    /// The machine ignores the event.
    case ignored
    /// The machine ends in this state case (the same case for a target-less transition).
    case target(String)

    var description: String {
        switch self {
        case .ignored: "ignored"
        case .target(let name): name
        }
    }
}

/// A parsed chart: its name, initial state and transitions per state and event.
struct StateChart {
    struct Transition {
        let event: String
        let target: String?
        let hasCondition: Bool
    }

    let name: String
    let initial: String
    /// State ids in file order.
    let stateIDs: [String]
    let transitions: [String: [Transition]]

    /// Loads `StateCharts/<name>.scxml`.
    static func load(_ name: String) throws -> StateChart {
        let url = repositoryRoot().appendingPathComponent("StateCharts/\(name).scxml")
        return try StateChart(xml: String(contentsOf: url, encoding: .utf8))
    }

    init(xml: String) throws {
        func attribute(_ name: String, in tag: Substring) -> String? {
            guard let range = tag.range(of: " \(name)=\"") else { return nil }
            let rest = tag[range.upperBound...]
            guard let end = rest.firstIndex(of: "\"") else { return nil }
            return String(rest[..<end])
        }
        let text = Self.strippingComments(xml)
        var name = ""
        var initial = ""
        var stateIDs: [String] = []
        var transitions: [String: [Transition]] = [:]
        var current: String?
        var cursor = text.startIndex
        while let open = text[cursor...].firstIndex(of: "<") {
            guard let close = Self.tagEnd(in: text, from: open) else { break }
            let tag = text[open...close]
            cursor = text.index(after: close)
            if tag.hasPrefix("<scxml") {
                name = attribute("name", in: tag) ?? ""
                initial = attribute("initial", in: tag) ?? ""
            } else if tag.hasPrefix("<state") {
                let id = attribute("id", in: tag) ?? ""
                stateIDs.append(id)
                transitions[id] = []
                current = tag.hasSuffix("/>") ? nil : id
            } else if tag.hasPrefix("</state") {
                current = nil
            } else if tag.hasPrefix("<transition"), let state = current, let event = attribute("event", in: tag) {
                transitions[state, default: []].append(
                    Transition(
                        event: event, target: attribute("target", in: tag),
                        hasCondition: attribute("cond", in: tag) != nil))
            }
        }
        self.name = name
        self.initial = initial
        self.stateIDs = stateIDs
        self.transitions = transitions
    }

    /// The `>` that closes the tag opened at `open`, skipping quoted attribute values.
    private static func tagEnd(in text: String, from open: String.Index) -> String.Index? {
        var inQuotes = false
        var index = open
        while index < text.endIndex {
            switch text[index] {
            case "\"": inQuotes.toggle()
            case ">" where !inQuotes: return index
            default: break
            }
            index = text.index(after: index)
        }
        return nil
    }

    private static func strippingComments(_ xml: String) -> String {
        var result = ""
        var rest = xml[...]
        while let start = rest.range(of: "<!--") {
            result += rest[..<start.lowerBound]
            guard let end = rest[start.upperBound...].range(of: "-->") else { return result }
            rest = rest[end.upperBound...]
        }
        return result + rest
    }

    /// Every event name the chart mentions.
    var eventNames: Set<String> { Set(transitions.values.flatMap { $0.map(\.event) }) }

    /// The outcomes the chart allows for `event` in `state`, and whether ignoring is allowed too.
    func allowed(state: String, event: String) -> (targets: Set<ChartOutcome>, mayIgnore: Bool) {
        let listed = (transitions[state] ?? []).filter { $0.event == event }
        guard !listed.isEmpty else { return ([.ignored], true) }
        let targets = Set(listed.map { ChartOutcome.target($0.target ?? state) })
        return (targets, listed.contains(where: \.hasCondition))
    }
}

/// Checks a machine against its chart for every (state case, event case) pair, using sample
/// states and events that must cover every case. Records one issue per disagreement.
func checkChart<Machine: StateMachine>(
    _ machine: Machine, chart: StateChart, stateCaseNames: [String], eventCaseNames: [String],
    initial: String, states: [Machine.State], events: [Machine.Event],
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(chart.name == Machine.name, sourceLocation: sourceLocation)
    #expect(chart.initial == initial, sourceLocation: sourceLocation)
    #expect(Set(chart.stateIDs) == Set(stateCaseNames), "chart states", sourceLocation: sourceLocation)
    #expect(chart.stateIDs.count == stateCaseNames.count, "duplicate chart states", sourceLocation: sourceLocation)
    #expect(chart.eventNames.isSubset(of: Set(eventCaseNames)), "unknown chart events", sourceLocation: sourceLocation)
    #expect(Set(states.map(\.caseName)) == Set(stateCaseNames), "sample states", sourceLocation: sourceLocation)
    #expect(Set(events.map(\.caseName)) == Set(eventCaseNames), "sample events", sourceLocation: sourceLocation)

    var observed: [String: [String: Set<ChartOutcome>]] = [:]
    let eventNames = events.map(\.caseName)
    for state in states {
        let stateName = state.caseName
        for (event, eventName) in zip(events, eventNames) {
            let transition = machine.transition(from: state, on: event)
            let outcome: ChartOutcome
            switch transition {
            case .ignored: outcome = .ignored
            case .stay: outcome = .target(stateName)
            case .move(let next, _): outcome = .target(next.caseName)
            }
            observed[stateName, default: [:]][eventName, default: []].insert(outcome)
        }
    }
    for stateName in stateCaseNames {
        for eventName in eventCaseNames {
            let seen = observed[stateName]?[eventName] ?? []
            let (targets, mayIgnore) = chart.allowed(state: stateName, event: eventName)
            let allowed = mayIgnore ? targets.union([.ignored]) : targets
            #expect(
                seen.isSubset(of: allowed), "\(stateName) --\(eventName)--> \(seen.sorted { "\($0)" < "\($1)" })",
                sourceLocation: sourceLocation)
            #expect(
                targets.subtracting(seen).isEmpty,
                "\(stateName) --\(eventName)--> chart allows \(targets.subtracting(seen)) never produced by the samples",
                sourceLocation: sourceLocation)
        }
    }
}
