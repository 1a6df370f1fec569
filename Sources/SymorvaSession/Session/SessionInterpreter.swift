import Foundation
import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Performs ``SessionMachine``'s effects: Matrix requests over the transport (``AuthAPI``
/// builders and decoders), the account's store (tokens sealed at rest) and the wall clock for
/// expiry. Its timers are performed by the host.
///
/// Errors are mapped at this boundary: transport failures become
/// ``SessionError/unreachable(_:)`` (cancellation ``SessionError/cancelled``), Matrix error
/// bodies go through ``AuthAPI/sessionError(for:status:errcode:softLogout:retryAfter:)``, store
/// failures become ``SessionError/store(_:)``. Nothing here logs a token, a password or a
/// response body.
struct SessionInterpreter: EffectInterpreter {
    typealias Machine = SessionMachine

    let transport: any HTTPTransport
    let wallClock: any WallClock
    let storage: AccountStorage
    let logger: Logger
    /// Where finished authorized requests go (the account's; a sign-in host's answers none).
    var authorizations = AuthorizationResults()

    func perform(_ effect: SessionMachine.Effect, context: EffectContext<SessionMachine.Event>) async
        -> SessionMachine.Event?
    {
        switch effect {
        case .loadStoredSession(let account):
            return await loadStoredSession(account)
        case .fetchWellKnown(let serverName):
            return .wellKnownResponse(await fetchWellKnown(serverName: serverName))
        case .fetchVersions(let url):
            return .versionsResponse(await fetchVersions(url))
        case .sendLogin(let request):
            return .loginResponse(await login(request))
        case .sendRegister(let request):
            return .registrationResponse(await register(request))
        case .persistSession(let session):
            return await persist(session)
        case .activate(let session):
            // Authenticated requests read the tokens of the `signedIn` state the host publishes
            // next (see SessionRequester), so there is nothing to hand over here.
            logger.debug("session active account=\(session.userID) device=\(session.deviceID)")
            return nil
        case .sendRefresh(let request):
            return .refreshResponse(await refresh(request))
        case .sendLogout(let request):
            return .logoutResponse(await logout(request))
        case .wipeLocalData(let account):
            return await wipe(account)
        case .keepLocalData(let account):
            await keep(account)
            return nil
        case .sendAuthorized(let call):
            return .authorizationResponse(await authorized(call))
        case .finishAuthorization(let id, let result):
            authorizations.finish(id, result)
            return nil
        case .scheduleRefresh, .scheduleRetry, .cancel:
            // Timers and cancellations are performed by the host (their directives).
            return nil
        }
    }

    // MARK: - Store

    private func loadStoredSession(_ account: UserID) async -> SessionMachine.Event {
        let userID = account
        do {
            let store = try await storage.sessionStore(for: userID)
            return .restored(try await store.load())
        } catch {
            logger.error("restoring the session failed account=\(account) error=\(error)")
            return .storeFailed(error.sessionError)
        }
    }

    private func persist(_ session: Session) async -> SessionMachine.Event {
        do {
            let store = try await storage.sessionStore(for: session.userID)
            try await store.save(session, savedAt: wallClock.now)
            try await storage.record(session)
            return .tokensPersisted
        } catch {
            logger.error("saving the session failed account=\(session.userID) error=\(error)")
            return .storeFailed(error.sessionError)
        }
    }

    private func wipe(_ account: UserID) async -> SessionMachine.Event {
        let userID = account
        do {
            try await storage.wipe(userID)
            return .localDataWiped
        } catch {
            logger.error("wiping the account failed account=\(account) error=\(error)")
            return .storeFailed(error.sessionError)
        }
    }

    private func keep(_ account: UserID) async {
        let userID = account
        do {
            try await storage.sessionStore(for: userID).markSoftLoggedOut()
        } catch {
            // The machine is soft logged out either way; a relaunch would then restore the dead
            // tokens as signed in and soft-log out again at the first 401.
            logger.warning("marking the session soft logged out failed account=\(account) error=\(error)")
        }
    }

    // MARK: - Requests

