import SymorvaMachines
import SymorvaTesting
import Testing

@Suite("Pusher chart")
struct PusherChartTests {
    @Test("Every (state, event) pair of Pusher matches StateCharts/Pusher.scxml")
    func conforms() throws {
        let checker = try ChartChecker(machine: PusherMachine())
        try checker.assertConforms(
            states: PusherFixture.sampleStates, events: PusherFixture.sampleEvents, initial: .unregistered)
    }

    @Test("The checker notices a broken chart: removing → unregistered changed to registered fails")
    func checkerIsSharp() throws {
        let checker = try ChartChecker(machine: PusherMachine())
        var chart = checker.chart
        let index = try #require(
            chart.transitions.firstIndex { $0.source == "removing" && $0.target == "unregistered" })
        chart.transitions[index].target = "registered"
        let found = ChartChecker(machine: PusherMachine(), chart: chart).mismatches(
            states: PusherFixture.sampleStates, events: PusherFixture.sampleEvents)
        #expect(!found.isEmpty)
    }
}
