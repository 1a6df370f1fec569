import SymorvaRuntime
import SymorvaTesting
import Synchronization
import Testing

@Suite("Waiting for a state")
struct WaitTests {
    @Test("The state the send settles on answers at once: an answer in the same turn is never missed")
    func sameTurn() async throws {
        let world = TimerWorld()
        let host = world.host()
        let answer = await host.send(.note("a")) { state in state.log.contains("a") ? state : nil }
        #expect(answer == .running(log: ["a"]))
    }

    @Test("A later state answers: the first one that matches")
    func laterState() async throws {
        let world = TimerWorld()
        let host = world.host()
        async let answer = host.send(.start("a", .after(.seconds(10)))) { state -> [String]? in
            state.log.isEmpty ? nil : state.log
        }
        try await world.clock.waitForSleepers(count: 1)
        await world.clock.advance(by: .seconds(10))
        #expect(await answer == ["fired:a"])
    }

    @Test("A state that is already settled answers a wait at once (no lost wake-up)")
    func alreadySettled() async throws {
        let world = TimerWorld()
        let host = world.host()
        host.post(.note("posted"))
        // The posted event may or may not have been applied yet: either way the wait sees it.
        let log = await host.wait { state in state.log == ["posted"] ? state.log : nil }
        #expect(log == ["posted"])
        #expect(await host.wait { $0.log.first } == "posted")
    }

    @Test("An ignored event answers with `ignored` when given, else waits like any other")
    func ignored() async throws {
        let world = TimerWorld()
        let host = world.host()
        let refused = await host.send(.resume, ignored: { _ in "ignored" }, until: { _ in "taken" })
        #expect(refused == "ignored")
        let taken = await host.send(.note("x"), ignored: { _ in "ignored" }, until: { _ in "taken" })
        #expect(taken == "taken")
    }

    @Test("Stopping the host ends the wait with nil; a stopped host answers nil at once")
    func hostStops() async throws {
        let world = TimerWorld()
        let host = world.host()
        async let answer = host.send(.note("a")) { _ -> Int? in nil }
        try await eventually("the send was applied") { await host.currentState == .running(log: ["a"]) }
        await host.stop()
        #expect(await answer == nil)
        #expect(await host.send(.note("b")) { _ in 1 } == nil)
        #expect(await host.wait { _ in 1 } == nil)
    }

    @Test("The scope moving on ends the wait with nil; an ended scope answers nil at once")
    func scopeEnds() async throws {
        let world = TimerWorld()
        let scope = AccountScope(label: "@alice:example.org")
        let host = world.host(scope: scope)
        async let answer = host.wait { _ -> Int? in nil }
        try await observed(host.states)  // the wait is registered: the scope ends under it
        scope.end(reason: .signedOut)
        #expect(await answer == nil)
        #expect(await host.send(.note("b")) { _ in 1 } == nil)
    }

    @Test("Cancelling the waiting task ends the wait with nil")
    func cancelled() async throws {
        let world = TimerWorld()
        let host = world.host()
        let waiting = Task { await host.wait { _ -> Int? in nil } }
        waiting.cancel()
        #expect(await waiting.value == nil)
    }

    @Test("An observable value answers with its first matching value, current or later")
    func observableFirst() async throws {
        let publisher = ObservableValue<Int>.Publisher(1)
        #expect(await publisher.observable.first { $0 == 1 ? "one" : nil } == "one")
        async let later = publisher.observable.first { $0 >= 3 ? $0 : nil }
        try await observed(publisher.observable)  // subscribed: 2 and 3 arrive as later values
        publisher.publish(2)
        publisher.publish(3)
        #expect(await later == 3)
    }
}

/// Returns once `value` has `count` observers: the gate that says a waiter has subscribed
/// (instead of sleeping and hoping it has).
func observed<Value: Sendable>(
    _ value: ObservableValue<Value>, count: Int = 1, fileID: String = #fileID, line: Int = #line
) async throws {
    let deadline = ContinuousClock.now + TestWaiting.defaultTimeout
    while value.observerCount < count {
        guard ContinuousClock.now < deadline else {
            throw TestFailure("\(count) observer(s) never subscribed", fileID: fileID, line: line)
        }
        await Task.yield()
    }
}