    private func fetchWellKnown(serverName: String) async -> Result<HomeserverURL?, SessionError> {
        guard let base = HomeserverURL(serverName: serverName) else {
            return .failure(.discoveryFailed(reason: "the server name does not make a URL"))
        }
        switch await exchange(AuthAPI.wellKnown(), on: base, operation: .wellKnown) {
        case .failure(let error): return .failure(error)
        case .success(let response) where response.status == 404: return .success(nil)
        case .success(let response) where response.isSuccess:
            do { return .success(try ClientWellKnown.homeserverURL(from: response.body)) } catch {
                return .failure(error)
            }
        case .success(let response): return .failure(error(in: response, for: .wellKnown))
        }
    }

    private func fetchVersions(_ url: HomeserverURL) async -> Result<ServerVersions, SessionError> {
        decoded(await exchange(AuthAPI.versions(), on: url, operation: .versions), operation: .versions) {
            (answer: VersionsResponse) in answer.serverVersions
        }
    }

    private func login(_ request: LoginRequest) async -> Result<SessionGrant, SessionError> {
        let now = wallClock
        return decoded(
            await exchange(AuthAPI.login(request), on: request.homeserverURL, operation: .login), operation: .login
        ) { (answer: LoginResponse) in answer.grant(receivedAt: now.now) }
    }

    private func register(_ request: RegisterRequest) async -> Result<RegistrationOutcome, SessionError> {
        let result = await exchange(AuthAPI.register(request), on: request.homeserverURL, operation: .register)
        let response: HTTPResponse
        switch result {
        case .failure(let error): return .failure(error)
        case .success(let answer): response = answer
        }
        if response.status == 401,
            let challenge = try? AuthAPI.decode(UserInteractiveAuthResponse.self, from: response.body),
            !challenge.flows.isEmpty
        {
            return .success(.authenticationRequired(challenge.challenge))
        }
        guard response.isSuccess else { return .failure(error(in: response, for: .register)) }
        do {
            let answer = try AuthAPI.decode(RegisterResponse.self, from: response.body)
            return .success(.registered(try answer.grant(receivedAt: wallClock.now)))
        } catch {
            return .failure(error)
        }
    }

    private func refresh(_ request: RefreshRequest) async -> Result<SessionTokens, SessionError> {
        let result = await exchange(AuthAPI.refresh(request), on: request.homeserverURL, operation: .refresh)
        let response: HTTPResponse
        switch result {
        case .failure(let error): return .failure(error)
        case .success(let answer): response = answer
        }
        guard response.isSuccess else { return .failure(error(in: response, for: .refresh)) }
        do {
            return .success(
                try AuthAPI.decode(RefreshResponse.self, from: response.body).tokens(receivedAt: wallClock.now))
        } catch {
            return .failure(error)
        }
    }

    private func logout(_ request: LogoutRequest) async -> SessionError? {
        let result = await exchange(
            AuthAPI.logout(), on: request.homeserverURL, token: request.accessToken, operation: .logout)
        switch result {
        case .success(let response) where response.isSuccess: return nil
        case .success(let response): return error(in: response, for: .logout)
        case .failure(let error): return error
        }
    }

    /// An authorized request: its JSON body, with the `m.login.password` stage under `auth`
    /// when the call carries it. A 401 with flows is a challenge; any other error is mapped.
    private func authorized(_ call: AuthorizedCall) async -> Result<AuthorizationOutcome, SessionError> {
        guard case .object(var members)? = try? JSONValue(parsing: call.request.body),
            let method = MatrixEndpoint.Method(rawValue: call.request.method)
        else { return .failure(.invalidResponse(reason: "the request is not a JSON object with a known method")) }
        if let stage = call.passwordStage {
            var auth: [String: JSONValue] = [
                "type": .string(SessionMachine.passwordStage),
                "identifier": .object(["type": .string("m.id.user"), "user": .string(call.userID.rawValue)]),
                "password": .string(call.request.password.exposedValue),
            ]
            if let session = stage.session { auth["session"] = .string(session) }
            members["auth"] = .object(auth)
        }
        guard let body = try? JSONValue.object(members).canonicalEncoding() else {
            return .failure(.invalidResponse(reason: "the request has no canonical JSON"))
        }
        let endpoint = MatrixEndpoint(method: method, path: call.request.path, body: body, requiresAuth: true)
        switch await exchange(endpoint, on: call.homeserverURL, token: call.accessToken, operation: .authorized) {
        case .failure(let error): return .failure(error)
        case .success(let response) where response.isSuccess: return .success(.completed(body: response.body))
        case .success(let response):
            if response.status == 401,
                let challenge = try? AuthAPI.decode(UserInteractiveAuthResponse.self, from: response.body),
                !challenge.flows.isEmpty
            {
                return .success(.authenticationRequired(challenge.challenge))
            }
            return .failure(error(in: response, for: .authorized))
        }
    }

