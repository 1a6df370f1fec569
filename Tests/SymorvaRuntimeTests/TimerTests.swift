import SymorvaRuntime
import SymorvaTesting
import Synchronization
import Testing

/// A machine whose timers the host performs: named timers, a state timer, and a log of what
/// reached it.
struct TimerMachine: StateMachine {
    static let name = "Timers"

    enum State: Sendable, Equatable, CaseNamed {
        /// Accepting work; `log` lists what reached the machine.
        case running(log: [String])
        /// Waiting with a state timer.
        case waiting(log: [String])
    }

    enum Event: Sendable, Equatable, CaseNamed {
        /// Starts (or replaces) the named timer.
        case start(String, TimerDeadline)
        /// Cancels the named timer.
        case stop(String)
        /// A named timer fired.
        case fired(String)
        /// Appends a note (a move).
        case note(String)
        /// Enters `waiting` with a state timer.
        case wait(Duration)
        /// Leaves `waiting`.
        case resume
        /// The state timer fired.
        case timedOut
    }

    enum Effect: MachineEffect, Equatable {
        case timer(String, TimerDeadline)
        case cancelTimer(String)
        case timeout(Duration)

        var directive: EffectDirective {
            switch self {
            case .timer(let name, let deadline): .timer(EffectKey(name), deadline)
            case .cancelTimer(let name): .cancel(EffectKey(name))
            case .timeout(let delay): .timer(.stateTimeout, .after(delay))
            }
        }
    }

    func event(firing timer: Effect) -> Event? {
        switch timer {
        case .timer(let name, _): .fired(name)
        case .timeout: .timedOut
        case .cancelTimer: nil
        }
    }

    func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch (state, event) {
        case (.running, .start(let name, let deadline)): .stay(effects: [.timer(name, deadline)])
        case (.running, .stop(let name)): .stay(effects: [.cancelTimer(name)])
        case (.running(let log), .fired(let name)): .move(to: .running(log: log + ["fired:\(name)"]))
        case (.running(let log), .note(let text)): .move(to: .running(log: log + [text]))
        case (.running(let log), .wait(let delay)): .move(to: .waiting(log: log), effects: [.timeout(delay)])
        case (.waiting(let log), .resume): .move(to: .running(log: log))
        case (.waiting(let log), .timedOut): .move(to: .running(log: log + ["timeout"]))
        default: .ignored
        }
    }
}

extension TimerMachine.State {
    var log: [String] {
        switch self {
        case .running(let log), .waiting(let log): log
        }
    }
}

/// A clock whose sleeps ignore cancellation, so that a cancelled timer still fires: the host
/// must drop its event.
struct StubbornClock: RuntimeClock {
    let manual: ManualClock
    var now: Duration { manual.now }
    func sleep(for duration: Duration) async throws {
        let manual = self.manual
        try await Task { try await manual.sleep(for: duration) }.value
    }
}

/// A wall clock standing still.
struct FixedWallClock: WallClock {
    let now: Timestamp
}

/// The host, its clocks and its trace for one timer test.
final class TimerWorld: Sendable {
    let clock = ManualClock()
    let tracer = Tracer()
    let trace = ObservableTraceRecorder()
    let interpreter = RecordingInterpreter<TimerMachine>()

    init() { tracer.addSink(trace) }

    func host(
        stubborn: Bool = false, scope: AccountScope? = nil,
        wallClock: any WallClock = FixedWallClock(now: Timestamp(millisecondsSince1970: 0))
    ) -> MachineHost<TimerMachine> {
        MachineHost(
            machine: TimerMachine(), initial: .running(log: []), interpreter: interpreter, scope: scope,
            clock: stubborn ? StubbornClock(manual: clock) : clock, wallClock: wallClock, tracer: tracer)
    }
}

@Suite("Host timers")
struct TimerTests {
    @Test("A timer fires after its delay on the host's clock; the interpreter never sees it")
    func firesAfterDelay() async throws {
        let world = TimerWorld()
        let host = world.host()
        await host.send(.start("a", .after(.seconds(10))))
        try await world.clock.waitForSleepers(count: 1)
        #expect(await host.runningKeys == ["a"])
        await world.clock.advance(by: .seconds(9))
        #expect(await host.currentState == .running(log: []))
        await world.clock.advance(by: .seconds(1))
        try await host.states.wait(for: .running(log: ["fired:a"]))
        #expect(world.interpreter.performed.isEmpty)
        #expect(await host.runningKeys.isEmpty)
        // Traced like any effect: the step that started it names it, and its event is a step.
        #expect(world.trace.records.contains { $0.event == "start" && $0.effects == ["timer"] })
        #expect(world.trace.records.contains { $0.kind == .transition && $0.event == "fired" })
    }

