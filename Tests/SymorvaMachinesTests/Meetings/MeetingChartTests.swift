import SymorvaMachines
import SymorvaTesting
import Testing

@Suite("Meeting chart")
struct MeetingChartTests {
    @Test("Every (state, event) pair of Meeting matches StateCharts/Meeting.scxml")
    func conforms() throws {
        let checker = try ChartChecker(machine: MeetingFixture.machine)
        try checker.assertConforms(
            states: MeetingFixture.sampleStates, events: MeetingFixture.sampleEvents, initial: .idle)
    }

    @Test("The checker notices a broken chart: promoting → stage changed to demoting fails")
    func checkerIsSharp() throws {
        let checker = try ChartChecker(machine: MeetingFixture.machine)
        var chart = checker.chart
        let index = try #require(chart.transitions.firstIndex { $0.source == "promoting" && $0.target == "stage" })
        chart.transitions[index].target = "demoting"
        let found = ChartChecker(machine: MeetingFixture.machine, chart: chart).mismatches(
            states: MeetingFixture.sampleStates, events: MeetingFixture.sampleEvents)
        #expect(!found.isEmpty)
    }
}
