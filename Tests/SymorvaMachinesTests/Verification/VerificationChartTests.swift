import SymorvaMachines
import SymorvaTesting
import Testing

@Suite("Verification chart")
struct VerificationChartTests {
    @Test("Every (state, event) pair of Verification matches StateCharts/Verification.scxml")
    func conforms() throws {
        let checker = try ChartChecker(machine: VerificationMachine())
        try checker.assertConforms(
            states: VerificationFixture.sampleStates, events: VerificationFixture.sampleEvents, initial: .idle)
    }

    @Test("The checker notices a broken chart: a mismatched commitment charted as comparing fails")
    func checkerIsSharp() throws {
        let checker = try ChartChecker(machine: VerificationMachine())
        var chart = checker.chart
        let index = try #require(
            chart.transitions.firstIndex {
                $0.source == "keySent" && $0.event == "keyReceived" && $0.target == "cancelled"
            })
        chart.transitions.remove(at: index)
        let found = ChartChecker(machine: VerificationMachine(), chart: chart).mismatches(
            states: VerificationFixture.sampleStates, events: VerificationFixture.sampleEvents)
        #expect(!found.isEmpty)
    }
}
