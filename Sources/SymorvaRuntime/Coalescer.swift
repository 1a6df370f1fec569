/// One request per key: concurrent requests for the same resource join one in-flight request.
///
/// The first caller for a key starts the work; callers arriving while it runs wait for the
/// same result. The work is cancelled only when every waiting caller has been cancelled. Once
/// it finishes, the key is free again: results are shared, not cached.
public actor RequestCoalescer<Key: Hashable & Sendable, Value: Sendable, Failure: Error> {
    private final class Flight: Sendable {
        let task: Task<Result<Value, Failure>, Never>
        init(task: Task<Result<Value, Failure>, Never>) { self.task = task }
    }

    private var flights: [Key: (flight: Flight, waiters: Int)] = [:]
    private var started = 0
    private var joined = 0
    private let joinCount = ObservableValue<Int>.Publisher(0)

    /// Creates an empty coalescer.
    public init() {}

    /// How many requests were started and how many callers joined one already in flight.
    public var statistics: (started: Int, joined: Int) { (started, joined) }

    /// How many callers have joined a request already in flight so far, observable: the gate a
    /// test waits on to know that a second caller reached the coalescing point (rather than
    /// sleeping and hoping it did) before it lets the first request finish.
    public nonisolated var joins: ObservableValue<Int> { joinCount.observable }

    /// The result for `key`, from a request already in flight or from `operation`.
    public func value(
        for key: Key, _ operation: @escaping @Sendable () async throws(Failure) -> Value
    ) async throws(Failure) -> Value {
        let flight: Flight
        if let existing = flights[key] {
            flights[key]!.waiters += 1
            flight = existing.flight
            joined += 1
            joinCount.publish(joined)
        } else {
            flight = Flight(
                task: Task {
                    do throws(Failure) {
                        return .success(try await operation())
                    } catch {
                        return .failure(error)
                    }
                })
            flights[key] = (flight, 1)
            started += 1
        }
        let result = await withTaskCancellationHandler {
            await flight.task.value
        } onCancel: {
            Task { await self.waiterCancelled(key: key, flight: flight) }
        }
        finish(key: key, flight: flight)
        return try result.get()
    }

    private func finish(key: Key, flight: Flight) {
        // The first waiter to come back retires the flight so that later callers start afresh.
        if let current = flights[key], current.flight === flight { flights[key] = nil }
    }

    private func waiterCancelled(key: Key, flight: Flight) {
        guard let current = flights[key], current.flight === flight else { return }
        let waiters = current.waiters - 1
        if waiters <= 0 {
            flights[key] = nil
            flight.task.cancel()
        } else {
            flights[key]!.waiters = waiters
        }
    }
}
