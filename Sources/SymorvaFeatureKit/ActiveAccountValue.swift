import SymorvaRuntime

/// An observable value that shows the active account's value of some observable (its
/// conversation list, its sync state, its balances) and a placeholder while no account is
/// active: what the community's stable facades (``ChatClient``, ``WalletClient``) expose.
///
/// Three rules, as the design asks:
/// - **Account-scoped.** ``follow(_:)`` switches to the new account's source and publishes its
///   value at once. A forward never passes on the value its source delivered: under the value's
///   lock (``ObservableValue/Publisher/publish(computing:)``) it checks that the source it was
///   subscribed to (its generation) is still the one followed and reads that source's current
///   value. So a late publication of a replaced source is never shown, not even briefly.
/// - **Work follows observers.** The source is subscribed to only while this value has
///   observers; its observer count (and so its owner's first- and last-observer hooks) sees
///   exactly the facade's observers coming and going.
/// - **Reads are current.** While nobody observes, ``observable``'s `value` reads the source
///   directly (``ObservableValue/ObserverHooks/unobservedValue``).
///
/// Lock order: the value's lock, then ``state``, then the source's lock. Nothing here holds
/// ``state`` while publishing or (un)subscribing.
package final class ActiveAccountValue<Value: Sendable>: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var source: ObservableValue<Value>?
        var isObserved = false
        var subscription: ObservableValue<Value>.Unsubscribe?
    }

    private let publisher: ObservableValue<Value>.Publisher
    private let placeholder: Value
    private let isSame: @Sendable (Value, Value) -> Bool
    private let state = Lock(State())

    /// A value that shows `placeholder` until it follows a source.
    ///
    /// - Parameter isSame: whether two values look the same to an observer; an equal value is
    ///   not published again.
    package init(placeholder: Value, isSame: @escaping @Sendable (Value, Value) -> Bool) {
        self.placeholder = placeholder
        self.isSame = isSame
        self.publisher = ObservableValue<Value>.Publisher(placeholder)
        publisher.observable.setHooks(
            .init(
                firstObserver: { [weak self] in self?.observersChanged(isObserved: true) },
                lastObserverGone: { [weak self] in self?.observersChanged(isObserved: false) },
                unobservedValue: { [weak self, placeholder] in
                    guard let self else { return placeholder }
                    return self.currentSourceValue(generation: nil) ?? placeholder
                }))
    }

    /// What observers see.
    package var observable: ObservableValue<Value> { publisher.observable }

    /// The generation of the source followed now (for tests of late publications).
    var generation: UInt64 { state.withLock { $0.generation } }

    /// Shows `source` (the new active account's value) from now on, or the placeholder when
    /// `nil`. The previous source is unsubscribed and nothing it publishes later is shown.
    package func follow(_ source: ObservableValue<Value>?) {
        let (generation, previous, isObserved) = state.withLock { state in
            state.generation += 1
            state.source = source
            defer { state.subscription = nil }
            return (state.generation, state.subscription, state.isObserved)
        }
        previous?()
        forward(generation: generation)
        if isObserved { attach(generation: generation) }
    }

    /// Publishes the current source's value, unless the source followed under `generation` has
    /// been replaced meanwhile or the value is unchanged.
    func forward(generation: UInt64) {
        publisher.publish { [isSame] current in
            guard let next = currentSourceValue(generation: generation) else { return nil }
            return isSame(current, next) ? nil : next
        }
    }

    /// The value to show: the source's, or the placeholder when no account is active; `nil`
    /// when `generation` is given and is no longer the current one.
    private func currentSourceValue(generation: UInt64?) -> Value? {
        let source = state.withLock { state -> ObservableValue<Value>?? in
            if let generation, generation != state.generation { return .none }
            return .some(state.source)
        }
        guard let source else { return nil }
        return source?.value ?? placeholder
    }

    private func observersChanged(isObserved: Bool) {
        let (generation, previous) = state.withLock { state in
            state.isObserved = isObserved
            defer { if !isObserved { state.subscription = nil } }
            return (state.generation, isObserved ? nil : state.subscription)
        }
        if isObserved {
            attach(generation: generation)
        } else {
            previous?()
        }
    }

    /// Subscribes to the source of `generation` and keeps the subscription if it is still
    /// wanted once made (still that generation, still observed, no other subscription).
    private func attach(generation: UInt64) {
        let source = state.withLock { state in state.generation == generation ? state.source : nil }
        guard let source else { return }
        let unsubscribe = source.subscribe { [weak self] _ in self?.forward(generation: generation) }
        let isWanted = state.withLock { state -> Bool in
            guard state.generation == generation, state.isObserved, state.subscription == nil else { return false }
            state.subscription = unsubscribe
            return true
        }
        if !isWanted { unsubscribe() }
    }
}

extension ActiveAccountValue where Value: Equatable {
    /// A value that shows `placeholder` until it follows a source; equal values are not
    /// published again.
    package convenience init(placeholder: Value) {
        self.init(placeholder: placeholder, isSame: ==)
    }
}
