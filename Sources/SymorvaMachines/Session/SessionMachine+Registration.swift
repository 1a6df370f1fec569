import SymorvaRuntime

// Registration with user-interactive authentication: the first `/register` asks for the
// flows; the machine completes the `m.login.dummy` stage and calls again with its session.
extension SessionMachine {
    /// UIA stages this machine can complete by itself.
    static let supportedRegistrationStages: Set<String> = ["m.login.dummy"]

    /// How many stages a registration may submit before the machine stops following the server.
    static let maxRegistrationStages = 3

    /// Entering ``State/registering(server:attempt:)`` with the first `/register`.
    func startRegistration(server: HomeserverInfo, username: String, password: Secret<String>)
        -> Transition<State, Effect>
    {
        let attempt = RegistrationAttempt(username: username, password: password)
        return .move(
            to: .registering(server: server, attempt: attempt),
            effects: [.sendRegister(registerRequest(server: server, attempt: attempt))])
    }

    /// The `/register` call for `attempt`.
    func registerRequest(server: HomeserverInfo, attempt: RegistrationAttempt) -> RegisterRequest {
        RegisterRequest(
            homeserverURL: server.baseURL, username: attempt.username, password: attempt.password,
            auth: attempt.auth, deviceDisplayName: deviceDisplayName, requestsRefreshToken: true)
    }

    /// The stage to submit next: the first remaining stage of the shortest flow whose
    /// remaining stages are all supported.
    package static func nextStage(for challenge: AuthenticationChallenge) -> RegistrationAuth? {
        for flow in challenge.flows.sorted(by: { $0.stages.count < $1.stages.count }) {
            let remaining = flow.stages.filter { !challenge.completed.contains($0) }
            guard let first = remaining.first, remaining.allSatisfy(supportedRegistrationStages.contains) else {
                continue
            }
            if first == "m.login.dummy" { return .dummy(session: challenge.session) }
        }
        return nil
    }

    func registering(server: HomeserverInfo, attempt registration: RegistrationAttempt, on event: Event)
        -> Transition<State, Effect>
    {
        let cancelRetry: [Effect] = registration.attempt.isWaitingToRetry ? [.cancel(Keys.retryTimer)] : []
        switch event {
        case .authorizationRequested, .authorizationResponse: return .ignored
        case .registrationResponse(.success(.registered(let grant))):
            let session = Session(
                userID: grant.userID, deviceID: grant.deviceID, homeserver: server, tokens: grant.tokens)
            return .move(
                to: .persisting(session, origin: .registration, waiting: 0),
                effects: cancelRetry + [.persistSession(session)])
        case .registrationResponse(.success(.authenticationRequired(let challenge))):
            guard registration.stagesSubmitted < Self.maxRegistrationStages,
                let auth = Self.nextStage(for: challenge)
            else {
                let shortest = challenge.flows.min { $0.stages.count < $1.stages.count }?.stages ?? []
                let error = SessionError.unsupportedRegistrationFlow(stages: shortest)
                return .move(to: .failed(from: .registration, error: error, server: server), effects: cancelRetry)
            }
            var next = registration
            next.auth = auth
            next.stagesSubmitted += 1
            next.attempt = .first
            return .move(
                to: .registering(server: server, attempt: next),
                effects: cancelRetry + [.sendRegister(registerRequest(server: server, attempt: next))])
        case .registrationResponse(.failure(let error)):
            if case .rateLimited(let retryAfter) = error, registration.attempt.number < maxAttempts {
                var waiting = registration
                waiting.attempt = registration.attempt.waiting
                return .move(
                    to: .registering(server: server, attempt: waiting),
                    effects: [
                        .scheduleRetry(
                            after: ServerWait.clamp(retryAfter) ?? backoff(attempt: registration.attempt.number))
                    ])
            }
            return .move(to: .failed(from: .registration, error: error, server: server), effects: cancelRetry)
        case .retryTimerFired:
            guard registration.attempt.isWaitingToRetry else { return .stay }
            var next = registration
            next.attempt = registration.attempt.next
            return .move(
                to: .registering(server: server, attempt: next),
                effects: [.sendRegister(registerRequest(server: server, attempt: next))])
        case .cancelRequested:
            return .move(to: .awaitingCredentials(server), effects: [.cancel(Keys.register)] + cancelRetry)
        case .discoveryRequested, .wellKnownResponse, .versionsResponse, .passwordSubmitted, .loginTokenSubmitted,
            .loginResponse, .registrationRequested, .restoreRequested, .restored, .tokensPersisted, .storeFailed,
            .accessTokenRejected, .refreshNeeded, .refreshResponse, .signOutRequested, .logoutResponse,
            .localDataWiped, .refreshTimerFired:
            return .ignored
        }
    }
}
