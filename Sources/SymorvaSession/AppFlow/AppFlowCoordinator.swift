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
package actor AppFlowCoordinator {
    /// The flow's state, observable.
    package nonisolated var state: ObservableValue<AppFlowMachine.State> { host.states }

    /// The scope of the active account's session, or `nil` while no session runs. Product
    /// features create their hosts in this scope.
    package nonisolated var activeScope: ObservableValue<AccountScope?> { scopes.active }

    private let host: MachineHost<AppFlowMachine>
    private let scopes: AccountScopes

    /// A coordinator in `launching`; nothing happens until ``launch()``.
    ///
    /// - Parameters:
    ///   - driver: runs sign-in and the account sessions.
    ///   - clock: the clock of the flow's effects.
    ///   - tracer: where the flow's transitions are traced.
    package init(driver: any SessionDriver, clock: any RuntimeClock = SystemClock(), tracer: Tracer = .shared) {
        let scopes = AccountScopes()
        self.scopes = scopes
        self.host = MachineHost(
            machine: AppFlowMachine(), initial: .launching,
            interpreter: AppFlowInterpreter(driver: driver, scopes: scopes), clock: clock, tracer: tracer)
    }

    /// Starts the flow: restores the stored accounts and activates one.
    package func launch() async { await host.send(.launched) }

    /// Starts the sign-in flow, for a first account or one more.
    package func signIn() async { await host.send(.signInRequested) }

    /// Dismisses the sign-in flow; its late result is dropped.
    package func cancelSignIn() async { await host.send(.signInCancelled) }

    /// Makes another signed-in account the active one.
    package func switchAccount(to account: UserID) async { await host.send(.switchRequested(account)) }

    /// Signs the active account out.
    package func signOut() async { await host.send(.signOutRequested) }

    /// Stops the flow and ends every account scope with `.shutdown`.
    package func shutdown() async {
        await host.stop()
        _ = scopes.endAll(reason: .shutdown)
    }
}

// MARK: - Session driver

/// What the app flow needs from the session feature: restoring, signing in, running and
/// stopping one account's session, and forgetting an account.
///
/// The app flow decides *when*; the driver does the work. The session feature implements it
/// for real; tests and SDK users' previews implement it with a small fake.
package protocol SessionDriver: Sendable {
    /// Reads the accounts stored on this device.
    func restoreAccounts() async throws(AppFlowError) -> RestoredAccounts

    /// Runs the sign-in flow and returns the account it signed in. The task is cancelled when
    /// the member cancels; a result that arrives after that is dropped.
    func signIn(_ attempt: SignInAttempt) async throws(AppFlowError) -> UserID

    /// Starts the account's session inside `scope`: every host and effect of the session
    /// belongs to it, so that ending the scope stops them and makes their late results stale.
    func startSession(for account: UserID, in scope: AccountScope) async

    /// Winds the account's session down after its scope ended for `reason` (the scope's work
    /// is already cancelled; this stops hosts and flushes what must be kept).
    func endSession(for account: UserID, reason: AccountScope.Reason) async

    /// Revokes the account's credentials on the server where possible, forgets them on the
    /// device, and returns the accounts still signed in.
    func forgetAccount(_ account: UserID) async -> [UserID]
}

/// The account scopes the app flow has opened: one per account whose session runs.
///
/// Start and end effects run concurrently, so an end may be performed before the start it
/// pairs with (the machine emits exactly one `endSession(a)` after each `startSession(a)`).
/// An end that finds no scope is remembered and cancels the start it pairs with.
final class AccountScopes: Sendable {
    private struct Storage {
        var scopes: [UserID: AccountScope] = [:]
        var endedBeforeStart: [UserID: AccountScope.Reason] = [:]
        var active: UserID?
    }

    private let storage = Lock(Storage())
    private let activePublisher = ObservableValue<AccountScope?>.Publisher(nil)

    /// The scope of the account whose session started last and has not ended.
    var active: ObservableValue<AccountScope?> { activePublisher.observable }

    /// Opens a scope for `account` and makes it the active one; `nil` when the session was
    /// ended before it started.
    func begin(_ account: UserID) -> AccountScope? {
        let (scope, replaced) = storage.withLock { storage -> (AccountScope?, AccountScope?) in
            if storage.endedBeforeStart.removeValue(forKey: account) != nil { return (nil, nil) }
            let scope = AccountScope(label: account.rawValue)
            let replaced = storage.scopes.updateValue(scope, forKey: account)
            storage.active = account
            activePublisher.publish(scope)
            return (scope, replaced)
        }
        // Cancellers run outside the lock; a second start without an end is not expected.
        replaced?.end(reason: .shutdown)
        return scope
    }

    /// Ends the account's scope for `reason`, cancelling its work.
    func end(_ account: UserID, reason: AccountScope.Reason) {
        let scope = storage.withLock { storage -> AccountScope? in
            guard let scope = storage.scopes.removeValue(forKey: account) else {
                storage.endedBeforeStart[account] = reason
                return nil
            }
            if storage.active == account {
                storage.active = nil
                activePublisher.publish(nil)
            }
            return scope
        }
        scope?.end(reason: reason)
    }

    /// Ends every scope for `reason` and returns the accounts whose scopes ended.
    func endAll(reason: AccountScope.Reason) -> [UserID] {
        let scopes = storage.withLock { storage -> [UserID: AccountScope] in
            defer {
                storage.scopes = [:]
                storage.active = nil
                activePublisher.publish(nil)
            }
            return storage.scopes
        }
        for scope in scopes.values { scope.end(reason: reason) }
        return scopes.keys.sorted()
    }
}

/// Performs the app flow's effects with a ``SessionDriver`` and the flow's account scopes.
struct AppFlowInterpreter: EffectInterpreter {
    typealias Machine = AppFlowMachine

    let driver: any SessionDriver
    let scopes: AccountScopes

    func perform(
        _ effect: AppFlowMachine.Effect, context: EffectContext<AppFlowMachine.Event>
    ) async -> AppFlowMachine.Event? {
        switch effect {
        case .restoreAccounts:
            do {
                return .restoreFinished(try await driver.restoreAccounts())
            } catch {
                return .restoreFailed(error)
            }
        case .beginSignIn(let attempt):
            do {
                return .signInSucceeded(try await driver.signIn(attempt))
            } catch {
                return .signInFailed(error)
            }
        case .cancelSignIn:
            // The host performs cancellations itself; nothing reaches here.
            return nil
        case .startSession(let account):
            guard let scope = scopes.begin(account) else { return nil }
            await driver.startSession(for: account, in: scope)
            return .sessionStarted(account)
        case .endSession(let account, let reason):
            scopes.end(account, reason: reason)
            await driver.endSession(for: account, reason: reason)
            return nil
        case .forgetAccount(let account):
            return .signOutFinished(remaining: await driver.forgetAccount(account))
        }
    }
}
