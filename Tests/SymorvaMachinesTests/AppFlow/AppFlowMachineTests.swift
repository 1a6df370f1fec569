import SymorvaMachines
import SymorvaTesting
import Testing

private let alice: UserID = "@alice:example.org"
private let bob: UserID = "@bob:example.org"
private let carol: UserID = "@carol:example.org"

private func store(_ initial: AppFlowMachine.State) -> MachineTestStore<AppFlowMachine> {
    MachineTestStore(AppFlowMachine(), initial: initial)
}

@Suite("AppFlow machine: launch and restore")
struct AppFlowRestoreTests {
    @Test("Launching starts restoring the stored accounts")
    func launch() throws {
        let store = store(.launching)
        try store.send(.launched, expecting: .restoring, effects: [.restoreAccounts])
    }

    @Test("Restore activates the account that was active last time and starts its session")
    func restoreActive() throws {
        let store = store(.restoring)
        try store.send(
            .restoreFinished(RestoredAccounts(accounts: [alice, bob], active: bob)), expecting: .signedIn(bob),
            effects: [.startSession(bob)])
    }

    @Test("Restore falls back to the first stored account when the active one is gone")
    func restoreFallback() throws {
        let store = store(.restoring)
        try store.send(
            .restoreFinished(RestoredAccounts(accounts: [alice, bob], active: carol)), expecting: .signedIn(alice),
            effects: [.startSession(alice)])
    }

    @Test("Restore without stored accounts lands signed out without an error")
    func restoreEmpty() throws {
        let store = store(.restoring)
        try store.send(
            .restoreFinished(RestoredAccounts(accounts: [], active: nil)), expecting: .signedOut(lastError: nil))
    }

    @Test("A failed restore lands signed out with the error")
    func restoreFailed() throws {
        let store = store(.restoring)
        try store.send(.restoreFailed(.storeUnavailable), expecting: .signedOut(lastError: .storeUnavailable))
    }

    @Test("Launching and restoring ignore member requests and stray results")
    func earlyEventsIgnored() throws {
        try store(.launching).assertIgnored([
            .signInRequested, .signOutRequested, .switchRequested(alice), .sessionStarted(alice),
            .restoreFinished(RestoredAccounts(accounts: [alice], active: alice)),
        ])
        try store(.restoring).assertIgnored([
            .launched, .signInRequested, .signOutRequested, .switchRequested(alice), .signInSucceeded(alice),
        ])
    }
}

@Suite("AppFlow machine: sign-in")
struct AppFlowSignInTests {
    @Test("Signing in from signed out runs the sign-in flow with nobody to return to")
    func signInRequested() throws {
        let store = store(.signedOut(lastError: .credentialsRejected))
        try store.send(
            .signInRequested, expecting: .signingIn(SignInAttempt(returnTo: nil)),
            effects: [.beginSignIn(SignInAttempt(returnTo: nil))])
    }

    @Test("A successful first sign-in activates the account and starts its session")
    func firstSignIn() throws {
        let store = store(.signingIn(SignInAttempt(returnTo: nil)))
        try store.send(.signInSucceeded(alice), expecting: .signedIn(alice), effects: [.startSession(alice)])
    }

    @Test("A failed first sign-in returns to signed out with the error")
    func firstSignInFails() throws {
        let store = store(.signingIn(SignInAttempt(returnTo: nil)))
        try store.send(.signInFailed(.serverUnreachable), expecting: .signedOut(lastError: .serverUnreachable))
        try store.send(
            .signInRequested, expecting: .signingIn(SignInAttempt()), effects: [.beginSignIn(SignInAttempt())])
    }

    @Test("Cancelling a first sign-in stops the flow and returns to signed out")
    func firstSignInCancelled() throws {
        let store = store(.signingIn(SignInAttempt(returnTo: nil)))
        try store.send(.signInCancelled, expecting: .signedOut(lastError: nil), effects: [.cancelSignIn])
    }

    @Test("Adding an account keeps the active one until the new one signs in, then switches")
    func addAccount() throws {
        let store = store(.signedIn(alice))
        try store.send(
            .signInRequested, expecting: .signingIn(SignInAttempt(returnTo: alice)),
            effects: [.beginSignIn(SignInAttempt(returnTo: alice))])
        try store.send(
            .signInSucceeded(bob), expecting: .signedIn(bob),
            effects: [.endSession(alice, reason: .switched), .startSession(bob)])
    }

    @Test("Signing in again to the active account keeps its session running")
    func signInSameAccount() throws {
        let store = store(.signingIn(SignInAttempt(returnTo: alice)))
        try store.send(.signInSucceeded(alice), expecting: .signedIn(alice))
    }

    @Test("A failed or cancelled extra sign-in returns to the active account")
    func extraSignInFailsOrCancels() throws {
        let failing = store(.signingIn(SignInAttempt(returnTo: alice)))
        try failing.send(.signInFailed(.credentialsRejected), expecting: .signedIn(alice))
        let cancelling = store(.signingIn(SignInAttempt(returnTo: alice)))
        try cancelling.send(.signInCancelled, expecting: .signedIn(alice), effects: [.cancelSignIn])
    }

    @Test("While signing in, other requests and stray results are ignored")
    func signingInIgnores() throws {
        try store(.signingIn(SignInAttempt(returnTo: alice))).assertIgnored([
            .launched, .signInRequested, .switchRequested(bob), .signOutRequested, .sessionStarted(alice),
            .signOutFinished(remaining: []), .restoreFailed(.storeUnavailable),
        ])
    }

    @Test("Signed out ignores everything but a sign-in request")
    func signedOutIgnores() throws {
        try store(.signedOut(lastError: nil)).assertIgnored([
            .launched, .signInSucceeded(alice), .signInFailed(.sessionFailed), .signInCancelled,
            .switchRequested(alice), .signOutRequested, .sessionStarted(alice), .signOutFinished(remaining: [alice]),
        ])
    }
}

