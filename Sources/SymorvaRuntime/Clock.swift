/// The runtime's source of time. Machines never read it: interpreters do, to perform timer
/// effects, and tests replace it with a manual clock that moves only when told.
public protocol RuntimeClock: Sendable {
    /// Monotonic time since the clock's origin.
    var now: Duration { get }
    /// Suspends for `duration`; throws `CancellationError` when the task is cancelled first.
    func sleep(for duration: Duration) async throws
}

/// The real, monotonic clock.
public struct SystemClock: RuntimeClock {
    private let origin: ContinuousClock.Instant
    /// A clock whose origin is now.
    public init() { origin = .now }
    public var now: Duration { ContinuousClock.now - origin }
    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration, clock: .continuous)
    }
}
