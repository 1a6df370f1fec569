import SymorvaRuntime
import Testing

@Suite("Server waits: every hint is clamped to the floor and the ceiling")
struct ServerWaitTests {
    @Test("The floor is 1 s and the ceiling 5 minutes")
    func bounds() {
        #expect(ServerWait.floor == .seconds(1))
        #expect(ServerWait.ceiling == .seconds(300))
    }

    @Test("A hint is clamped: 0 waits the floor, a huge one the ceiling, a negative one counts as none")
    func clamp() {
        #expect(ServerWait.clamp(nil) == nil)
        #expect(ServerWait.clamp(.milliseconds(-5)) == nil)
        #expect(ServerWait.clamp(.zero) == .seconds(1))
        #expect(ServerWait.clamp(.milliseconds(1)) == .seconds(1))
        #expect(ServerWait.clamp(.milliseconds(2_500)) == .milliseconds(2_500))
        #expect(ServerWait.clamp(.milliseconds(999_999_999)) == .seconds(300))
    }

    @Test("A retry_after_ms is clamped the same way; garbage numbers count as none")
    func clampMilliseconds() {
        #expect(ServerWait.clamp(milliseconds: nil) == nil)
        #expect(ServerWait.clamp(milliseconds: -5) == nil)
        #expect(ServerWait.clamp(milliseconds: .nan) == nil)
        #expect(ServerWait.clamp(milliseconds: .infinity) == nil)
        #expect(ServerWait.clamp(milliseconds: 0) == .seconds(1))
        #expect(ServerWait.clamp(milliseconds: 1_500) == .milliseconds(1_500))
        #expect(ServerWait.clamp(milliseconds: 999_999_999) == .seconds(300))
        #expect(ServerWait.clamp(milliseconds: 1e30) == .seconds(300))
    }

    @Test("The runtime's backoff clamps a server hint and falls back to its own delay for a negative one")
    func backoff() {
        let backoff = RetryBackoff(initialDelay: .seconds(2), maximumDelay: .seconds(60), jitterRatio: 0)
        #expect(backoff.delay(attempt: 1, jitter: 0, retryAfter: .milliseconds(999_999_999)) == .seconds(300))
        #expect(backoff.delay(attempt: 1, jitter: 0, retryAfter: .zero) == .seconds(1))
        #expect(backoff.delay(attempt: 1, jitter: 0, retryAfter: .milliseconds(-5)) == .seconds(2))
    }
}
