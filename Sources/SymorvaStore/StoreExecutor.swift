import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A serial executor that runs every job on one dedicated thread.
///
/// ``SQLiteDatabase`` uses one as its actor executor, so SQLite is only ever called from that
/// thread (the connection is opened with `SQLITE_OPEN_NOMUTEX`) and never from the caller's.
/// Several databases may share an executor; an account's stores usually do.
public final class StoreExecutor: SerialExecutor {
    private let shared: Shared

    /// Starts the executor's thread.
    public init() {
        shared = Shared()
        let shared = self.shared
        StoreThread.start { shared.run() }
        shared.started.wait()
    }

    deinit { shared.stop() }

    /// Queues a job for the thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        shared.push(UnownedJob(job), executor: asUnownedSerialExecutor())
    }

    /// This executor, unowned, for actors to return from `unownedExecutor`.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Traps unless called on the executor's thread (used by `assumeIsolated`).
    public func checkIsolated() {
        precondition(isCurrentThread, "not on the store executor's thread")
    }

    /// Whether the calling code runs on this executor's thread.
    public var isCurrentThread: Bool { shared.threadID.load(ordering: .acquiring) == StoreThread.currentID() }

    /// The job queue, shared by the executor and its thread. The thread holds it (not the
    /// executor) so that the executor can be released, which stops the thread.
    private final class Shared: Sendable {
        struct Queue {
            var jobs: [(job: UnownedJob, executor: UnownedSerialExecutor)] = []
            var stopped = false
        }
        let queue = Mutex(Queue())
        let wakeUp = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let threadID = Atomic<UInt>(0)

        func push(_ job: UnownedJob, executor: UnownedSerialExecutor) {
            queue.withLock { $0.jobs.append((job, executor)) }
            wakeUp.signal()
        }

        func stop() {
            queue.withLock { $0.stopped = true }
            wakeUp.signal()
        }

        func run() {
            threadID.store(StoreThread.currentID(), ordering: .releasing)
            started.signal()
            while true {
                wakeUp.wait()
                let (batch, stopped) = queue.withLock { queue in
                    defer { queue.jobs.removeAll(keepingCapacity: true) }
                    return (queue.jobs, queue.stopped)
                }
                for entry in batch { entry.job.runSynchronously(on: entry.executor) }
                if stopped { return }
            }
        }
    }
}

/// Starts detached POSIX threads and names the current one.
enum StoreThread {
    private final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    static func currentID() -> UInt {
        #if canImport(Darwin)
            UInt(bitPattern: pthread_self())
        #else
            UInt(pthread_self())
        #endif
    }

    static func start(_ body: @escaping @Sendable () -> Void) {
        let context = Unmanaged.passRetained(Box(body)).toOpaque()
        #if canImport(Darwin)
            var thread: pthread_t?
        #else
            var thread = pthread_t()
        #endif
        let result = pthread_create(
            &thread, nil,
            { context in
                let box = Unmanaged<Box>.fromOpaque(context!).takeRetainedValue()
                box.body()
                return nil
            }, context)
        precondition(result == 0, "pthread_create failed: \(result)")
        #if canImport(Darwin)
            pthread_detach(thread!)
        #else
            pthread_detach(thread)
        #endif
    }
}
