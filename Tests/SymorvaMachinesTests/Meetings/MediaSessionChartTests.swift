import SymorvaMachines
import SymorvaTesting
import Testing

@Suite("Media session chart")
struct MediaSessionChartTests {
    @Test("Every (state, event) pair of MediaSession matches StateCharts/MediaSession.scxml")
    func conforms() throws {
        let checker = try ChartChecker(machine: MediaFixture.machine)
        try checker.assertConforms(
            states: MediaFixture.sampleStates, events: MediaFixture.sampleEvents, initial: .idle(MediaFixture.call()))
    }

    @Test("The checker notices a broken chart: negotiating → connected on ICE changed to closed fails")
    func checkerIsSharp() throws {
        let checker = try ChartChecker(machine: MediaFixture.machine)
        var chart = checker.chart
        let index = try #require(
            chart.transitions.firstIndex { $0.source == "negotiating" && $0.target == "connected" })
        chart.transitions[index].target = "closed"
        let found = ChartChecker(machine: MediaFixture.machine, chart: chart).mismatches(
            states: MediaFixture.sampleStates, events: MediaFixture.sampleEvents)
        #expect(!found.isEmpty)
    }
}
