import SymorvaRuntime
import Testing

@testable import SymorvaFeatureKit

@Suite("A value that follows the active account")
struct ActiveAccountValueTests {
    @Test("Shows the placeholder, then the followed source, then the placeholder again")
    func follows() {
        let value = ActiveAccountValue<String>(placeholder: "nobody")
        let alice = ObservableValue<String>.Publisher("alice 1")
        #expect(value.observable.value == "nobody")
        value.follow(alice.observable)
        #expect(value.observable.value == "alice 1")
        alice.publish("alice 2")
        #expect(value.observable.value == "alice 2")
        value.follow(nil)
        #expect(value.observable.value == "nobody")
    }

    @Test("An observer sees the switch at once and nothing the replaced source publishes later")
    func latePublications() {
        let value = ActiveAccountValue<String>(placeholder: "nobody")
        let alice = ObservableValue<String>.Publisher("alice 1")
        let bob = ObservableValue<String>.Publisher("bob 1")
        value.follow(alice.observable)
        let seen = Lock<[String]>([])
        let stop = value.observable.subscribe { text in seen.withLock { $0.append(text) } }
        alice.publish("alice 2")
        let aliceGeneration = value.generation
        value.follow(bob.observable)
        alice.publish("alice late")
        // A publication of alice's already on its way when the switch happened.
        value.forward(generation: aliceGeneration)
        bob.publish("bob 2")
        stop()
        #expect(seen.withLock { $0 } == ["alice 1", "alice 2", "bob 1", "bob 2"])
    }

    @Test("The source is observed only while the value is, and a first observer gets one current value")
    func observersFollow() {
        let value = ActiveAccountValue<Int>(placeholder: 0)
        let source = ObservableValue<Int>.Publisher(1)
        value.follow(source.observable)
        #expect(source.observable.observerCount == 0)
        source.publish(2)
        let seen = Lock<[Int]>([])
        let stop = value.observable.subscribe { number in seen.withLock { $0.append(number) } }
        #expect(source.observable.observerCount == 1)
        #expect(seen.withLock { $0 } == [2])
        stop()
        #expect(source.observable.observerCount == 0)
        source.publish(3)
        #expect(value.observable.value == 3)
        let again = value.observable.subscribe { number in seen.withLock { $0.append(number) } }
        #expect(seen.withLock { $0 } == [2, 3])
        again()
    }

    @Test("Switching while observed moves the one subscription to the new source")
    func switchWhileObserved() {
        let value = ActiveAccountValue<Int>(placeholder: 0)
        let first = ObservableValue<Int>.Publisher(1)
        let second = ObservableValue<Int>.Publisher(2)
        let stop = value.observable.subscribe { _ in }
        value.follow(first.observable)
        #expect(first.observable.observerCount == 1)
        value.follow(second.observable)
        #expect(first.observable.observerCount == 0)
        #expect(second.observable.observerCount == 1)
        value.follow(nil)
        #expect(second.observable.observerCount == 0)
        #expect(value.observable.value == 0)
        stop()
    }
}
