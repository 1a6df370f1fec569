#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value behind a mutual-exclusion lock: the one lock of every module in the package.
///
/// Why not `Synchronization.Mutex`: on Linux the standard library's `Mutex` locks with atomics
/// and futexes inside the uninstrumented standard library, so ThreadSanitizer sees neither its
/// lock nor its unlock and reports every pair of accesses made under it from two threads as a
/// data race. A sanitizer that always reports hides the races that are real. `Lock` is a
/// `pthread_mutex_t`, which ThreadSanitizer intercepts on every platform, allocated once on
/// the heap and never moved. `Scripts/layering` fails on any other lock (`Mutex`, `NSLock`,
/// `os_unfair_lock`, …) in a Swift file under `Sources/`, `Tests/` or `Fuzz/`;
/// `symorva-bench locks` measures the cost against `Mutex` (`docs/testing.md`,
/// "ThreadSanitizer"; `docs/benchmarks.md`, "Locks").
///
/// The API is `Mutex`'s: `Lock(initial)`, `withLock { value in … }`, with the same `sending`
/// rules, so a value that is not `Sendable` can live behind it. Unlike `Mutex`, a `Lock` is
/// copyable, and a copy is the same lock around the same value (a reference, like a class):
/// a closure can capture one.
///
/// Not recursive: locking again on the thread that holds the lock is a programming error
/// (debug builds trap on it; release builds deadlock).
@usableFromInline
package struct Lock<Value: ~Copyable>: @unchecked Sendable {
    // @unchecked Sendable, proved: the only mutable state is `storage.value`, and it is read
    // or written only inside `withLock`, between `pthread_mutex_lock` and
    // `pthread_mutex_unlock` of the mutex of the same storage, so no two threads touch it at
    // once and each sees the last one's writes. A non-`Sendable` value cannot leak to another
    // thread through it: it comes in as `sending` (disconnected from the caller), the body
    // gets it `inout sending` (it must stay disconnected when the body ends) and a result
    // leaves as `sending` — `Synchronization.Mutex`'s contract, checked by the compiler at
    // every call.
    @usableFromInline let storage: LockStorage<Value>

    /// A lock around `initialValue`.
    @inlinable
    package init(_ initialValue: consuming sending Value) {
        storage = LockStorage(initialValue)
    }

    /// Runs `body` with the value while holding the lock, and returns what it returns.
    ///
    /// Keep the body short and synchronous; never call out to code that may take this lock.
    /// (`@_transparent`, like `Mutex.withLock`: a generic `withLock` the optimizer did not
    /// specialize cost four times as many instructions.)
    @_transparent @usableFromInline
    package func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let locked = pthread_mutex_lock(storage.mutex)
        precondition(locked == 0, "Lock: pthread_mutex_lock failed (\(locked)); locked again on the same thread?")
        defer { pthread_mutex_unlock(storage.mutex) }
        return try body(&storage.value)
    }
}

/// The storage of a ``Lock``: the value, and the `pthread_mutex_t` in a heap allocation of its
/// own, made once and never moved (a mutex must keep its address while it lives).
@usableFromInline
final class LockStorage<Value: ~Copyable>: @unchecked Sendable {
    // @unchecked Sendable: ``Lock``'s proof; `value` is read or written only in `withLock`,
    // while `mutex` is held.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    // @exclusivity(unchecked): the mutex already gives one `withLock` at a time the value;
    // the runtime's dynamic exclusivity check on every access would double the cost of a lock.
    @exclusivity(unchecked) @usableFromInline var value: Value

    @inlinable
    init(_ initialValue: consuming sending Value) {
        value = initialValue
        mutex = .allocate(capacity: 1)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        #if DEBUG
            // A relock on the same thread fails with EDEADLK instead of hanging.
            pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        #endif
        let status = pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        precondition(status == 0, "Lock: pthread_mutex_init failed (\(status))")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }
}

/// A lock reflects with no children. Its value is read only while the lock is held, and it may
/// be noncopyable, which reflection would have to copy (a trap): `dump`, `Mirror(reflecting:)`
/// and a failed test expectation describing a value that holds a lock (a machine host, a
/// client) stop at the lock instead of reading past it.
extension Lock: CustomReflectable where Value: ~Copyable {
    @usableFromInline package var customMirror: Mirror { Mirror(self, children: [:]) }
}
