import SymorvaRuntime

// Signed in, refreshing the access token (single-flight), and soft logout.
extension SessionMachine {
    func signedIn(_ session: Session, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .authorizationRequested, .authorizationResponse: return .ignored
        case .accessTokenRejected(let softLogout):
            guard softLogout else {
                // The server destroyed the session: nothing local may be reused (spec, soft logout).
                return enterWipe(session.userID, extra: [.cancel(Keys.refreshTimer)])
            }
            return beginRefresh(session, waiting: 1, otherwise: .softLoggedOut)
        case .refreshNeeded:
            return beginRefresh(session, waiting: 1, otherwise: .tokenExpired)
        case .refreshTimerFired:
            return beginRefresh(session, waiting: 0, otherwise: .tokenExpired)
        case .signOutRequested:
            return .move(
                to: .signingOut(session),
                effects: [.cancel(Keys.refreshTimer), .sendLogout(logoutRequest(for: session))])
        case .discoveryRequested, .wellKnownResponse, .versionsResponse, .passwordSubmitted, .loginTokenSubmitted,
            .loginResponse, .registrationRequested, .registrationResponse, .cancelRequested, .restoreRequested,
            .restored, .tokensPersisted, .storeFailed, .refreshResponse, .logoutResponse, .localDataWiped,
            .retryTimerFired:
            return .ignored
        }
    }

    /// Starts the one refresh, or soft-logs out with `error` when there is no refresh token.
    func beginRefresh(_ session: Session, waiting: Int, otherwise error: SessionError) -> Transition<State, Effect> {
        guard session.tokens.refreshToken != nil else { return enterSoftLogout(session, error: error) }
        return .move(
            to: .refreshing(session, waiting: waiting, attempt: .first),
            effects: [.cancel(Keys.refreshTimer), refreshEffect(for: session)])
    }

    /// `/refresh` with the session's saved refresh token. Only called when there is one.
    func refreshEffect(for session: Session) -> Effect {
        guard let refreshToken = session.tokens.refreshToken else {
            preconditionFailure(
                "SessionMachine: state refreshing (or signedIn on a refresh event) without a refresh token")
        }
        return .sendRefresh(RefreshRequest(homeserverURL: session.homeserver.baseURL, refreshToken: refreshToken))
    }

    /// `/logout` with the session's saved access token.
    func logoutRequest(for session: Session) -> LogoutRequest {
        LogoutRequest(homeserverURL: session.homeserver.baseURL, accessToken: session.tokens.accessToken)
    }

    func refreshing(_ session: Session, waiting: Int, attempt: Attempt, on event: Event) -> Transition<State, Effect> {
        let cancelRetry: [Effect] = attempt.isWaitingToRetry ? [.cancel(Keys.retryTimer)] : []
        switch event {
        case .authorizationRequested, .authorizationResponse: return .ignored
        case .accessTokenRejected, .refreshNeeded:
            // Single flight: every request that needs a token joins the refresh under way.
            return .move(to: .refreshing(session, waiting: waiting + 1, attempt: attempt))
        case .refreshResponse(.success(let tokens)):
            var refreshed = session
            refreshed.tokens = session.tokens.refreshed(with: tokens)
            return .move(
                to: .persisting(refreshed, origin: .refresh, waiting: waiting),
                effects: cancelRetry + [.persistSession(refreshed)])
        case .refreshResponse(.failure(let error)):
            return refreshFailed(session, waiting: waiting, attempt: attempt, error: error)
        case .retryTimerFired:
            guard attempt.isWaitingToRetry else { return .stay }
            return .move(
                to: .refreshing(session, waiting: waiting, attempt: attempt.next),
                effects: [refreshEffect(for: session)])
        case .signOutRequested:
            return .move(
                to: .signingOut(session),
                effects: [.cancel(Keys.refresh)] + cancelRetry + [.sendLogout(logoutRequest(for: session))])
        case .discoveryRequested, .wellKnownResponse, .versionsResponse, .passwordSubmitted, .loginTokenSubmitted,
            .loginResponse, .registrationRequested, .registrationResponse, .cancelRequested, .restoreRequested,
            .restored, .tokensPersisted, .storeFailed, .logoutResponse, .localDataWiped, .refreshTimerFired:
            return .ignored
        }
    }

    /// A failed `/refresh`: the token's fate decides soft or hard logout; transient failures
    /// back off and retry for as long as it takes (being offline is normal), keeping the waiters.
    func refreshFailed(_ session: Session, waiting: Int, attempt: Attempt, error: SessionError)
        -> Transition<State, Effect>
    {
        let cancelRetry: [Effect] = attempt.isWaitingToRetry ? [.cancel(Keys.retryTimer)] : []
        switch error {
        case .unknownToken(softLogout: true), .softLoggedOut:
            return enterSoftLogout(session, error: .softLoggedOut, extra: cancelRetry)
        case .unknownToken(softLogout: false):
            return enterWipe(session.userID, extra: cancelRetry)
        case .rateLimited(let retryAfter):
            return .move(
                to: .refreshing(session, waiting: waiting, attempt: attempt.waiting),
                effects: [.scheduleRetry(after: ServerWait.clamp(retryAfter) ?? backoff(attempt: attempt.number))])
        default:
            guard error.isTransient else { return enterSoftLogout(session, error: error, extra: cancelRetry) }
            return .move(
                to: .refreshing(session, waiting: waiting, attempt: attempt.waiting),
                effects: [.scheduleRetry(after: backoff(attempt: attempt.number))])
        }
    }

    func softLoggedOut(_ session: Session, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .authorizationRequested, .authorizationResponse: return .ignored
        case .passwordSubmitted(let username, let password):
            return startLogin(
                server: session.homeserver, credentials: .password(username: username, password: password),
                resuming: session)
        case .loginTokenSubmitted(let token):
            return startLogin(server: session.homeserver, credentials: .loginToken(token), resuming: session)
        case .signOutRequested:
            // The tokens are dead, so the server cannot be told; the user gives up the local data.
            return enterWipe(session.userID)
        case .discoveryRequested, .wellKnownResponse, .versionsResponse, .loginResponse, .registrationRequested,
            .registrationResponse, .cancelRequested, .restoreRequested, .restored, .tokensPersisted, .storeFailed,
            .accessTokenRejected, .refreshNeeded, .refreshResponse, .logoutResponse, .localDataWiped,
            .refreshTimerFired, .retryTimerFired:
            return .ignored
        }
    }
}

// Signing out: the server first, then the local data, whatever the server said.
extension SessionMachine {
    func signingOut(_ session: Session, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .authorizationRequested, .authorizationResponse: return .ignored
        case .logoutResponse:
            // Success, `M_UNKNOWN_TOKEN` (already gone) and failures alike lead to the wipe: the
            // user asked for this device to forget the account, and a network failure must not
            // keep their data here. An unreachable server keeps the device listed until it is
            // removed from another session; `docs/session.md` explains the choice.
            return enterWipe(session.userID)
        case .discoveryRequested, .wellKnownResponse, .versionsResponse, .passwordSubmitted, .loginTokenSubmitted,
            .loginResponse, .registrationRequested, .registrationResponse, .cancelRequested, .restoreRequested,
            .restored, .tokensPersisted, .storeFailed, .accessTokenRejected, .refreshNeeded, .refreshResponse,
            .signOutRequested, .localDataWiped, .refreshTimerFired, .retryTimerFired:
            return .ignored
        }
    }

    func wipingLocalData(on event: Event) -> Transition<State, Effect> {
        switch event {
        case .authorizationRequested, .authorizationResponse: return .ignored
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
