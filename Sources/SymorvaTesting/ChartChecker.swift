import Foundation
import SymorvaRuntime

/// Checks a machine against its chart for every (sample state, sample event) pair.
///
/// For each pair the checker runs the pure transition and compares its outcome with the
/// chart: the code's target state case (a `.stay` targets its own state) must be one of the
/// chart's alternatives for that pair, and an ignored event must have no arrow. It also fails
/// when the samples miss a `State` or `Event` case, when the chart names a state or event the
/// code lacks, when the code has a case the chart never names, and when a chart arrow is never
/// produced by any sample (so every guarded alternative is exercised).
///
/// ```swift
/// @Test("AppFlow conforms to its chart")
/// func chart() throws {
///     try ChartChecker(machine: AppFlowMachine())
///         .assertConforms(states: samples, events: events, initial: .launching)
/// }
/// ```
public struct ChartChecker<Machine: ChartedMachine>: Sendable {
    /// The machine under check.
    public let machine: Machine
    /// Its chart.
    public let chart: StateChart

    /// A checker for `machine` against an already loaded `chart`.
    public init(machine: Machine, chart: StateChart) {
        self.machine = machine
        self.chart = chart
    }

    /// A checker for `machine` against `StateCharts/<Machine.name>.scxml` of the package that
    /// contains `filePath` (the calling test file by default).
    public init(machine: Machine, filePath: String = #filePath) throws(ChartError) {
        let url = try ChartLocator.chartURL(named: Machine.name, from: filePath)
        self.init(machine: machine, chart: try StateChart(contentsOf: url))
    }

    /// Every disagreement between code, chart and samples; empty when they agree.
    public func mismatches(
        states: [Machine.State], events: [Machine.Event], initial: Machine.State? = nil
    ) -> [ChartMismatch] {
        var found = vocabularyMismatches(states: states, events: events)
        if chart.name != Machine.name {
            found.append(.chartName(chart: chart.name, machine: Machine.name))
        }
        if let initial, initial.caseName != chart.initial {
            found.append(.initialState(chart: chart.initial, code: initial.caseName))
        }
        var witnessed = Set<String>()
        for state in states {
            for event in events {
                let from = state.caseName
                let name = event.caseName
                let actual = outcome(of: machine.transition(from: state, on: event), from: from)
                let arrows = chart.transitions(from: from, on: name)
                let expected = arrows.isEmpty ? ["ignored"] : arrows.map(\.resolvedTarget)
                if expected.contains(actual) {
                    witnessed.insert("\(from)|\(name)|\(actual)")
                } else {
                    found.append(
                        .transition(
                            state: from, event: name, expected: expected, actual: actual,
                            sample: "\(state) on \(event)"))
                }
            }
        }
        let sampledStates = Set(states.map(\.caseName))
        let sampledEvents = Set(events.map(\.caseName))
        for arrow in chart.transitions
        where sampledStates.contains(arrow.source) && sampledEvents.contains(arrow.event)
            && !witnessed.contains("\(arrow.source)|\(arrow.event)|\(arrow.resolvedTarget)")
        {
            found.append(.unwitnessedTransition(arrow))
        }
        return found
    }

    /// Throws a ``TestFailure`` listing every mismatch when code, chart and samples disagree.
    public func assertConforms(
        states: [Machine.State], events: [Machine.Event], initial: Machine.State? = nil,
        fileID: String = #fileID, line: Int = #line
    ) throws(TestFailure) {
        let found = mismatches(states: states, events: events, initial: initial)
        guard found.isEmpty else {
            let list = found.map { "  - \($0)" }.joined(separator: "\n")
            throw TestFailure(
                "\(Machine.name) does not conform to its chart (\(found.count) mismatch(es)):\n\(list)",
                fileID: fileID, line: line)
        }
    }

    private func outcome(of transition: Transition<Machine.State, Machine.Effect>, from: String) -> String {
        switch transition {
        case .ignored: "ignored"
        case .stay: from
        case .move(let next, _): next.caseName
        }
    }

    private func vocabularyMismatches(states: [Machine.State], events: [Machine.Event]) -> [ChartMismatch] {
        var found: [ChartMismatch] = []
        let stateNames = Machine.State.allCaseNames
        let eventNames = Machine.Event.allCaseNames
        let chartStates = Set(chart.stateIDs)
        let chartEvents = Set(chart.eventNames)
        found += chart.stateIDs.filter { !stateNames.contains($0) }.map { .stateMissingFromCode($0) }
        found += stateNames.filter { !chartStates.contains($0) }.map { .stateMissingFromChart($0) }
        found += chart.eventNames.filter { !eventNames.contains($0) }.map { .eventMissingFromCode($0) }
        found += eventNames.filter { !chartEvents.contains($0) }.map { .eventMissingFromChart($0) }
        let sampledStates = Set(states.map(\.caseName))
        let sampledEvents = Set(events.map(\.caseName))
        found += stateNames.filter { !sampledStates.contains($0) }.map { .stateNotSampled($0) }
        found += eventNames.filter { !sampledEvents.contains($0) }.map { .eventNotSampled($0) }
        found += unique(states.map(\.caseName)).filter { !stateNames.contains($0) }.map { .unlistedState($0) }
        found += unique(events.map(\.caseName)).filter { !eventNames.contains($0) }.map { .unlistedEvent($0) }
        found += nameDisagreements(states) + nameDisagreements(events)
        return found
    }