    // MARK: - Plumbing

    /// Sends `endpoint` and returns the response whatever its status; only a failed exchange
    /// is an error.
    private func exchange(
        _ endpoint: MatrixEndpoint, on base: HomeserverURL, token: Secret<String>? = nil,
        operation: AuthAPI.Operation
    ) async -> Result<HTTPResponse, SessionError> {
        guard let url = URL(string: endpoint.urlString(relativeTo: base)) else {
            return .failure(.invalidResponse(reason: "the endpoint does not make a URL"))
        }
        var request = HTTPRequest(
            method: HTTPMethod(rawValue: endpoint.method.rawValue), url: url, body: endpoint.body ?? [],
            bearerToken: endpoint.requiresAuth ? token : nil)
        if endpoint.body != nil { request.headers.add(name: "Content-Type", value: "application/json") }
        do {
            return .success(try await transport.send(request))
        } catch {
            logger.info("request failed operation=\(LogLabel("\(operation)")) error=\(error)")
            return .failure(Self.sessionError(for: error))
        }
    }

    /// Decodes a 2xx answer as `Answer` and converts it; any other status is its Matrix error.
    private func decoded<Answer: Decodable, Value>(
        _ result: Result<HTTPResponse, SessionError>, operation: AuthAPI.Operation,
        _ convert: (Answer) -> Value
    ) -> Result<Value, SessionError> {
        switch result {
        case .failure(let error): return .failure(error)
        case .success(let response) where response.isSuccess:
            do { return .success(convert(try AuthAPI.decode(Answer.self, from: response.body))) } catch {
                return .failure(error)
            }
        case .success(let response): return .failure(error(in: response, for: operation))
        }
    }

    /// The session error a non-2xx response carries.
    func error(in response: HTTPResponse, for operation: AuthAPI.Operation) -> SessionError {
        let matrix = MatrixError.decode(from: response)
        let errcode = matrix.flatMap { $0.code == .malformedBody ? nil : $0.code.errcode }
        return AuthAPI.sessionError(
            for: operation, status: response.status, errcode: errcode, softLogout: matrix?.isSoftLogout ?? false,
            retryAfter: matrix?.retryAfter?.wait(from: wallClock.now))
    }

    /// The session error for a failed exchange.
    static func sessionError(for error: TransportError) -> SessionError {
        switch error {
        case .cancelled: .cancelled
        case .dnsFailure: .unreachable(.cannotResolveHost)
        case .connectFailed: .unreachable(.cannotConnect)
        case .tls: .unreachable(.secureConnectionFailed)
        case .timedOut: .unreachable(.timedOut)
        case .tooLarge: .invalidResponse(reason: "response too large")
        case .invalidURL: .invalidResponse(reason: "invalid URL")
        case .invalidHeader: .invalidResponse(reason: "invalid header")
        case .fileAccess: .invalidResponse(reason: "file access")
        case .emptyResponse, .partialResponse, .connectionLost: .unreachable(.connectionLost)
        case .other: .unreachable(.other(error.description))
        }
    }
}

extension SessionError {
    /// The session feature's view of a transport failure (what sign-in and the account's own
    /// requests report: unreachable, with the transport's reason).
    package init(transport error: TransportError) { self = SessionInterpreter.sessionError(for: error) }
}
