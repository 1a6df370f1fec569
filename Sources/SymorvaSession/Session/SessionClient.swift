import SymorvaMachines
import SymorvaRuntime

/// The member's session: sign in, register, sign out, several accounts side by side, switching
/// between them, and re-authentication after a soft logout.
///
/// Views observe ``state`` and ``accounts``; the methods wait until the change they asked for
/// is visible in ``state`` (or failed) and report failures as a typed ``/SymorvaMachines/SessionError``.
/// Operations run one at a time, in call order.
///
/// ```swift
/// let account = try await community.session.signIn(username: "alice", password: Secret(password))
/// for await state in community.session.state.values { render(state) }
/// ```
public final class SessionClient: Sendable {
    /// Where the session is.
    public var state: ObservableValue<SessionState> { statePublisher.observable }
    /// Every account signed in on this device, in the order they were added.
    public var accounts: ObservableValue<[Account]> { accountsPublisher.observable }

    private let coordinator: AppFlowCoordinator
    package let sessions: CommunitySessions
    private let operations = AsyncLock()
    private let statePublisher = ObservableValue<SessionState>.Publisher(.launching)
    private let accountsPublisher = ObservableValue<[Account]>.Publisher([])
    private let combiner: Lock<Combiner>
    private let subscriptions = Lock<[ObservableValue<Void>.Unsubscribe]>([])

    private struct Combiner: ~Copyable {
        var flow: AppFlowMachine.State = .launching
        var active: ActiveSession = .none
        var session: SessionMachine.State?
        var unsubscribeSession: ObservableValue<Void>.Unsubscribe?
    }

    package init(coordinator: AppFlowCoordinator, sessions: CommunitySessions) {
        self.coordinator = coordinator
        self.sessions = sessions
        self.combiner = Lock(Combiner())
        let accountsPublisher = self.accountsPublisher
        let unsubscribeAccounts = sessions.storage.accounts.subscribe { stored in
            accountsPublisher.publish(stored.map(Account.init))
        }
        let unsubscribeFlow = coordinator.state.subscribe { [weak self] flow in
            self?.update { $0.flow = flow }
        }
        let unsubscribeActive = sessions.active.subscribe { [weak self] active in self?.activeChanged(active) }
        subscriptions.withLock { $0 = [unsubscribeAccounts, unsubscribeFlow, unsubscribeActive] }
        sessions.onSessionEnded { [weak self] account in self?.sessionEnded(account) }
    }

    deinit {
        for unsubscribe in subscriptions.withLock({ $0 }) { unsubscribe() }
        combiner.withLock { $0.unsubscribeSession?() }
    }

    // MARK: - Operations

    /// Signs in with a user name (a localpart or a full user ID) and password on the manifest's
    /// homeserver and makes the account the active one. Another account already signed in
    /// stays on the device.
    ///
    /// An account that is already on this device is not signed in a second time (that would make
    /// it a second device): when it is the active account and soft logged out, this is
    /// ``reauthenticate(password:)``; otherwise it throws ``/SymorvaMachines/SessionError/alreadySignedIn(_:)``
    /// and the app switches to it with ``switchAccount(to:)``. The check knows the name the way
    /// the member typed it (a localpart on the manifest's server, or a full user ID); a login
    /// name the server maps to the account otherwise (another case, a third-party ID) is not
    /// recognised before the server answers.
    ///
    /// - Throws: ``/SymorvaMachines/SessionError/invalidCredentials`` for a wrong password,
    ///   ``/SymorvaMachines/SessionError/unreachable(_:)`` when the homeserver cannot be reached,
    ///   ``/SymorvaMachines/SessionError/alreadySignedIn(_:)``, and the other cases of
    ///   ``/SymorvaMachines/SessionError``.
    @discardableResult
    public func signIn(username: String, password: Secret<String>) async throws(SessionError) -> Account {
        try await serialized { () async throws(SessionError) -> Account in
            if let existing = self.storedAccount(named: username) {
                if case .running(let context) = self.sessions.active.value, context.userID == existing.userID,
                    case .softLoggedOut = context.sessionHost.states.value
                {
                    return try await self.reauthenticateActive(password: password)
                }
                throw .alreadySignedIn(existing.userID)
            }
            return try await self.runSignIn(SignInRequest(kind: .signIn, username: username, password: password))
        }
    }

    /// The account on this device that `username` names: a full user ID, or a localpart on the
    /// manifest's server (localparts are lower case on Matrix servers).
    private func storedAccount(named username: String) -> Account? {
        let userID =
            username.hasPrefix("@") ? UserID(username) : UserID("@\(username.lowercased()):\(sessions.serverName)")
        guard let userID else { return nil }
        return accounts.value.first { $0.userID == userID }
    }

