import Synchronization

#if canImport(Observation)
    import Observation
#endif

/// A value that changes over time and can be observed: the only way state leaves a
/// repository or a host.
///
/// Observers are counted. The owner can react to the first observer arriving and the last one
/// leaving, which is how page-owned work (live timeline updates, back-pagination, polling)
/// follows observers: nobody watching, no work.
///
/// `ObservableValue` is read-only to its observers; the owner keeps the ``Publisher`` that
/// changes it.
///
/// Where the Observation module exists (Apple platforms, Linux), it is also `Observable`: code
/// that reads ``value`` inside `withObservationTracking` — a SwiftUI view's body reading
/// `community.chat.conversations.items` — is told when a new value is published. Publications
/// come from the owner's isolation domain, not the main actor; views that must only change on
/// the main actor use ``ObservedValue``.
public final class ObservableValue<Value: Sendable>: Sendable {
    /// A function that ends a subscription. Calling it more than once is harmless.
    public typealias Unsubscribe = @Sendable () -> Void

    /// A subscriber's callback.
    @usableFromInline typealias Listener = @Sendable (Value) -> Void

    @usableFromInline
    struct Subscription {
        @usableFromInline let id: UInt64
        @usableFromInline let listener: Listener
    }

    @usableFromInline
    struct Storage {
        @usableFromInline var value: Value
        /// The listeners in subscription order. A publication only retains this array (no copy,
        /// no allocation); subscribing and unsubscribing replace it.
        @usableFromInline var subscriptions: [Subscription] = []
        @usableFromInline var nextID: UInt64 = 0
        @usableFromInline init(value: Value) { self.value = value }
    }

    /// Hooks the owner sets to make work follow observers.
    ///
    /// `firstObserver` and `lastObserverGone` run in the order of the count changes they report,
    /// one at a time, never under the value's lock (a hook may subscribe, unsubscribe or publish).
    /// When another thread is running hooks of this value, a subscription or unsubscription
    /// leaves its hook to that thread and returns without waiting for it.
    public struct ObserverHooks: Sendable {
        /// Called when the observer count goes from zero to one.
        public var firstObserver: (@Sendable () -> Void)?
        /// Called when the observer count goes back to zero.
        public var lastObserverGone: (@Sendable () -> Void)?
        /// For an owner that mirrors another source and follows it only while observed: what
        /// ``ObservableValue/value`` reads while nobody observes, and the value a first observer
        /// starts with. It runs under the value's lock, so it must not touch this value.
        public var unobservedValue: (@Sendable () -> Value)?
        /// Hooks that do nothing.
        public init(
            firstObserver: (@Sendable () -> Void)? = nil, lastObserverGone: (@Sendable () -> Void)? = nil,
            unobservedValue: (@Sendable () -> Value)? = nil
        ) {
            self.firstObserver = firstObserver
            self.lastObserverGone = lastObserverGone
            self.unobservedValue = unobservedValue
        }
    }

    @usableFromInline let storage: Lock<Storage>
    /// The number of publications so far. Written under `storage`'s lock; read without it by a
    /// publication that checks, before each listener, whether a newer one has begun.
    @usableFromInline let version = Atomic<UInt64>(0)
    private let hooks: Lock<ObserverHooks>
    /// Count changes whose hooks have not run yet, in order, and whether a thread is running them.
    private let pendingHooks = Lock<(changes: [ObserverChange], isRunning: Bool)>(([], false))

    private enum ObserverChange {
        case first, lastGone
    }
    #if canImport(Observation)
        @usableFromInline let registrar = ObservationRegistrar()
        /// `\.value`, built once: a key path into a generic class is instantiated at run time.
        @usableFromInline let valueKeyPath: any KeyPath<ObservableValue, Value> & Sendable
    #endif

    /// Creates a value with its owner's hooks.
    public init(_ initial: Value, hooks: ObserverHooks = ObserverHooks()) {
        storage = Lock(Storage(value: initial))
        self.hooks = Lock(hooks)
        #if canImport(Observation)
            valueKeyPath = \.value
        #endif
    }

    /// The current value: the last one published, or, while nobody observes a value whose owner
    /// set ``ObserverHooks/unobservedValue``, what that hook reads.
    public var value: Value {
        #if canImport(Observation)
            registrar.access(self, keyPath: valueKeyPath)
        #endif
        let read = hooks.withLock { $0.unobservedValue }
        return storage.withLock { storage in
            guard storage.subscriptions.isEmpty, let read else { return storage.value }
            storage.value = read()
            return storage.value
        }
    }

    /// How many subscriptions (listeners and live async iterators) exist now.
    public var observerCount: Int { storage.withLock { $0.subscriptions.count } }

    /// Replaces the owner's hooks (the owner may create the value before its work exists).
    public func setHooks(_ newHooks: ObserverHooks) { hooks.withLock { $0 = newHooks } }

