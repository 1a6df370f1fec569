import SymorvaChatStore
import SymorvaMachines

/// The member's conversations, as the conversation list shows them.
public struct ConversationList: Sendable, Hashable {
    /// Joined and invited conversations: pinned ones first, then by latest activity (newest
    /// first), ties broken by name and room ID so the order is the same on every device.
    public var items: [ConversationListItem]
    /// Whose list it is and whether it is known yet: an empty list means "no conversations"
    /// only when ``Status-swift.enum/loaded``.
    public var status: Status
    /// The account the list belongs to; `nil` when nobody is signed in.
    public var userID: UserID?

    /// Where a list stands.
    public enum Status: String, Sendable, Hashable {
        /// Nobody is signed in: there is no list to show.
        case signedOut
        /// An account is signed in and its list has not been read from its store yet.
        case loading
        /// The list as the account's store holds it.
        case loaded
    }

    /// A list.
    public init(items: [ConversationListItem] = [], status: Status, userID: UserID?) {
        self.items = items
        self.status = status
        self.userID = userID
    }

    /// What ``ChatClient/conversations`` shows while nobody is signed in.
    public static let signedOut = ConversationList(status: .signedOut, userID: nil)

    /// Whether the list has been read from the store at least once (an empty list before that
    /// means "not known yet", not "no conversations").
    public var isLoaded: Bool { status == .loaded }

    /// The item for `roomID`, if listed.
    public subscript(roomID: RoomID) -> ConversationListItem? { items.first { $0.id == roomID } }
}

/// The member's relation to a listed conversation.
public enum ConversationMembership: String, Sendable, Hashable {
    /// A member of the room.
    case joined
    /// Invited; only the invite's stripped state is known until the member joins.
    case invited
}

/// One row of the conversation list.
///
/// Its name, topic and preview are user content: the description shows the room ID only.
public struct ConversationListItem: Sendable, Hashable, Identifiable, CustomStringConvertible {
    /// The room.
    public var id: RoomID
    /// The computed room name (specification rules), structured for localisation.
    public var displayName: RoomDisplayName
    /// `m.room.avatar` (an `mxc://` URI).
    public var avatarURL: String?
    /// The room's avatar to show, when ``avatarURL`` is a valid `mxc://` URI: a small square
    /// thumbnail of it comes from ``MediaClient/cachedAvatar(_:size:)``.
    public var avatar: MediaURI? { avatarURL.flatMap(MediaURI.init) }
    /// `m.room.topic`.
    public var topic: String?
    /// The last message, if any is stored.
    public var lastMessage: MessagePreview?
    /// Unread notifications.
    public var unreadCount: Int
    /// Unread highlights (mentions).
    public var highlightCount: Int
    /// Joined or invited.
    public var membership: ConversationMembership
    /// Tagged `m.favourite`.
    public var isFavourite: Bool
    /// Tagged `m.lowpriority`.
    public var isLowPriority: Bool
    /// Pinned to the top of the list.
    public var isPinned: Bool
    /// Silenced by a push rule.
    public var isMuted: Bool
    /// Whether the room is end-to-end encrypted.
    public var isEncrypted: Bool
    /// A direct chat: listed in the account's `m.direct`, or an invite to one (its membership
    /// event says `is_direct`). Joining such an invite adds the room to `m.direct`.
    public var isDirect: Bool
    /// When the room last had activity; `nil` when never.
    public var latestActivity: MatrixTimestamp?

    /// The English rendering of ``displayName``.
    public var name: String { displayName.englishText }

    /// The room ID only: names and previews are user content.
    public var description: String { "ConversationListItem(\(id))" }

    /// The row for a stored summary, or `nil` for rooms the member left.
    init?(_ summary: ConversationSummary, ownUserID: UserID) {
        let membership: ConversationMembership
        switch summary.membership {
        case .joined: membership = .joined
        case .invited: membership = .invited
        case .left, .knocked: return nil
        }
        let members = summary.heroes.map {
            RoomMember(userID: UserID(stored: $0.userID), displayName: $0.displayName, membership: .join)
        }
        let hasCounts = summary.joinedMemberCount + summary.invitedMemberCount > 0
        let source = RoomNameSource(
            name: summary.name, canonicalAlias: summary.canonicalAlias, heroes: members.map(\.userID),
            joinedMemberCount: hasCounts ? summary.joinedMemberCount : nil,
            invitedMemberCount: hasCounts ? summary.invitedMemberCount : nil, members: members,
            ownUserID: ownUserID)
        self.id = RoomID(summary.roomID)
        self.displayName = RoomDisplayName(source)
        self.avatarURL = summary.avatarURL
        self.topic = summary.topic
        self.lastMessage = summary.preview
        self.unreadCount = summary.notificationCount
        self.highlightCount = summary.highlightCount
        self.membership = membership
        self.isFavourite = summary.isFavourite
        self.isLowPriority = summary.isLowPriority
        self.isPinned = summary.isPinned
        self.isMuted = summary.isMuted
        self.isEncrypted = summary.isEncrypted
        self.isDirect = summary.isDirect
        self.latestActivity =
            summary.latestActivityTS > 0 ? MatrixTimestamp(milliseconds: summary.latestActivityTS) : nil
    }
}

extension ConversationFlag {
    func read(_ item: ConversationListItem) -> Bool {
        switch self {
        case .favourite: item.isFavourite
        case .lowPriority: item.isLowPriority
        case .pinned: item.isPinned
        case .muted: item.isMuted
        }
    }

    func write(_ value: Bool, to item: inout ConversationListItem) {
        switch self {
        case .favourite: item.isFavourite = value
        case .lowPriority: item.isLowPriority = value
        case .pinned: item.isPinned = value
        case .muted: item.isMuted = value
        }
    }
}

extension ConversationList {
    /// Builds the list from stored summaries with optimistic flags laid over them.
    static func build(
        _ summaries: [ConversationSummary], ownUserID: UserID, overrides: [RoomID: [ConversationFlag: Bool]]
    ) -> ConversationList {
        var items = summaries.compactMap { ConversationListItem($0, ownUserID: ownUserID) }
        for index in items.indices {
            for (flag, value) in overrides[items[index].id] ?? [:] { flag.write(value, to: &items[index]) }
        }
        let keys = Dictionary(
            uniqueKeysWithValues: items.map {
                ($0.id, ConversationSortKey(roomID: $0.id, latestActivity: $0.latestActivity, displayName: $0.name))
            })
        items.sort { lhs, rhs in
            if lhs.isPinned != rhs.isPinned { return lhs.isPinned }
            return ConversationSorting.areInIncreasingOrder(keys[lhs.id]!, keys[rhs.id]!)
        }
        return ConversationList(items: items, status: .loaded, userID: ownUserID)
    }
}
