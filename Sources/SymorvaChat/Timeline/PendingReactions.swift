import SymorvaChatStore
import SymorvaMachines

/// A reaction of ours applied at once, before the store reflects it, and rolled back if the
/// server refuses it.
struct PendingReaction: Sendable, Hashable {
    var target: EventID
    var key: String
    /// Adding (react) or removing (unreact).
    var isAdded: Bool
    /// The reaction event. For an addition, the event the server created (`nil` while the
    /// request is on its way); for a removal, the event being redacted.
    var reactionEventID: EventID?
}

/// Our reaction changes that the store does not reflect yet: at most one per target and key,
/// the latest (a removal replaces the addition it undoes, and the other way round).
///
/// A change is settled — dropped, because the store now shows the same — once the store holds
/// its reaction event and shows our reaction with that key (an addition) or no longer shows it
/// (a removal). Waiting for the event matters for a reaction removed before sync brought it:
/// the store does not show it yet, and settling the removal then would show the reaction again
/// as soon as it arrives, with nothing left to hide it.
struct PendingReactions: Sendable {
    /// The changes, in the order they were made.
    private(set) var changes: [PendingReaction] = []

    /// The pending change of our reaction with `key` to `target`, if any.
    func change(for target: EventID, key: String) -> PendingReaction? {
        changes.first { $0.target == target && $0.key == key }
    }

    /// Makes `change` the pending change for its target and key; returns the one it replaces
    /// (what a rollback restores).
    mutating func replace(with change: PendingReaction) -> PendingReaction? {
        let index = changes.firstIndex { $0.target == change.target && $0.key == change.key }
        guard let index else {
            changes.append(change)
            return nil
        }
        let previous = changes[index]
        changes[index] = change
        return previous
    }

    /// The server refused `change`: `previous` (what it replaced) is pending again, unless a later
    /// change has replaced `change` meanwhile.
    mutating func rollBack(_ change: PendingReaction, to previous: PendingReaction?) {
        guard let index = changes.firstIndex(of: change) else { return }
        if let previous {
            changes[index] = previous
        } else {
            changes.remove(at: index)
        }
    }

    /// The server accepted the addition `change` as `eventID`; recorded while it is pending.
    mutating func accept(_ change: PendingReaction, as eventID: EventID) {
        guard let index = changes.firstIndex(of: change) else { return }
        changes[index].reactionEventID = eventID
    }

    /// The reaction events whose arrival in the store the settlement needs to know.
    var reactionEventIDs: [EventID] { changes.compactMap(\.reactionEventID) }

    /// Drops the changes the store reflects: `items` are the stored items of the window (with
    /// their reactions), `storedReactions` those of ``reactionEventIDs`` the store holds.
    mutating func settle(items: [StoredTimelineItem], storedReactions: Set<String>, ownUserID: String) {
        changes.removeAll { change in
            guard let item = items.first(where: { $0.eventID == change.target.rawValue }) else { return false }
            let hasOwn = item.reactions.contains { $0.key == change.key && $0.senders.contains(ownUserID) }
            let isStored = change.reactionEventID.map { storedReactions.contains($0.rawValue) }
            if change.isAdded {
                // Our reaction shows; if we know which event it is, that event is the one stored.
                return hasOwn && isStored != false
            }
            // Our reaction no longer shows, and not because it has not arrived yet.
            return !hasOwn && isStored != false
        }
    }
}
