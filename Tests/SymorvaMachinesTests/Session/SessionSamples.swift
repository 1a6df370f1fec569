import SymorvaMachines
import SymorvaRuntime

/// Sample states and events for the chart check: every case, with the data variants that
/// lead to different targets (waiting or not, resuming or not, homeserver known or not).
enum SessionSamples {
    static let session = Fixture.session()
    static let plainSession = Fixture.session(refresh: false, lifetime: nil)
    static let password = Credentials.password(username: "alice", password: Fixture.password)
    static let waiting = Attempt(number: 1, isWaitingToRetry: true)

    static let sampleStates: [SessionMachine.State] = [
        .signedOut,
        .restoring(Fixture.account),
        .discovering(target: .serverName("localhost"), step: .wellKnown),
        .discovering(target: .serverName("localhost"), step: .versions(Fixture.baseURL)),
        .discovering(target: .homeserverURL(Fixture.baseURL, serverName: nil), step: .versions(Fixture.baseURL)),
        .awaitingCredentials(Fixture.server),
        .authenticating(server: Fixture.server, attempt: LoginAttempt(credentials: password)),
        .authenticating(server: Fixture.server, attempt: LoginAttempt(credentials: password, attempt: waiting)),
        .authenticating(server: Fixture.server, attempt: LoginAttempt(credentials: password, resuming: session)),
        .authenticating(
            server: Fixture.server, attempt: LoginAttempt(credentials: password, resuming: session, attempt: waiting)),
        .registering(
            server: Fixture.server, attempt: RegistrationAttempt(username: "alice", password: Fixture.password)),
        .registering(
            server: Fixture.server,
            attempt: RegistrationAttempt(
                username: "alice", password: Fixture.password, auth: .dummy(session: "uia-session-1"),
                stagesSubmitted: 1, attempt: waiting)),
        .registering(
            server: Fixture.server,
            attempt: RegistrationAttempt(
                username: "alice", password: Fixture.password, auth: .dummy(session: "uia-session-1"),
                stagesSubmitted: 3)),
        .persisting(session, origin: .login, waiting: 0),
        .persisting(session, origin: .registration, waiting: 0),
        .persisting(session, origin: .reauthentication, waiting: 1),
        .persisting(session, origin: .refresh, waiting: 2),
        .signedIn(session),
        .signedIn(plainSession),
        .refreshing(session, waiting: 0, attempt: .first),
        .refreshing(session, waiting: 2, attempt: waiting),
        .softLoggedOut(session, lastError: nil),
        .softLoggedOut(session, lastError: .invalidCredentials),
        .signingOut(session),
        .wipingLocalData(Fixture.account),
        .failed(from: .discovery, error: .unreachable(.cannotConnect), server: nil),
        .failed(from: .login, error: .invalidCredentials, server: Fixture.server),
    ]

    static let sampleEvents: [SessionMachine.Event] = [
        .discoveryRequested(.serverName("localhost")),
        .discoveryRequested(.homeserverURL(Fixture.baseURL, serverName: "localhost")),
        .wellKnownResponse(.success(Fixture.baseURL)),
        .wellKnownResponse(.success(nil)),
        .wellKnownResponse(.failure(.discoveryFailed(reason: "invalid JSON"))),
        .versionsResponse(.success(Fixture.versions)),
        .versionsResponse(.success(Fixture.oldVersions)),
        .versionsResponse(.failure(.unreachable(.cannotConnect))),
        .passwordSubmitted(username: "alice", password: Fixture.password),
        .loginTokenSubmitted(Fixture.loginToken),
        .loginResponse(.success(Fixture.grant(2))),
        .loginResponse(.success(Fixture.grant(2, user: Fixture.bob))),
        .loginResponse(.failure(.invalidCredentials)),
        .loginResponse(.failure(.rateLimited(retryAfter: .seconds(2)))),
        .registrationRequested(username: "alice", password: Fixture.password),
        .registrationResponse(.success(.registered(Fixture.grant(2)))),
        .registrationResponse(.success(.authenticationRequired(Fixture.dummyChallenge))),
        .registrationResponse(.success(.authenticationRequired(Fixture.captchaOnlyChallenge))),
        .registrationResponse(.failure(.userInUse)),
        .registrationResponse(.failure(.rateLimited(retryAfter: nil))),
        .cancelRequested,
        .restoreRequested(Fixture.account),
        .restored(nil),
        .restored(StoredSession(session: session)),
        .restored(StoredSession(session: session, isSoftLoggedOut: true)),
        .tokensPersisted,
        .storeFailed(.store(reason: "disk full")),
        .accessTokenRejected(softLogout: true),
        .accessTokenRejected(softLogout: false),
        .refreshNeeded,
        .refreshResponse(.success(Fixture.tokens(2))),
        .refreshResponse(.failure(.unknownToken(softLogout: true))),
        .refreshResponse(.failure(.unknownToken(softLogout: false))),
        .refreshResponse(.failure(.unreachable(.timedOut))),
        .refreshResponse(.failure(.rateLimited(retryAfter: .seconds(5)))),
        .refreshResponse(.failure(.invalidResponse(reason: "no access_token"))),
        .signOutRequested,
        .logoutResponse(nil),
        .logoutResponse(.unknownToken(softLogout: false)),
        .logoutResponse(.unreachable(.timedOut)),
        .localDataWiped,
        .refreshTimerFired,
        .retryTimerFired,
    ]
}
