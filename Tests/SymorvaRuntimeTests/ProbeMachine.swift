import SymorvaRuntime
import SymorvaTesting

/// A small machine that exercises every runtime feature: plain, keyed and cancelled effects,
/// a state timeout and a named timer. Its state is a log of what reached it.
struct ProbeMachine: StateMachine {
    static let name = "Probe"

    enum State: Sendable, Equatable, CaseNamed {
        /// Before `start`.
        case idle
        /// Accepting work; `log` lists what reached the machine.
        case running(log: [String])
        /// Waiting with a state timeout.
        case waiting(log: [String])
    }

    enum Event: Sendable, Equatable, CaseNamed {
        /// Leaves idle.
        case start
        /// Appends a note to the log (a move to a new state value).
        case note(String)
        /// Asks for an unkeyed effect.
        case perform(String)
        /// Asks for an effect under the key `work`, replacing a running one.
        case performKeyed(String)
        /// Cancels the effect under the key `work`.
        case cancelKeyed
        /// An effect's result.
        case finished(String)
        /// Enters `waiting` with a state timeout.
        case wait(Duration)
        /// Understood in `waiting`, stays there.
        case poke
        /// Leaves `waiting`.
        case resume
        /// The state timeout fired.
        case timedOut
        /// Starts the named timer.
        case startTimer(Duration)
        /// Cancels the named timer.
        case stopTimer
        /// The named timer fired.
        case timerFired
    }

    enum Effect: MachineEffect, Equatable {
        case work(String)
        case keyedWork(String)
        case cancelWork
        case timeout(Duration)
        case timer(Duration)
        case cancelTimer

        var directive: EffectDirective {
            switch self {
            case .work: .perform
            case .keyedWork: .keyed("work")
            case .cancelWork: .cancel("work")
            case .timeout: .stateTimeout
            case .timer: .keyed("timer")
            case .cancelTimer: .cancel("timer")
            }
        }
    }

    func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch (state, event) {
        case (.idle, .start): .move(to: .running(log: []))
        case (.running(let log), .note(let text)): .move(to: .running(log: log + [text]))
        case (.running, .perform(let text)): .stay(effects: [.work(text)])
        case (.running, .performKeyed(let text)): .stay(effects: [.keyedWork(text)])
        case (.running, .cancelKeyed): .stay(effects: [.cancelWork])
        case (.running(let log), .finished(let text)): .move(to: .running(log: log + ["done:\(text)"]))
        case (.waiting(let log), .finished(let text)): .move(to: .waiting(log: log + ["done:\(text)"]))
        case (.running(let log), .wait(let duration)): .move(to: .waiting(log: log), effects: [.timeout(duration)])
        case (.waiting, .poke): .stay
        case (.waiting(let log), .resume): .move(to: .running(log: log))
        case (.waiting(let log), .timedOut): .move(to: .running(log: log + ["timeout"]))
        case (.running, .startTimer(let duration)): .stay(effects: [.timer(duration)])
        case (.running, .stopTimer): .stay(effects: [.cancelTimer])
        case (.running(let log), .timerFired): .move(to: .running(log: log + ["timer"]))
        default: .ignored
        }
    }
}

extension ProbeMachine.State {
    /// The log of a running or waiting state.
    var log: [String] {
        switch self {
        case .idle: []
        case .running(let log), .waiting(let log): log
        }
    }
}

/// The interpreter the host tests use: timers sleep on the clock and report their event even
/// when cancelled (the runtime must drop it); work waits at `gate` when its text starts with
/// `slow`, and reports a cancellation in `cancelled` when its text starts with `stoppable`.
final class ProbeWorld: Sendable {
    let clock = ManualClock()
    let gate = TestGate()
    let tracer = Tracer()
    let trace = ObservableTraceRecorder()
    let cancelled = Lock<[String]>([])
    let cancellations = ObservableValue<Int>.Publisher(0)

    init() { tracer.addSink(trace) }

    var interpreter: RecordingInterpreter<ProbeMachine> {
        RecordingInterpreter { [self] effect, context in
            switch effect {
            case .work(let text), .keyedWork(let text):
                if text.hasPrefix("slow") {
                    await gate.wait()
                } else if text.hasPrefix("stoppable") {
                    do {
                        try await gate.waitCancellable()
                    } catch {
                        noteCancelled(text)
                    }
                }
                return .finished(text)
            case .timeout(let duration):
                do { try await context.clock.sleep(for: duration) } catch { noteCancelled("timeout") }
                return .timedOut
            case .timer(let duration):
                do { try await context.clock.sleep(for: duration) } catch { noteCancelled("timer") }
                return .timerFired
            case .cancelWork, .cancelTimer:
                return nil
            }
        }
    }

    func noteCancelled(_ text: String) {
        let count = cancelled.withLock { cancelled -> Int in
            cancelled.append(text)
            return cancelled.count
        }
        cancellations.publish(count)
    }

    func waitForCancellations(_ count: Int) async throws {
        try await cancellations.observable.wait(until: { $0 >= count })
    }

    func host(
        interpreter: RecordingInterpreter<ProbeMachine>, initial: ProbeMachine.State = .running(log: []),
        scope: AccountScope? = nil
    ) -> MachineHost<ProbeMachine> {
        MachineHost(
            machine: ProbeMachine(), initial: initial, interpreter: interpreter, scope: scope, clock: clock,
            tracer: tracer)
    }
}

/// Waits, yielding, until `condition` holds; for actor state that is not observable. Fails
/// after many turns rather than after a duration.
func eventually(
    _ what: String, isolation: isolated (any Actor)? = #isolation, fileID: String = #fileID, line: Int = #line,
    _ condition: () async -> Bool
) async throws {
    for _ in 0..<100_000 {
        if await condition() { return }
        await Task.yield()
    }
    throw TestFailure("condition never held: \(what)", fileID: fileID, line: line)
}
