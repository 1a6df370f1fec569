import SymorvaRuntime
import Testing

@testable import SymorvaFeatureKit

/// The one "follows the active account" client every community client is built on.
@Suite("The active account's module")
struct ActiveAccountTests {
    final class Module: AccountBound {
        let name: String
        let scope = AccountScope(label: "test")
        let counter: ObservableValue<Int>.Publisher
        init(_ name: String, counter: Int = 0) {
            self.name = name
            self.counter = ObservableValue<Int>.Publisher(counter)
        }
        var isEnded: Bool { scope.isEnded }
    }

    enum Failure: ActiveAccountError, Equatable {
        case notSignedIn, accountEnded, storeFailed
        static var moduleUnavailable: Failure { .storeFailed }
    }

    @Test("Nobody signed in, signed in without the module, an ended scope: each its own error")
    func resolvesTheModule() throws {
        let active = ActiveAccount<Module>()
        #expect(throws: Failure.notSignedIn) { try active.module(orThrow: Failure.self) }
        active.follow(nil, isSignedIn: true)
        #expect(throws: Failure.storeFailed) { try active.module(orThrow: Failure.self) }
        let alice = Module("alice")
        active.follow(alice, isSignedIn: true)
        #expect(try active.module(orThrow: Failure.self) === alice)
        #expect(active.current === alice)
        alice.scope.end(reason: .signedOut)
        #expect(throws: Failure.accountEnded) { try active.module(orThrow: Failure.self) }
        active.follow(nil, isSignedIn: false)
        #expect(active.current == nil)
        #expect(throws: Failure.notSignedIn) { try active.module(orThrow: Failure.self) }
    }

    @Test("The default for a signed-in account without the module is: not signed in")
    func defaultUnavailable() {
        enum Plain: ActiveAccountError { case notSignedIn, accountEnded }
        #expect(Plain.moduleUnavailable == .notSignedIn)
    }

    @Test("A result that comes back after a switch is not handed out; the handle it was is discarded")
    func lateResultIsDiscarded() async {
        let active = ActiveAccount<Module>()
        let alice = Module("alice")
        let bob = Module("bob")
        active.follow(alice, isSignedIn: true)
        let discarded = Lock<[String]>([])
        let outcome: Result<String, Failure>
        do throws(Failure) {
            outcome = .success(
                try await active.withActive { module async throws(Failure) -> String in
                    active.follow(bob, isSignedIn: true)  // the member switches while the request is out
                    return "room of " + module.name
                } discarding: { room in
                    discarded.withLock { $0.append(room) }
                })
        } catch {
            outcome = .failure(error)
        }
        #expect(outcome == .failure(.accountEnded))
        #expect(discarded.withLock { $0 } == ["room of alice"])
    }

    @Test("A result for the account still active is handed out; one of an ended scope is not")
    func currentResult() async throws {
        let active = ActiveAccount<Module>()
        let alice = Module("alice")
        active.follow(alice, isSignedIn: true)
        let name = try await active.withActive { module async throws(Failure) -> String in module.name }
        #expect(name == "alice")
        await #expect(throws: Failure.accountEnded) {
            try await active.withActive { module async throws(Failure) -> String in
                module.scope.end(reason: .switched)
                return module.name
            }
        }
        #expect(throws: Failure.accountEnded) { try active.ensureActive(alice, orThrow: Failure.self) }
    }

    @Test("Values show the active account's source, the placeholder while nobody is signed in")
    func values() {
        let active = ActiveAccount<Module>()
        let alice = Module("alice", counter: 1)
        active.follow(alice, isSignedIn: true)
        // A value made after a follow starts on the account already active.
        let counter = active.value(placeholder: -1) { $0.counter.observable }
        #expect(counter.value == 1)
        let bob = Module("bob", counter: 7)
        active.follow(bob, isSignedIn: true)
        #expect(counter.value == 7)
        alice.counter.publish(2)
        #expect(counter.value == 7)
        bob.counter.publish(8)
        #expect(counter.value == 8)
        active.follow(nil, isSignedIn: false)
        #expect(counter.value == -1)
    }
}
