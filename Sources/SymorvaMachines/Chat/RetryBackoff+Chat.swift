import SymorvaRuntime

extension RetryBackoff {
    /// `/sync`: 1 s doubling to 60 s.
    public static let sync = RetryBackoff(initialDelay: .seconds(1), maximumDelay: .seconds(60))
    /// The send queue: 2 s doubling to 5 min.
    public static let sendQueue = RetryBackoff(initialDelay: .seconds(2), maximumDelay: .seconds(300))
}