    /// Calls `listener` with the current value now and with every published value after it,
    /// in order, until the returned function is called. When a publication races with the
    /// subscription, the listener may see a value twice, but its last call is the newest value.
    /// The listeners of one publication run in the order they subscribed, on the publishing
    /// thread: an owner can rely on an earlier subscriber having seen a value before a later one
    /// reacts to it.
    public func subscribe(_ listener: @escaping @Sendable (Value) -> Void) -> Unsubscribe {
        let read = hooks.withLock { $0.unobservedValue }
        let (id, current, seen, isFirst) = storage.withLock { storage in
            let id = storage.nextID
            storage.nextID += 1
            if storage.subscriptions.isEmpty, let read { storage.value = read() }
            storage.subscriptions.append(Subscription(id: id, listener: listener))
            let isFirst = storage.subscriptions.count == 1
            // Queued under the value's lock: hooks run in the order of the count changes.
            if isFirst { pendingHooks.withLock { $0.changes.append(.first) } }
            return (id, storage.value, version.load(ordering: .relaxed), isFirst)
        }
        if isFirst { runPendingHooks() }
        listener(current)
        // A publication made after the lock was released may have reached the listener before
        // `current` did. Then the newest value goes to the listener once more, so that its last
        // call is never older than the value (a later publication calls it again anyway).
        let newer = storage.withLock { storage in
            version.load(ordering: .relaxed) == seen ? nil : storage.value
        }
        if let newer { listener(newer) }
        return { [weak self] in self?.unsubscribe(id) }
    }

    private func unsubscribe(_ id: UInt64) {
        let wasLast = storage.withLock { storage -> Bool in
            guard let index = storage.subscriptions.firstIndex(where: { $0.id == id }) else { return false }
            storage.subscriptions.remove(at: index)
            guard storage.subscriptions.isEmpty else { return false }
            pendingHooks.withLock { $0.changes.append(.lastGone) }
            return true
        }
        if wasLast { runPendingHooks() }
    }

    /// Runs the queued hooks in order, unless another thread is running them (it runs ours too).
    private func runPendingHooks() {
        let isRunner = pendingHooks.withLock { pending -> Bool in
            guard !pending.isRunning else { return false }
            pending.isRunning = true
            return true
        }
        guard isRunner else { return }
        while true {
            let next = pendingHooks.withLock { pending -> ObserverChange? in
                guard !pending.changes.isEmpty else {
                    pending.isRunning = false
                    return nil
                }
                return pending.changes.removeFirst()
            }
            guard let next else { return }
            let hooks = self.hooks.withLock { $0 }
            switch next {
            case .first: hooks.firstObserver?()
            case .lastGone: hooks.lastObserverGone?()
            }
        }
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

    /// Sets a new value and notifies every observer (`package` for owners that hold the value
    /// weakly, such as windows of a list that must not keep themselves alive through their hooks).
    @inlinable
    package func publish(_ value: Value) {
        // Listeners run outside the lock, in publication order: the owner publishes from one
        // isolation domain (an actor), and the version check keeps a slower earlier publication
        // from overwriting a newer one.
        observationWillChange()
        let (subscriptions, version) = storage.withLock { storage in
            storage.value = value
            let version = self.version.wrappingAdd(1, ordering: .releasing).newValue
            return (storage.subscriptions, version)
        }
        observationDidChange()
        for subscription in subscriptions {
            guard self.version.load(ordering: .acquiring) == version else { return }
            subscription.listener(value)
        }
    }

    /// Tells Observation that ``value`` is about to change (`withObservationTracking`'s
    /// `onChange` runs now).
    @inlinable
    func observationWillChange() {
        #if canImport(Observation)
            registrar.willSet(self, keyPath: valueKeyPath)
        #endif
    }

    /// Tells Observation that ``value`` has changed.
    @inlinable
    func observationDidChange() {
        #if canImport(Observation)
            registrar.didSet(self, keyPath: valueKeyPath)
        #endif
    }

    /// Computes the next value from the current one under the value's lock and publishes it;
    /// `next` returning `nil` publishes nothing. For owners that forward another source: the
    /// check (is this source still the one to show?) and the publication are one step, so a
    /// source replaced meanwhile never overwrites its successor. `next` must not touch this value.
    ///
    /// - Returns: whether a value was published.
    @discardableResult
    func publish(computing next: @Sendable (Value) -> Value?) -> Bool {
        // Observation hears of a change that may not happen (`next` may decline): a spurious
        // `onChange` re-reads an unchanged value, a missed one would leave a view stale.
        observationWillChange()
        let published = storage.withLock { storage -> (Value, [Subscription], UInt64)? in
            guard let value = next(storage.value) else { return nil }
            storage.value = value
            let version = self.version.wrappingAdd(1, ordering: .releasing).newValue
            return (value, storage.subscriptions, version)
        }
        guard let (value, subscriptions, version) = published else { return false }
        observationDidChange()
        for subscription in subscriptions {
            guard self.version.load(ordering: .acquiring) == version else { return true }
            subscription.listener(value)
        }
        return true
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
        @inlinable
        public func publish(_ value: Value) { observable.publish(value) }
        /// Computes the next value from the current one under the value's lock and publishes
        /// it, unless `next` returns `nil` (see ``ObservableValue/ObserverHooks/unobservedValue``
        /// for owners that mirror another source).
        ///
        /// - Returns: whether a value was published.
        @discardableResult
        public func publish(computing next: @Sendable (Value) -> Value?) -> Bool { observable.publish(computing: next) }
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
    extension ObservableValue: Observable {}

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
