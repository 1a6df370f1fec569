import SymorvaRuntime

/// The app's top-level flow: which account, if any, is signed in and active.
///
/// `launching → restoring → signedOut ↔ signingIn → signedIn(account) → switching / signingOut`.
/// The flow owns the lifetime of each account's session: entering `signedIn(a)` starts `a`'s
/// session (a new account scope); switching away or signing out ends it with the matching
/// reason, which cancels the account's work and makes its late results stale. Exactly one
/// `endSession(a)` follows each `startSession(a)`.
///
/// Chart: `StateCharts/AppFlow.scxml`.
package struct AppFlowMachine: ChartedMachine {
    /// `AppFlow`.
    package static let name = "AppFlow"

    /// The key of the sign-in effect, so that cancelling sign-in drops its late result.
    package static let signInKey: EffectKey = "appFlow.signIn"
    /// The key of the session start, so that a newer start supersedes an older one.
    package static let sessionKey: EffectKey = "appFlow.session"

    /// Creates the machine.
    package init() {}

    /// Where the app is.
    package enum State: Sendable, Hashable, CaseNameListing {
        /// The process started; nothing is known yet.
        case launching
        /// Reading the stored accounts.
        case restoring
        /// No account is active. `lastError` says why the last attempt to get one failed.
        case signedOut(lastError: AppFlowError?)
        /// The sign-in flow runs; `attempt.returnTo` is the account still active meanwhile.
        case signingIn(SignInAttempt)
        /// An account is active and its session runs.
        case signedIn(UserID)
        /// Ending `from`'s session and starting `to`'s.
        case switching(from: UserID, to: UserID)
        /// Ending the account's session and forgetting its credentials.
        case signingOut(UserID)

        /// Every state case name, in declaration order.
        package static let allCaseNames = [
            "launching", "restoring", "signedOut", "signingIn", "signedIn", "switching", "signingOut",
        ]

        /// The case name, without data.
        package var caseNameLiteral: StaticString? {
            switch self {
            case .launching: "launching"
            case .restoring: "restoring"
            case .signedOut: "signedOut"
            case .signingIn: "signingIn"
            case .signedIn: "signedIn"
            case .switching: "switching"
            case .signingOut: "signingOut"
            }
        }

        /// The account whose session is (or is about to be) running in this state.
        package var activeAccount: UserID? {
            switch self {
            case .launching, .restoring, .signedOut, .signingOut: nil
            case .signingIn(let attempt): attempt.returnTo
            case .signedIn(let account): account
            case .switching(_, let account): account
            }
        }
    }

    /// What happened.
    package enum Event: Sendable, Hashable, CaseNameListing {
        /// The app finished launching; restoring may begin.
        case launched
        /// The stored accounts were read.
        case restoreFinished(RestoredAccounts)
        /// The stored accounts could not be read.
        case restoreFailed(AppFlowError)
        /// The member asked to sign in (first account, or one more).
        case signInRequested
        /// The sign-in flow produced a signed-in account.
        case signInSucceeded(UserID)
        /// The sign-in flow gave up with an error.
        case signInFailed(AppFlowError)
        /// The member dismissed the sign-in flow.
        case signInCancelled
        /// The member asked to make another signed-in account the active one.
        case switchRequested(UserID)
        /// An account's session has started (the result of ``Effect/startSession(_:)``).
        case sessionStarted(UserID)
        /// The member asked to sign the active account out.
        case signOutRequested
        /// Sign-out finished; the accounts still signed in on this device remain.
        case signOutFinished(remaining: [UserID])

        /// Every event case name, in declaration order.
        package static let allCaseNames = [
            "launched", "restoreFinished", "restoreFailed", "signInRequested", "signInSucceeded", "signInFailed",
            "signInCancelled", "switchRequested", "sessionStarted", "signOutRequested", "signOutFinished",
        ]

        /// The case name, without data.
        package var caseNameLiteral: StaticString? {
            switch self {
            case .launched: "launched"
            case .restoreFinished: "restoreFinished"
            case .restoreFailed: "restoreFailed"
            case .signInRequested: "signInRequested"
            case .signInSucceeded: "signInSucceeded"
            case .signInFailed: "signInFailed"
            case .signInCancelled: "signInCancelled"
            case .switchRequested: "switchRequested"
            case .sessionStarted: "sessionStarted"
            case .signOutRequested: "signOutRequested"
            case .signOutFinished: "signOutFinished"
            }
        }
    }

    /// What the coordinator must do.
    package enum Effect: MachineEffect, Hashable {
        /// Read the stored accounts; answers ``Event/restoreFinished(_:)`` or ``Event/restoreFailed(_:)``.
        case restoreAccounts
        /// Run the sign-in flow; answers ``Event/signInSucceeded(_:)`` or ``Event/signInFailed(_:)``.
        case beginSignIn(SignInAttempt)
        /// Stop the sign-in flow; its late result is dropped.
        case cancelSignIn
        /// Open the account's scope and start its session; answers ``Event/sessionStarted(_:)``.
        case startSession(UserID)
        /// End the account's scope for `reason` and stop its session.
        case endSession(UserID, reason: AccountScope.Reason)
        /// Revoke and forget the account's credentials; answers ``Event/signOutFinished(remaining:)``.
        case forgetAccount(UserID)

        /// How the host schedules the effect.
        package var directive: EffectDirective {
            switch self {
            case .beginSignIn: .keyed(AppFlowMachine.signInKey)
            case .cancelSignIn: .cancel(AppFlowMachine.signInKey)
            case .startSession: .keyed(AppFlowMachine.sessionKey)
            case .restoreAccounts, .endSession, .forgetAccount: .perform
            }
        }

        /// The case name, without data.
        package var caseNameLiteral: StaticString? {
            switch self {
            case .restoreAccounts: "restoreAccounts"
            case .beginSignIn: "beginSignIn"
            case .cancelSignIn: "cancelSignIn"
            case .startSession: "startSession"
            case .endSession: "endSession"
            case .forgetAccount: "forgetAccount"
            }
        }
    }

    /// Decides the outcome of `event` in `state`.
    ///
    /// Each state's function switches over every event without `default:`, so a new event does
    /// not compile until every state has decided what it means.
    package func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch state {
        case .launching: launching(on: event)
        case .restoring: restoring(on: event)
        case .signedOut: signedOut(on: event)
        case .signingIn(let attempt): signingIn(attempt, on: event)
        case .signedIn(let account): signedIn(account, on: event)
        case .switching(_, let target): switching(to: target, on: event)
        case .signingOut: signingOut(on: event)
        }
    }

    private func launching(on event: Event) -> Transition<State, Effect> {
        switch event {
        case .launched:
            .move(to: .restoring, effects: [.restoreAccounts])
        case .restoreFinished, .restoreFailed, .signInRequested, .signInSucceeded, .signInFailed, .signInCancelled,
            .switchRequested, .sessionStarted, .signOutRequested, .signOutFinished:
            .ignored
        }
    }

    private func restoring(on event: Event) -> Transition<State, Effect> {
        switch event {
        case .restoreFinished(let restored):
            activate(restored.accountToActivate, error: nil)
        case .restoreFailed(let error):
            .move(to: .signedOut(lastError: error))
        case .launched, .signInRequested, .signInSucceeded, .signInFailed, .signInCancelled, .switchRequested,
            .sessionStarted, .signOutRequested, .signOutFinished:
            .ignored
        }
    }

    private func signingIn(_ attempt: SignInAttempt, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .signInSucceeded(let account):
            guard let previous = attempt.returnTo else { return activate(account, error: nil) }
            // Signing in again to the active account keeps its session running.
            if previous == account { return .move(to: .signedIn(account)) }
            return .move(
                to: .signedIn(account), effects: [.endSession(previous, reason: .switched), .startSession(account)])
        case .signInFailed(let error):
            return .move(to: attempt.returnTo.map(State.signedIn) ?? .signedOut(lastError: error))
        case .signInCancelled:
            return .move(
                to: attempt.returnTo.map(State.signedIn) ?? .signedOut(lastError: nil), effects: [.cancelSignIn])
        case .launched, .restoreFinished, .restoreFailed, .signInRequested, .switchRequested, .sessionStarted,
            .signOutRequested, .signOutFinished:
            return .ignored
        }
    }

    private func signedOut(on event: Event) -> Transition<State, Effect> {
        switch event {
        case .signInRequested:
            .move(to: .signingIn(SignInAttempt(returnTo: nil)), effects: [.beginSignIn(SignInAttempt(returnTo: nil))])
        case .launched, .restoreFinished, .restoreFailed, .signInSucceeded, .signInFailed, .signInCancelled,
            .switchRequested, .sessionStarted, .signOutRequested, .signOutFinished:
            .ignored
        }
    }

    private func switching(to target: UserID, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .sessionStarted(let account):
            // A start for another account is a superseded one: the switch is not done yet.
            account == target ? .move(to: .signedIn(target)) : .stay
        case .launched, .restoreFinished, .restoreFailed, .signInRequested, .signInSucceeded, .signInFailed,
            .signInCancelled, .switchRequested, .signOutRequested, .signOutFinished:
            .ignored
        }
    }

    private func signingOut(on event: Event) -> Transition<State, Effect> {
        switch event {
        case .signOutFinished(let remaining):
            activate(remaining.first, error: nil)
        case .launched, .restoreFinished, .restoreFailed, .signInRequested, .signInSucceeded, .signInFailed,
            .signInCancelled, .switchRequested, .sessionStarted, .signOutRequested:
            .ignored
        }
    }

    private func signedIn(_ account: UserID, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .signInRequested:
            let attempt = SignInAttempt(returnTo: account)
            return .move(to: .signingIn(attempt), effects: [.beginSignIn(attempt)])
        case .switchRequested(let target):
            guard target != account else { return .stay }
            return .move(
                to: .switching(from: account, to: target),
                effects: [.endSession(account, reason: .switched), .startSession(target)])
        case .signOutRequested:
            return .move(
                to: .signingOut(account), effects: [.endSession(account, reason: .signedOut), .forgetAccount(account)])
        case .launched, .restoreFinished, .restoreFailed, .signInSucceeded, .signInFailed, .signInCancelled,
            .sessionStarted, .signOutFinished:
            return .ignored
        }
    }

    /// Enters `signedIn(account)` and starts its session, or `signedOut` when there is none.
    private func activate(_ account: UserID?, error: AppFlowError?) -> Transition<State, Effect> {
        guard let account else { return .move(to: .signedOut(lastError: error)) }
        return .move(to: .signedIn(account), effects: [.startSession(account)])
    }
}