    /// Creates an account (user-interactive registration with the `m.login.dummy` stage), signs
    /// it in and makes it the active one.
    ///
    /// - Throws: ``/SymorvaMachines/SessionError/userInUse`` when the name is taken,
    ///   ``/SymorvaMachines/SessionError/invalidUsername``, ``/SymorvaMachines/SessionError/registrationDisabled``, …
    @discardableResult
    public func register(username: String, password: Secret<String>) async throws(SessionError) -> Account {
        try await serialized { () async throws(SessionError) -> Account in
            try await self.runSignIn(SignInRequest(kind: .register, username: username, password: password))
        }
    }

    /// Signs the active account out: `/logout` on the server (its tokens stop working), then
    /// its local data is wiped. The next account on the device, if any, becomes active.
    ///
    /// - Throws: ``/SymorvaMachines/SessionError/notSignedIn`` when no account is active.
    public func signOut() async throws(SessionError) {
        try await serialized { () async throws(SessionError) in
            try await self.settle()
            guard case .signedIn = self.coordinator.state.value else { throw .notSignedIn }
            await self.coordinator.signOut()
            await self.waitForSettledState()
        }
    }

    /// Makes another account of the device the active one. The previous account's session
    /// stops: its in-flight requests are cancelled and their late results dropped.
    ///
    /// - Throws: ``/SymorvaMachines/SessionError/notSignedIn`` when the account is not on this device.
    @discardableResult
    public func switchAccount(to account: Account) async throws(SessionError) -> Account {
        try await serialized { () async throws(SessionError) -> Account in
            try await self.settle()
            guard self.accounts.value.contains(where: { $0.id == account.id }) else { throw .notSignedIn }
            if case .signedIn(let active) = self.coordinator.state.value, active == account.id {
                return self.state.value.account ?? account
            }
            await self.coordinator.switchAccount(to: account.id)
            return try await self.waitForActive(account.id)
        }
    }

    /// Removes an account from the device: signs it out on the server where possible and wipes
    /// its local data. Removing the active account is ``signOut()``.
    public func removeAccount(_ account: Account) async throws(SessionError) {
        if case .signedIn(let active) = coordinator.state.value, active == account.id {
            try await signOut()
            return
        }
        try await serialized { () async throws(SessionError) in
            guard self.accounts.value.contains(where: { $0.id == account.id }) else { throw .notSignedIn }
            _ = await self.sessions.forgetAccount(account.id)
        }
    }

    /// Signs the soft-logged-out active account in again with its password, on the same
    /// device, keeping its local data.
    ///
    /// - Throws: ``/SymorvaMachines/SessionError/notSignedIn`` unless the active account is soft logged out;
    ///   ``/SymorvaMachines/SessionError/invalidCredentials`` for a wrong password.
    @discardableResult
    public func reauthenticate(password: Secret<String>) async throws(SessionError) -> Account {
        try await serialized { () async throws(SessionError) -> Account in
            try await self.reauthenticateActive(password: password)
        }
    }

    /// ``reauthenticate(password:)`` inside an operation that is already serialized.
    private func reauthenticateActive(password: Secret<String>) async throws(SessionError) -> Account {
        guard case .running(let context) = sessions.active.value,
            case .softLoggedOut(let session, _) = context.sessionHost.states.value
        else { throw .notSignedIn }
        let outcome = await context.sessionHost.send(
            .passwordSubmitted(username: session.userID.rawValue, password: password)
        ) { state -> Result<Account, SessionError>? in
            switch state {
            case .signedIn(let session): .success(Account(session))
            case .softLoggedOut(_, let error): .failure(error ?? .softLoggedOut)
            case .signedOut, .wipingLocalData, .failed: .failure(.notSignedIn)
            default: nil
            }
        }
        return try (outcome ?? .failure(.cancelled)).get()
    }

    // MARK: - Requests that may need the password

    /// Sends a request of the active account that may need user-interactive authentication
    /// (replacing the cross-signing identity, removing a device): without `auth` first, then,
    /// if the server asks for the `m.login.password` stage, once more with `password`. One at a
    /// time per account. Returns the answer's body.
    ///
    /// - Throws: ``/SymorvaMachines/SessionError/notSignedIn`` without a signed-in account,
    ///   ``/SymorvaMachines/SessionError/invalidCredentials`` for a wrong password,
    ///   ``/SymorvaMachines/SessionError/unsupportedAuthenticationFlow(stages:)`` when the
    ///   server wants stages other than the password,
    ///   ``/SymorvaMachines/SessionError/authorizationInProgress`` while another runs, or the
    ///   request's own error.
    package func authorize(method: String, path: String, body: [UInt8], password: Secret<String>)
        async throws(SessionError) -> [UInt8]
    {
        guard case .running(let context) = sessions.active.value else { throw .notSignedIn }
        let request = AuthorizedRequest(
            id: "authorize-\(UInt64.random(in: 0...UInt64.max))", method: method, path: path, body: body,
            password: password)
        await context.sessionHost.send(.authorizationRequested(request))
        return try await context.authorizations.wait(request.id).get()
    }

