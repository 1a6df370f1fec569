import Dispatch
import SymorvaRuntime
// The one `Mutex` of the package outside the runtime's history: the baseline this mode
// measures `Lock` against (`Scripts/layering` allows it in this file only).
import Synchronization

/// `symorva-bench locks`: what the runtime's `Lock` (a `pthread_mutex_t`, visible to
/// ThreadSanitizer) costs against the standard library's `Mutex` (invisible to it on Linux).
///
/// Three figures per lock, each the median of `--runs` runs: an uncontended `withLock` that
/// increments the value (one thread), the same split over two threads hammering one lock
/// (contended), and making a lock inside a heap object (what each `ObservableValue`, host and
/// client pays once).
struct LockBenchmark: BenchmarkMode {
    let name = "locks"
    let argumentsSynopsis = "[--operations N] [--runs N]"
    let summary = "the runtime's Lock (pthread) against Synchronization.Mutex: ns per withLock and per lock made"

    func run(arguments: [String]) async -> Int32 {
        var options = Options(arguments, known: ["operations", "runs"])
        let operations = options.integer("operations", default: 5_000_000)
        let runs = options.integer("runs", default: 5)
        guard options.problems.isEmpty else {
            print("usage: symorva-bench \(name) \(argumentsSynopsis)  (\(options.problems.joined(separator: "; ")))")
            return 2
        }
        let sink = Sink()
        print("locks: \(grouped(Double(operations))) operations per run, median of \(runs) runs (ns per operation)")
        print("  \(padded("", 22, right: true))\(padded("Lock", 10))\(padded("Mutex", 10))")
        let rows: [(String, (any LockUnderTest) -> Double)] = [
            ("uncontended withLock", { Self.uncontended($0, operations: operations, sink: sink) }),
            ("2 threads, one lock", { Self.contended($0, operations: operations, sink: sink) }),
            ("make a lock", { Self.making($0, count: operations / 10, sink: sink) }),
        ]
        for (label, measure) in rows {
            let lock = Repeated(values: (0..<runs).map { _ in measure(PthreadLock()) })
            let mutex = Repeated(values: (0..<runs).map { _ in measure(StandardMutex()) })
            print(
                "  \(padded(label, 22, right: true))\(padded(fixed(lock.median, 1), 10))"
                    + "\(padded(fixed(mutex.median, 1), 10))")
        }
        print("  (checksum \(sink.checksum))")
        return 0
    }

    @inline(never)
    private static func uncontended(_ lock: any LockUnderTest, operations: Int, sink: Sink) -> Double {
        let counter = lock.make()
        let start = ContinuousClock.now
        for _ in 0..<operations { counter.increment() }
        let elapsed = ContinuousClock.now - start
        sink.consume(counter.value)
        return elapsed.nanoseconds / Double(operations)
    }

    @inline(never)
    private static func contended(_ lock: any LockUnderTest, operations: Int, sink: Sink) -> Double {
        let counter = lock.make()
        let start = ContinuousClock.now
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            for _ in 0..<(operations / 2) { counter.increment() }
        }
        let elapsed = ContinuousClock.now - start
        sink.consume(counter.value)
        return elapsed.nanoseconds / Double(operations)
    }

    @inline(never)
    private static func making(_ lock: any LockUnderTest, count: Int, sink: Sink) -> Double {
        let start = ContinuousClock.now
        for index in 0..<count {
            let counter = lock.make()
            counter.increment()
            sink.consume(counter.value &+ index)
        }
        return (ContinuousClock.now - start).nanoseconds / Double(count)
    }
}

/// A lock kind the benchmark measures.
private protocol LockUnderTest: Sendable {
    /// A new counter at zero behind this kind of lock, in its own heap object.
    func make() -> any LockedCounter
}

/// An integer behind a lock.
private protocol LockedCounter: Sendable {
    func increment()
    var value: Int { get }
}

private struct PthreadLock: LockUnderTest {
    func make() -> any LockedCounter { Counter() }

    final class Counter: LockedCounter {
        let lock = Lock(0)
        func increment() { lock.withLock { $0 &+= 1 } }
        var value: Int { lock.withLock { $0 } }
    }
}

private struct StandardMutex: LockUnderTest {
    func make() -> any LockedCounter { Counter() }

    final class Counter: LockedCounter {
        let lock = Mutex(0)
        func increment() { lock.withLock { $0 &+= 1 } }
        var value: Int { lock.withLock { $0 } }
    }
}