// MARK: - Values of the flow

/// One run of the sign-in flow, and where to go back to if it does not end with an account.
package struct SignInAttempt: Hashable, Sendable {
    /// The account that was active when sign-in started (adding a second account), or `nil`
    /// when nobody was signed in. Cancelling or failing returns to it.
    package var returnTo: UserID?

    /// Creates an attempt.
    package init(returnTo: UserID? = nil) { self.returnTo = returnTo }
}

/// Why the app flow could not reach a signed-in account.
package enum AppFlowError: Error, Hashable, Sendable {
    /// The stored accounts could not be read (store missing, corrupt or locked).
    case storeUnavailable
    /// The homeserver rejected the credentials.
    case credentialsRejected
    /// The homeserver could not be reached or answered with an unusable response.
    case serverUnreachable
    /// The session feature failed for a reason it reports itself.
    case sessionFailed
}

/// What restoring found on the device.
package struct RestoredAccounts: Hashable, Sendable {
    /// Every account with stored credentials, in the order the member added them.
    package var accounts: [UserID]
    /// The account that was active when the app last ran, if any.
    package var active: UserID?

    /// Creates a restore result.
    package init(accounts: [UserID], active: UserID?) {
        self.accounts = accounts
        self.active = active
    }

    /// The account to activate: the last active one if it still has credentials, else the
    /// first stored one, else none.
    package var accountToActivate: UserID? {
        if let active, accounts.contains(active) { return active }
        return accounts.first
    }
}
