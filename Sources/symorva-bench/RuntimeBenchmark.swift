import SymorvaRuntime
import Synchronization

/// `symorva-bench runtime`: how many events per second one ``MachineHost`` processes, against
/// the plain transition loop, and how long an effect takes to come back as an applied event.
///
/// Every figure is the median of `--repeat` runs, each on a fresh host, measured with tracing
/// off (no sink) and on (a sink that counts records).
struct RuntimeBenchmark: BenchmarkMode {
    let name = "runtime"
    let argumentsSynopsis =
        "[--events N] [--burst N] [--round-trips N] [--repeat N] [--forms loop,burst,send,post,trip] [--tracing off|on|both] [--trace-sink batch|each]"
    let summary = "events/s through one MachineHost vs the plain transition loop; effect round trip p50/p99"

    func run(arguments: [String]) async -> Int32 {
        var options = Options(
            arguments,
            known: ["events", "burst", "round-trips", "repeat", "forms", "tracing", "trace-sink", "observers"])
        let configuration = Configuration(
            events: options.integer("events", default: 1_000_000),
            burst: options.integer("burst", default: 1_000),
            roundTrips: options.integer("round-trips", default: 20_000),
            repeats: options.integer("repeat", default: 5),
            forms: Set(
                options.string("forms", default: "loop,burst,send,post,trip").split(separator: ",").map(String.init)),
            tracing: options.string("tracing", default: "both"),
            traceSink: options.string("trace-sink", default: "batch"),
            observerCounts: options.string("observers", default: "0,10").split(separator: ",").compactMap { Int($0) })
        let unknownForms = configuration.forms.subtracting(["loop", "burst", "send", "post", "trip"])
        let tracingModes: [Bool]? =
            switch configuration.tracing {
            case "off": [false]
            case "on": [true]
            case "both": [false, true]
            default: nil
            }
        guard options.problems.isEmpty, unknownForms.isEmpty, let tracingModes,
            ["batch", "each"].contains(configuration.traceSink)
        else {
            var text = options.problems.map { "symorva-bench runtime: \($0)\n" }.joined()
            if !unknownForms.isEmpty { text += "symorva-bench runtime: unknown forms \(unknownForms.sorted())\n" }
            text += "usage: symorva-bench runtime \(argumentsSynopsis)\n"
            writeStandardError(text)
            return 2
        }
        await RuntimeRun(configuration: configuration, tracingModes: tracingModes).report()
        return 0
    }

    /// What one invocation measures.
    struct Configuration {
        var events: Int
        var burst: Int
        var roundTrips: Int
        var repeats: Int
        var forms: Set<String>
        var tracing: String
        /// `batch`: the counting sink adds each turn's count; `each`: it receives every record.
        var traceSink: String
        var observerCounts: [Int]
    }
}

/// One invocation of the runtime benchmark: measures, then prints the table.
private struct RuntimeRun {
    typealias Machine = CounterSyncMachine
    typealias Host = MachineHost<Machine>

    let configuration: RuntimeBenchmark.Configuration
    let tracingModes: [Bool]
    let sink = Sink()
    /// The monotonic clock of hosts, events and the probe (machines carry `Duration`s from it).
    let clock = SystemClock()

    /// A host form, measured for each observer count and tracing mode.
    enum Form: CaseIterable {
        case burst, send, post

        var key: String {
            switch self {
            case .burst: "burst"
            case .send: "send"
            case .post: "post"
            }
        }
    }

