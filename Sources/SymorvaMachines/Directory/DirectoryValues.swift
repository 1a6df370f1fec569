import SymorvaRuntime

/// Which directory a search reads.
public enum DirectorySource: Sendable, Hashable, CustomStringConvertible {
    /// The public room directory of a homeserver (`/publicRooms`): `server` names another
    /// homeserver to list through ours, `nil` for ours.
    case publicRooms(server: String?)
    /// The community's member directory (the community services' directory module).
    case members(role: String?)
    /// The homeserver's user directory (`/user_directory/search`); needs a search term.
    case users

    public var description: String {
        switch self {
        case .publicRooms: "publicRooms"
        case .members: "members"
        case .users: "users"
        }
    }
}

/// What a member searches for: the key of one search's requests (equal queries share one).
public struct DirectoryQuery: Sendable, Hashable, CustomStringConvertible {
    /// Where to search.
    public var source: DirectorySource
    /// The search term, trimmed; empty lists everything the directory lists.
    public var term: String
    /// Entries per page, 1–100.
    public var pageSize: Int

    /// A query; the term is trimmed and the page size clamped to 1–100.
    public init(source: DirectorySource, term: String = "", pageSize: Int = 20) {
        self.source = source
        self.term = DirectoryQuery.trimmed(term)
        self.pageSize = max(1, min(pageSize, 100))
    }

    /// What a query prints: its source and page size, never the term the member typed.
    public var description: String { "DirectoryQuery(\(source), pageSize: \(pageSize), term: <private>)" }

    private static func trimmed(_ text: String) -> String {
        var scalars = Substring(text).unicodeScalars[...]
        while let first = scalars.first, first.properties.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.properties.isWhitespace { scalars.removeLast() }
        return String(String.UnicodeScalarView(scalars))
    }
}

/// The opaque position of the next page (`next_batch` of `/publicRooms`, `next_from` of the
/// member directory).
public struct DirectoryPageToken: Sendable, Hashable, CustomStringConvertible {
    /// The token as the server gave it.
    public let rawValue: String
    /// A token.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { "DirectoryPageToken(<opaque>)" }
}

/// One page of a directory as a server answered it.
public struct DirectoryPage<Item: Sendable & Equatable>: Sendable, Equatable {
    /// The entries, in the server's order.
    public var items: [Item]
    /// Where the next page starts, `nil` on the last page.
    public var nextPage: DirectoryPageToken?
    /// The server's estimate of how many entries match (`total_room_count_estimate`, `total`;
    /// `nil` when it gives none). The user directory says only whether it stopped early.
    public var totalEstimate: Int?

    /// A page.
    public init(items: [Item], nextPage: DirectoryPageToken? = nil, totalEstimate: Int? = nil) {
        self.items = items
        self.nextPage = nextPage
        self.totalEstimate = totalEstimate
    }
}

/// The results of one search so far: every page fetched, in order.
public struct DirectoryResults<Item: Sendable & Equatable>: Sendable, Equatable {
    /// The query these results answer.
    public let query: DirectoryQuery
    /// Every entry of the pages fetched so far.
    public var items: [Item]
    /// Where the next page starts, `nil` when every page is there.
    public var nextPage: DirectoryPageToken?
    /// The server's latest estimate of how many entries match.
    public var totalEstimate: Int?
    /// How many pages were fetched.
    public var pageCount: Int
    /// Why the last "more" request failed, if it did (the pages shown stay).
    public var lastFailure: DirectoryError?

    /// Results made of their first page.
    public init(query: DirectoryQuery, first page: DirectoryPage<Item>) {
        self.query = query
        self.items = page.items
        self.nextPage = page.nextPage
        self.totalEstimate = page.totalEstimate
        self.pageCount = 1
        self.lastFailure = nil
    }

    /// These results followed by `page`.
    public func appending(_ page: DirectoryPage<Item>) -> DirectoryResults {
        var next = self
        next.items += page.items
        next.nextPage = page.nextPage
        next.totalEstimate = page.totalEstimate ?? totalEstimate
        next.pageCount += 1
        next.lastFailure = nil
        return next
    }

    /// Whether another page can be fetched.
    public var hasMore: Bool { nextPage != nil }
}

