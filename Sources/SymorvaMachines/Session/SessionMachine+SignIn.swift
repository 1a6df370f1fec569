import SymorvaRuntime

// The signed-out side of the machine: restore, discovery, waiting for credentials, failure.
extension SessionMachine {
    func signedOut(on event: Event) -> Transition<State, Effect> {
        switch event {
        case .authorizationRequested, .authorizationResponse: return .ignored
        case .discoveryRequested(let target):
            return startDiscovery(target)
        case .restoreRequested(let account):
            return .move(to: .restoring(account), effects: [.loadStoredSession(account)])
        case .wellKnownResponse, .versionsResponse, .passwordSubmitted, .loginTokenSubmitted, .loginResponse,
            .registrationRequested, .registrationResponse, .cancelRequested, .restored, .tokensPersisted, .storeFailed,
            .accessTokenRejected, .refreshNeeded, .refreshResponse, .signOutRequested, .logoutResponse,
            .localDataWiped, .refreshTimerFired, .retryTimerFired:
            return .ignored
        }
    }

    func restoring(on event: Event) -> Transition<State, Effect> {
        switch event {
        case .authorizationRequested, .authorizationResponse: return .ignored
        case .restored(let stored):
            guard let stored else { return .move(to: .signedOut) }
            // A session saved while soft logged out comes back soft logged out: its tokens are dead.
            if stored.isSoftLoggedOut { return .move(to: .softLoggedOut(stored.session, lastError: .softLoggedOut)) }
            return enterSignedIn(stored.session)
        case .storeFailed(let error):
            return .move(to: .failed(from: .restore, error: error, server: nil))
        case .discoveryRequested, .wellKnownResponse, .versionsResponse, .passwordSubmitted, .loginTokenSubmitted,
            .loginResponse, .registrationRequested, .registrationResponse, .cancelRequested, .restoreRequested,
            .tokensPersisted, .accessTokenRejected, .refreshNeeded, .refreshResponse, .signOutRequested,
            .logoutResponse, .localDataWiped, .refreshTimerFired, .retryTimerFired:
            return .ignored
        }
    }

