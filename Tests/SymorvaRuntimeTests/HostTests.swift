import SymorvaRuntime
import Testing

@Suite("Machine host")
struct HostTests {
    @Test("Posted and sent events are processed in the order they were given")
    func ordering() async throws {
        let world = ProbeWorld()
        let host = world.host(interpreter: world.interpreter)
        host.post(.note("1"))
        await host.send(.note("2"))
        host.post(.note("3"))
        host.post(.note("4"))
        await host.send(.note("5"))
        await host.send(contentsOf: [.note("6"), .note("7")])
        host.post(.note("8"))
        try await host.states.wait(for: .running(log: ["1", "2", "3", "4", "5", "6", "7", "8"]))
        #expect(await host.currentState == .running(log: ["1", "2", "3", "4", "5", "6", "7", "8"]))
    }

    @Test("Observers see each state the host settles on, once per send")
    func observers() async throws {
        let world = ProbeWorld()
        let host = world.host(interpreter: world.interpreter, initial: .idle)
        let seen = Lock<[ProbeMachine.State]>([])
        let unsubscribe = host.states.subscribe { state in seen.withLock { $0.append(state) } }
        defer { unsubscribe() }
        await host.send(.start)
        await host.send(.note("a"))
        await host.send(contentsOf: [.note("b"), .note("c")])
        await host.send(.poke)  // ignored in running: nothing to publish
        #expect(
            seen.withLock { $0 } == [
                .idle, .running(log: []), .running(log: ["a"]), .running(log: ["a", "b", "c"]),
            ])
    }

    @Test("An ignored event is traced as ignored and changes nothing")
    func ignoredTraced() async throws {
        let world = ProbeWorld()
        let host = world.host(interpreter: world.interpreter, initial: .idle)
        await host.send(.note("x"))
        #expect(await host.currentState == .idle)
        #expect(
            world.trace.records == [
                TraceRecord(kind: .ignored, machine: "Probe", from: "idle", event: "note", to: "idle")
            ])
        #expect(world.trace.records.first?.description == "Probe from=idle event=note to=idle effects=[] (ignored)")
    }

    @Test("Effects run concurrently")
    func concurrentEffects() async throws {
        let world = ProbeWorld()
        let host = world.host(interpreter: world.interpreter)
        await host.send(.perform("slow-a"))
        await host.send(.perform("slow-b"))
        // Both effects wait at the closed gate at the same time: neither waits for the other.
        try await world.gate.waitForWaiters(count: 2)
        #expect(await host.runningEffectCount == 2)
        world.gate.open()
        try await host.states.wait(until: { Set($0.log) == ["done:slow-a", "done:slow-b"] })
        try await eventually("effects retired") { await host.runningEffectCount == 0 }
    }

    @Test("Replacing a keyed effect drops the first one's late result, traced as cancelled")
    func keyedReplacement() async throws {
        let world = ProbeWorld()
        let host = world.host(interpreter: world.interpreter)
        await host.send(.performKeyed("slow-a"))
        try await world.gate.waitForWaiters(count: 1)
        await host.send(.performKeyed("slow-b"))
        try await world.gate.waitForWaiters(count: 2)
        #expect(await host.runningKeys == ["work"])
        world.gate.open()
        try await world.trace.wait(for: { $0.kind == .cancelled && $0.event == "finished" })
        try await host.states.wait(until: { $0.log.contains("done:slow-b") })
        try await eventually("both results handled") { await host.runningEffectCount == 0 }
        #expect(await host.currentState == .running(log: ["done:slow-b"]))
    }

    @Test("A cancel effect cancels the keyed effect and drops its result")
    func cancelEffect() async throws {
        let world = ProbeWorld()
        let interpreter = world.interpreter
        let host = world.host(interpreter: interpreter)
        await host.send(.performKeyed("stoppable"))
        try await world.gate.waitForWaiters(count: 1)
        await host.send(.cancelKeyed)
        try await world.waitForCancellations(1)
        try await world.trace.wait(for: { $0.kind == .cancelled && $0.event == "finished" })
        #expect(await host.runningKeys.isEmpty)
        #expect(await host.currentState == .running(log: []))
        // The interpreter never sees the cancel effect itself.
        #expect(interpreter.performed == [.keyedWork("stoppable")])
    }

    @Test("The state timeout fires when the machine stays in its state")
    func stateTimeoutFiresOnStay() async throws {
        let world = ProbeWorld()
        let host = world.host(interpreter: world.interpreter)
        await host.send(.wait(.seconds(5)))
        try await world.clock.waitForSleepers(count: 1)
        await host.send(.poke)
        #expect(world.clock.sleeperCount == 1)
        await world.clock.advance(by: .seconds(5))
        try await host.states.wait(for: .running(log: ["timeout"]))
    }

    @Test("The state timeout is cancelled when the machine moves")
    func stateTimeoutCancelledOnMove() async throws {
        let world = ProbeWorld()
        let host = world.host(interpreter: world.interpreter)
        await host.send(.wait(.seconds(5)))
        try await world.clock.waitForSleepers(count: 1)
        await host.send(.resume)
        try await world.waitForCancellations(1)
        #expect(world.clock.sleeperCount == 0)
        // The timeout task still reports `timedOut` after its cancellation: the host drops it.
        try await world.trace.wait(for: { $0.kind == .cancelled && $0.event == "timedOut" })
        await world.clock.advance(by: .seconds(10))
        #expect(await host.currentState == .running(log: []))
    }

    @Test("A named timer fires at its deadline on the manual clock and survives moves")
    func namedTimer() async throws {
        let world = ProbeWorld()
        let host = world.host(interpreter: world.interpreter)
        await host.send(.startTimer(.seconds(10)))
        try await world.clock.waitForSleepers(count: 1)
        await host.send(.note("moved"))
        await world.clock.advance(by: .seconds(9))
        #expect(world.clock.sleeperCount == 1)
        #expect(await host.currentState == .running(log: ["moved"]))
        await world.clock.advance(by: .seconds(1))
        try await host.states.wait(for: .running(log: ["moved", "timer"]))
    }

    @Test("A timer that fires after its cancellation never delivers")
    func timerAfterCancel() async throws {
        let world = ProbeWorld()
        let host = world.host(interpreter: world.interpreter)
        await host.send(.startTimer(.seconds(10)))
        try await world.clock.waitForSleepers(count: 1)
        await host.send(.stopTimer)
        try await world.waitForCancellations(1)
        try await world.trace.wait(for: { $0.kind == .cancelled && $0.event == "timerFired" })
        await world.clock.advance(by: .seconds(10))
        #expect(await host.currentState == .running(log: []))
        #expect(!world.trace.records.contains { $0.kind == .transition && $0.event == "timerFired" })
    }

    @Test("Stopping the host cancels every effect and ignores later events")
    func stopCancelsAll() async throws {
        let world = ProbeWorld()
        let host = world.host(interpreter: world.interpreter)
        await host.send(.perform("stoppable-a"))
        await host.send(.performKeyed("stoppable-b"))
        await host.send(.startTimer(.seconds(1)))
        try await world.gate.waitForWaiters(count: 2)
        try await world.clock.waitForSleepers(count: 1)
        await host.stop()
        try await world.waitForCancellations(3)
        #expect(Set(world.cancelled.withLock { $0 }) == ["stoppable-a", "stoppable-b", "timer"])
        #expect(await host.runningEffectCount == 0)
        // The cancelled effects still report; a stopped host traces their results and drops them.
        try await world.trace.observable.wait(until: { records in
            records.filter { $0.kind == .cancelled }.map(\.event).sorted() == ["finished", "finished", "timerFired"]
        })
        await host.send(.note("after stop"))
        #expect(await host.currentState == .running(log: []))
    }

    @Test("A result that arrives after its scope ended is traced stale and not applied")
    func scopeEnded() async throws {
        let world = ProbeWorld()
        let scope = AccountScope(label: "@alice:example.org")
        let host = world.host(interpreter: world.interpreter, scope: scope)
        await host.send(.perform("slow"))
        try await world.gate.waitForWaiters(count: 1)
        scope.end(reason: .signedOut)
        world.gate.open()
        let record = try await world.trace.wait(for: { $0.kind == .stale })
        #expect(record.event == "finished")
        #expect(record.epoch == scope.epoch.value)
        try await eventually("effects cancelled") { await host.runningEffectCount == 0 }
        #expect(await host.currentState == .running(log: []))
    }

    @Test("After a cache clear, old results are stale and new effects apply")
    func scopeAdvanced() async throws {
        let world = ProbeWorld()
        let scope = AccountScope(label: "@alice:example.org")
        let host = world.host(interpreter: world.interpreter, scope: scope)
        await host.send(.perform("slow-old"))
        try await world.gate.waitForWaiters(count: 1)
        let epoch = scope.advance(reason: .cacheCleared)
        #expect(epoch == Epoch(2))
        world.gate.open()
        try await world.trace.wait(for: { $0.kind == .stale && $0.event == "finished" })
        await host.send(.perform("fresh"))
        try await host.states.wait(for: .running(log: ["done:fresh"]))
    }
}
