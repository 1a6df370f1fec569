import SymorvaRuntime

#if canImport(Dispatch)
    import Dispatch
#endif

/// The messages the SDK has for the host (answers, updates, host requests), in the order they
/// were produced, until the host receives them.
///
/// Any number of threads may wait in ``receive(timeout:)`` at once: each message goes to exactly
/// one of them, in order. ``close()`` wakes every waiter; once closed and drained, `receive`
/// answers `nil` at once.
package final class ContractOutbox: Sendable {
    private struct Queue: ~Copyable {
        var messages: [[UInt8]] = []
        var head = 0
        var waiting = 0
        var isClosed = false

        var count: Int { messages.count - head }

        mutating func pop() -> [UInt8]? {
            guard head < messages.count else { return nil }
            let message = messages[head]
            head += 1
            if head > 1024, head * 2 > messages.count {
                messages.removeFirst(head)
                head = 0
            }
            return message
        }
    }

    private let queue = Lock(Queue())
    // One signal per message pushed (and one per waiter at close): a waiter that takes a signal
    // takes a message, so two threads never take the same one.
    private let signals = DispatchSemaphore(value: 0)

    /// An empty outbox.
    package init() {}

    /// Appends a message. Ignored after ``close()``.
    package func push(_ message: [UInt8]) {
        let accepted = queue.withLock { queue -> Bool in
            guard !queue.isClosed else { return false }
            queue.messages.append(message)
            return true
        }
        if accepted { signals.signal() }
    }

    /// The number of messages not received yet.
    package var count: Int { queue.withLock { $0.count } }

    /// Whether ``close()`` was called.
    package var isClosed: Bool { queue.withLock { $0.isClosed } }

    /// The next message, waiting up to `timeout` for one; `nil` when none came in time or the
    /// outbox is closed and empty. Blocks the calling thread: never call it from an actor or a
    /// task of the cooperative pool.
    package func receive(timeout: Duration) -> [UInt8]? {
        let ready = queue.withLock { queue -> Bool in
            if queue.isClosed && queue.count == 0 { return false }
            queue.waiting += 1
            return true
        }
        guard ready else { return nil }
        let nanoseconds = max(
            0, timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000)
        let result = signals.wait(timeout: .now() + .nanoseconds(Int(min(nanoseconds, Int64(Int32.max) * 1000))))
        return queue.withLock { queue -> [UInt8]? in
            queue.waiting -= 1
            guard result == .success else { return nil }
            return queue.pop()
        }
    }

    /// Stops accepting messages and wakes every waiting ``receive(timeout:)``; messages already
    /// queued can still be received.
    package func close() {
        let waiters = queue.withLock { queue -> Int in
            queue.isClosed = true
            return queue.waiting
        }
        // A waiter woken by this signal finds either a message or nothing (`nil`).
        for _ in 0..<waiters { signals.signal() }
    }
}
