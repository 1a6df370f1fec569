import SymorvaMachines
import SymorvaRuntime
import SymorvaSession
import SymorvaTesting
import Testing

private let alice: UserID = "@alice:example.org"
private let bob: UserID = "@bob:example.org"
private let carol: UserID = "@carol:example.org"

@Suite("AppFlow coordinator")
struct AppFlowCoordinatorTests {
    /// Launches a coordinator and waits until `account`'s session runs in its scope.
    func launched(
        _ driver: FakeSessionDriver, active account: UserID, tracer: Tracer = Tracer()
    ) async throws -> (AppFlowCoordinator, AccountScope) {
        let flow = AppFlowCoordinator(driver: driver, clock: ManualClock(), tracer: tracer)
        await flow.launch()
        try await flow.state.wait(for: .signedIn(account))
        let scope = try await flow.activeScope.wait(until: { $0?.label == account.rawValue })!
        try await driver.hosts.wait(until: { $0[account] != nil })
        return (flow, scope)
    }

    @Test("Launch restores the last active account and opens its scope")
    func launchRestores() async throws {
        let driver = FakeSessionDriver(accounts: [alice, bob], active: bob)
        let (flow, scope) = try await launched(driver, active: bob)
        #expect(!scope.isEnded)
        #expect(flow.state.value == .signedIn(bob))
        #expect(driver.ended.value.isEmpty)
    }

    @Test("Switching ends the old account's scope as switched and opens the new one's")
    func switchingEndsOldScope() async throws {
        let driver = FakeSessionDriver(accounts: [alice, bob], active: alice)
        let (flow, aliceScope) = try await launched(driver, active: alice)
        await flow.switchAccount(to: bob)
        try await flow.state.wait(for: .signedIn(bob))
        try await driver.ended.wait(for: [.init(account: alice, reason: .switched)])
        #expect(aliceScope.isEnded)
        let bobScope = try await flow.activeScope.wait(until: { $0?.label == bob.rawValue })
        #expect(bobScope !== aliceScope)
        #expect(bobScope?.isEnded == false)
    }

    @Test("A slow effect of the old account returns after the switch: traced stale, never applied")
    func lateResultIsStale() async throws {
        let driver = FakeSessionDriver(accounts: [alice, bob], active: alice)
        let (flow, _) = try await launched(driver, active: alice)
        let aliceHost = try #require(driver.hosts.value[alice])
        await aliceHost.send(.load("alice's inbox"))
        try await driver.gate.waitForWaiters(count: 1)

        await flow.switchAccount(to: bob)
        try await flow.state.wait(for: .signedIn(bob))
        try await driver.ended.wait(until: { $0.contains(.init(account: alice, reason: .switched)) })
        let bobHost = try #require(await driver.hosts.wait(until: { $0[bob] != nil })[bob])

        driver.gate.open()
        let record = try await driver.trace.wait(for: { $0.kind == .stale })
        #expect(record.machine == "FakeSession")
        #expect(record.instance == alice.rawValue)
        #expect(record.event == "loaded")
        #expect(await aliceHost.currentState == .idle)
        #expect(await bobHost.currentState == .idle)
        #expect(!driver.trace.records.contains { $0.kind == .transition && $0.event == "loaded" })
    }

    @Test("Signing out ends the scope as signed out and activates the remaining account")
    func signOut() async throws {
        let driver = FakeSessionDriver(accounts: [alice, bob], active: alice)
        let (flow, aliceScope) = try await launched(driver, active: alice)
        await flow.signOut()
        try await flow.state.wait(for: .signedIn(bob))
        try await driver.ended.wait(for: [.init(account: alice, reason: .signedOut)])
        #expect(aliceScope.isEnded)
        try await flow.activeScope.wait(until: { $0?.label == bob.rawValue && $0?.isEnded == false })
        await flow.signOut()
        try await flow.state.wait(for: .signedOut(lastError: nil))
        try await flow.activeScope.wait(until: { $0 == nil })
    }

    @Test("Signing in through the session driver opens the new account's scope")
    func signIn() async throws {
        let driver = FakeSessionDriver(accounts: [], active: nil, signIn: .success(carol))
        let flow = AppFlowCoordinator(driver: driver, clock: ManualClock(), tracer: Tracer())
        await flow.launch()
        try await flow.state.wait(for: .signedOut(lastError: nil))
        await flow.signIn()
        try await flow.state.wait(for: .signedIn(carol))
        try await flow.activeScope.wait(until: { $0?.label == carol.rawValue })
    }

    @Test("A failed sign-in lands signed out with the driver's error")
    func signInFails() async throws {
        let driver = FakeSessionDriver(accounts: [], active: nil, signIn: .failure(.credentialsRejected))
        let flow = AppFlowCoordinator(driver: driver, clock: ManualClock(), tracer: Tracer())
        await flow.launch()
        try await flow.state.wait(for: .signedOut(lastError: nil))
        await flow.signIn()
        try await flow.state.wait(for: .signedOut(lastError: .credentialsRejected))
        #expect(flow.activeScope.value == nil)
    }

    @Test("Cancelling sign-in cancels the driver's sign-in and drops its result")
    func cancelSignIn() async throws {
        let driver = FakeSessionDriver(accounts: [alice], active: alice, signIn: .success(carol))
        driver.holdSignIn.withLock { $0 = true }
        let trace = ObservableTraceRecorder()
        let tracer = Tracer()
        tracer.addSink(trace)
        let (flow, aliceScope) = try await launched(driver, active: alice, tracer: tracer)
        await flow.signIn()
        try await driver.signInGate.waitForWaiters(count: 1)
        await flow.cancelSignIn()
        try await flow.state.wait(for: .signedIn(alice))
        try await driver.signInCancellations.wait(for: 1)
        try await trace.wait(for: { $0.kind == .cancelled && $0.event == "signInFailed" })
        #expect(!aliceScope.isEnded)
        #expect(flow.state.value == .signedIn(alice))
    }

    @Test("Shutdown ends every open scope")
    func shutdown() async throws {
        let driver = FakeSessionDriver(accounts: [alice], active: alice)
        let (flow, scope) = try await launched(driver, active: alice)
        await flow.shutdown()
        #expect(scope.isEnded)
        #expect(flow.activeScope.value == nil)
        await flow.signOut()
        #expect(flow.state.value == .signedIn(alice))
    }
}
