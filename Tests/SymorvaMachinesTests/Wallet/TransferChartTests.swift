import Foundation
import SymorvaMachines
import Testing

/// A minimal conformance check of `StateCharts/Transfer.scxml` against the machine, for every
/// sampled (state, event) pair. SymorvaTesting's `ChartChecker` replaces it when it lands.
@Suite("Transfer chart")
struct TransferChartTests {
    /// The chart's transitions: (state id, event name) → targets, `nil` for a targetless stay.
    struct Chart {
        var initial = ""
        var states: [String] = []
        var transitions: [Pair: [String?]] = [:]
    }

    struct Pair: Hashable {
        let state: String
        let event: String
    }

    static func loadChart() throws -> Chart {
        let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appending(path: "StateCharts/Transfer.scxml"), encoding: .utf8)
        var chart = Chart()
        var current: String?
        for line in text.split(separator: "\n") {
            if let match = line.firstMatch(of: /<scxml [^>]*initial="([^"]+)"/) { chart.initial = String(match.1) }
            if let match = line.firstMatch(of: /<state id="([^"]+)"/) {
                current = String(match.1)
                chart.states.append(String(match.1))
            }
            if let match = line.firstMatch(of: /<transition event="([^"]+)"(?: target="([^"]+)")?/), let current {
                chart.transitions[Pair(state: current, event: String(match.1)), default: []].append(
                    match.2.map(String.init))
            }
        }
        return chart
    }

    @Test("The chart names every state and only the machine's states and events")
    func names() throws {
        let chart = try Self.loadChart()
        #expect(chart.initial == "idle")
        #expect(chart.states == TransferMachine.stateCaseNames)
        for pair in chart.transitions.keys {
            #expect(TransferMachine.eventCaseNames.contains(pair.event), "unknown event \(pair.event)")
            for target in chart.transitions[pair] ?? [] {
                if let target { #expect(TransferMachine.stateCaseNames.contains(target)) }
            }
        }
    }

    @Test("Every sampled (state, event) pair does what the chart says, and every chart edge is used")
    func conformance() throws {
        let chart = try Self.loadChart()
        var used = Set<String>()
        for machine in [Fixture.machine, Fixture.biometricMachine] {
            for state in Fixture.sampleStates {
                for event in Fixture.sampleEvents {
                    let pair = Pair(state: state.caseName, event: event.caseName)
                    let allowed = chart.transitions[pair] ?? []
                    let transition = machine.transition(from: state, on: event)
                    let label = "\(pair.state) --\(pair.event)-->"
                    switch transition {
                    case .ignored:
                        #expect(allowed.isEmpty, "\(label) is ignored by the machine but in the chart")
                    case .stay:
                        #expect(allowed.contains(nil), "\(label) stays in the machine but not in the chart")
                        used.insert("\(label) (stay)")
                    case .move(let next, _):
                        #expect(allowed.contains(next.caseName), "\(label) \(next.caseName) is not in the chart")
                        used.insert("\(label) \(next.caseName)")
                    }
                }
            }
        }
        let edges = chart.transitions.flatMap { pair, targets in
            targets.map { "\(pair.state) --\(pair.event)--> \($0 ?? "(stay)")" }
        }
        for edge in edges { #expect(used.contains(edge), "chart edge never taken by a sample: \(edge)") }
    }
}
