import SymorvaRuntime

/// A ``/SymorvaRuntime/RuntimeClock`` whose time moves only when a test calls ``advance(by:)``.
///
/// Sleepers wait until the clock has been advanced past their deadline and then resume in
/// deadline order (ties in the order they went to sleep). A sleeping task that is cancelled
/// throws `CancellationError` at once and stops counting as a sleeper. Tests that need an
/// interpreter to have started its timer before they move time wait for it with
/// ``waitForSleepers(count:timeout:fileID:line:)`` instead of sleeping.
///
/// ```swift
/// let clock = ManualClock()
/// host.post(.retryScheduled)
/// try await clock.waitForSleepers(count: 1)
/// await clock.advance(by: .seconds(30))   // the retry timer fires
/// ```
public final class ManualClock: RuntimeClock {
    private struct Sleeper {
        let deadline: Duration
        let sequence: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct Storage {
        var now: Duration
        var sleepers: [UInt64: Sleeper] = [:]
        var nextSequence: UInt64 = 0
    }

    private enum Registration {
        case cancelled
        case elapsed
        case sleeping
    }

    private let storage: Lock<Storage>
    private let count = ObservableValue<Int>.Publisher(0)
    private let deadlines = ObservableValue<[Duration]>.Publisher([])

    /// A clock standing at `now`.
    public init(now: Duration = .zero) {
        storage = Lock(Storage(now: now))
    }

    /// The clock's current time.
    public var now: Duration { storage.withLock { $0.now } }

    /// How many tasks are sleeping on the clock now.
    public var sleeperCount: Int { storage.withLock { $0.sleepers.count } }

    /// The deadlines of the sleeping tasks, earliest first.
    public var pendingDeadlines: [Duration] {
        storage.withLock { $0.sleepers.values.map(\.deadline).sorted() }
    }

    /// Suspends until the clock has been advanced by `duration`, or throws `CancellationError`
    /// when the task is cancelled first. A duration of zero or less returns at once.
    public func sleep(for duration: Duration) async throws {
        let sequence = storage.withLock { storage -> UInt64 in
            defer { storage.nextSequence += 1 }
            return storage.nextSequence
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // The cancellation check and the registration happen under the lock that the
                // cancellation handler takes too, so a sleeper is either registered and later
                // removed by the handler, or never registered because cancellation came first.
                let registration = storage.withLock { storage -> Registration in
                    if Task.isCancelled { return .cancelled }
                    if duration <= .zero { return .elapsed }
                    storage.sleepers[sequence] = Sleeper(
                        deadline: storage.now + duration, sequence: sequence, continuation: continuation)
                    publishSleepers(storage)
                    return .sleeping
                }
                switch registration {
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .elapsed: continuation.resume()
                case .sleeping: break
                }
            }
        } onCancel: {
            let sleeper = storage.withLock { storage -> Sleeper? in
                guard let sleeper = storage.sleepers.removeValue(forKey: sequence) else { return nil }
                publishSleepers(storage)
                return sleeper
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward by `duration`, waking every sleeper whose deadline is reached.
    ///
    /// Time moves from deadline to deadline: the sleepers due at the earliest deadline resume
    /// first, then the clock yields so that they can run (and perhaps sleep again) before the
    /// next deadline is reached.
    public func advance(by duration: Duration) async {
        let target = storage.withLock { $0.now + duration }
        await advance(to: target)
    }

    /// Moves time forward to `deadline` (never backwards), waking sleepers in deadline order.
    public func advance(to deadline: Duration) async {
        while let due = nextDue(notAfter: deadline) {
            for sleeper in due { sleeper.continuation.resume() }
            await Task.yield()
        }
    }

    private func nextDue(notAfter target: Duration) -> [Sleeper]? {
        storage.withLock { storage -> [Sleeper]? in
            let earliest = storage.sleepers.values.filter { $0.deadline <= target }.map(\.deadline).min()
            guard let earliest else {
                storage.now = max(storage.now, target)
                return nil
            }
            storage.now = max(storage.now, earliest)
            let due = storage.sleepers.values.filter { $0.deadline == earliest }.sorted { $0.sequence < $1.sequence }
            for sleeper in due { storage.sleepers[sleeper.sequence] = nil }
            publishSleepers(storage)
            return due
        }
    }

    /// Publishes how many tasks sleep and until when; called under the storage lock.
    private func publishSleepers(_ storage: Storage) {
        count.publish(storage.sleepers.count)
        deadlines.publish(storage.sleepers.values.map(\.deadline).sorted())
    }

    /// Waits until a task sleeps until `deadline` (a timer started for that instant), without
    /// moving time: for a test whose clock has other sleepers that come and go.
    public func waitForDeadline(
        _ deadline: Duration, timeout: Duration = TestWaiting.defaultTimeout, fileID: String = #fileID,
        line: Int = #line
    ) async throws(TestFailure) {
        do {
            try await deadlines.observable.wait(timeout: timeout, until: { $0.contains(deadline) })
        } catch {
            throw TestFailure(
                "timed out waiting for a sleeper until \(deadline) on the manual clock; deadlines \(pendingDeadlines)",
                fileID: fileID, line: line)
        }
    }

    /// Waits until at least `count` tasks are sleeping on the clock (an interpreter has
    /// started its timer), without moving time.
    public func waitForSleepers(
        count expected: Int, timeout: Duration = TestWaiting.defaultTimeout,
        fileID: String = #fileID, line: Int = #line
    ) async throws(TestFailure) {
        do {
            try await count.observable.wait(timeout: timeout, until: { $0 >= expected })
        } catch {
            throw TestFailure(
                "timed out waiting for \(expected) sleeper(s) on the manual clock; \(sleeperCount) sleeping",
                fileID: fileID, line: line)
        }
    }
}
