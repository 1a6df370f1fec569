import SymorvaMachines
import SymorvaTesting
import Testing

@Suite("DirectorySearch chart")
struct DirectorySearchChartTests {
    @Test("Every (state, event) pair of DirectorySearch matches StateCharts/DirectorySearch.scxml")
    func conforms() throws {
        let checker = try ChartChecker(machine: SearchMachine())
        try checker.assertConforms(
            states: SearchFixture.sampleStates, events: SearchFixture.sampleEvents, initial: .idle(generation: 0))
    }

    @Test("The checker notices a broken chart: a stale page in searching changed to loaded fails")
    func checkerIsSharp() throws {
        let checker = try ChartChecker(machine: SearchMachine())
        var chart = checker.chart
        let index = try #require(
            chart.transitions.firstIndex { $0.source == "searching" && $0.event == "pageLoaded" && $0.target == nil })
        chart.transitions.remove(at: index)
        let found = ChartChecker(machine: SearchMachine(), chart: chart).mismatches(
            states: SearchFixture.sampleStates, events: SearchFixture.sampleEvents)
        #expect(!found.isEmpty)
    }
}