    func report() async {
        let c = configuration
        print("SymorvaKit runtime benchmark (symorva-bench runtime)")
        print(machineDescription())
        print(
            "host: \(grouped(Double(c.events))) events per run, bursts of \(grouped(Double(c.burst))); "
                + "median of \(c.repeats) runs [min–max]; events/s")
        print("")

        var limit: Repeated?
        if c.forms.contains("loop") {
            limit = Repeated(values: (0..<c.repeats).map { _ in plainLoopRate(events: c.events * 20) })
            print(row("plain transition loop (limit)", "-", limit, nil))
        }
        var results: [String: (off: Repeated?, on: Repeated?)] = [:]
        for form in Form.allCases where c.forms.contains(form.key) {
            for observers in c.observerCounts {
                var off: Repeated?
                var on: Repeated?
                for tracing in tracingModes {
                    var values: [Double] = []
                    for _ in 0..<c.repeats {
                        values.append(await hostRate(form: form, observers: observers, tracing: tracing))
                    }
                    if tracing { on = Repeated(values: values) } else { off = Repeated(values: values) }
                }
                results["\(form.key)/\(observers)"] = (off, on)
                print(row(label(form), String(observers), off, on))
            }
        }
        if let limit {
            print("")
            print("host / limit (tracing off, medians):")
            for form in Form.allCases where c.forms.contains(form.key) {
                for observers in c.observerCounts {
                    guard let off = results["\(form.key)/\(observers)"]?.off else { continue }
                    print(
                        "  \(padded(label(form), 42, right: true)) \(padded(String(observers), 2)) observers: 1/"
                            + fixed(limit.median / off.median, 1))
                }
            }
        }
        if c.forms.contains("trip") {
            print("")
            print(
                "effect round trip: \(grouped(Double(c.roundTrips))) trips per run, median of \(c.repeats) runs; "
                    + "from just before `await host.send(.syncRequested(at:))` to the observer seeing the applied "
                    + ".syncCompleted (push effect keyed, interpreter returns at once)")
            for tracing in tracingModes {
                var p50: [Double] = []
                var p99: [Double] = []
                var p999: [Double] = []
                for _ in 0..<c.repeats {
                    let sorted = await roundTripLatencies(trips: c.roundTrips, tracing: tracing).sorted()
                    p50.append(percentile(sorted, 0.5))
                    p99.append(percentile(sorted, 0.99))
                    p999.append(percentile(sorted, 0.999))
                }
                let (a, b, d) = (Repeated(values: p50), Repeated(values: p99), Repeated(values: p999))
                print(
                    "  tracing \(tracing ? "on " : "off"): p50 \(fixed(a.median / 1000, 1)) µs "
                        + "[\(fixed(a.min / 1000, 1))–\(fixed(a.max / 1000, 1))]  "
                        + "p99 \(fixed(b.median / 1000, 1)) µs [\(fixed(b.min / 1000, 1))–\(fixed(b.max / 1000, 1))]  "
                        + "p99.9 \(fixed(d.median / 1000, 1)) µs")
            }
        }
        print("")
        print("checksum \(sink.checksum)")
    }

    private func machineDescription() -> String {
        """
        machine: CounterSync — State: idle | counting(Tally) | paused(Tally) | syncing(Tally, requestedAt:), \
        Tally = {total, unsynced, lastSync: Duration?}; Event: increment(by:) | decrement(by:) | pause | resume | \
        syncRequested(at:) | syncCompleted(total:requestedAt:); Effect: push(total:requestedAt:) keyed.
        throughput mix: a 16-event cycle, 13 moves, 1 stay, 2 ignored, no effects. \
        Observers: closures reading the total into an atomic. Tracing on: one sink counting records \
        (\(configuration.traceSink == "each" ? "each record built and received" : "one add per host turn")).
        """
    }

    private func label(_ form: Form) -> String {
        switch form {
        case .burst: "burst: send(contentsOf:) \(grouped(Double(configuration.burst)))-event arrays"
        case .send: "per call: await host.send(event)"
        case .post: "post(event) each, then wait for all"
        }
    }

    private func row(_ label: String, _ observers: String, _ off: Repeated?, _ on: Repeated?) -> String {
        func cell(_ value: Repeated?) -> String {
            guard let value else { return padded("-", 36) }
            return padded(
                grouped(value.median) + " [" + grouped(value.min) + "–" + grouped(value.max) + "]", 36)
        }
        var text = padded(label, 42, right: true) + padded(observers, 3) + "  off " + cell(off) + "  on " + cell(on)
        if let off, let on { text += "  cost ×" + fixed(off.median / on.median, 2) }
        return text
    }

    // MARK: - Measurements

    /// The machine's transition in a plain loop over the same events: the limit.
    private func plainLoopRate(events count: Int) -> Double {
        let machine = Machine()
        let cycle = Machine.throughputEvents(count: configuration.burst)
        var state = Machine.State.idle
        var effects = 0
        let start = ContinuousClock.now
        var remaining = count
        while remaining > 0 {
            for index in 0..<min(remaining, cycle.count) {
                effects &+= Self.step(machine, &state, cycle[index])
            }
            remaining -= cycle.count
        }
        let elapsed = (ContinuousClock.now - start).seconds
        sink.consume(state.total &+ effects)
        return Double(count) / elapsed
    }

    /// One event in the plain loop: the host's `apply` without the host. A direct `switch` on
    /// the call, as in the host, so that the transition's payload is moved, not copied.
    @inline(__always)
    private static func step(_ machine: Machine, _ state: inout Machine.State, _ event: Machine.Event) -> Int {
        switch machine.transition(from: state, on: event) {
        case .move(let next, let effects):
            state = next
            return effects.isEmpty ? 0 : effects.count
        case .stay(let effects):
            return effects.isEmpty ? 0 : effects.count
        case .ignored:
            return 1
        }
    }