    // MARK: - Launch

    /// Reads the stored accounts and restores the last active one (no network needed); returns
    /// once ``state`` says where the member is.
    package func launch() async {
        await operations.withLock {
            if case .launching = self.coordinator.state.value { await self.coordinator.launch() }
            await self.waitForSettledState()
        }
    }

    // MARK: - Internals

    private func serialized<T: Sendable>(_ body: @escaping @Sendable () async throws(SessionError) -> T)
        async throws(SessionError) -> T
    {
        let result = await operations.withLock { () async -> Result<T, SessionError> in
            do throws(SessionError) { return .success(try await body()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Launches if needed and waits until the app flow is at rest (not mid-switch or mid-sign-out).
    private func settle() async throws(SessionError) {
        if case .launching = coordinator.state.value { await coordinator.launch() }
        await waitForSettledState()
    }

    private func waitForSettledState() async {
        _ = await state.first { state -> Void? in
            switch state {
            case .launching, .signingIn, .restoring, .switching, .signingOut: nil
            case .signedOut, .signedIn, .softLoggedOut, .unavailable: ()
            }
        }
    }

    private func runSignIn(_ request: SignInRequest) async throws(SessionError) -> Account {
        try await settle()
        await sessions.setPending(request)
        await coordinator.signIn()
        if case .signingIn = coordinator.state.value {
        } else if !request.isPicked {
            // The app flow had no sign-in to start (it was busy): nothing was sent.
            await sessions.setPending(nil)
            throw .cancelled
        }
        switch await request.outcome() {
        case .success(let account):
            return try await waitForActive(account)
        case .failure(let error):
            // The app flow goes back to where it was; report the error once it is there.
            await waitForSettledState()
            throw error
        }
    }

    /// Waits until `account` is the active account and its session is restored.
    private func waitForActive(_ account: UserID) async throws(SessionError) -> Account {
        let outcome = await state.first { state -> Result<Account, SessionError>? in
            switch state {
            case .signedIn(let active) where active.id == account: .success(active)
            case .softLoggedOut(let active) where active.id == account: .failure(.softLoggedOut)
            case .unavailable(let failed, let error) where failed == account: .failure(error)
            case .signedOut: .failure(.notSignedIn)
            default: nil
            }
        }
        return try (outcome ?? .failure(.cancelled)).get()
    }

    /// A running session ended by itself (the server revoked the device and the local data is
    /// wiped): sign the account out of the app flow so that the next account becomes active.
    private func sessionEnded(_ account: UserID) {
        let coordinator = self.coordinator
        Task {
            if case .signedIn(let active) = coordinator.state.value, active == account { await coordinator.signOut() }
        }
    }

    private func activeChanged(_ active: ActiveSession) {
        var sessionStates: ObservableValue<SessionMachine.State>?
        if case .running(let context) = active { sessionStates = context.sessionHost.states }
        let previous = combiner.withLock { combiner -> ObservableValue<Void>.Unsubscribe? in
            defer { combiner.unsubscribeSession = nil }
            return combiner.unsubscribeSession
        }
        previous?()
        update {
            $0.active = active
            $0.session = sessionStates?.value
        }
        guard let sessionStates else { return }
        let unsubscribe = sessionStates.subscribe { [weak self] state in
            self?.update { combiner in
                guard case .running(let context) = combiner.active, context.sessionHost.states === sessionStates else {
                    return
                }
                combiner.session = state
            }
        }
        combiner.withLock { $0.unsubscribeSession = unsubscribe }
    }

    /// Applies a change to the inputs and publishes the combined state. Publishing happens
    /// under the lock so that two inputs changing at once can never publish out of order.
    private func update(_ change: (inout Combiner) -> Void) {
        combiner.withLock { combiner in
            change(&combiner)
            let next = SessionState.combining(flow: combiner.flow, active: combiner.active, session: combiner.session)
            if next != statePublisher.value { statePublisher.publish(next) }
        }
    }
}

// MARK: - Product values

/// A signed-in account on this device, as the product shows it.
public struct Account: Sendable, Hashable, Identifiable, CustomStringConvertible, LogSafe {
    /// The Matrix user ID (`@alice:example.org`).
    public var userID: UserID
    /// This installation's device of the account.
    public var deviceID: DeviceID
    /// The homeserver the account lives on.
    public var homeserverURL: HomeserverURL

    /// An account.
    public init(userID: UserID, deviceID: DeviceID, homeserverURL: HomeserverURL) {
        self.userID = userID
        self.deviceID = deviceID
        self.homeserverURL = homeserverURL
    }

    init(_ stored: StoredAccount) {
        self.init(userID: stored.userID, deviceID: stored.deviceID, homeserverURL: stored.homeserverURL)
    }

    init(_ session: Session) {
        self.init(userID: session.userID, deviceID: session.deviceID, homeserverURL: session.homeserver.baseURL)
    }

    /// The local account ID (the app flow's and the store's key).
    public var id: UserID { userID }

    /// `@alice:example.org (device ABCDEF)`: IDs only, safe to log.
    public var description: String { "\(userID) (device \(deviceID))" }
    /// Same as ``description``: Matrix IDs are safe to log.
    public var logDescription: String { description }
}

/// Where the member's session is, as views show it.
///
/// A product-level summary of the app flow (which account is active) and of the active
/// account's session machine (signed in, refreshing, soft logged out, …); refreshing tokens is
/// invisible here — the account simply stays ``signedIn(_:)``.
public enum SessionState: Sendable, Equatable, CustomStringConvertible {
    /// `SymorvaCommunity.launch()` has not finished reading the stored accounts yet.
    case launching
    /// No account is active.
    case signedOut
    /// A sign-in, registration or re-authentication is under way.
    case signingIn
    /// An account's stored session is being loaded (after launch, sign-in or a switch); no
    /// network is needed for this.
    case restoring(UserID)
    /// The account is signed in and active.
    case signedIn(Account)
    /// The server ended the account's tokens but kept its device: local data is kept, and
    /// ``SessionClient/reauthenticate(password:)`` resumes on the same device.
    case softLoggedOut(Account)
    /// The active account is changing to this one.
    case switching(to: UserID)
    /// The account is being signed out and its local data wiped.
    case signingOut(UserID)
    /// The account is active but its stored session cannot be used (for instance a tampered
    /// or undecryptable token): sign in again or remove the account.
    case unavailable(UserID, SessionError)

    /// The active account when one is signed in (or soft logged out).
    public var account: Account? {
        switch self {
        case .signedIn(let account), .softLoggedOut(let account): account
        default: nil
        }
    }

    /// The case and its IDs; never a token.
    public var description: String {
        switch self {
        case .launching: "launching"
        case .signedOut: "signedOut"
        case .signingIn: "signingIn"
        case .restoring(let account): "restoring(\(account))"
        case .signedIn(let account): "signedIn(\(account))"
        case .softLoggedOut(let account): "softLoggedOut(\(account))"
        case .switching(let account): "switching(to: \(account))"
        case .signingOut(let account): "signingOut(\(account))"
        case .unavailable(let account, let error): "unavailable(\(account), \(error))"
        }
    }

    /// The product state for the app flow's `flow` and the active session.
    static func combining(
        flow: AppFlowMachine.State, active: ActiveSession, session: SessionMachine.State?
    ) -> SessionState {
        switch flow {
        case .launching, .restoring: return .launching
        case .signedOut: return .signedOut
        case .signingIn: return .signingIn
        case .switching(_, let target): return .switching(to: target)
        case .signingOut(let account): return .signingOut(account)
        case .signedIn(let account):
            switch active {
            case .running(let context) where context.userID == account:
                guard let session else { return .restoring(account) }
                return session.productState(for: account)
            case .unavailable(let failed, let error) where failed == account:
                return .unavailable(account, error)
            default:
                return .restoring(account)
            }
        }
    }
}

extension SessionMachine.State {
    /// What the member sees of this session state when `account` is the active account.
    func productState(for account: UserID) -> SessionState {
        switch self {
        case .restoring: .restoring(account)
        case .signedIn(let session), .authorizing(let session, _), .refreshing(let session, _, _),
            .persisting(let session, _, _):
            .signedIn(Account(session))
        case .softLoggedOut(let session, _): .softLoggedOut(Account(session))
        case .signingOut, .wipingLocalData: .signingOut(account)
        case .signedOut: .signedOut
        case .failed(_, let error, _): .unavailable(account, error)
        case .discovering, .awaitingCredentials, .authenticating, .registering: .signingIn
        }
    }
}
