import Foundation
import Observation
import SymorvaRuntime
import SymorvaTesting
import Testing

@Suite("Observable values")
struct ObservableTests {
    @Test("First and last observer hooks follow the observer count")
    func hooks() {
        let firsts = Lock(0)
        let lasts = Lock(0)
        let publisher = ObservableValue<Int>.Publisher(
            0,
            hooks: .init(
                firstObserver: { firsts.withLock { $0 += 1 } }, lastObserverGone: { lasts.withLock { $0 += 1 } }))
        let value = publisher.observable
        let a = value.subscribe { _ in }
        #expect(firsts.withLock { $0 } == 1)
        let b = value.subscribe { _ in }
        #expect(firsts.withLock { $0 } == 1)
        #expect(value.observerCount == 2)
        a()
        #expect(lasts.withLock { $0 } == 0)
        b()
        #expect(lasts.withLock { $0 } == 1)
        #expect(value.observerCount == 0)
        let c = value.subscribe { _ in }
        #expect(firsts.withLock { $0 } == 2)
        c()
        #expect(lasts.withLock { $0 } == 2)
    }

    @Test("Unsubscribing twice is harmless and leaves other observers alone")
    func unsubscribeIdempotent() {
        let lasts = Lock(0)
        let publisher = ObservableValue<Int>.Publisher(
            0, hooks: .init(lastObserverGone: { lasts.withLock { $0 += 1 } }))
        let received = Lock<[Int]>([])
        let kept = Lock<[Int]>([])
        let unsubscribe = publisher.observable.subscribe { value in received.withLock { $0.append(value) } }
        let keep = publisher.observable.subscribe { value in kept.withLock { $0.append(value) } }
        publisher.publish(1)
        unsubscribe()
        unsubscribe()
        #expect(publisher.observable.observerCount == 1)
        #expect(lasts.withLock { $0 } == 0)
        publisher.publish(2)
        #expect(received.withLock { $0 } == [0, 1])
        #expect(kept.withLock { $0 } == [0, 1, 2])
        keep()
        keep()
        #expect(lasts.withLock { $0 } == 1)
    }

    @Test("A computed publication publishes only what its closure returns, under the lock")
    func publishComputing() {
        let publisher = ObservableValue<Int>.Publisher(1)
        let received = Lock<[Int]>([])
        let stop = publisher.observable.subscribe { value in received.withLock { $0.append(value) } }
        #expect(publisher.publish { $0 + 1 })
        #expect(!publisher.publish { _ in nil })
        stop()
        #expect(received.withLock { $0 } == [1, 2])
        #expect(publisher.value == 2)
    }

    @Test("While unobserved, the value reads the owner's source; a first observer starts from it")
    func unobservedValue() {
        let source = Lock(10)
        let publisher = ObservableValue<Int>.Publisher(0)
        publisher.observable.setHooks(.init(unobservedValue: { source.withLock { $0 } }))
        #expect(publisher.observable.value == 10)
        source.withLock { $0 = 11 }
        let received = Lock<[Int]>([])
        let stop = publisher.observable.subscribe { value in received.withLock { $0.append(value) } }
        source.withLock { $0 = 12 }
        // Observed: the published value counts, not the source.
        #expect(publisher.observable.value == 11)
        publisher.publish(13)
        stop()
        #expect(received.withLock { $0 } == [11, 13])
        #expect(publisher.observable.value == 12)
    }

    @Test("Subscribers get the current value, then every published value in order")
    func subscribeOrder() {
        let publisher = ObservableValue<Int>.Publisher(7)
        let received = Lock<[Int]>([])
        let unsubscribe = publisher.observable.subscribe { value in received.withLock { $0.append(value) } }
        publisher.publish(8)
        publisher.update { $0 += 1 }
        unsubscribe()
        publisher.publish(10)
        #expect(received.withLock { $0 } == [7, 8, 9])
        #expect(publisher.value == 10)
    }

    @Test("The listeners of one publication run in the order they subscribed")
    func listenerOrder() {
        let publisher = ObservableValue<Int>.Publisher(0)
        let calls = Lock<[String]>([])
        let first = publisher.observable.subscribe { value in calls.withLock { $0.append("first \(value)") } }
        let second = publisher.observable.subscribe { value in calls.withLock { $0.append("second \(value)") } }
        calls.withLock { $0.removeAll() }
        publisher.publish(1)
        first()
        let third = publisher.observable.subscribe { value in calls.withLock { $0.append("third \(value)") } }
        publisher.publish(2)
        second()
        third()
        #expect(calls.withLock { $0 } == ["first 1", "second 1", "third 1", "second 2", "third 2"])
    }

    @Test("The values sequence yields the current and later values and ends its subscription")
    func asyncSequence() async throws {
        let publisher = ObservableValue<Int>.Publisher(0)
        let value = publisher.observable
        let consumer = Task {
            var seen: [Int] = []
            for await element in value.values {
                seen.append(element)
                if element == 3 { break }
            }
            return seen
        }
        try await eventually("iterator subscribed") { value.observerCount == 1 }
        publisher.publish(1)
        publisher.publish(2)
        publisher.publish(3)
        let seen = await consumer.value
        #expect(seen.first == 0)
        #expect(seen.last == 3)
        #expect(seen == seen.sorted())
        try await eventually("iterator unsubscribed") { value.observerCount == 0 }
    }