    func discovering(target: ServerAddress, step: DiscoveryStep, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .authorizationRequested, .authorizationResponse: return .ignored
        case .discoveryRequested(let newTarget):
            // The discovery key makes the new fetch replace the old one.
            return startDiscovery(newTarget)
        case .wellKnownResponse(let result):
            // A late answer for a step already passed changes nothing.
            guard step == .wellKnown else { return .stay }
            switch result {
            case .success(let published):
                guard let url = published ?? target.serverName.flatMap(HomeserverURL.init(serverName:)) else {
                    let error = SessionError.discoveryFailed(reason: "no homeserver URL for this server name")
                    return .move(to: .failed(from: .discovery, error: error, server: nil))
                }
                return .move(to: .discovering(target: target, step: .versions(url)), effects: [.fetchVersions(url)])
            case .failure(let error):
                return .move(to: .failed(from: .discovery, error: error, server: nil))
            }
        case .versionsResponse(let result):
            guard case .versions(let url) = step else { return .stay }
            switch result {
            case .success(let versions) where versions.isSupported:
                let info = HomeserverInfo(baseURL: url, serverName: target.serverName, versions: versions)
                return .move(to: .awaitingCredentials(info))
            case .success(let versions):
                let error = SessionError.unsupportedServer(versions: versions.versions)
                return .move(to: .failed(from: .discovery, error: error, server: nil))
            case .failure(let error):
                return .move(to: .failed(from: .discovery, error: error, server: nil))
            }
        case .cancelRequested:
            return .move(to: .signedOut, effects: [.cancel(Keys.discovery)])
        case .passwordSubmitted, .loginTokenSubmitted, .loginResponse, .registrationRequested, .registrationResponse,
            .restoreRequested, .restored, .tokensPersisted, .storeFailed, .accessTokenRejected, .refreshNeeded,
            .refreshResponse, .signOutRequested, .logoutResponse, .localDataWiped, .refreshTimerFired,
            .retryTimerFired:
            return .ignored
        }
    }

    func awaitingCredentials(server: HomeserverInfo, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .authorizationRequested, .authorizationResponse: return .ignored
        case .discoveryRequested(let target):
            return startDiscovery(target)
        case .passwordSubmitted(let username, let password):
            return startLogin(server: server, credentials: .password(username: username, password: password))
        case .loginTokenSubmitted(let token):
            return startLogin(server: server, credentials: .loginToken(token))
        case .registrationRequested(let username, let password):
            return startRegistration(server: server, username: username, password: password)
        case .cancelRequested:
            return .move(to: .signedOut)
        case .wellKnownResponse, .versionsResponse, .loginResponse, .registrationResponse, .restoreRequested,
            .restored, .tokensPersisted, .storeFailed, .accessTokenRejected, .refreshNeeded, .refreshResponse,
            .signOutRequested, .logoutResponse, .localDataWiped, .refreshTimerFired, .retryTimerFired:
            return .ignored
        }
    }

    func failed(server: HomeserverInfo?, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .authorizationRequested, .authorizationResponse: return .ignored
        case .discoveryRequested(let target):
            return startDiscovery(target)
        case .passwordSubmitted(let username, let password):
            guard let server else { return .move(to: .failed(from: .login, error: .noHomeserver, server: nil)) }
            return startLogin(server: server, credentials: .password(username: username, password: password))
        case .loginTokenSubmitted(let token):
            guard let server else { return .move(to: .failed(from: .login, error: .noHomeserver, server: nil)) }
            return startLogin(server: server, credentials: .loginToken(token))
        case .registrationRequested(let username, let password):
            guard let server else {
                return .move(to: .failed(from: .registration, error: .noHomeserver, server: nil))
            }
            return startRegistration(server: server, username: username, password: password)
        case .restoreRequested(let account):
            return .move(to: .restoring(account), effects: [.loadStoredSession(account)])
        case .cancelRequested:
            // Dismissing the error: back to the credentials form when a homeserver is known.
            guard let server else { return .move(to: .signedOut) }
            return .move(to: .awaitingCredentials(server))
        case .wellKnownResponse, .versionsResponse, .loginResponse, .registrationResponse, .restored,
            .tokensPersisted, .storeFailed, .accessTokenRejected, .refreshNeeded, .refreshResponse,
            .signOutRequested, .logoutResponse, .localDataWiped, .refreshTimerFired, .retryTimerFired:
            return .ignored
        }
    }
}

// Signing in with a password or a login token, and saving the tokens before anyone uses them.
extension SessionMachine {
    /// Entering ``State/authenticating(server:attempt:)`` with a first `/login`.
    func startLogin(server: HomeserverInfo, credentials: Credentials, resuming: Session? = nil)
        -> Transition<State, Effect>
    {
        let attempt = LoginAttempt(credentials: credentials, resuming: resuming)
        return .move(
            to: .authenticating(server: server, attempt: attempt),
            effects: [.sendLogin(loginRequest(server: server, attempt: attempt))])
    }

    /// The `/login` call for `attempt`: a resumed session signs in its own device again.
    func loginRequest(server: HomeserverInfo, attempt: LoginAttempt) -> LoginRequest {
        LoginRequest(
            homeserverURL: server.baseURL, credentials: attempt.credentials, deviceID: attempt.resuming?.deviceID,
            deviceDisplayName: deviceDisplayName, requestsRefreshToken: true)
    }