/// Why a directory operation failed.
public enum DirectoryError: Error, Sendable, Hashable, CustomStringConvertible, LogSafe {
    /// Nobody is signed in, and the operation needs an account.
    case notSignedIn
    /// The account the handle belonged to was switched away from or signed out.
    case accountEnded
    /// The manifest disables the member directory.
    case moduleDisabled
    /// The homeserver answers this only to a signed-in member (searching its room directory
    /// when it allows no guests, the user directory).
    case signInRequired
    /// The input is not what the operation takes (a room alias without `#…:server`, an empty
    /// user directory term); says which.
    case invalidInput(String)
    /// The server knows no such thing (an alias that resolves to no room, a member not listed).
    case notFound
    /// The account may not do this: `needed` is the power level the room asks for, `has` the
    /// account's (both `nil` when the server refused without saying why).
    case forbidden(needed: Int?, has: Int?)
    /// The server asked to wait (`M_LIMIT_EXCEEDED`, `SY_LIMIT_EXCEEDED`).
    case rateLimited(retryAfter: Duration?)
    /// The server answered with an error code and status.
    case server(code: String, status: Int)
    /// No usable answer: the exchange never completed (no connection, timeout, cancelled) or
    /// the server failed (5xx), as the SDK classifies it everywhere.
    case transport(TransportProblem)
    /// The answer was not the documented JSON.
    case malformedResponse

    public var description: String {
        switch self {
        case .notSignedIn: "notSignedIn"
        case .accountEnded: "accountEnded"
        case .moduleDisabled: "moduleDisabled"
        case .signInRequired: "signInRequired"
        case .invalidInput(let what): "invalidInput(\(what))"
        case .notFound: "notFound"
        case .forbidden(let needed, let has):
            "forbidden(needed: \(needed.map(String.init) ?? "?"), has: \(has.map(String.init) ?? "?"))"
        case .rateLimited(let wait): "rateLimited(retryAfter: \(wait.map { "\($0)" } ?? "nil"))"
        case .server(let code, let status): "server(\(code), status: \(status))"
        case .transport(let problem): "transport(\(problem))"
        case .malformedResponse: "malformedResponse"
        }
    }

    public var logDescription: String { description }
}

/// What a directory search's machine sees of a failure.
public typealias DirectoryFailure = DirectoryError

/// A room listed in a homeserver's public room directory (`/publicRooms` chunk).
public struct PublicRoom: Sendable, Hashable, CustomStringConvertible {
    /// The room.
    public var roomID: RoomID
    /// The room's name, if it has one.
    public var name: String?
    /// The room's topic.
    public var topic: String?
    /// The canonical alias (`#general:localhost`).
    public var canonicalAlias: String?
    /// The avatar, an `mxc://` URL.
    public var avatarURL: String?
    /// How many members have joined.
    public var joinedMemberCount: Int
    /// Whether anyone may join without an invite (`join_rule` `public`).
    public var isPubliclyJoinable: Bool
    /// Whether guests may join.
    public var guestCanJoin: Bool
    /// Whether anyone may read the history without joining.
    public var isWorldReadable: Bool

    /// A public room.
    public init(
        roomID: RoomID, name: String? = nil, topic: String? = nil, canonicalAlias: String? = nil,
        avatarURL: String? = nil, joinedMemberCount: Int = 0, isPubliclyJoinable: Bool = true,
        guestCanJoin: Bool = false, isWorldReadable: Bool = false
    ) {
        self.roomID = roomID
        self.name = name
        self.topic = topic
        self.canonicalAlias = canonicalAlias
        self.avatarURL = avatarURL
        self.joinedMemberCount = joinedMemberCount
        self.isPubliclyJoinable = isPubliclyJoinable
        self.guestCanJoin = guestCanJoin
        self.isWorldReadable = isWorldReadable
    }

    /// The room ID only: names and topics are member-written text.
    public var description: String { "PublicRoom(\(roomID.rawValue))" }
}

/// A member of the community as its member directory lists them.
public struct DirectoryMember: Sendable, Hashable, CustomStringConvertible {
    /// The member's Matrix user ID.
    public var userID: UserID
    /// The Matrix display name, as the services last fetched it.
    public var displayName: String?
    /// The Matrix avatar (`mxc://`), as the services last fetched it.
    public var avatarURL: String?
    /// The roles (badges) the community's admins gave the member, sorted.
    public var roles: [String]

    /// A member entry.
    public init(userID: UserID, displayName: String? = nil, avatarURL: String? = nil, roles: [String] = []) {
        self.userID = userID
        self.displayName = displayName
        self.avatarURL = avatarURL
        self.roles = roles
    }

    /// The user ID only: display names are member-written text.
    public var description: String { "DirectoryMember(\(userID.rawValue))" }
}

/// A user found in the homeserver's user directory.
public struct DirectoryUser: Sendable, Hashable, CustomStringConvertible {
    /// The user's Matrix user ID.
    public var userID: UserID
    /// The display name.
    public var displayName: String?
    /// The avatar (`mxc://`).
    public var avatarURL: String?

    /// A user entry.
    public init(userID: UserID, displayName: String? = nil, avatarURL: String? = nil) {
        self.userID = userID
        self.displayName = displayName
        self.avatarURL = avatarURL
    }

    /// The user ID only: display names are member-written text.
    public var description: String { "DirectoryUser(\(userID.rawValue))" }
}
