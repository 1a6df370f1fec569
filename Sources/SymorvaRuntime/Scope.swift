import Synchronization

/// A generation of an account scope. Effects are launched under an epoch; their results are
/// applied only while the scope is still at that epoch.
public struct Epoch: Hashable, Sendable, Comparable, CustomStringConvertible, LogSafe {
    /// The generation number, starting at 1.
    public let value: UInt64
    /// Creates an epoch.
    public init(_ value: UInt64) { self.value = value }
    public static func < (lhs: Epoch, rhs: Epoch) -> Bool { lhs.value < rhs.value }
    public var description: String { "epoch \(value)" }
    public var logDescription: String { description }
}

/// The lifetime of everything that belongs to one signed-in account.
///
/// Hosts and their effects are created inside a scope. Ending the scope (sign-out), or
/// advancing it (cache clear) moves it to a new epoch and cancels the work registered with
/// it; a result that still arrives for the old epoch is dropped and traced as stale, never
/// applied — not to this account, and not to the one that replaced it.
public final class AccountScope: Sendable {
    /// Why a scope moved on.
    public enum Reason: String, Sendable {
        /// The member signed out.
        case signedOut
        /// Another account became the active one.
        case switched
        /// The local cache was cleared; the account stays signed in.
        case cacheCleared
        /// The scope's owner shut down.
        case shutdown
    }

    private struct Storage {
        var epoch: UInt64 = 1
        var ended = false
        var cancellers: [UInt64: @Sendable (Reason) -> Void] = [:]
        var nextID: UInt64 = 0
    }

    /// The account this scope belongs to (a Matrix user ID), or a label for non-account scopes.
    public let label: String
    private let storage = Lock(Storage())
    private let currentEpoch = Atomic<UInt64>(1)

    /// Creates a scope at epoch 1.
    public init(label: String) { self.label = label }

    /// The current epoch.
    public var epoch: Epoch { Epoch(currentEpoch.load(ordering: .acquiring)) }

    /// Whether `epoch` is still the scope's current epoch and the scope has not ended.
    public func isCurrent(_ epoch: Epoch) -> Bool {
        currentEpoch.load(ordering: .acquiring) == epoch.value && !isEnded
    }

    /// Whether ``end(reason:)`` was called.
    public var isEnded: Bool { storage.withLock { $0.ended } }

    /// Registers work to cancel when the scope advances or ends. Returns a function that
    /// unregisters it.
    @discardableResult
    public func onAdvance(_ cancel: @escaping @Sendable (Reason) -> Void) -> @Sendable () -> Void {
        let id: UInt64? = storage.withLock { storage in
            guard !storage.ended else { return nil }
            defer { storage.nextID += 1 }
            storage.cancellers[storage.nextID] = cancel
            return storage.nextID
        }
        guard let id else {
            cancel(.shutdown)
            return {}
        }
        return { [weak self] in _ = self?.storage.withLock { $0.cancellers.removeValue(forKey: id) } }
    }

    /// Moves to a new epoch: in-flight work is cancelled, late results are dropped, and the
    /// scope stays usable (cache clear).
    @discardableResult
    public func advance(reason: Reason) -> Epoch {
        let (epoch, cancellers) = storage.withLock { storage in
            storage.epoch += 1
            currentEpoch.store(storage.epoch, ordering: .releasing)
            return (storage.epoch, Array(storage.cancellers.values))
        }
        for cancel in cancellers { cancel(reason) }
        return Epoch(epoch)
    }

    /// Ends the scope for good (sign-out, switch): cancels its work; every later result is stale.
    public func end(reason: Reason) {
        let cancellers = storage.withLock { storage -> [@Sendable (Reason) -> Void] in
            guard !storage.ended else { return [] }
            storage.ended = true
            storage.epoch += 1
            currentEpoch.store(storage.epoch, ordering: .releasing)
            defer { storage.cancellers.removeAll() }
            return Array(storage.cancellers.values)
        }
        for cancel in cancellers { cancel(reason) }
    }
}