    func authenticating(server: HomeserverInfo, attempt login: LoginAttempt, on event: Event)
        -> Transition<State, Effect>
    {
        let cancelRetry: [Effect] = login.attempt.isWaitingToRetry ? [.cancel(Keys.retryTimer)] : []
        switch event {
        case .authorizationRequested, .authorizationResponse: return .ignored
        case .loginResponse(.success(let grant)):
            if let resumed = login.resuming, grant.userID != resumed.userID {
                // Another user's password: the local data belongs to `resumed`, so stay soft
                // logged out. The stray tokens were never saved and are never used.
                let error = SessionError.accountMismatch(expected: resumed.userID, received: grant.userID)
                return .move(to: .softLoggedOut(resumed, lastError: error), effects: cancelRetry)
            }
            let session = Session(
                userID: grant.userID, deviceID: grant.deviceID, homeserver: server, tokens: grant.tokens)
            let origin: TokenOrigin = login.resuming == nil ? .login : .reauthentication
            return .move(
                to: .persisting(session, origin: origin, waiting: 0), effects: cancelRetry + [.persistSession(session)])
        case .loginResponse(.failure(let error)):
            if case .rateLimited(let retryAfter) = error, login.attempt.number < maxAttempts {
                var waiting = login
                waiting.attempt = login.attempt.waiting
                return .move(
                    to: .authenticating(server: server, attempt: waiting),
                    effects: [
                        .scheduleRetry(after: ServerWait.clamp(retryAfter) ?? backoff(attempt: login.attempt.number))
                    ])
            }
            if let resumed = login.resuming {
                return .move(to: .softLoggedOut(resumed, lastError: error), effects: cancelRetry)
            }
            return .move(to: .failed(from: .login, error: error, server: server), effects: cancelRetry)
        case .retryTimerFired:
            // Only a try that is waiting is resent; a timer that outlived its wait changes nothing.
            guard login.attempt.isWaitingToRetry else { return .stay }
            var next = login
            next.attempt = login.attempt.next
            return .move(
                to: .authenticating(server: server, attempt: next),
                effects: [.sendLogin(loginRequest(server: server, attempt: next))])
        case .cancelRequested:
            let effects: [Effect] = [.cancel(Keys.login)] + cancelRetry
            if let resumed = login.resuming {
                return .move(to: .softLoggedOut(resumed, lastError: .cancelled), effects: effects)
            }
            return .move(to: .awaitingCredentials(server), effects: effects)
        case .discoveryRequested, .wellKnownResponse, .versionsResponse, .passwordSubmitted, .loginTokenSubmitted,
            .registrationRequested, .registrationResponse, .restoreRequested, .restored, .tokensPersisted,
            .storeFailed, .accessTokenRejected, .refreshNeeded, .refreshResponse, .signOutRequested,
            .logoutResponse, .localDataWiped, .refreshTimerFired:
            return .ignored
        }
    }

    func persisting(_ session: Session, origin: TokenOrigin, waiting: Int, on event: Event)
        -> Transition<State, Effect>
    {
        switch event {
        case .authorizationRequested, .authorizationResponse: return .ignored
        case .tokensPersisted:
            return enterSignedIn(session)
        case .storeFailed(let error):
            // The new tokens were never used. After a refresh the old refresh token is still
            // valid on the server, but without a saved session the device cannot go on.
            switch origin {
            case .login:
                return .move(to: .failed(from: .login, error: error, server: session.homeserver))
            case .registration:
                return .move(to: .failed(from: .registration, error: error, server: session.homeserver))
            case .reauthentication, .refresh:
                return enterSoftLogout(session, error: error)
            }
        case .accessTokenRejected, .refreshNeeded:
            // The new tokens are on their way: wait for them instead of refreshing again.
            return .move(to: .persisting(session, origin: origin, waiting: waiting + 1))
        case .discoveryRequested, .wellKnownResponse, .versionsResponse, .passwordSubmitted, .loginTokenSubmitted,
            .loginResponse, .registrationRequested, .registrationResponse, .cancelRequested, .restoreRequested,
            .restored, .refreshResponse, .signOutRequested, .logoutResponse, .localDataWiped, .refreshTimerFired,
            .retryTimerFired:
            return .ignored
        }
    }
}
