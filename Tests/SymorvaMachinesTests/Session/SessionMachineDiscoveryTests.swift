import SymorvaMachines
import SymorvaTesting
import Testing

@Suite("Session machine: discovery and restore")
struct SessionMachineDiscoveryTests {
    let wellKnownStep = SessionState.discovering(target: .serverName("localhost"), step: .wellKnown)
    let versionsStep = SessionState.discovering(
        target: .serverName("localhost"), step: .versions(SessionFixture.baseURL))

    @Test("Discovery by server name reads .well-known first")
    func discoveryStartsWithWellKnown() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signedOut)
        try store.send(
            .discoveryRequested(.serverName("localhost")), expecting: wellKnownStep,
            effects: [.fetchWellKnown(serverName: "localhost")])
    }

    @Test("Discovery by base URL goes straight to /versions")
    func discoveryByURLSkipsWellKnown() throws {
        let target = ServerAddress.homeserverURL(SessionFixture.baseURL, serverName: "localhost")
        let store = MachineTestStore(SessionFixture.machine, initial: .signedOut)
        try store.send(
            .discoveryRequested(target),
            expecting: .discovering(target: target, step: .versions(SessionFixture.baseURL)),
            effects: [.fetchVersions(SessionFixture.baseURL)])
    }

    @Test("The base URL published in .well-known is checked with /versions")
    func wellKnownLeadsToVersions() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: wellKnownStep)
        try store.send(
            .wellKnownResponse(.success(SessionFixture.baseURL)), expecting: versionsStep,
            effects: [.fetchVersions(SessionFixture.baseURL)])
    }

    @Test("Without .well-known (404) the server name's https URL is tried")
    func missingWellKnownFallsBackToServerName() throws {
        let fallback = HomeserverURL("https://localhost")!
        let store = MachineTestStore(SessionFixture.machine, initial: wellKnownStep)
        try store.send(
            .wellKnownResponse(.success(nil)),
            expecting: .discovering(target: .serverName("localhost"), step: .versions(fallback)),
            effects: [.fetchVersions(fallback)])
    }

    @Test("A supported /versions answer waits for credentials with the homeserver's info")
    func versionsSuccess() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: versionsStep)
        try store.send(
            .versionsResponse(.success(SessionFixture.versions)), expecting: .awaitingCredentials(SessionFixture.server)
        )
    }

    @Test("A broken .well-known fails discovery with its typed reason")
    func wellKnownFailure() throws {
        let error = SessionError.discoveryFailed(reason: "m.homeserver.base_url is not a URL")
        let store = MachineTestStore(SessionFixture.machine, initial: wellKnownStep)
        try store.send(
            .wellKnownResponse(.failure(error)), expecting: .failed(from: .discovery, error: error, server: nil))
    }

    @Test("A .well-known pointing at a plain-http, non-loopback base URL fails discovery, naming the field")
    func wellKnownDowngradeFails() throws {
        let error = SessionError.discoveryFailed(
            reason: "m.homeserver.base_url uses plain http to a host that is not loopback (no downgrade from https)")
        let store = MachineTestStore(SessionFixture.machine, initial: wellKnownStep)
        try store.send(
            .wellKnownResponse(.failure(error)), expecting: .failed(from: .discovery, error: error, server: nil))
    }

    @Test("An unreachable homeserver fails discovery as unreachable")
    func versionsUnreachable() throws {
        let error = SessionError.unreachable(.cannotConnect)
        let store = MachineTestStore(SessionFixture.machine, initial: versionsStep)
        try store.send(
            .versionsResponse(.failure(error)), expecting: .failed(from: .discovery, error: error, server: nil))
    }

    @Test("A homeserver without v1.1 is unsupported")
    func oldServerIsUnsupported() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: versionsStep)
        try store.send(
            .versionsResponse(.success(SessionFixture.oldVersions)),
            expecting: .failed(
                from: .discovery, error: .unsupportedServer(versions: ["r0.5.0", "r0.6.1"]), server: nil))
    }

    @Test("A late .well-known answer during /versions changes nothing")
    func lateWellKnownIsAbsorbed() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: versionsStep)
        try store.send(.wellKnownResponse(.success(SessionFixture.baseURL)), stayingWith: [])
    }

    @Test("Cancelling discovery cancels its request and signs out")
    func cancelDiscovery() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: versionsStep)
        try store.send(.cancelRequested, expecting: .signedOut, effects: [.cancel(SessionKeys.discovery)])
    }

    @Test("A new discovery replaces the one under way")
    func rediscovery() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: versionsStep)
        try store.send(
            .discoveryRequested(.serverName("example.org")),
            expecting: .discovering(target: .serverName("example.org"), step: .wellKnown),
            effects: [.fetchWellKnown(serverName: "example.org")])
    }

    @Test("Submitting credentials after a failed discovery is a typed noHomeserver error")
    func credentialsWithoutHomeserver() throws {
        let failed = SessionState.failed(from: .discovery, error: .unreachable(.timedOut), server: nil)
        let store = MachineTestStore(SessionFixture.machine, initial: failed)
        try store.send(
            .passwordSubmitted(username: "alice", password: SessionFixture.password),
            expecting: .failed(from: .login, error: .noHomeserver, server: nil))
    }

    @Test("Restore loads the stored session without the network")
    func restoreLoadsFromStore() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .signedOut)
        try store.send(
            .restoreRequested(SessionFixture.account), expecting: .restoring(SessionFixture.account),
            effects: [.loadStoredSession(SessionFixture.account)])
    }

    @Test("A restored session is signed in at once and arms its refresh timer")
    func restoreSignsIn() throws {
        let session = SessionFixture.session()
        let store = MachineTestStore(SessionFixture.machine, initial: .restoring(SessionFixture.account))
        try store.send(
            .restored(StoredSession(session: session)), expecting: .signedIn(session),
            effects: [.activate(session), .scheduleRefresh(at: SessionFixture.refreshDeadline)])
    }

    @Test("A restored session without expiry arms no timer")
    func restoreWithoutExpiry() throws {
        let session = SessionFixture.session(refresh: false, lifetime: nil)
        let store = MachineTestStore(SessionFixture.machine, initial: .restoring(SessionFixture.account))
        try store.send(
            .restored(StoredSession(session: session)), expecting: .signedIn(session), effects: [.activate(session)])
    }

    @Test("A session saved while soft logged out is restored soft logged out")
    func restoreSoftLoggedOut() throws {
        let session = SessionFixture.session()
        let store = MachineTestStore(SessionFixture.machine, initial: .restoring(SessionFixture.account))
        try store.send(
            .restored(StoredSession(session: session, isSoftLoggedOut: true)),
            expecting: .softLoggedOut(session, lastError: .softLoggedOut))
    }

    @Test("Nothing stored restores to signed out")
    func restoreNothing() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .restoring(SessionFixture.account))
        try store.send(.restored(nil), expecting: .signedOut)
    }

    @Test("A store failure during restore is a typed store error")
    func restoreStoreFailure() throws {
        let store = MachineTestStore(SessionFixture.machine, initial: .restoring(SessionFixture.account))
        try store.send(
            .storeFailed(.store(.busy)),
            expecting: .failed(from: .restore, error: .store(.busy), server: nil))
    }

    @Test("Dismissing an error with a known homeserver returns to the credentials form")
    func dismissError() throws {
        let failed = SessionState.failed(from: .login, error: .invalidCredentials, server: SessionFixture.server)
        let store = MachineTestStore(SessionFixture.machine, initial: failed)
        try store.send(.cancelRequested, expecting: .awaitingCredentials(SessionFixture.server))
    }
}