    /// Events per second through a fresh host in one form.
    private func hostRate(form: Form, observers: Int, tracing: Bool) async -> Double {
        let (host, counter) = makeHost(tracing: tracing)
        let sink = self.sink
        let unsubscribes = (0..<observers).map { _ in host.states.subscribe { sink.consume($0.total) } }
        defer { for unsubscribe in unsubscribes { unsubscribe() } }
        let burst = Machine.throughputEvents(count: configuration.burst)
        let count = configuration.events
        // Warm up: the first events allocate the host's buffers and fault in the code.
        for _ in 0..<10 { await host.send(contentsOf: burst) }
        for event in burst { await host.send(event) }

        let start = ContinuousClock.now
        switch form {
        case .burst:
            var remaining = count
            while remaining >= burst.count {
                await host.send(contentsOf: burst)
                remaining -= burst.count
            }
            if remaining > 0 { await host.send(contentsOf: burst.prefix(remaining)) }
        case .send:
            var index = 0
            for _ in 0..<count {
                await host.send(burst[index])
                index += 1
                if index == burst.count { index = 0 }
            }
        case .post:
            var index = 0
            for _ in 0..<count {
                host.post(burst[index])
                index += 1
                if index == burst.count { index = 0 }
            }
            // `send` drains everything posted before it: when it returns, all are processed.
            await host.send(contentsOf: [])
        }
        let elapsed = (ContinuousClock.now - start).seconds
        sink.consume(await host.currentState.total &+ (counter?() ?? 0))
        await host.stop()
        return Double(count) / elapsed
    }

    /// Round-trip latencies in nanoseconds.
    private func roundTripLatencies(trips: Int, tracing: Bool) async -> [Double] {
        let (host, _) = makeHost(tracing: tracing)
        let probe = RoundTripProbe(capacity: trips + 1_000, clock: clock)
        let unsubscribe = host.states.subscribe { probe.observe($0) }
        defer { unsubscribe() }
        for trip in 0..<(trips + 1_000) {
            if trip == 1_000 { probe.reset() }  // the first thousand warm up
            await host.send(.increment(by: 1))
            await host.send(.syncRequested(at: clock.now))
            await probe.waitForTrip()
        }
        await host.stop()
        return probe.latencies
    }

    /// A fresh host, and when tracing, a function reading its sink's count.
    private func makeHost(tracing: Bool) -> (Host, (@Sendable () -> Int)?) {
        let tracer = Tracer()
        var counter: (@Sendable () -> Int)?
        if tracing && configuration.traceSink == "each" {
            let sink = EachRecordCounter()
            tracer.addSink(sink)
            counter = { sink.count }
        } else if tracing {
            let sink = TraceCounter()
            tracer.addSink(sink)
            counter = { sink.count }
        }
        let interpreter = ClosureInterpreter<Machine> { effect, _ in
            switch effect {
            case .push(let total, let requestedAt): .syncCompleted(total: total, requestedAt: requestedAt)
            }
        }
        let host = Host(
            machine: Machine(), initial: .idle, interpreter: interpreter, instance: "bench", clock: clock,
            tracer: tracer)
        return (host, counter)
    }
}

/// The minimal trace sink: counts records, one atomic add per host turn.
private final class TraceCounter: TraceSink {
    private let records = Atomic<Int>(0)
    func record(_ record: TraceRecord) { records.wrappingAdd(1, ordering: .relaxed) }
    func record(contentsOf records: TraceRecords) { self.records.wrappingAdd(records.count, ordering: .relaxed) }
    var count: Int { records.load(ordering: .relaxed) }
}

/// `--trace-sink each`: counts records received one by one, through the protocol's default
/// `record(contentsOf:)`, which builds every record: what a sink that reads every record costs.
private final class EachRecordCounter: TraceSink {
    private let records = Atomic<Int>(0)
    func record(_ record: TraceRecord) { records.wrappingAdd(1, ordering: .relaxed) }
    var count: Int { records.load(ordering: .relaxed) }
}

/// Observes a host's states and measures each completed push from its request time.
private final class RoundTripProbe: Sendable {
    private struct State {
        var lastSeen: Duration?
        var latencies: [Double] = []
        var waiter: CheckedContinuation<Void, Never>?
        var completed = 0
    }
    private let state: Lock<State>
    private let clock: SystemClock

    init(capacity: Int, clock: SystemClock) {
        self.clock = clock
        var initial = State()
        initial.latencies.reserveCapacity(capacity)
        state = Lock(initial)
    }

    /// The listener: records a latency when a new completed push shows up.
    func observe(_ hostState: CounterSyncMachine.State) {
        guard case .counting(let tally) = hostState, let requestedAt = tally.lastSync else { return }
        let now = clock.now
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.lastSeen != requestedAt else { return nil }
            state.lastSeen = requestedAt
            state.latencies.append((now - requestedAt).nanoseconds)
            guard let waiter = state.waiter else {
                state.completed += 1
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns once the next push has completed.
    func waitForTrip() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.completed > 0 {
                    state.completed -= 1
                    return true
                }
                state.waiter = continuation
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// Forgets the latencies so far.
    func reset() { state.withLock { $0.latencies.removeAll(keepingCapacity: true) } }

    /// Every latency recorded since the last reset, in nanoseconds.
    var latencies: [Double] { state.withLock { $0.latencies } }
}
