import SymorvaRuntime

/// A failed expectation of a SymorvaTesting helper, with where it was asserted.
///
/// Helpers throw it instead of recording an issue themselves, so that this library never links
/// a test framework into the products that depend on it. A Swift Testing or XCTest test that
/// lets the error escape fails with the ``description``, which names the call site and shows
/// what was expected and what happened.
public struct TestFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong: expected versus actual, by name.
    public let message: String
    /// The file of the assertion (`#fileID` of the caller).
    public let fileID: String
    /// The line of the assertion.
    public let line: Int

    /// Creates a failure.
    public init(_ message: String, fileID: String = #fileID, line: Int = #line) {
        self.message = message
        self.fileID = fileID
        self.line = line
    }

    /// `file:line: message`.
    public var description: String { "\(fileID):\(line): \(message)" }
}

/// Options for waits: how long a test may wait for a condition before it fails.
///
/// A timeout here is a safety net against hangs, never a timing assertion: tests wait for a
/// condition, and the timeout only turns a lost wake-up into a readable failure.
public enum TestWaiting {
    /// The default timeout of every wait in this library: long enough that a test waiting for
    /// a condition does not fail only because the machine is busy; a passing test never waits
    /// it out. The unit tiers start all their tests at once on two cores, and under
    /// ThreadSanitizer a test's next step can wait 45-80 s in the queue behind the others'
    /// (its "passed after" shows it): 30 s was seen to fail there, 60 s has little margin.
    public static let defaultTimeout: Duration = .seconds(180)
}

/// Resumes one continuation once, with a value or with `nil` on timeout or cancellation, and
/// runs the cleanups registered while waiting.
final class OneShot<Value: Sendable>: Sendable {
    private struct Storage {
        var continuation: CheckedContinuation<Value?, Never>?
        var outcome: Value??
        var cleanups: [@Sendable () -> Void] = []
    }
    private let storage = Lock(Storage())

    func install(_ continuation: CheckedContinuation<Value?, Never>) {
        let ready = storage.withLock { storage -> Value?? in
            if let outcome = storage.outcome { return outcome }
            storage.continuation = continuation
            return nil
        }
        if let ready { continuation.resume(returning: ready) }
    }

    func addCleanup(_ cleanup: @escaping @Sendable () -> Void) {
        let runNow = storage.withLock { storage -> Bool in
            if storage.outcome != nil { return true }
            storage.cleanups.append(cleanup)
            return false
        }
        if runNow { cleanup() }
    }

    func resolve(_ value: Value?) {
        let (continuation, cleanups) = storage.withLock {
            storage -> (CheckedContinuation<Value?, Never>?, [@Sendable () -> Void]) in
            guard storage.outcome == nil else { return (nil, []) }
            storage.outcome = .some(value)
            defer {
                storage.continuation = nil
                storage.cleanups = []
            }
            return (storage.continuation, storage.cleanups)
        }
        for cleanup in cleanups { cleanup() }
        continuation?.resume(returning: value)
    }
}

/// Waits until `subscribe` delivers a value, the timeout passes or the task is cancelled.
/// `subscribe` receives the delivery function and returns the function that ends the
/// subscription. Returns `nil` on timeout or cancellation.
func awaitDelivery<Value: Sendable>(
    timeout: Duration,
    subscribe: (@escaping @Sendable (Value) -> Void) -> @Sendable () -> Void
) async -> Value? {
    let shot = OneShot<Value>()
    return await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
            shot.install(continuation)
            let timer = Task {
                try? await Task.sleep(for: timeout)
                shot.resolve(nil)
            }
            shot.addCleanup { timer.cancel() }
            let unsubscribe = subscribe { shot.resolve($0) }
            shot.addCleanup(unsubscribe)
        }
    } onCancel: {
        shot.resolve(nil)
    }
}

extension ObservableValue {
    /// Waits for the first value, current or future, that satisfies `predicate`, and returns it.
    ///
    /// Fails with a ``TestFailure`` naming the last value seen when `timeout` passes first.
    @discardableResult
    public func wait(
        timeout: Duration = TestWaiting.defaultTimeout,
        until predicate: @escaping @Sendable (Value) -> Bool,
        fileID: String = #fileID, line: Int = #line
    ) async throws(TestFailure) -> Value {
        let found: Value? = await awaitDelivery(timeout: timeout) { deliver in
            subscribe { value in if predicate(value) { deliver(value) } }
        }
        guard let found else {
            throw TestFailure(
                "timed out after \(timeout) waiting for a matching value; last value: \(value)",
                fileID: fileID, line: line)
        }
        return found
    }
}

extension ObservableValue where Value: Equatable {
    /// Waits until the value equals `expected`.
    public func wait(
        timeout: Duration = TestWaiting.defaultTimeout, for expected: Value,
        fileID: String = #fileID, line: Int = #line
    ) async throws(TestFailure) {
        try await wait(timeout: timeout, until: { $0 == expected }, fileID: fileID, line: line)
    }
}

/// A trace sink whose records can be awaited: tests attach it to a ``/SymorvaRuntime/Tracer`` and wait for the
/// record that proves what they assert (a `.stale` drop, an ignored event).
public final class ObservableTraceRecorder: TraceSink {
    private let publisher = ObservableValue<[TraceRecord]>.Publisher([])
    private let lock = Lock(())

    /// Creates an empty recorder.
    public init() {}

    /// Every record so far, observable.
    public var observable: ObservableValue<[TraceRecord]> { publisher.observable }

    /// Every record so far.
    public var records: [TraceRecord] { publisher.value }

    /// Appends a record; observers see records in the order hosts traced them.
    public func record(_ record: TraceRecord) {
        lock.withLock { _ in publisher.update { $0.append(record) } }
    }

    /// Waits for the first record satisfying `predicate` and returns it.
    @discardableResult
    public func wait(
        timeout: Duration = TestWaiting.defaultTimeout,
        for predicate: @escaping @Sendable (TraceRecord) -> Bool,
        fileID: String = #fileID, line: Int = #line
    ) async throws(TestFailure) -> TraceRecord {
        let records = try await observable.wait(
            timeout: timeout, until: { $0.contains(where: predicate) }, fileID: fileID, line: line)
        return records.first(where: predicate)!
    }
}
