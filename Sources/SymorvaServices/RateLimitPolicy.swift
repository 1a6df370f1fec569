import SymorvaRuntime

/// How the community services client answers a rate-limited request (429 `SY_LIMIT_EXCEEDED`).
///
/// The services refuse a rate-limited request before handling it, so sending it again cannot
/// do anything twice. The client therefore waits the service's hint and sends the request
/// again, up to ``retries`` times, for every request except one sent with
/// `deliversAtMostOnce` (a wallet confirmation): whether a command goes out again is its
/// machine's decision, so that request gets ``ServicesError/rateLimited(retryAfter:)`` at once.
/// A hint longer than ``longestWait`` is not waited for either: the caller gets the error and
/// can tell the member how long to wait. Every wait is clamped by ``/SymorvaRuntime/ServerWait``:
/// never shorter than its floor (1 s, also without a hint), never longer than its ceiling, a
/// negative hint counting as none.
public struct RateLimitPolicy: Sendable, Hashable {
    /// How many times one request is sent again after a 429; `0` never.
    public var retries: Int
    /// The longest hint the client waits for by itself.
    public var longestWait: Duration
    /// How long to wait when the 429 carried no hint.
    public var waitWithoutHint: Duration

    /// Creates a policy.
    public init(retries: Int, longestWait: Duration, waitWithoutHint: Duration) {
        self.retries = max(0, retries)
        self.longestWait = longestWait
        self.waitWithoutHint = waitWithoutHint
    }

    /// Two more tries, waiting up to 10 s each (1 s without a hint): a short burst is absorbed,
    /// a sustained limit reaches the caller within seconds.
    public static let standard = RateLimitPolicy(retries: 2, longestWait: .seconds(10), waitWithoutHint: .seconds(1))

    /// Never waits: every 429 is the caller's ``ServicesError/rateLimited(retryAfter:)``.
    public static let never = RateLimitPolicy(retries: 0, longestWait: .zero, waitWithoutHint: .zero)

    /// How long to wait before sending again a request refused with `retryAfter` after
    /// `retriesSoFar` retries, or `nil` to give up and report the 429.
    public func delay(retryAfter: Duration?, retriesSoFar: Int) -> Duration? {
        guard retriesSoFar < retries else { return nil }
        let wait = ServerWait.clamp(retryAfter) ?? max(ServerWait.floor, waitWithoutHint)
        return wait <= longestWait ? wait : nil
    }
}
