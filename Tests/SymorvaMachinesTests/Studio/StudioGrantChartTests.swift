import SymorvaMachines
import SymorvaTesting
import Testing

@Suite("StudioGrant chart")
struct StudioGrantChartTests {
    @Test("Every (state, event) pair of StudioGrant matches StateCharts/StudioGrant.scxml")
    func conformsToChart() throws {
        try ChartChecker(machine: StudioGrantMachine())
            .assertConforms(states: StudioFixture.sampleStates, events: StudioFixture.sampleEvents, initial: .idle)
    }

    @Test("The checker notices a broken chart: awaitingConsent skipped (idle → requestingGrant) fails")
    func checkerIsSharp() throws {
        let checker = try ChartChecker(machine: StudioGrantMachine())
        var chart = checker.chart
        let index = try #require(chart.transitions.firstIndex { $0.source == "idle" && $0.target == "awaitingConsent" })
        chart.transitions[index].target = "requestingGrant"
        let found = ChartChecker(machine: StudioGrantMachine(), chart: chart).mismatches(
            states: StudioFixture.sampleStates, events: StudioFixture.sampleEvents)
        #expect(!found.isEmpty)
    }
}
