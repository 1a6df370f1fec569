import SymorvaRuntime

/// An ``/SymorvaRuntime/EffectInterpreter`` for host-level tests: records every effect it is asked to perform
/// and answers with events from a script.
///
/// The script is a closure from effect to result event (or `nil`), and may suspend — on a
/// ``ManualClock`` through the context, or on a gate the test opens — to model slow work.
///
/// ```swift
/// let interpreter = RecordingInterpreter<AppFlowMachine> { effect, _ in
///     effect == .restoreAccounts ? .restoreFinished(accounts: [], active: nil) : nil
/// }
/// let host = MachineHost(machine: AppFlowMachine(), initial: .launching, interpreter: interpreter)
/// await host.send(.launched)
/// try await interpreter.waitForEffects(count: 1)
/// ```
public final class RecordingInterpreter<Machine: StateMachine>: EffectInterpreter {
    /// Decides the event that reports an effect's outcome.
    public typealias Script = @Sendable (Machine.Effect, EffectContext<Machine.Event>) async -> Machine.Event?

    private let script: Script
    private let lock = Lock(())
    private let log = ObservableValue<[Machine.Effect]>.Publisher([])
    private let finishedCount = ObservableValue<Int>.Publisher(0)

    /// An interpreter answering with `script`; by default every effect reports nothing.
    public init(_ script: @escaping Script = { _, _ in nil }) {
        self.script = script
    }

    /// Every effect performed so far, in the order the host started them.
    public var performed: [Machine.Effect] { log.value }

    /// The performed effects, observable (wait on them with `wait(until:)`).
    public var performedEffects: ObservableValue<[Machine.Effect]> { log.observable }

    /// How many effects have run their script to the end (returned or been cancelled).
    public var finished: Int { finishedCount.value }

    /// Records `effect`, then runs the script.
    public func perform(_ effect: Machine.Effect, context: EffectContext<Machine.Event>) async -> Machine.Event? {
        lock.withLock { _ in log.update { $0.append(effect) } }
        let event = await script(effect, context)
        lock.withLock { _ in finishedCount.update { $0 += 1 } }
        return event
    }

    /// Waits until at least `count` effects have been performed and returns them all.
    @discardableResult
    public func waitForEffects(
        count: Int, timeout: Duration = TestWaiting.defaultTimeout, fileID: String = #fileID, line: Int = #line
    ) async throws(TestFailure) -> [Machine.Effect] {
        do {
            return try await log.observable.wait(timeout: timeout, until: { $0.count >= count })
        } catch {
            throw TestFailure(
                "timed out waiting for \(count) effect(s); performed \(performed.count): \(performed)",
                fileID: fileID, line: line)
        }
    }

    /// Waits until at least `count` effects have finished running their script.
    public func waitForFinished(
        count: Int, timeout: Duration = TestWaiting.defaultTimeout, fileID: String = #fileID, line: Int = #line
    ) async throws(TestFailure) {
        do {
            try await finishedCount.observable.wait(timeout: timeout, until: { $0 >= count })
        } catch {
            throw TestFailure(
                "timed out waiting for \(count) effect(s) to finish; \(finished) finished", fileID: fileID,
                line: line)
        }
    }
}

/// A gate that effects wait on until the test opens it: the way to make an effect slow
/// without sleeping.
///
/// ``wait()`` deliberately ignores cancellation, like I/O that cannot be interrupted, so that a
/// test can prove a late result is dropped; use ``waitCancellable()`` for work that stops.
public final class TestGate: Sendable {
    private struct Storage {
        var isOpen = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextID: UInt64 = 0
    }
    private let storage = Lock(Storage())
    private let waiting = ObservableValue<Int>.Publisher(0)

    /// A closed gate.
    public init() {}

    /// Whether ``open()`` was called.
    public var isOpen: Bool { storage.withLock { $0.isOpen } }

    /// How many tasks are waiting at the gate.
    public var waiterCount: Int { waiting.value }

    /// Opens the gate for every waiter, now and later.
    public func open() {
        let waiters = storage.withLock { storage -> [CheckedContinuation<Void, Never>] in
            storage.isOpen = true
            defer {
                storage.waiters = [:]
                waiting.publish(0)
            }
            return Array(storage.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Waits until the gate opens, even if the task is cancelled meanwhile.
    public func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isOpen = storage.withLock { storage -> Bool in
                if storage.isOpen { return true }
                storage.waiters[storage.nextID] = continuation
                storage.nextID += 1
                waiting.publish(storage.waiters.count)
                return false
            }
            if isOpen { continuation.resume() }
        }
    }

    /// Waits until the gate opens; throws `CancellationError` if the task is cancelled first.
    public func waitCancellable() async throws(CancellationError) {
        let id = storage.withLock { storage -> UInt64 in
            defer { storage.nextID += 1 }
            return storage.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Checked under the lock the cancellation handler takes: either the waiter is
                // registered and the handler removes it, or cancellation came first.
                let resumeNow = storage.withLock { storage -> Bool in
                    if storage.isOpen || Task.isCancelled { return true }
                    storage.waiters[id] = continuation
                    waiting.publish(storage.waiters.count)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = storage.withLock { storage -> CheckedContinuation<Void, Never>? in
                defer { waiting.publish(storage.waiters.count) }
                return storage.waiters.removeValue(forKey: id)
            }
            waiter?.resume()
        }
        if !isOpen { throw CancellationError() }
    }

    /// Waits until at least `count` tasks wait at the gate.
    public func waitForWaiters(
        count: Int, timeout: Duration = TestWaiting.defaultTimeout, fileID: String = #fileID, line: Int = #line
    ) async throws(TestFailure) {
        do {
            try await waiting.observable.wait(timeout: timeout, until: { $0 >= count })
        } catch {
            throw TestFailure(
                "timed out waiting for \(count) task(s) at the gate; \(waiterCount) waiting", fileID: fileID, line: line
            )
        }
    }
}
