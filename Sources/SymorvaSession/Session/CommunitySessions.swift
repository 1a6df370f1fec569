import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaServices
import Synchronization

/// The account whose session is running, as the product layer sees it.
package enum ActiveSession: Sendable {
    /// No account session runs.
    case none
    /// The account's session runs.
    case running(AccountContext)
    /// The account is active but its local data could not be opened.
    case unavailable(UserID, SessionError)
}

/// A sign-in or registration the product API asked for, waiting for the app flow to run it.
final class SignInRequest: Sendable {
    /// What to do with the credentials.
    enum Kind: Sendable {
        /// `/login`.
        case signIn
        /// `/register`.
        case register
    }

    let kind: Kind
    let username: String
    let password: Secret<String>
    private let picked = Atomic<Bool>(false)
    private let result = OneShot<Result<UserID, SessionError>>()

    init(kind: Kind, username: String, password: Secret<String>) {
        self.kind = kind
        self.username = username
        self.password = password
    }

    /// Whether the app flow's sign-in effect took the request.
    var isPicked: Bool { picked.load(ordering: .acquiring) }
    func markPicked() { picked.store(true, ordering: .releasing) }

    /// Reports how the sign-in ended.
    func finish(_ outcome: Result<UserID, SessionError>) { result.resolve(outcome) }

    /// How the sign-in ended.
    func outcome() async -> Result<UserID, SessionError> {
        await result.value
    }
}

