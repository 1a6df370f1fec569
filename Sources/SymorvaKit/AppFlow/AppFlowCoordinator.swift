import SymorvaMachines
import SymorvaRuntime

/// Runs the app's top-level flow: restores accounts at launch, signs in, switches and signs out,
/// and gives each signed-in account its own ``AccountScope``.
///
/// The coordinator hosts ``AppFlowMachine`` in a ``MachineHost``. Its effects open a scope when
/// an account's session starts and end it — with `.switched` or `.signedOut` — when the member
/// moves away from the account, through the ``SessionDriver`` that runs the sessions. Ending a
/// scope cancels the account's work; a result of that work that still arrives is traced as
/// stale and never applied, to that account or to the next one.
///
/// ```swift
/// let flow = AppFlowCoordinator(driver: sessions)
/// await flow.launch()
/// for await state in flow.state.values { render(state) }
/// ```
public actor AppFlowCoordinator {
    /// The flow's state, observable.
    public nonisolated var state: ObservableValue<AppFlowMachine.State> { host.states }

    /// The scope of the active account's session, or `nil` while no session runs. Product
    /// features create their hosts in this scope.
    public nonisolated var activeScope: ObservableValue<AccountScope?> { scopes.active }

    private let host: MachineHost<AppFlowMachine>
    private let scopes: AccountScopes

    /// A coordinator in `launching`; nothing happens until ``launch()``.
    ///
    /// - Parameters:
    ///   - driver: runs sign-in and the account sessions.
    ///   - clock: the clock of the flow's effects.
    ///   - tracer: where the flow's transitions are traced.
    public init(driver: any SessionDriver, clock: any RuntimeClock = SystemClock(), tracer: Tracer = .shared) {
        let scopes = AccountScopes()
        self.scopes = scopes
        self.host = MachineHost(
            machine: AppFlowMachine(), initial: .launching,
            interpreter: AppFlowInterpreter(driver: driver, scopes: scopes), clock: clock, tracer: tracer)
    }

    /// Starts the flow: restores the stored accounts and activates one.
    public func launch() async { await host.send(.launched) }

    /// Starts the sign-in flow, for a first account or one more.
    public func signIn() async { await host.send(.signInRequested) }

    /// Dismisses the sign-in flow; its late result is dropped.
    public func cancelSignIn() async { await host.send(.signInCancelled) }

    /// Makes another signed-in account the active one.
    public func switchAccount(to account: AccountID) async { await host.send(.switchRequested(account)) }

    /// Signs the active account out.
    public func signOut() async { await host.send(.signOutRequested) }

    /// Stops the flow and ends every account scope with `.shutdown`.
    public func shutdown() async {
        await host.stop()
        _ = scopes.endAll(reason: .shutdown)
    }
}
