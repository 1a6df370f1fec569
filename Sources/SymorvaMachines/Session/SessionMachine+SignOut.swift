import SymorvaRuntime

// Signing out: the server first, then the local data, whatever the server said.
extension SessionMachine {
    func signingOut(_ session: Session, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .logoutResponse:
            // Success, `M_UNKNOWN_TOKEN` (already gone) and failures alike lead to the wipe: the
            // user asked for this device to forget the account, and a network failure must not
            // keep their data here. An unreachable server keeps the device listed until it is
            // removed from another session; `docs/session.md` explains the choice.
            return enterWipe(session.accountID)
        case .discoveryRequested, .wellKnownResponse, .versionsResponse, .passwordSubmitted, .loginTokenSubmitted,
            .loginResponse, .registrationRequested, .registrationResponse, .cancelRequested, .restoreRequested,
            .restored, .tokensPersisted, .storeFailed, .accessTokenRejected, .refreshNeeded, .refreshResponse,
            .signOutRequested, .localDataWiped, .refreshTimerFired, .retryTimerFired:
            return .ignored
        }
    }

    func wipingLocalData(on event: Event) -> Transition<State, Effect> {
        switch event {
        case .localDataWiped:
            return .move(to: .signedOut)
        case .storeFailed(let error):
            return .move(to: .failed(from: .signOut, error: error, server: nil))
        case .discoveryRequested, .wellKnownResponse, .versionsResponse, .passwordSubmitted, .loginTokenSubmitted,
            .loginResponse, .registrationRequested, .registrationResponse, .cancelRequested, .restoreRequested,
            .restored, .tokensPersisted, .accessTokenRejected, .refreshNeeded, .refreshResponse, .signOutRequested,
            .logoutResponse, .refreshTimerFired, .retryTimerFired:
            return .ignored
        }
    }
}
