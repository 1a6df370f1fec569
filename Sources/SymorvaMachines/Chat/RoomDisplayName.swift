// Conversation-list logic: the computed room name of the Matrix client-server specification
// ("Calculating the display name for a room", with "Calculating the display name for a user"
// for the heroes) and the order of the conversation list. Pure functions over values the store
// already has; no machine is needed.

/// A room member as its `m.room.member` state event describes it.
public struct RoomMember: Sendable, Hashable {
    /// The member's user ID.
    public var userID: UserID
    /// The `displayname` of the member event; `nil` when absent or `null`.
    public var displayName: String?
    /// The `membership` of the member event.
    public var membership: Membership

    /// Creates a member.
    public init(userID: UserID, displayName: String?, membership: Membership) {
        self.userID = userID
        self.displayName = displayName
        self.membership = membership
    }
}

/// The `membership` of an `m.room.member` event.
public enum Membership: String, Sendable, Hashable {
    /// `join`.
    case join
    /// `invite`.
    case invite
    /// `leave` (left or kicked).
    case leave
    /// `ban`.
    case ban
    /// `knock`.
    case knock

    /// Joined or invited: the members that name a room and that display names must be unique among.
    public var isJoinedOrInvited: Bool { self == .join || self == .invite }
}

/// What the room name is computed from.
public struct RoomNameSource: Sendable, Equatable {
    /// `name` of `m.room.name`.
    public var name: String?
    /// `alias` of `m.room.canonical_alias`.
    public var canonicalAlias: String?
    /// `m.heroes` of the sync summary (the server excludes the user); empty when not sent.
    public var heroes: [UserID]
    /// `m.joined_member_count`; `nil` when the server did not send it (counted from `members`).
    public var joinedMemberCount: Int?
    /// `m.invited_member_count`; `nil` when the server did not send it (counted from `members`).
    public var invitedMemberCount: Int?
    /// The member events the client knows: at least the heroes' (lazy loading), at most all.
    public var members: [RoomMember]
    /// The signed-in user, never a hero.
    public var ownUserID: UserID

    /// Creates a source.
    public init(
        name: String? = nil, canonicalAlias: String? = nil, heroes: [UserID] = [],
        joinedMemberCount: Int? = nil, invitedMemberCount: Int? = nil, members: [RoomMember] = [],
        ownUserID: UserID
    ) {
        self.name = name
        self.canonicalAlias = canonicalAlias
        self.heroes = heroes
        self.joinedMemberCount = joinedMemberCount
        self.invitedMemberCount = invitedMemberCount
        self.members = members
        self.ownUserID = ownUserID
    }
}

/// A room's computed name, kept structured so that the product layer can localise it.
///
/// ``englishText`` renders it the way the specification's examples do.
public enum RoomDisplayName: Sendable, Hashable, CustomStringConvertible {
    /// The room's `m.room.name`.
    case named(String)
    /// The room's canonical alias (`#room:example.org`).
    case alias(String)
    /// Named after its members: the heroes' disambiguated names and how many more there are.
    case members([String], others: Int)
    /// The user is alone; the room used to have these members (and `others` more).
    case emptyWas([String], others: Int)
    /// The user is alone and nobody else is known.
    case empty

    /// How many heroes a name lists at most (the specification suggests at least 5).
    public static let maximumHeroes = 5

    /// Computes the name by the specification's algorithm.
    public init(_ source: RoomNameSource) {
        if let name = source.name, !name.isEmpty {
            self = .named(name)
        } else if let alias = source.canonicalAlias, Self.isValidAlias(alias) {
            self = .alias(alias)
        } else {
            self = Self.fromMembers(source)
        }
    }

    /// `#localpart:server`: what the specification calls a valid alias for naming.
    static func isValidAlias(_ alias: String) -> Bool {
        alias.hasPrefix("#") && alias.dropFirst().contains(":") && !alias.hasSuffix(":")
    }

    static func fromMembers(_ source: RoomNameSource) -> RoomDisplayName {
        let heroes = self.heroes(of: source)
        let shown = Array(heroes.prefix(maximumHeroes))
        let names = shown.map { MemberDisplayName.disambiguated($0, among: source.members) }
        let joined = source.joinedMemberCount ?? source.members.filter { $0.membership == .join }.count
        let invited = source.invitedMemberCount ?? source.members.filter { $0.membership == .invite }.count
        let total = joined + invited
        if total <= 1 {
            return names.isEmpty ? .empty : .emptyWas(names, others: heroes.count - shown.count)
        }
        return .members(names, others: max(0, total - 1 - shown.count))
    }

