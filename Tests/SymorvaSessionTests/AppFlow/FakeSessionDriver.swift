import SymorvaMachines
import SymorvaRuntime
import SymorvaSession
import SymorvaTesting

/// A stand-in for one account's session: loads a resource through a slow effect.
struct FakeSessionMachine: StateMachine {
    static let name = "FakeSession"

    enum State: Sendable, Equatable, CaseNamed {
        /// Nothing loaded.
        case idle
        /// A resource arrived.
        case loaded(String)
    }

    enum Event: Sendable, Equatable, CaseNamed {
        /// Somebody asked for a resource.
        case load(String)
        /// The resource arrived.
        case loaded(String)
    }

    enum Effect: MachineEffect, Equatable {
        case fetch(String)
    }

    func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .load(let name): .stay(effects: [.fetch(name)])
        case .loaded(let name): .move(to: .loaded(name))
        }
    }
}

/// The session-feature double the app flow is tested with: accounts in memory, sign-in
/// answered from a script, one ``FakeSessionMachine`` host per started session, created in the
/// account's scope. Fetches wait at `gate` and ignore cancellation, like I/O that cannot be
/// interrupted.
final class FakeSessionDriver: SessionDriver {
    struct Ended: Equatable, Sendable {
        let account: UserID
        let reason: AccountScope.Reason
    }

    let tracer = Tracer()
    let trace = ObservableTraceRecorder()
    let gate = TestGate()
    let signInGate = TestGate()
    private let stored: Lock<RestoredAccounts>
    private let signInResult: Lock<Result<UserID, AppFlowError>>
    private let hostsPublisher = ObservableValue<[UserID: MachineHost<FakeSessionMachine>]>.Publisher([:])
    private let endedPublisher = ObservableValue<[Ended]>.Publisher([])
    private let cancelledSignIns = ObservableValue<Int>.Publisher(0)
    private let lock = Lock(())

    init(accounts: [UserID], active: UserID?, signIn: Result<UserID, AppFlowError> = .failure(.sessionFailed)) {
        stored = Lock(RestoredAccounts(accounts: accounts, active: active))
        signInResult = Lock(signIn)
        tracer.addSink(trace)
    }

    /// The session hosts started so far, by account.
    var hosts: ObservableValue<[UserID: MachineHost<FakeSessionMachine>]> { hostsPublisher.observable }
    /// Every session end, in order.
    var ended: ObservableValue<[Ended]> { endedPublisher.observable }
    /// How many sign-ins saw their cancellation.
    var signInCancellations: ObservableValue<Int> { cancelledSignIns.observable }

    /// Makes the next sign-in wait at `signInGate` (cancellably) before answering.
    let holdSignIn = Lock(false)

    func restoreAccounts() async throws(AppFlowError) -> RestoredAccounts {
        stored.withLock { $0 }
    }

    func signIn(_ attempt: SignInAttempt) async throws(AppFlowError) -> UserID {
        if holdSignIn.withLock({ $0 }) {
            do {
                try await signInGate.waitCancellable()
            } catch {
                lock.withLock { _ in cancelledSignIns.update { $0 += 1 } }
                throw .sessionFailed
            }
        }
        let result = signInResult.withLock { $0 }
        if case .success(let account) = result {
            stored.withLock { $0.accounts.append(account) }
        }
        return try result.get()
    }

    func startSession(for account: UserID, in scope: AccountScope) async {
        let gate = self.gate
        let host = MachineHost(
            machine: FakeSessionMachine(), initial: .idle,
            interpreter: ClosureInterpreter<FakeSessionMachine> { effect, _ in
                switch effect {
                case .fetch(let name):
                    await gate.wait()
                    return .loaded(name)
                }
            }, instance: account.rawValue, scope: scope, tracer: tracer)
        lock.withLock { _ in hostsPublisher.update { $0[account] = host } }
    }

    func endSession(for account: UserID, reason: AccountScope.Reason) async {
        await hosts.value[account]?.stop()
        lock.withLock { _ in endedPublisher.update { $0.append(Ended(account: account, reason: reason)) } }
    }

    func forgetAccount(_ account: UserID) async -> [UserID] {
        stored.withLock { stored in
            stored.accounts.removeAll { $0 == account }
            return stored.accounts
        }
    }
}
