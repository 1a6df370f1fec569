import SymorvaMachines
import Testing

@Suite("Session machine: discovery and restore")
struct SessionMachineDiscoveryTests {
    let wellKnownStep = SessionState.discovering(target: .serverName("localhost"), step: .wellKnown)
    let versionsStep = SessionState.discovering(
        target: .serverName("localhost"), step: .versions(SessionFixture.baseURL))

    @Test("Discovery by server name reads .well-known first")
    func discoveryStartsWithWellKnown() {
        expectMove(
            from: .signedOut, on: .discoveryRequested(.serverName("localhost")), to: wellKnownStep,
            effects: [.fetchWellKnown(serverName: "localhost")])
    }

    @Test("Discovery by base URL goes straight to /versions")
    func discoveryByURLSkipsWellKnown() {
        let target = ServerAddress.homeserverURL(SessionFixture.baseURL, serverName: "localhost")
        expectMove(
            from: .signedOut, on: .discoveryRequested(target),
            to: .discovering(target: target, step: .versions(SessionFixture.baseURL)),
            effects: [.fetchVersions(SessionFixture.baseURL)])
    }

    @Test("The base URL published in .well-known is checked with /versions")
    func wellKnownLeadsToVersions() {
        expectMove(
            from: wellKnownStep, on: .wellKnownResponse(.success(SessionFixture.baseURL)), to: versionsStep,
            effects: [.fetchVersions(SessionFixture.baseURL)])
    }

    @Test("Without .well-known (404) the server name's https URL is tried")
    func missingWellKnownFallsBackToServerName() {
        let fallback = HomeserverURL("https://localhost")!
        expectMove(
            from: wellKnownStep, on: .wellKnownResponse(.success(nil)),
            to: .discovering(target: .serverName("localhost"), step: .versions(fallback)),
            effects: [.fetchVersions(fallback)])
    }

    @Test("A supported /versions answer waits for credentials with the homeserver's info")
    func versionsSuccess() {
        expectMove(
            from: versionsStep, on: .versionsResponse(.success(SessionFixture.versions)),
            to: .awaitingCredentials(SessionFixture.server))
    }

    @Test("A broken .well-known fails discovery with its typed reason")
    func wellKnownFailure() {
        let error = SessionError.discoveryFailed(reason: "m.homeserver.base_url is not a URL")
        expectMove(
            from: wellKnownStep, on: .wellKnownResponse(.failure(error)),
            to: .failed(from: .discovery, error: error, server: nil))
    }

    @Test("An unreachable homeserver fails discovery as unreachable")
    func versionsUnreachable() {
        let error = SessionError.unreachable(.cannotConnect)
        expectMove(
            from: versionsStep, on: .versionsResponse(.failure(error)),
            to: .failed(from: .discovery, error: error, server: nil))
    }

    @Test("A homeserver without v1.1 is unsupported")
    func oldServerIsUnsupported() {
        expectMove(
            from: versionsStep, on: .versionsResponse(.success(SessionFixture.oldVersions)),
            to: .failed(from: .discovery, error: .unsupportedServer(versions: ["r0.5.0", "r0.6.1"]), server: nil))
    }

    @Test("A late .well-known answer during /versions changes nothing")
    func lateWellKnownIsAbsorbed() {
        expectStay(in: versionsStep, on: .wellKnownResponse(.success(SessionFixture.baseURL)))
    }

    @Test("Cancelling discovery cancels its request and signs out")
    func cancelDiscovery() {
        expectMove(from: versionsStep, on: .cancelRequested, to: .signedOut, effects: [.cancel(SessionKeys.discovery)])
    }

    @Test("A new discovery replaces the one under way")
    func rediscovery() {
        expectMove(
            from: versionsStep, on: .discoveryRequested(.serverName("example.org")),
            to: .discovering(target: .serverName("example.org"), step: .wellKnown),
            effects: [.fetchWellKnown(serverName: "example.org")])
    }

    @Test("Submitting credentials after a failed discovery is a typed noHomeserver error")
    func credentialsWithoutHomeserver() {
        let failed = SessionState.failed(from: .discovery, error: .unreachable(.timedOut), server: nil)
        expectMove(
            from: failed, on: .passwordSubmitted(username: "alice", password: SessionFixture.password),
            to: .failed(from: .login, error: .noHomeserver, server: nil))
    }

    @Test("Restore loads the stored session without the network")
    func restoreLoadsFromStore() {
        expectMove(
            from: .signedOut, on: .restoreRequested(SessionFixture.account), to: .restoring(SessionFixture.account),
            effects: [.loadStoredSession(SessionFixture.account)])
    }

    @Test("A restored session is signed in at once and arms its refresh timer")
    func restoreSignsIn() {
        let session = SessionFixture.session()
        expectMove(
            from: .restoring(SessionFixture.account), on: .restored(StoredSession(session: session)),
            to: .signedIn(session),
            effects: [.activate(session), .scheduleRefresh(at: SessionFixture.refreshDeadline)])
    }

    @Test("A restored session without expiry arms no timer")
    func restoreWithoutExpiry() {
        let session = SessionFixture.session(refresh: false, lifetime: nil)
        expectMove(
            from: .restoring(SessionFixture.account), on: .restored(StoredSession(session: session)),
            to: .signedIn(session),
            effects: [.activate(session)])
    }

    @Test("A session saved while soft logged out is restored soft logged out")
    func restoreSoftLoggedOut() {
        let session = SessionFixture.session()
        expectMove(
            from: .restoring(SessionFixture.account),
            on: .restored(StoredSession(session: session, isSoftLoggedOut: true)),
            to: .softLoggedOut(session, lastError: .softLoggedOut))
    }

    @Test("Nothing stored restores to signed out")
    func restoreNothing() {
        expectMove(from: .restoring(SessionFixture.account), on: .restored(nil), to: .signedOut)
    }

    @Test("A store failure during restore is a typed store error")
    func restoreStoreFailure() {
        expectMove(
            from: .restoring(SessionFixture.account), on: .storeFailed(.store(.busy)),
            to: .failed(from: .restore, error: .store(.busy), server: nil))
    }

    @Test("Dismissing an error with a known homeserver returns to the credentials form")
    func dismissError() {
        let failed = SessionState.failed(from: .login, error: .invalidCredentials, server: SessionFixture.server)
        expectMove(from: failed, on: .cancelRequested, to: .awaitingCredentials(SessionFixture.server))
    }
}
