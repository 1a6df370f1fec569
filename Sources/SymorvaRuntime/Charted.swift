/// A state or event type that can list every one of its case names.
///
/// The chart checker uses the list to prove that a test's samples cover every case and that
/// the chart in `StateCharts/` names exactly the cases the code has. Swift cannot enumerate
/// the cases of an enum with associated values, so the type lists them itself; keep the list
/// next to an exhaustive `caseName` switch so that adding a case breaks the build until both
/// are updated.
public protocol CaseNameListing: CaseNamed {
    /// Every case name of the type, in declaration order.
    static var allCaseNames: [String] { get }
}

/// A machine with a chart: `StateCharts/<name>.scxml` describes every (state, event) pair.
///
/// Adopting the protocol is how a machine opts into the chart conformance check
/// (`ChartChecker` in `SymorvaTesting`), which every machine of the SDK must pass.
public protocol ChartedMachine: StateMachine where State: CaseNameListing, Event: CaseNameListing {}
