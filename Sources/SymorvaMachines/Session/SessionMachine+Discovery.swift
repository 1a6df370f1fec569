import SymorvaRuntime

// The signed-out side of the machine: restore, discovery, waiting for credentials, failure.
extension SessionMachine {
    func signedOut(on event: Event) -> Transition<State, Effect> {
        switch event {
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