@Suite("AppFlow machine: switching and signing out")
struct AppFlowSwitchTests {
    @Test("Switching ends the active session as switched and starts the other")
    func switchAccount() throws {
        let store = store(.signedIn(alice))
        try store.send(
            .switchRequested(bob), expecting: .switching(from: alice, to: bob),
            effects: [.endSession(alice, reason: .switched), .startSession(bob)])
        try store.send(.sessionStarted(bob), expecting: .signedIn(bob))
    }

    @Test("Switching to the active account changes nothing")
    func switchToSelf() throws {
        let store = store(.signedIn(alice))
        try store.send(.switchRequested(alice), stayingWith: [])
    }

    @Test("A superseded session start does not finish the switch")
    func supersededStart() throws {
        let store = store(.switching(from: alice, to: bob))
        try store.send(.sessionStarted(alice), stayingWith: [])
        try store.send(.sessionStarted(bob), expecting: .signedIn(bob))
    }

    @Test("While switching, requests wait for the switch to finish")
    func switchingIgnores() throws {
        try store(.switching(from: alice, to: bob)).assertIgnored([
            .switchRequested(carol), .signInRequested, .signOutRequested, .signInSucceeded(carol),
            .signOutFinished(remaining: []),
        ])
    }

    @Test("A signed-in account ignores its own session start and stray results")
    func signedInIgnores() throws {
        try store(.signedIn(alice)).assertIgnored([
            .launched, .sessionStarted(alice), .signInSucceeded(bob), .signInCancelled,
            .signOutFinished(remaining: []), .restoreFinished(RestoredAccounts(accounts: [bob], active: bob)),
        ])
    }

    @Test("Signing out ends the session as signed out and forgets the account")
    func signOut() throws {
        let store = store(.signedIn(alice))
        try store.send(
            .signOutRequested, expecting: .signingOut(alice),
            effects: [.endSession(alice, reason: .signedOut), .forgetAccount(alice)])
        try store.send(.signOutFinished(remaining: []), expecting: .signedOut(lastError: nil))
    }

    @Test("Signing out with other accounts left activates the first of them")
    func signOutWithRemaining() throws {
        let store = store(.signingOut(alice))
        try store.send(
            .signOutFinished(remaining: [carol, bob]), expecting: .signedIn(carol), effects: [.startSession(carol)])
    }

    @Test("While signing out, requests are ignored")
    func signingOutIgnores() throws {
        try store(.signingOut(alice)).assertIgnored([
            .signInRequested, .signOutRequested, .switchRequested(bob), .sessionStarted(alice), .launched,
        ])
    }

    @Test("A whole session: launch, sign in, add an account, switch back, sign out twice")
    func wholeSession() throws {
        let store = store(.launching)
        try store.send(.launched, expecting: .restoring, effects: [.restoreAccounts])
        try store.send(
            .restoreFinished(RestoredAccounts(accounts: [], active: nil)), expecting: .signedOut(lastError: nil))
        try store.send(
            .signInRequested, expecting: .signingIn(SignInAttempt()), effects: [.beginSignIn(SignInAttempt())])
        try store.send(.signInSucceeded(alice), expecting: .signedIn(alice), effects: [.startSession(alice)])
        try store.assertIgnored(.sessionStarted(alice))
        try store.send(
            .signInRequested, expecting: .signingIn(SignInAttempt(returnTo: alice)),
            effects: [.beginSignIn(SignInAttempt(returnTo: alice))])
        try store.send(
            .signInSucceeded(bob), expecting: .signedIn(bob),
            effects: [.endSession(alice, reason: .switched), .startSession(bob)])
        try store.send(
            .switchRequested(alice), expecting: .switching(from: bob, to: alice),
            effects: [.endSession(bob, reason: .switched), .startSession(alice)])
        try store.send(.sessionStarted(alice), expecting: .signedIn(alice))
        try store.send(
            .signOutRequested, expecting: .signingOut(alice),
            effects: [.endSession(alice, reason: .signedOut), .forgetAccount(alice)])
        try store.send(.signOutFinished(remaining: [bob]), expecting: .signedIn(bob), effects: [.startSession(bob)])
        try store.send(
            .signOutRequested, expecting: .signingOut(bob),
            effects: [.endSession(bob, reason: .signedOut), .forgetAccount(bob)])
        try store.send(.signOutFinished(remaining: []), expecting: .signedOut(lastError: nil))
    }
}

@Suite("AppFlow machine: names and effects")
struct AppFlowNamingTests {
    @Test("Case names carry no data and the effect directives use the flow's keys")
    func names() {
        #expect(AppFlowMachine.State.signedIn(alice).caseName == "signedIn")
        #expect(AppFlowMachine.Event.signOutFinished(remaining: [alice]).caseName == "signOutFinished")
        #expect(AppFlowMachine.Effect.endSession(alice, reason: .switched).caseName == "endSession")
        #expect(AppFlowMachine.Effect.beginSignIn(SignInAttempt()).directive == .keyed(AppFlowMachine.signInKey))
        #expect(AppFlowMachine.Effect.cancelSignIn.directive == .cancel(AppFlowMachine.signInKey))
        #expect(AppFlowMachine.Effect.startSession(alice).directive == .keyed(AppFlowMachine.sessionKey))
        #expect(AppFlowMachine.Effect.forgetAccount(alice).directive == .perform)
        #expect(AppFlowMachine.State.switching(from: alice, to: bob).activeAccount == bob)
        #expect(AppFlowMachine.State.signingOut(alice).activeAccount == nil)
    }
}
