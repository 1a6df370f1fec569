extension ObservableValue {
    /// Waits for the first value, the current one or a later one, that `answer` maps to an
    /// answer, and returns that answer; `nil` when `scope` moves on (ends or advances) or when
    /// the calling task is cancelled first. Counts as an observer while it waits.
    ///
    /// The runtime's one way to wait for a state; ``MachineHost/send(_:ignored:until:)`` and
    /// ``MachineHost/wait(until:)`` are built on it. `answer` runs on the thread that publishes.
    public func first<Answer: Sendable>(
        scope: AccountScope? = nil, until answer: @escaping @Sendable (Value) -> Answer?
    ) async -> Answer? {
        await StateWait.first(of: self, stopped: nil, scope: scope, until: answer)
    }
}

/// Waiting for a published value.
@usableFromInline
enum StateWait {
    /// The first answer for `values`, or `nil` once `stopped` is `true`, `scope` moves on or the
    /// task is cancelled. Everything is registered before the first suspension, and a
    /// subscription sees the current value at once: a value that is already there is never
    /// missed (no lost wake-up). It runs on the caller's actor until it suspends, so a host
    /// that calls it right after a turn registers before any later turn can run.
    @usableFromInline
    static func first<Value: Sendable, Answer: Sendable>(
        of values: ObservableValue<Value>, stopped: ObservableValue<Bool>?, scope: AccountScope?,
        isolation: isolated (any Actor)? = #isolation, until answer: @escaping @Sendable (Value) -> Answer?
    ) async -> Answer? {
        let shot = OneShot<Answer?>()
        if let stopped {
            shot.addCleanup(stopped.subscribe { isStopped in if isStopped { shot.resolve(nil) } })
        }
        if let scope {
            shot.addCleanup(scope.onAdvance { _ in shot.resolve(nil) })
        }
        shot.addCleanup(values.subscribe { value in if let found = answer(value) { shot.resolve(found) } })
        return await withTaskCancellationHandler {
            await shot.value
        } onCancel: {
            shot.resolve(nil)
        }
    }
}

/// Resumes its waiters with the first outcome offered, from whichever thread offers it, and then
/// runs its clean-ups (unsubscribing, unregistering) once. The package's one
/// mutex-with-continuations: waits (``StateWait``) and one-off results (a sign-in's outcome)
/// use it.
package final class OneShot<Outcome: Sendable>: Sendable {
    private struct State {
        var continuations: [CheckedContinuation<Outcome, Never>] = []
        var outcome: Outcome?
        var isResolved = false
        var cleanups: [@Sendable () -> Void] = []
    }

    private let state = Lock(State())

    /// A one-shot with no outcome yet.
    package init() {}

    /// The outcome, once one is offered.
    package var value: Outcome {
        get async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                let ready = state.withLock { state -> Outcome? in
                    if state.isResolved { return state.outcome }
                    state.continuations.append(continuation)
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }

    /// Offers an outcome; only the first one counts.
    package func resolve(_ outcome: Outcome) {
        let resolved = state.withLock {
            state -> ([CheckedContinuation<Outcome, Never>], [@Sendable () -> Void])? in
            guard !state.isResolved else { return nil }
            state.isResolved = true
            state.outcome = outcome
            defer {
                state.continuations = []
                state.cleanups = []
            }
            return (state.continuations, state.cleanups)
        }
        guard let (continuations, cleanups) = resolved else { return }
        for cleanup in cleanups { cleanup() }
        for continuation in continuations { continuation.resume(returning: outcome) }
    }

    /// Adds a clean-up; runs it at once when the outcome is already known.
    package func addCleanup(_ cleanup: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            guard !state.isResolved else { return true }
            state.cleanups.append(cleanup)
            return false
        }
        if runNow { cleanup() }
    }
}

/// A lock that suspends instead of blocking: callers run their critical sections one at a time,
/// in the order they asked. The package's one async lock (a chat's multi-step sends, the session
/// client's operations).
package actor AsyncLock {
    private var isLocked = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    /// An unlocked lock.
    package init() {}

    /// Takes the lock, waiting for earlier holders and waiters.
    package func lock() async {
        guard isLocked else {
            isLocked = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    /// Releases the lock to the longest waiter, if any.
    package func unlock() {
        if waiters.isEmpty {
            isLocked = false
        } else {
            waiters.removeFirst().resume()
        }
    }

    /// Runs `body` holding the lock.
    package nonisolated func withLock<T: Sendable, Failure: Error>(
        _ body: () async throws(Failure) -> T
    ) async throws(Failure) -> T {
        await lock()
        do {
            let value = try await body()
            await unlock()
            return value
        } catch {
            await unlock()
            throw error
        }
    }
}
