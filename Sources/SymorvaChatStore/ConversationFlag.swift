import SymorvaMachines

extension ConversationFlag {
    /// The room tag that carries the flag; `nil` for mute (a push rule).
    package var tag: String? {
        switch self {
        case .favourite: "m.favourite"
        case .lowPriority: "m.lowpriority"
        case .pinned: ChatStore.pinnedTag
        case .muted: nil
        }
    }

    /// The `rooms` column that mirrors the flag.
    package var column: String {
        switch self {
        case .favourite: "is_favourite"
        case .lowPriority: "is_low_priority"
        case .pinned: "is_pinned"
        case .muted: "is_muted"
        }
    }
}
