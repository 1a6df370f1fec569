import Synchronization

/// A value that changes over time and can be observed: the only way state leaves a
/// repository or a host.
///
/// Observers are counted. The owner can react to the first observer arriving and the last one
/// leaving, which is how page-owned work (live timeline updates, back-pagination, polling)
/// follows observers: nobody watching, no work.
///
/// `ObservableValue` is read-only to its observers; the owner keeps the ``Publisher`` that
/// changes it.
public final class ObservableValue<Value: Sendable>: Sendable {
    /// A function that ends a subscription. Calling it more than once is harmless.
    public typealias Unsubscribe = @Sendable () -> Void

    private struct Storage {
        var value: Value
        var version: UInt64 = 0
        var listeners: [UInt64: @Sendable (Value) -> Void] = [:]
        var nextID: UInt64 = 0
    }

    /// Hooks the owner sets to make work follow observers.
    public struct ObserverHooks: Sendable {
        /// Called when the observer count goes from zero to one.
        public var firstObserver: (@Sendable () -> Void)?
        /// Called when the observer count goes back to zero.
        public var lastObserverGone: (@Sendable () -> Void)?
        /// Hooks that do nothing.
        public init(
            firstObserver: (@Sendable () -> Void)? = nil, lastObserverGone: (@Sendable () -> Void)? = nil
        ) {
            self.firstObserver = firstObserver
            self.lastObserverGone = lastObserverGone
        }
    }

    private let storage: Mutex<Storage>
    private let hooks: Mutex<ObserverHooks>

    /// Creates a value with its owner's hooks.
    public init(_ initial: Value, hooks: ObserverHooks = ObserverHooks()) {
        storage = Mutex(Storage(value: initial))
        self.hooks = Mutex(hooks)
    }

    /// The current value.
    public var value: Value { storage.withLock { $0.value } }

    /// How many subscriptions (listeners and live async iterators) exist now.
    public var observerCount: Int { storage.withLock { $0.listeners.count } }

    /// Replaces the owner's hooks (the owner may create the value before its work exists).
    public func setHooks(_ newHooks: ObserverHooks) { hooks.withLock { $0 = newHooks } }

    /// Calls `listener` with the current value now and with every published value after it,
    /// in order, until the returned function is called.
    public func subscribe(_ listener: @escaping @Sendable (Value) -> Void) -> Unsubscribe {
        let (id, current, isFirst) = storage.withLock { storage in
            let id = storage.nextID
            storage.nextID += 1
            storage.listeners[id] = listener
            return (id, storage.value, storage.listeners.count == 1)
        }
        if isFirst, let hook = hooks.withLock({ $0.firstObserver }) { hook() }
        listener(current)
        return { [weak self] in self?.unsubscribe(id) }
    }

    private func unsubscribe(_ id: UInt64) {
        let wasLast = storage.withLock { storage -> Bool in
            guard storage.listeners.removeValue(forKey: id) != nil else { return false }
            return storage.listeners.isEmpty
        }
        if wasLast, let hook = hooks.withLock({ $0.lastObserverGone }) { hook() }
    }

    /// The current value and every later one, as an async sequence. Each iteration is one
    /// observer; it ends when the iterating task is cancelled. A slow consumer sees the newest
    /// value rather than a backlog.
    public var values: AsyncStream<Value> {
        AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let unsubscribe = subscribe { continuation.yield($0) }
            continuation.onTermination = { _ in unsubscribe() }
        }
    }

    fileprivate func publish(_ value: Value) {
        // Listeners run outside the lock, in publication order: the owner publishes from one
        // isolation domain (an actor), and the version check keeps a slower earlier publication
        // from overwriting a newer one.
        let (listeners, version) = storage.withLock { storage in
            storage.value = value
            storage.version += 1
            return (storage.listeners.isEmpty ? [] : Array(storage.listeners.values), storage.version)
        }
        for listener in listeners {
            guard storage.withLock({ $0.version }) == version else { return }
            listener(value)
        }
    }

    /// The handle an owner keeps to change an ``ObservableValue``.
    public struct Publisher: Sendable {
        /// The value observers see.
        public let observable: ObservableValue<Value>
        /// Creates a value and its publisher.
        public init(_ initial: Value, hooks: ObserverHooks = ObserverHooks()) {
            observable = ObservableValue(initial, hooks: hooks)
        }
        /// Sets a new value and notifies every observer.
        public func publish(_ value: Value) { observable.publish(value) }
        /// Changes the value in place and notifies every observer.
        public func update(_ change: (inout Value) -> Void) {
            var value = observable.value
            change(&value)
            observable.publish(value)
        }
        /// The current value.
        public var value: Value { observable.value }
    }
}

#if canImport(Observation)
    import Observation

    /// Bridges an ``ObservableValue`` to the Observation framework for SwiftUI: views read
    /// ``value`` and are re-rendered when it changes.
    @MainActor
    @Observable
    public final class ObservedValue<Value: Sendable> {
        /// The latest value, updated on the main actor.
        public private(set) var value: Value
        @ObservationIgnored private var unsubscribe: ObservableValue<Value>.Unsubscribe?

        /// Starts observing `source`; observation lasts as long as this object.
        public init(_ source: ObservableValue<Value>) {
            value = source.value
            unsubscribe = source.subscribe { [weak self] newValue in
                Task { @MainActor [weak self] in self?.value = newValue }
            }
        }

        isolated deinit { unsubscribe?() }
    }
#endif