    /// Samples whose ``CaseNamed/caseNameLiteral`` and ``CaseNamed/caseName`` differ (a type
    /// that implements both): traces would then name the case differently from the chart.
    private func nameDisagreements(_ samples: [some CaseNamed]) -> [ChartMismatch] {
        var found: [ChartMismatch] = []
        for sample in samples {
            if let literal = sample.caseNameLiteral, literal.description != sample.caseName {
                found.append(.caseNamesDisagree(caseName: sample.caseName, literal: literal.description))
            }
        }
        return found
    }

    private func unique(_ names: [String]) -> [String] {
        var seen = Set<String>()
        return names.filter { seen.insert($0).inserted }
    }
}

/// One disagreement between a machine, its chart and the test's samples.
public enum ChartMismatch: Sendable, Equatable, CustomStringConvertible {
    /// A pair whose code outcome is not one of the chart's: `expected` lists the chart's
    /// targets (or `ignored`), `actual` is the code's target or `ignored`.
    case transition(state: String, event: String, expected: [String], actual: String, sample: String)
    /// A chart arrow that no sample pair produced: a guarded alternative is untested.
    case unwitnessedTransition(StateChart.Transition)
    /// The chart has a state the code's `State.allCaseNames` lacks.
    case stateMissingFromCode(String)
    /// The code has a state case the chart lacks.
    case stateMissingFromChart(String)
    /// The chart names an event the code's `Event.allCaseNames` lacks.
    case eventMissingFromCode(String)
    /// The code has an event case the chart never names.
    case eventMissingFromChart(String)
    /// No sample state has this case.
    case stateNotSampled(String)
    /// No sample event has this case.
    case eventNotSampled(String)
    /// A sample state's case name is missing from `State.allCaseNames`: the list is stale.
    case unlistedState(String)
    /// A sample event's case name is missing from `Event.allCaseNames`: the list is stale.
    case unlistedEvent(String)
    /// A sample's ``/SymorvaRuntime/CaseNamed/caseName`` and ``/SymorvaRuntime/CaseNamed/caseNameLiteral`` differ.
    case caseNamesDisagree(caseName: String, literal: String)
    /// The chart's `name` is not the machine's name.
    case chartName(chart: String, machine: String)
    /// The chart's `initial` is not the initial state the test gave.
    case initialState(chart: String, code: String)

    /// A sentence naming the state, the event, what the chart expects and what the code does.
    public var description: String {
        switch self {
        case .transition(let state, let event, let expected, let actual, let sample):
            let wanted = expected.count == 1 ? expected[0] : "one of \(expected.joined(separator: ", "))"
            return "state \(state), event \(event): chart expects \(wanted), code gives \(actual) (sample: \(sample))"
        case .unwitnessedTransition(let arrow):
            return "chart transition \(arrow) is produced by no sample pair"
        case .stateMissingFromCode(let name): return "chart state \(name) is not a State case of the code"
        case .stateMissingFromChart(let name): return "State case \(name) is missing from the chart"
        case .eventMissingFromCode(let name): return "chart event \(name) is not an Event case of the code"
        case .eventMissingFromChart(let name): return "Event case \(name) appears nowhere in the chart"
        case .stateNotSampled(let name): return "no sample state has case \(name)"
        case .eventNotSampled(let name): return "no sample event has case \(name)"
        case .unlistedState(let name): return "sample state case \(name) is missing from State.allCaseNames"
        case .unlistedEvent(let name): return "sample event case \(name) is missing from Event.allCaseNames"
        case .caseNamesDisagree(let caseName, let literal):
            return "caseName \(caseName) and caseNameLiteral \(literal) name the same case differently"
        case .chartName(let chart, let machine): return "chart is named \(chart), machine is named \(machine)"
        case .initialState(let chart, let code): return "chart starts in \(chart), code starts in \(code)"
        }
    }
}

/// Finds the package's `StateCharts/` directory from a test file's `#filePath`.
public enum ChartLocator {
    /// The nearest directory above `filePath` that contains `Package.swift`.
    public static func packageRoot(from filePath: String = #filePath) throws(ChartError) -> URL {
        var directory = URL(fileURLWithPath: filePath).deletingLastPathComponent()
        while true {
            if FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path) {
                return directory
            }
            let parent = directory.deletingLastPathComponent()
            if parent.path == directory.path { throw .packageRootNotFound(startingAt: filePath) }
            directory = parent
        }
    }

    /// The package's `StateCharts/` directory.
    public static func chartsDirectory(from filePath: String = #filePath) throws(ChartError) -> URL {
        try packageRoot(from: filePath).appendingPathComponent("StateCharts", isDirectory: true)
    }

    /// The URL of `StateCharts/<name>.scxml`; throws when the file does not exist.
    public static func chartURL(named name: String, from filePath: String = #filePath) throws(ChartError) -> URL {
        let url = try chartsDirectory(from: filePath).appendingPathComponent("\(name).scxml")
        guard FileManager.default.fileExists(atPath: url.path) else { throw .fileNotFound(url.path) }
        return url
    }
}
