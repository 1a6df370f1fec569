/// A personal setting of a conversation that applies at once and rolls back on failure.
public enum ConversationFlag: String, Sendable, Hashable, CaseIterable {
    /// The `m.favourite` tag.
    case favourite
    /// The `m.lowpriority` tag.
    case lowPriority
    /// Pinned to the top of the list (a room tag of the SDK's own).
    case pinned
    /// Silenced by a room push rule.
    case muted
}