    /// `m.heroes` when the server sent them; otherwise the specification's own choice from the
    /// known members: joined and invited users other than the user, else those who left or were
    /// banned. Without the server's stream order, user IDs order them, so every client agrees.
    static func heroes(of source: RoomNameSource) -> [UserID] {
        var seen: Set<UserID> = [source.ownUserID]
        let fromServer = source.heroes.filter { seen.insert($0).inserted }
        if !fromServer.isEmpty { return fromServer }
        let others = source.members.filter { $0.userID != source.ownUserID }
        let present = others.filter { $0.membership.isJoinedOrInvited }
        let chosen = present.isEmpty ? others.filter { $0.membership == .leave || $0.membership == .ban } : present
        return Array(Set(chosen.map(\.userID))).sorted()
    }

    /// The English rendering of the specification's examples: "Alice, Bob, and 3 others",
    /// "Empty Room (was Alice)".
    public var englishText: String {
        switch self {
        case .named(let name): name
        case .alias(let alias): alias
        case .members(let names, let others): Self.list(names, others: others)
        case .emptyWas(let names, let others): "Empty Room (was \(Self.list(names, others: others)))"
        case .empty: "Empty Room"
        }
    }

    /// Room names are user content: they never reach a log through `description`.
    public var description: String { "RoomDisplayName(<private>)" }

    static func list(_ names: [String], others: Int) -> String {
        var items = names
        if others > 0 { items.append(others == 1 ? "1 other" : "\(others) others") }
        switch items.count {
        case 0: return ""
        case 1: return items[0]
        case 2: return "\(items[0]) and \(items[1])"
        default: return items.dropLast().joined(separator: ", ") + ", and " + items[items.count - 1]
        }
    }
}

/// The specification's "Calculating the display name for a user".
package enum MemberDisplayName {
    /// The name to show for `userID`: its `displayname`, disambiguated with the user ID when
    /// another joined or invited member uses the same one (anti-spoofing), or the bare user ID
    /// when there is no `displayname`.
    package static func disambiguated(_ userID: UserID, among members: [RoomMember]) -> String {
        guard let member = members.first(where: { $0.userID == userID }),
            let displayName = member.displayName, !displayName.isEmpty
        else { return userID.rawValue }
        let isShared = members.contains {
            $0.userID != userID && $0.membership.isJoinedOrInvited && $0.displayName == displayName
        }
        return isShared ? "\(displayName) (\(userID))" : displayName
    }
}

// MARK: - Conversation order

/// What the conversation list is sorted by.
package struct ConversationSortKey: Sendable, Hashable {
    /// The room.
    package var roomID: RoomID
    /// `origin_server_ts` of the room's latest activity (a message, an invite, the user joining);
    /// `nil` when the room has none yet.
    package var latestActivity: MatrixTimestamp?
    /// The room's computed name as shown, for the tie-break.
    package var displayName: String

    /// Creates a key.
    package init(roomID: RoomID, latestActivity: MatrixTimestamp?, displayName: String) {
        self.roomID = roomID
        self.latestActivity = latestActivity
        self.displayName = displayName
    }
}

/// The conversation list's order: the most recently active first.
///
/// Ties break by the shown name (case-insensitively, then exactly) and finally by room ID, so
/// the order is total and the same on every device for the same data: rows never swap places
/// between two refreshes that change nothing.
package enum ConversationSorting {
    /// Whether `lhs` comes before `rhs`.
    package static func areInIncreasingOrder(_ lhs: ConversationSortKey, _ rhs: ConversationSortKey) -> Bool {
        switch (lhs.latestActivity, rhs.latestActivity) {
        case (let left?, let right?) where left != right: return left > right
        case (.some, .none): return true
        case (.none, .some): return false
        default: break
        }
        let leftName = lhs.displayName.lowercased()
        let rightName = rhs.displayName.lowercased()
        if leftName != rightName { return leftName < rightName }
        if lhs.displayName != rhs.displayName { return lhs.displayName < rhs.displayName }
        return lhs.roomID < rhs.roomID
    }

    /// `keys` in conversation-list order.
    package static func sorted(_ keys: [ConversationSortKey]) -> [ConversationSortKey] {
        keys.sorted(by: areInIncreasingOrder)
    }
}
