import SymorvaMachines
import SymorvaRuntime
import Testing

@testable import SymorvaSession

/// What a module hears of the session's tokens (``AccountModuleContext/onTokenRefreshed(_:)``):
/// once per new access token, whether it came from a refresh or from re-authenticating.
@Suite("Modules hear of the session's new tokens")
struct SessionTokenFollowingTests {
    static func session(_ access: String) -> Session { SessionSamples.session(access: access) }

    /// Counts the calls of a token follower.
    final class Calls: Sendable {
        private let count = Lock(0)
        var value: Int { count.withLock { $0 } }
        func follow(_ states: ObservableValue<SessionMachine.State>)
            -> ObservableValue<SessionMachine.State>.Unsubscribe
        {
            states.onNewAccessToken { self.count.withLock { $0 += 1 } }
        }
    }

    @Test("A refresh is heard once, when the new token is saved; the token in use at subscription is not")
    func refresh() {
        let states = ObservableValue<SessionMachine.State>.Publisher(.signedIn(Self.session("a")))
        let calls = Calls()
        let stop = calls.follow(states.observable)
        defer { stop() }
        #expect(calls.value == 0)
        states.publish(.refreshing(Self.session("a"), waiting: 1, attempt: Attempt(number: 1)))
        #expect(calls.value == 0)
        states.publish(.signedIn(Self.session("b")))
        #expect(calls.value == 1)
        states.publish(.signedIn(Self.session("b")))
        #expect(calls.value == 1)
    }

    @Test("Re-authenticating a session that was soft logged out at subscription is heard")
    func reauthentication() {
        let states = ObservableValue<SessionMachine.State>.Publisher(
            .softLoggedOut(Self.session("a"), lastError: .softLoggedOut))
        let calls = Calls()
        let stop = calls.follow(states.observable)
        states.publish(.signedIn(Self.session("c")))
        #expect(calls.value == 1)
        stop()
        states.publish(.signedIn(Self.session("d")))
        #expect(calls.value == 1, "heard after unsubscribing")
    }
}
