import Foundation
import SymorvaMachines
import SymorvaRuntime
import Synchronization

// Small concurrency tools of the chat product layer.

/// Runs `body` again and again while requests keep coming, never twice at once: bursts of
/// requests (sync batches, queue changes) collapse into one run after the current one.
final class SerialRunner: Sendable {
    private struct State {
        var isRunning = false
        var isDirty = false
    }

    private let state = Mutex(State())
    private let body: @Sendable () async -> Void

    init(_ body: @escaping @Sendable () async -> Void) { self.body = body }

    /// Asks for a run; returns at once.
    func request() {
        let mustStart = state.withLock { state -> Bool in
            if state.isRunning {
                state.isDirty = true
                return false
            }
            state.isRunning = true
            return true
        }
        if mustStart { Task { await self.loop() } }
    }

    private func loop() async {
        while true {
            state.withLock { $0.isDirty = false }
            await body()
            let again = state.withLock { state -> Bool in
                if state.isDirty { return true }
                state.isRunning = false
                return false
            }
            if !again { return }
        }
    }
}

/// A lock that suspends instead of blocking: keeps one caller's multi-step work (persisting the
/// parts of a split message, then queueing them) from interleaving with another's.
actor AsyncLock {
    private var isLocked = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func lock() async {
        guard isLocked else {
            isLocked = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func unlock() {
        if waiters.isEmpty {
            isLocked = false
        } else {
            waiters.removeFirst().resume()
        }
    }

    /// Runs `body` holding the lock.
    nonisolated func withLock<T: Sendable, Failure: Error>(
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

/// A flag shared between a conversation and its timeline interpreter: whether the room's sync
/// updates are forwarded to its timeline (only while someone observes it).
final class LiveSwitch: Sendable {
    private let isOn = Atomic<Bool>(false)
    var value: Bool { isOn.load(ordering: .acquiring) }
    func set(_ on: Bool) { isOn.store(on, ordering: .releasing) }
}

extension ObservableValue {
    /// The first value, current or later, that satisfies `predicate`; `nil` when the task is
    /// cancelled first. Counts as an observer while it waits.
    func first(where predicate: @escaping @Sendable (Value) -> Bool) async -> Value? {
        for await value in values where predicate(value) { return value }
        return nil
    }
}

/// Milliseconds since 1970 now: the store's `created_at`.
func currentUnixMilliseconds() -> Int64 {
    Int64((Date().timeIntervalSince1970 * 1000).rounded())
}

/// A fresh transaction ID: unique per device and never reused for another event.
func makeTransactionID() -> TransactionID {
    TransactionID(
        "sk" + String(currentUnixMilliseconds(), radix: 36) + "." + String(UInt64.random(in: 0...UInt64.max), radix: 36)
    )
}
