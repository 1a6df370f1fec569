import SymorvaRuntime
import Testing

/// A tally whose three types name their cases in the three ways ``CaseNamed`` allows: the state
/// by literals, the event by a computed `caseName`, the effect by reflection.
private struct TallyMachine: StateMachine {
    static let name = "Tally"

    enum State: Sendable, Equatable, CaseNamed {
        case counting(Int)
        case stopped(Int)

        var caseNameLiteral: StaticString? {
            switch self {
            case .counting: "counting"
            case .stopped: "stopped"
            }
        }
    }

    enum Event: Sendable, Equatable, CaseNamed {
        case add(Int)
        case stop
        case report

        var caseName: String {
            switch self {
            case .add: ["a", "d", "d"].joined()
            case .stop: "stop"
            case .report: "report"
            }
        }
    }

    enum Effect: MachineEffect, Equatable {
        case announce(Int)
    }

    func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch (state, event) {
        case (.counting(let total), .add(let amount)): .move(to: .counting(total + amount))
        case (.counting(let total), .stop): .move(to: .stopped(total))
        case (.counting(let total), .report), (.stopped(let total), .report): .stay(effects: [.announce(total)])
        case (.stopped, _): .ignored
        }
    }
}

/// Case names of one character: a single-scalar literal is a `StaticString` without a pointer.
private struct FlipMachine: StateMachine {
    static let name = "Flip"

    enum State: Sendable, Equatable, CaseNamed {
        case a, é

        var caseNameLiteral: StaticString? {
            switch self {
            case .a: "a"
            case .é: "é"
            }
        }
    }

    enum Event: Sendable, Equatable, CaseNamed {
        case flip

        var caseNameLiteral: StaticString? { "flip" }
    }

    enum Effect: MachineEffect, Equatable {}

    func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        .move(to: state == .a ? .é : .a)
    }
}

private struct FlipInterpreter: EffectInterpreter {
    typealias Machine = FlipMachine
    func perform(_ effect: FlipMachine.Effect, context: EffectContext<FlipMachine.Event>) async -> FlipMachine.Event? {}
}

private struct SilentInterpreter: EffectInterpreter {
    typealias Machine = TallyMachine
    func perform(_ effect: TallyMachine.Effect, context: EffectContext<TallyMachine.Event>) async
        -> TallyMachine.Event?
    { nil }
}

/// Keeps every batch it is handed, as it was handed.
private final class BatchKeeper: TraceSink {
    let batches = Lock<[TraceRecords]>([])
    /// Records as read at the moment each batch arrived.
    let readOnArrival = Lock<[[TraceRecord]]>([])

    func record(_ record: TraceRecord) { Issue.record("batches should arrive whole") }

    func record(contentsOf records: TraceRecords) {
        batches.withLock { $0.append(records) }
        readOnArrival.withLock { $0.append(Array(records)) }
    }
}

@Suite("Machine host: tracing")
struct TracingTests {
    private func makeHost(tracer: Tracer) -> MachineHost<TallyMachine> {
        MachineHost(
            machine: TallyMachine(), initial: .counting(0), interpreter: SilentInterpreter(), instance: "room-1",
            tracer: tracer)
    }

    @Test("Literal, computed and reflected case names all reach the records")
    func namesOfEveryKind() async {
        let tracer = Tracer()
        let recorder = TraceRecorder()
        tracer.addSink(recorder)
        let host = makeHost(tracer: tracer)
        await host.send(.add(2))
        await host.send(contentsOf: [.report, .stop, .add(1)])
        #expect(
            recorder.records == [
                TraceRecord(
                    kind: .transition, machine: "Tally", instance: "room-1", from: "counting", event: "add",
                    to: "counting"),
                TraceRecord(
                    kind: .transition, machine: "Tally", instance: "room-1", from: "counting", event: "report",
                    to: "counting", effects: ["announce"]),
                TraceRecord(
                    kind: .transition, machine: "Tally", instance: "room-1", from: "counting", event: "stop",
                    to: "stopped"),
                TraceRecord(
                    kind: .ignored, machine: "Tally", instance: "room-1", from: "stopped", event: "add", to: "stopped"),
            ])
    }

    @Test("One-character literal names (no UTF-8 pointer behind them) are traced as written")
    func oneCharacterNames() async {
        let tracer = Tracer()
        let recorder = TraceRecorder()
        tracer.addSink(recorder)
        let host = MachineHost(machine: FlipMachine(), initial: .a, interpreter: FlipInterpreter(), tracer: tracer)
        await host.send(contentsOf: [.flip, .flip])
        #expect(recorder.records.map { "\($0.from)>\($0.to)" } == ["a>é", "é>a"])
        #expect(recorder.records.allSatisfy { $0.event == "flip" })
    }

    @Test("A long burst reaches the sinks in order, in bounded batches, before observers see its state")
    func longBurst() async {
        let tracer = Tracer()
        let keeper = BatchKeeper()
        tracer.addSink(keeper)
        let host = makeHost(tracer: tracer)
        let tracedWhenPublished = Lock<[Int]>([])
        let unsubscribe = host.states.subscribe { _ in
            let count = keeper.batches.withLock { $0.reduce(0) { $0 + $1.count } }
            tracedWhenPublished.withLock { $0.append(count) }
        }
        defer { unsubscribe() }
        await host.send(contentsOf: Array(repeating: TallyMachine.Event.add(1), count: 1_300))
        #expect(await host.currentState == .counting(1_300))

        let batches = keeper.batches.withLock { $0 }
        #expect(batches.count > 1)
        #expect(batches.allSatisfy { $0.count <= 512 })
        #expect(batches.reduce(0) { $0 + $1.count } == 1_300)
        #expect(batches.allSatisfy { $0.machine == "Tally" && $0.instance == "room-1" })
        // The subscription's first call is the initial state; the burst publishes once, after
        // all of its steps were traced.
        #expect(tracedWhenPublished.withLock { $0 } == [0, 1_300])
    }

    @Test("A batch a sink keeps never changes, whatever the host traces later")
    func keptBatchesAreValues() async {
        let tracer = Tracer()
        let keeper = BatchKeeper()
        tracer.addSink(keeper)
        let host = makeHost(tracer: tracer)
        await host.send(contentsOf: [.add(1), .report])
        await host.send(contentsOf: [.stop, .report, .add(5)])
        await host.send(.report)
        let kept = keeper.batches.withLock { $0 }.map { Array($0) }
        #expect(kept == keeper.readOnArrival.withLock { $0 })
        #expect(kept.map { $0.map(\.event) } == [["add", "report"], ["stop", "report"], ["add"], ["report"]])
    }

    @Test("A sink without a batch method receives each record in order")
    func defaultBatchMethod() async {
        let tracer = Tracer()
        let events = Lock<[String]>([])
        tracer.addSink(ClosureTraceSink { record in events.withLock { $0.append(record.event) } })
        let host = makeHost(tracer: tracer)
        await host.send(contentsOf: [.add(1), .add(2), .report, .stop])
        #expect(events.withLock { $0 } == ["add", "add", "report", "stop"])
    }

    @Test("With no sink attached, nothing is buffered")
    func untraced() async {
        let tracer = Tracer()
        let host = makeHost(tracer: tracer)
        await host.send(contentsOf: Array(repeating: TallyMachine.Event.add(1), count: 100))
        let recorder = TraceRecorder()
        tracer.addSink(recorder)
        await host.send(.stop)
        #expect(recorder.records.map(\.event) == ["stop"])
    }
}