/// The session feature's ``SessionDriver``: what the app flow calls to restore accounts, sign
/// in, start and end account sessions, and forget accounts.
///
/// Sign-in and sign-out run in short-lived session hosts of their own (outside any account
/// scope: the app flow owns them); an account's running session lives in an ``AccountContext``
/// created in the scope the app flow opened for it.
package actor CommunitySessions: SessionDriver {
    package nonisolated let storage: AccountStorage
    private let configuration: SymorvaConfiguration
    /// The manifest's server name: what a bare localpart signs in on.
    nonisolated let serverName: String
    private let environment: SymorvaEnvironment
    private let machine: SessionMachine
    private let factories: [AccountModuleFactory]
    private let logger: Logger
    private var contexts: [UserID: AccountContext] = [:]
    private var watchers: [UserID: ObservableValue<SessionMachine.State>.Unsubscribe] = [:]
    private var closing: [UserID: Task<Void, Never>] = [:]
    /// The services token a signed-out account's running client held, from its `close` to its
    /// `signOutStored` (which presents it to the services logout).
    private var heldServicesTokens: [UserID: HeldServicesToken] = [:]
    private var pending: SignInRequest?
    private nonisolated let activePublisher = ObservableValue<ActiveSession>.Publisher(.none)
    private nonisolated let endedHandler = EndedHandler()

    package init(
        configuration: SymorvaConfiguration, environment: SymorvaEnvironment, storage: AccountStorage,
        factories: [AccountModuleFactory]
    ) {
        self.configuration = configuration
        self.serverName = configuration.homeserver.serverName
        self.environment = environment
        self.storage = storage
        self.factories = factories
        self.machine = SessionMachine(deviceDisplayName: environment.deviceDisplayName)
        self.logger = environment.logger("session")
    }

    /// The active account's session.
    package nonisolated var active: ObservableValue<ActiveSession> { activePublisher.observable }

    /// Called when a running session ends by itself (the server revoked the device): the
    /// product layer then signs the account out of the app flow.
    nonisolated func onSessionEnded(_ handler: @escaping @Sendable (UserID) -> Void) {
        endedHandler.set(handler)
    }

    /// Queues the credentials for the app flow's next sign-in effect.
    func setPending(_ request: SignInRequest?) { pending = request }

    private var interpreter: SessionInterpreter {
        SessionInterpreter(
            transport: environment.transport, wallClock: environment.wallClock, storage: storage,
            logger: environment.logger("session"))
    }

    private func makeHost(instance: String) -> MachineHost<SessionMachine> {
        MachineHost(
            machine: machine, initial: .signedOut, interpreter: interpreter, instance: instance,
            clock: environment.clock, wallClock: environment.wallClock, tracer: environment.tracer)
    }

    // MARK: - SessionDriver

    package func restoreAccounts() async throws(AppFlowError) -> RestoredAccounts {
        do {
            return try await storage.restore()
        } catch {
            logger.error("reading the stored accounts failed error=\(error)")
            throw .storeUnavailable
        }
    }

    package func signIn(_ attempt: SignInAttempt) async throws(AppFlowError) -> UserID {
        guard let request = pending else { throw .sessionFailed }
        pending = nil
        request.markPicked()
        let outcome = await runSignIn(request)
        request.finish(outcome)
        switch outcome {
        case .success(let account): return account
        case .failure(let error): throw Self.appFlowError(for: error)
        }
    }

    package func startSession(for account: UserID, in scope: AccountScope) async {
        await closing[account]?.value
        let userID = account
        do {
            let context = try await AccountContext.start(
                userID: userID, scope: scope, storage: storage, machine: machine, configuration: configuration,
                environment: environment, factories: factories)
            guard !scope.isEnded else {
                await context.stop()
                return
            }
            // Remembered before the session is announced: a program that quits as soon as it
            // sees the account signed in must still find it active at the next launch.
            do { try await storage.setActive(userID) } catch {
                logger.warning("remembering the active account failed error=\(error)")
            }
            contexts[account] = context
            watch(context)
            activePublisher.publish(.running(context))
        } catch {
            logger.error("starting the session failed account=\(account) error=\(error)")
            activePublisher.publish(.unavailable(account, error.sessionError))
        }
    }

    package func endSession(for account: UserID, reason: AccountScope.Reason) async {
        await close(account, signingOut: reason == .signedOut)
    }

    package func forgetAccount(_ account: UserID) async -> [UserID] {
        await close(account, signingOut: true)
        if case .unavailable(let unavailable, _) = active.value, unavailable == account {
            activePublisher.publish(.none)
        }
        let held = heldServicesTokens.removeValue(forKey: account)
        if (try? await storage.currentRegistry().account(account)) != nil {
            await signOutStored(account, held: held)
        } else if let held {
            // The server ended the session (and the account is wiped): no OpenID token can be
            // had, but the services token the client held can still be revoked.
            await signOutOfServices(account, held: held, session: nil)
        }
        return (try? await storage.currentRegistry().restorable.map(\.userID)) ?? []
    }

    // MARK: - Sign-in and sign-out hosts

    /// Discovery, then `/login` or `/register`, in a host of its own; the new tokens are saved
    /// (to the new account's database) before the host reports `signedIn`.
    private func runSignIn(_ request: SignInRequest) async -> Result<UserID, SessionError> {
        let host = makeHost(instance: "sign-in")
        defer { Task { await host.stop() } }
        let discovered = await host.send(.discoveryRequested(configuration.homeserver.address)) {
            state -> Result<Void, SessionError>? in
            switch state {
            case .awaitingCredentials: .success(())
            case .failed(_, let error, _): .failure(error)
            case .signedOut: .failure(.cancelled)
            default: nil
            }
        }
        switch discovered {
        case .success: break
        case .failure(let error): return .failure(error)
        case nil: return .failure(.cancelled)
        }
        let credentials: SessionMachine.Event =
            switch request.kind {
            case .signIn: .passwordSubmitted(username: request.username, password: request.password)
            case .register: .registrationRequested(username: request.username, password: request.password)
            }
        let signedIn = await host.send(credentials) { state -> Result<UserID, SessionError>? in
            switch state {
            case .signedIn(let session): .success(session.userID)
            case .failed(_, let error, _): .failure(error)
            case .awaitingCredentials, .signedOut: .failure(.cancelled)
            default: nil
            }
        }
        return signedIn ?? .failure(.cancelled)
    }

    /// Signs a stored account out: restores its session in a host of its own, signs it out of
    /// the community services (presenting `held`, the token its running client held, if any),
    /// then sends `/logout` when it has live tokens, and wipes its data. An unreadable store is
    /// wiped directly.
    ///
    /// The services logout runs first, while the Matrix session is live: the sign-out host can
    /// answer the OpenID request of a services client that holds no token (and refresh the
    /// access token first if need be), which the running session, its scope ended, cannot.
    private func signOutStored(_ userID: UserID, held: HeldServicesToken?) async {
        let host = makeHost(instance: userID.rawValue)
        let restored = await host.send(.restoreRequested(userID)) { state -> SessionMachine.State? in
            if case .restoring = state { return nil }
            return state
        }
        switch restored {
        case .signedIn(let session):
            await signOutOfServices(userID, held: held, session: (host, session.homeserver.baseURL))
        case .softLoggedOut:
            // No OpenID token without a live access token: only a held token can be presented.
            if let held { await signOutOfServices(userID, held: held, session: nil) }
        default: break
        }
        switch restored {
        case .signedIn, .softLoggedOut:
            _ = await host.send(.signOutRequested) { state -> Void? in
                switch state {
                case .signedOut, .failed: ()
                default: nil
                }
            }
        default: break
        }
        await host.stop()
        if (try? await storage.currentRegistry().account(userID)) != nil {
            do { try await storage.wipe(userID) } catch {
                logger.error("wiping the account failed account=\(userID) error=\(error)")
            }
        }
    }

    /// Signs the account out of the community services (best effort, bounded by
    /// ``ServicesSignOut/timeout``) with a services client of its own: it presents `held` when
    /// given, else exchanges an OpenID token from `session`, the sign-out host (`nil`: no
    /// exchange is possible).
    private func signOutOfServices(
        _ userID: UserID, held: HeldServicesToken?,
        session: (host: MachineHost<SessionMachine>, homeserver: HomeserverURL)?
    ) async {
        let tokenSource: any OpenIDTokenSource =
            if let session {
                SessionOpenIDSource(
                    requester: SessionRequester(
                        userID: userID, homeserverURL: session.homeserver, transport: environment.transport,
                        host: session.host, wallClock: environment.wallClock,
                        logger: environment.logger("requester")),
                    session: session.host)
            } else {
                NoOpenIDSource()
            }
        let services = CommunityServicesClient(
            baseURL: configuration.services.url, transport: environment.transport, tokenSource: tokenSource,
            clock: environment.clock, wallClock: environment.wallClock)
        if let held { await services.adopt(held) }
        await ServicesSignOut(account: userID, services: services, clock: environment.clock, logger: logger).run()
    }

    /// Stops every running session (the community shuts down: its scopes have ended): each
    /// context's hosts and modules stop and its database is released, so that nothing of the
    /// accounts outlives the community (their databases stayed open before).
    package func shutdown() async {
        for account in contexts.keys.sorted(by: { $0.rawValue < $1.rawValue }) { await close(account) }
    }

    // MARK: - Running sessions

    /// Notices a running session that ends by itself (hard logout by the server wipes the
    /// account and ends in `signedOut`).
    private func watch(_ context: AccountContext) {
        let account = context.userID
        let handler = endedHandler
        watchers[account] = context.sessionHost.states.subscribe { state in
            guard case .signedOut = state else { return }
            handler.call(account)
        }
    }

    /// Stops the account's running context once, whoever asks first. When `signingOut`, the
    /// services token its client holds is kept for `signOutStored`, which signs the account out
    /// of the services before the Matrix logout: the context's own session, its scope ended,
    /// can no longer answer an OpenID request.
    private func close(_ account: UserID, signingOut: Bool = false) async {
        if let task = closing[account] {
            await task.value
            return
        }
        guard let context = contexts.removeValue(forKey: account) else { return }
        watchers.removeValue(forKey: account)?()
        if case .running(let running) = active.value, running === context { activePublisher.publish(.none) }
        let task = Task {
            if signingOut, let held = await context.services.handOverToken() {
                self.heldServicesTokens[account] = held
            }
            await context.stop()
        }
        closing[account] = task
        await task.value
        closing[account] = nil
        await storage.release(context.userID)
    }

    /// The app flow's summary of a session error.
    static func appFlowError(for error: SessionError) -> AppFlowError {
        switch error {
        case .invalidCredentials, .userDeactivated, .accountMismatch: .credentialsRejected
        case .unreachable, .discoveryFailed, .unsupportedServer, .invalidResponse: .serverUnreachable
        default: .sessionFailed
        }
    }
}

/// The callback for sessions that end by themselves, set once the product layer exists.
final class EndedHandler: Sendable {
    private let handler = Lock<(@Sendable (UserID) -> Void)?>(nil)
    func set(_ newHandler: @escaping @Sendable (UserID) -> Void) { handler.withLock { $0 = newHandler } }
    func call(_ account: UserID) { handler.withLock { $0 }?(account) }
}