    @Test("A timer at an instant fires then; one at a passed instant fires at once")
    func firesAtInstant() async throws {
        let world = TimerWorld()
        let host = world.host()
        await host.send(.start("expiry", .at(.seconds(110))))
        try await world.clock.waitForSleepers(count: 1)
        #expect(world.clock.pendingDeadlines == [.seconds(110)])
        await world.clock.advance(to: .seconds(110))
        try await host.states.wait(for: .running(log: ["fired:expiry"]))
        await host.send(.start("late", .at(.seconds(1))))
        try await host.states.wait(for: .running(log: ["fired:expiry", "fired:late"]))
    }

    @Test("A wall-clock timer becomes a delay on the host's clock")
    func wallClockTimer() async throws {
        let world = TimerWorld()
        let host = world.host(wallClock: FixedWallClock(now: Timestamp(millisecondsSince1970: 1_000_000)))
        await host.send(.start("refresh", .atWallTime(Timestamp(millisecondsSince1970: 1_005_000))))
        try await world.clock.waitForSleepers(count: 1)
        #expect(world.clock.pendingDeadlines == [.seconds(5)])
        await world.clock.advance(by: .seconds(5))
        try await host.states.wait(for: .running(log: ["fired:refresh"]))
    }

    @Test("A cancelled timer never fires, even when its sleep ends anyway")
    func cancelled() async throws {
        let world = TimerWorld()
        let host = world.host(stubborn: true)
        await host.send(.start("a", .after(.seconds(10))))
        try await world.clock.waitForSleepers(count: 1)
        await host.send(.stop("a"))
        #expect(await host.runningKeys.isEmpty)
        await world.clock.advance(by: .seconds(10))
        try await world.trace.wait(for: { $0.kind == .cancelled && $0.event == "fired" })
        #expect(await host.currentState == .running(log: []))
    }

    @Test("A replaced timer never fires; its replacement fires once")
    func replaced() async throws {
        let world = TimerWorld()
        let host = world.host(stubborn: true)
        await host.send(.start("a", .after(.seconds(10))))
        await host.send(.start("a", .after(.seconds(20))))
        try await world.clock.waitForSleepers(count: 2)
        await world.clock.advance(by: .seconds(10))
        try await world.trace.wait(for: { $0.kind == .cancelled && $0.event == "fired" })
        #expect(await host.currentState == .running(log: []))
        await world.clock.advance(by: .seconds(10))
        try await host.states.wait(for: .running(log: ["fired:a"]))
        #expect(world.trace.records.filter { $0.kind == .transition && $0.event == "fired" }.count == 1)
    }

    @Test("A state timer fires when the machine stays and is cancelled when it moves")
    func stateTimer() async throws {
        let world = TimerWorld()
        let host = world.host()
        await host.send(.wait(.seconds(5)))
        try await world.clock.waitForSleepers(count: 1)
        await host.send(.resume)
        #expect(await host.runningKeys.isEmpty)
        #expect(world.clock.sleeperCount == 0)
        await world.clock.advance(by: .seconds(5))
        #expect(await host.currentState == .running(log: []))
        await host.send(.wait(.seconds(5)))
        try await world.clock.waitForSleepers(count: 1)
        await world.clock.advance(by: .seconds(5))
        try await host.states.wait(for: .running(log: ["timeout"]))
    }

    @Test("A timer of an ended scope epoch is traced stale and never applied")
    func stale() async throws {
        let world = TimerWorld()
        let scope = AccountScope(label: "@alice:example.org")
        let host = world.host(stubborn: true, scope: scope)
        await host.send(.start("a", .after(.seconds(10))))
        try await world.clock.waitForSleepers(count: 1)
        scope.advance(reason: .cacheCleared)
        await world.clock.advance(by: .seconds(10))
        try await world.trace.wait(for: { $0.kind == .stale && $0.event == "fired" })
        #expect(await host.currentState == .running(log: []))
    }

    @Test("A stopped host fires no timer")
    func stopped() async throws {
        let world = TimerWorld()
        let host = world.host(stubborn: true)
        await host.send(.start("a", .after(.seconds(10))))
        await host.send(.wait(.seconds(10)))
        try await world.clock.waitForSleepers(count: 2)
        await host.stop()
        #expect(await host.runningEffectCount == 0)
        await world.clock.advance(by: .seconds(10))
        try await world.trace.observable.wait(until: { records in
            records.filter { $0.kind == .cancelled }.map(\.event).sorted() == ["fired", "timedOut"]
        })
        #expect(await host.currentState == .waiting(log: []))
    }
}
