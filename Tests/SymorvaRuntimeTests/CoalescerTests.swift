import SymorvaRuntime
import SymorvaTesting
import Testing

@Suite("Request coalescer")
struct CoalescerTests {
    enum FetchError: Error, Equatable {
        case cancelled
    }

    @Test("Concurrent requests for one key join one in-flight request")
    func joins() async throws {
        let coalescer = RequestCoalescer<String, Int, FetchError>()
        let gate = TestGate()
        let calls = Lock(0)
        let fetch: @Sendable () async throws(FetchError) -> Int = {
            let call = calls.withLock { calls -> Int in
                calls += 1
                return calls
            }
            await gate.wait()
            return call * 100
        }
        let first = Task { try await coalescer.value(for: "room", fetch) }
        try await gate.waitForWaiters(count: 1)
        let second = Task { try await coalescer.value(for: "room", fetch) }
        let third = Task { try await coalescer.value(for: "room", fetch) }
        try await coalescer.joins.wait(until: { $0 == 2 })  // the gate: both joined, observably
        #expect(await coalescer.statistics.joined == 2)
        gate.open()
        let values = [try await first.value, try await second.value, try await third.value]
        #expect(values == [100, 100, 100])
        #expect(calls.withLock { $0 } == 1)
        #expect(await coalescer.statistics == (started: 1, joined: 2))
    }

    @Test("Requests for different keys run separately")
    func separatesKeys() async throws {
        let coalescer = RequestCoalescer<String, String, FetchError>()
        let gate = TestGate()
        let first = Task {
            try await coalescer.value(for: "a") { () async throws(FetchError) -> String in
                await gate.wait()
                return "value a"
            }
        }
        let second = Task {
            try await coalescer.value(for: "b") { () async throws(FetchError) -> String in
                await gate.wait()
                return "value b"
            }
        }
        try await gate.waitForWaiters(count: 2)
        gate.open()
        #expect(try await first.value == "value a")
        #expect(try await second.value == "value b")
        #expect(await coalescer.statistics == (started: 2, joined: 0))
    }

    @Test("A finished request frees its key: the next caller starts afresh")
    func resultsAreNotCached() async throws {
        let coalescer = RequestCoalescer<String, Int, FetchError>()
        let calls = Lock(0)
        let fetch: @Sendable () async throws(FetchError) -> Int = {
            calls.withLock { calls -> Int in
                calls += 1
                return calls
            }
        }
        #expect(try await coalescer.value(for: "k", fetch) == 1)
        #expect(try await coalescer.value(for: "k", fetch) == 2)
        #expect(await coalescer.statistics == (started: 2, joined: 0))
    }

    @Test("Cancelling every waiter cancels the work")
    func cancellationOfAllWaiters() async throws {
        let coalescer = RequestCoalescer<String, Int, FetchError>()
        let gate = TestGate()
        let workCancelled = ObservableValue<Bool>.Publisher(false)
        let fetch: @Sendable () async throws(FetchError) -> Int = { () async throws(FetchError) -> Int in
            do {
                try await gate.waitCancellable()
            } catch {
                workCancelled.publish(true)
                throw FetchError.cancelled
            }
            return 1
        }
        let first = Task { try await coalescer.value(for: "k", fetch) }
        let second = Task { try await coalescer.value(for: "k", fetch) }
        try await gate.waitForWaiters(count: 1)
        try await eventually("second caller joined") { await coalescer.statistics.joined == 1 }
        first.cancel()
        second.cancel()
        try await workCancelled.observable.wait(for: true)
        await #expect(throws: FetchError.cancelled) { try await first.value }
        await #expect(throws: FetchError.cancelled) { try await second.value }
        #expect(!gate.isOpen)
    }
}
