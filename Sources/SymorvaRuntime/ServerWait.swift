// How long the SDK waits when a server says how long to wait (`Retry-After`, `retry_after_ms`).

/// The one clamp every server-supplied wait goes through before the SDK waits on it.
///
/// A server's hint is untrusted input: `retry_after_ms: 999999999` would freeze sync and
/// sending for days, `0` on repeated 429s would make a tight loop, and a negative value means
/// nothing. So a hint is clamped to ``floor``...``ceiling`` and a negative one is treated as
/// absent (the caller's own backoff applies). The Matrix error mapping (`RetryAfter`), the
/// community services client (its errors and its `RateLimitPolicy`), the runtime's
/// ``RetryBackoff`` (sync, send queue) and the session and transfer machines all use it.
public enum ServerWait {
    /// The shortest wait a hint can ask for: 1 s. A 429 without a hint, or with `0`, waits at
    /// least this long, so repeated 429s back off instead of spinning.
    public static let floor: Duration = .seconds(1)
    /// The longest wait a hint can ask for: 5 minutes.
    public static let ceiling: Duration = .seconds(300)

    /// `hint` clamped to ``floor``...``ceiling``; `nil` when there is no hint or it is negative.
    public static func clamp(_ hint: Duration?) -> Duration? {
        guard let hint, hint >= .zero else { return nil }
        return min(max(hint, floor), ceiling)
    }

    /// A hint in milliseconds (`retry_after_ms`) clamped; `nil` when absent, negative or not
    /// a number.
    public static func clamp(milliseconds: Double?) -> Duration? {
        guard let milliseconds, milliseconds.isFinite, milliseconds >= 0 else { return nil }
        let ceilingMilliseconds = Double(ceiling.components.seconds) * 1_000
        return clamp(.milliseconds(Int64(min(milliseconds, ceilingMilliseconds).rounded(.up))))
    }
}