    @Test("Cancelling the iterating task ends its subscription")
    func asyncSequenceCancellation() async throws {
        let value = ObservableValue<Int>.Publisher(0).observable
        let consumer = Task {
            for await _ in value.values {}
        }
        try await eventually("iterator subscribed") { value.observerCount == 1 }
        consumer.cancel()
        await consumer.value
        try await eventually("iterator unsubscribed") { value.observerCount == 0 }
    }

    @Test("The ObservedValue bridge updates on the main actor and notifies Observation")
    @MainActor
    func observedValueBridge() async throws {
        let publisher = ObservableValue<String>.Publisher("first")
        let observed = ObservedValue(publisher.observable)
        #expect(observed.value == "first")
        let changed = ObservableValue<Bool>.Publisher(false)
        withObservationTracking {
            _ = observed.value
        } onChange: {
            changed.publish(true)
        }
        publisher.publish("second")
        try await changed.observable.wait(for: true)
        try await eventually("bridge updated") { observed.value == "second" }
    }

    @Test("Reading the value inside Observation tracking is told of the next publication, and only once")
    func observationTracking() {
        let publisher = ObservableValue<Int>.Publisher(1)
        let changes = Lock(0)
        let seen = withObservationTracking {
            publisher.observable.value
        } onChange: {
            changes.withLock { $0 += 1 }
        }
        #expect(seen == 1)
        #expect(changes.withLock { $0 } == 0)
        publisher.publish(2)
        #expect(changes.withLock { $0 } == 1)
        publisher.publish(3)  // tracking ends at the first change, as Observation defines it
        #expect(changes.withLock { $0 } == 1)

        let computed = Lock(0)
        _ = withObservationTracking {
            publisher.observable.value
        } onChange: {
            computed.withLock { $0 += 1 }
        }
        let published = publisher.publish(computing: { $0 == 3 ? 4 : nil })
        #expect(published)
        #expect(computed.withLock { $0 } == 1)
        #expect(publisher.observable.value == 4)
    }

    @Test("A publication that overtakes a subscriber's first value is delivered again: the last call is the newest")
    func subscribeRace() {
        let publisher = ObservableValue<Int>.Publisher(1)
        // The first-observer hook runs after the subscription is registered and before the
        // listener gets its first value: exactly where another thread's publication can land.
        publisher.observable.setHooks(.init(firstObserver: { publisher.publish(2) }))
        let seen = Lock<[Int]>([])
        let unsubscribe = publisher.observable.subscribe { value in seen.withLock { $0.append(value) } }
        defer { unsubscribe() }
        #expect(seen.withLock { $0 } == [2, 1, 2])
        publisher.publish(3)
        #expect(seen.withLock { $0.last } == 3)
    }

    @Test("Observer hooks run in the order of the count changes, even when one is slow on another thread")
    func hookOrder() {
        let publisher = ObservableValue<Int>.Publisher(0)
        let calls = Lock<[String]>([])
        let insideLastGone = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let isFirstLastGone = Lock(true)
        publisher.observable.setHooks(
            .init(
                firstObserver: { calls.withLock { $0.append("first") } },
                lastObserverGone: {
                    let isFirstCall = isFirstLastGone.withLock { isFirst in
                        defer { isFirst = false }
                        return isFirst
                    }
                    if isFirstCall {
                        insideLastGone.signal()
                        release.wait()
                    }
                    calls.withLock { $0.append("lastGone") }
                }))
        let unsubscribe = publisher.observable.subscribe { _ in }
        // Another thread drops the only observer; its hook is still running when a new observer
        // arrives here. The new observer's hook must not overtake it.
        Thread {
            unsubscribe()
            finished.signal()
        }.start()
        insideLastGone.wait()
        let unsubscribeAgain = publisher.observable.subscribe { _ in }
        #expect(calls.withLock { $0 } == ["first"])
        release.signal()
        finished.wait()
        #expect(calls.withLock { $0 } == ["first", "lastGone", "first"])
        unsubscribeAgain()
        #expect(calls.withLock { $0 } == ["first", "lastGone", "first", "lastGone"])
    }

    @Test("Waiting for a value returns the first match, or fails naming the last value")
    func waitHelper() async throws {
        let publisher = ObservableValue<Int>.Publisher(1)
        let waiter = Task { try await publisher.observable.wait(until: { $0 > 5 }) }
        try await eventually("waiter subscribed") { publisher.observable.observerCount == 1 }
        publisher.publish(3)
        publisher.publish(6)
        publisher.publish(9)
        #expect(try await waiter.value == 6)
        #expect(publisher.observable.observerCount == 0)
        let failure = await #expect(throws: TestFailure.self) {
            try await publisher.observable.wait(timeout: .milliseconds(20), until: { $0 < 0 })
        }
        #expect(failure?.message.contains("last value: 9") == true)
    }
}
