import SymorvaMachines
import SymorvaTesting
import Testing

@Suite("AppFlow chart")
struct AppFlowChartTests {
    static let alice: UserID = "@alice:example.org"
    static let bob: UserID = "@bob:example.org"

    /// Sample states: every case, with the data that takes every guarded branch.
    static let states: [AppFlowMachine.State] = [
        .launching, .restoring, .signedOut(lastError: nil), .signedOut(lastError: .credentialsRejected),
        .signingIn(SignInAttempt(returnTo: nil)), .signingIn(SignInAttempt(returnTo: alice)),
        .signingIn(SignInAttempt(returnTo: bob)), .signedIn(alice), .signedIn(bob),
        .switching(from: alice, to: bob), .signingOut(alice),
    ]

    /// Sample events: every case, with the data that takes every guarded branch.
    static let events: [AppFlowMachine.Event] = [
        .launched,
        .restoreFinished(RestoredAccounts(accounts: [alice, bob], active: bob)),
        .restoreFinished(RestoredAccounts(accounts: [], active: nil)),
        .restoreFailed(.storeUnavailable),
        .signInRequested, .signInSucceeded(alice), .signInSucceeded(bob), .signInFailed(.credentialsRejected),
        .signInCancelled, .switchRequested(alice), .switchRequested(bob), .sessionStarted(alice),
        .sessionStarted(bob), .signOutRequested, .signOutFinished(remaining: []), .signOutFinished(remaining: [bob]),
    ]

    @Test("Every (state, event) pair of AppFlow matches StateCharts/AppFlow.scxml")
    func conformsToChart() throws {
        let checker = try ChartChecker(machine: AppFlowMachine())
        try checker.assertConforms(states: Self.states, events: Self.events, initial: .launching)
    }

    @Test("The checker would notice a broken AppFlow: a chart with one arrow changed fails")
    func checkerIsSharp() throws {
        let checker = try ChartChecker(machine: AppFlowMachine())
        var chart = checker.chart
        let index = try #require(
            chart.transitions.firstIndex { $0.source == "signedIn" && $0.event == "signOutRequested" })
        chart.transitions[index].target = "signedOut"
        let found = ChartChecker(machine: AppFlowMachine(), chart: chart).mismatches(
            states: Self.states, events: Self.events)
        #expect(
            found.contains {
                $0.description.hasPrefix(
                    "state signedIn, event signOutRequested: chart expects signedOut, code gives signingOut")
            })
    }
}
