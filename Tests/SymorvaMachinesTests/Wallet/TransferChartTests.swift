import SymorvaMachines
import SymorvaTesting
import Testing

@Suite("Transfer chart")
struct TransferChartTests {
    @Test("Every (state, event) pair of Transfer matches StateCharts/Transfer.scxml, without a biometric verifier")
    func conformsWithoutBiometrics() throws {
        let checker = try ChartChecker(machine: Fixture.machine)
        try checker.assertConforms(states: Fixture.sampleStates, events: Fixture.sampleEvents, initial: .idle)
    }

    @Test("Every (state, event) pair of Transfer matches the chart with a biometric verifier present")
    func conformsWithBiometrics() throws {
        let checker = try ChartChecker(machine: Fixture.biometricMachine)
        let mismatches = checker.mismatches(states: Fixture.sampleStates, events: Fixture.sampleEvents, initial: .idle)
        // Without biometric samples some chart alternatives are witnessed only by the other configuration.
        let real = mismatches.filter {
            if case .unwitnessedTransition = $0 { return false }
            return true
        }
        #expect(real.isEmpty, "\(real.map(\.description).joined(separator: "\n"))")
    }

    @Test("The checker notices a broken chart: unknown → querying changed to confirming fails")
    func checkerIsSharp() throws {
        let checker = try ChartChecker(machine: Fixture.machine)
        var chart = checker.chart
        let index = try #require(
            chart.transitions.firstIndex { $0.source == "unknown" && $0.target == "querying" })
        chart.transitions[index].target = "confirming"
        let found = ChartChecker(machine: Fixture.machine, chart: chart).mismatches(
            states: Fixture.sampleStates, events: Fixture.sampleEvents)
        #expect(!found.isEmpty)
    }
}
