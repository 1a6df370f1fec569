import SymorvaRuntime
import Testing

@Suite("The runtime's lock")
struct LockTests {
    /// Under `Scripts/test --tsan` this is also the proof that ThreadSanitizer sees the lock: with
    /// `Synchronization.Mutex` in its place, the same appends are reported as data races.
    @Test("Eight tasks appending and counting under one Lock lose nothing, and are no race to ThreadSanitizer")
    func mutualExclusion() async {
        let counter = Lock(0)
        let appended = Lock<[Int]>([])
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for step in 0..<1_000 {
                        counter.withLock { $0 += 1 }
                        appended.withLock { $0.append(task * 1_000 + step) }
                    }
                }
            }
        }
        #expect(counter.withLock { $0 } == 8_000)
        #expect(Set(appended.withLock { $0 }) == Set(0..<8_000))
    }

    @Test("A copy of a Lock is the same lock around the same value")
    func copiesShareTheValue() {
        let lock = Lock([1])
        let copy = lock
        copy.withLock { $0.append(2) }
        #expect(lock.withLock { $0 } == [1, 2])
    }

    @Test("A value that is not Sendable lives behind a Lock that another task captures")
    func nonSendableValue() async {
        final class Tally {
            var count = 0
        }
        let lock = Lock(Tally())
        await Task { lock.withLock { $0.count += 1 } }.value
        #expect(lock.withLock { $0.count } == 1)
    }

    /// Swift Testing describes a failed expectation's operands by reflection: a lock holding a
    /// noncopyable value (a machine host's mailbox) trapped the whole test process then.
    @Test(
        "A lock reflects with no children: dump and Mirror of a host stop at its locks, a noncopyable value is never copied"
    )
    func reflectionStopsAtTheLock() {
        struct Mailbox: ~Copyable { var entries = [1, 2, 3] }
        let lock = Lock(Mailbox())
        #expect(Mirror(reflecting: lock).children.isEmpty)
        var dumped = ""
        dump(lock, to: &dumped)
        #expect(!dumped.contains("entries"))

        let world = ProbeWorld()
        let host = world.host(interpreter: world.interpreter)
        var hostDump = ""
        dump(host, to: &hostDump, maxDepth: 8)
        #expect(hostDump.contains("MachineHost"))
    }
}
