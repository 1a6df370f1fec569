import SymorvaRuntime

// The AI studio's domain values: grants, their scopes, the consent sheet, conversation content
// and summaries. Content (`ConversationItem`, `GrantedContent`, `Summary`) never describes its
// text: descriptions and mirrors show IDs and counts only.

/// The ID of a grant, as the community services issued it. Safe to log.
public struct GrantID: RawRepresentable, Hashable, Sendable, CustomStringConvertible, LogSafe {
    /// The ID as the service spells it.
    public let rawValue: String
    /// Wraps an ID the service issued.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Wraps an ID the service issued.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public var logDescription: String { rawValue }
}

/// What part of one conversation a grant lets the assistant read.
public enum GrantScope: Sendable, Hashable {
    /// Exactly these messages, nothing else.
    case selectedMessages([EventID])
    /// The conversation from this message on: that message and every later one, while the grant lives.
    case conversation(since: EventID)
}

/// What the assistant may do with the content: one purpose per grant.
public enum GrantPurpose: String, Sendable, Hashable, LogSafe {
    /// Summarize it.
    case summarize

    public var logDescription: String { rawValue }
}

/// A grant the member asked for, before the service issued it.
package struct GrantRequest: Sendable, Hashable {
    /// The member asking (the grant is theirs alone).
    package let member: UserID
    /// The conversation.
    package let roomID: RoomID
    /// What of it may be read.
    package let scope: GrantScope
    /// For ``GrantScope/conversation(since:)``: the first message's `origin_server_ts`, which
    /// bounds the scope (read from the device's copy of the message). `nil` for selected messages.
    package let sinceTimestamp: MatrixTimestamp?
    /// What for.
    package let purpose: GrantPurpose
    /// How long the grant is asked to live (the service may cap it).
    package let lifetime: Duration
    /// Who receives the content: the community's assistant, as the consent sheet names it.
    package let recipient: String

    /// Creates a request.
    package init(
        member: UserID, roomID: RoomID, scope: GrantScope, sinceTimestamp: MatrixTimestamp? = nil,
        purpose: GrantPurpose = .summarize, lifetime: Duration, recipient: String
    ) {
        self.member = member
        self.roomID = roomID
        self.scope = scope
        self.sinceTimestamp = sinceTimestamp
        self.purpose = purpose
        self.lifetime = lifetime
        self.recipient = recipient
    }

    /// What the member is shown before anything is asked of the service.
    package var consentSheet: ConsentSheet {
        ConsentSheet(roomID: roomID, scope: scope, purpose: purpose, recipient: recipient, lifetime: lifetime)
    }
}

/// What the consent sheet tells the member: what will be shared, with whom, for how long.
public struct ConsentSheet: Sendable, Hashable, CustomStringConvertible {
    /// The conversation.
    public let roomID: RoomID
    /// What of it would be shared.
    public let scope: GrantScope
    /// What for.
    public let purpose: GrantPurpose
    /// Who would receive it.
    public let recipient: String
    /// For how long the grant would live.
    public let lifetime: Duration

    /// Creates a sheet.
    public init(roomID: RoomID, scope: GrantScope, purpose: GrantPurpose, recipient: String, lifetime: Duration) {
        self.roomID = roomID
        self.scope = scope
        self.purpose = purpose
        self.recipient = recipient
        self.lifetime = lifetime
    }

    /// The sheet's text, in English: what a presenter without its own design shows.
    public var text: String {
        let what: String
        switch scope {
        case .selectedMessages(let ids):
            what = ids.count == 1 ? "1 selected message" : "\(ids.count) selected messages"
        case .conversation(let since):
            what = "every message from \(since.rawValue) on"
        }
        let minutes = max(1, lifetime.wholeMilliseconds / 60_000)
        let duration = minutes % 60 == 0 ? "\(minutes / 60) hour\(minutes == 60 ? "" : "s")" : "\(minutes) minutes"
        return "Share \(what) of \(roomID.rawValue) with \(recipient) to \(purpose.rawValue) them, for \(duration)."
    }

    public var description: String { "ConsentSheet(\(roomID.rawValue))" }
}

/// The member's answer to the consent sheet.
public enum ConsentAnswer: Sendable, Hashable {
    /// Yes: ask the service for the grant.
    case approved
    /// No: nothing is asked of the service.
    case declined
    /// No sheet could be shown (no presenter on this device): treated as no.
    case unavailable
}

/// A grant the service issued: one member, one conversation, one scope, one purpose, until
/// it expires.
package struct StudioGrant: Sendable, Hashable {
    /// The service's ID.
    package let id: GrantID
    /// The member it belongs to.
    package let member: UserID
    /// The conversation.
    package let roomID: RoomID
    /// What of it may be read.
    package let scope: GrantScope
    /// The lower bound of a ``GrantScope/conversation(since:)`` scope.
    package let sinceTimestamp: MatrixTimestamp?
    /// What for.
    package let purpose: GrantPurpose
    /// When it expires, on the wall clock (as the service said).
    package let expiresAt: Timestamp
    /// When it expires on the runtime's clock: the instant the machine's expiry timer fires.
    package let expiryDeadline: Duration

    /// Creates a grant.
    package init(
        id: GrantID, member: UserID, roomID: RoomID, scope: GrantScope, sinceTimestamp: MatrixTimestamp? = nil,
        purpose: GrantPurpose = .summarize, expiresAt: Timestamp, expiryDeadline: Duration
    ) {
        self.id = id
        self.member = member
        self.roomID = roomID
        self.scope = scope
        self.sinceTimestamp = sinceTimestamp
        self.purpose = purpose
        self.expiresAt = expiresAt
        self.expiryDeadline = expiryDeadline
    }

    /// Whether `item` is inside the scope.
    package func covers(_ item: ConversationItem) -> Bool {
        switch scope {
        case .selectedMessages(let ids):
            return ids.contains(item.eventID)
        case .conversation(let since):
            if item.eventID == since { return true }
            guard let sinceTimestamp else { return false }
            return item.timestamp >= sinceTimestamp
        }
    }

    /// The first item outside the scope, or the first selected message missing: `nil` when
    /// `items` covers exactly the scope (every selected message once, or only messages from
    /// the first one on, each once).
    package func firstMismatch(in items: [ConversationItem]) -> ScopeMismatch? {
        var seen = Set<EventID>()
        for item in items {
            guard covers(item) else { return .outside(item.eventID) }
            guard seen.insert(item.eventID).inserted else { return .duplicate(item.eventID) }
        }
        if case .selectedMessages(let ids) = scope, let missing = ids.first(where: { !seen.contains($0) }) {
            return .missing(missing)
        }
        return items.isEmpty ? .empty : nil
    }
}

/// How content fails to cover a grant's scope exactly.
public enum ScopeMismatch: Sendable, Hashable {
    /// This message is outside the scope.
    case outside(EventID)
    /// This message appears twice.
    case duplicate(EventID)
    /// This selected message is not in the content.
    case missing(EventID)
    /// There is no content at all.
    case empty
}

/// One message of a conversation, as the device has it (decrypted on the device for encrypted
/// rooms). Its description and mirror show the event ID only, never the body.
public struct ConversationItem: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The message's event ID.
    public let eventID: EventID
    /// Who sent it.
    public let sender: UserID
    /// Its `origin_server_ts`.
    public let timestamp: MatrixTimestamp
    /// Its text. Leaves the device only inside a `GrantedContent`.
    public let body: String

    /// Creates an item.
    public init(eventID: EventID, sender: UserID, timestamp: MatrixTimestamp, body: String) {
        self.eventID = eventID
        self.sender = sender
        self.timestamp = timestamp
        self.body = body
    }

    public var description: String { "ConversationItem(\(eventID.rawValue))" }
    public var customMirror: Mirror { Mirror(self, children: ["eventID": eventID], displayStyle: .struct) }
}

/// Content that may leave the device: made only by ``StudioGrantMachine`` in its granted state,
/// for the grant it holds, and only when the items cover exactly the grant's scope.
///
/// Its initializer is internal to the machines module, so no other code can make one: the
/// request that carries conversation content to the service takes this type and nothing else,
/// and checks it again (``recheck(at:revoked:)``) right before it leaves.
package struct GrantedContent: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The grant it was made under.
    package let grant: StudioGrant
    /// Which summary request it answers.
    package let requestID: SummaryRequestID
    /// The messages, in the order given.
    package let items: [ConversationItem]

    init(grant: StudioGrant, requestID: SummaryRequestID, items: [ConversationItem]) {
        self.grant = grant
        self.requestID = requestID
        self.items = items
    }

    /// The last check before the content leaves: the grant has not expired at `now` (runtime
    /// clock), is not among `revoked`, and the items still cover exactly its scope.
    package func recheck(at now: Duration, revoked: Set<GrantID>) -> StudioFailure? {
        if revoked.contains(grant.id) { return .grantRevoked }
        if now >= grant.expiryDeadline { return .grantExpired }
        if let mismatch = grant.firstMismatch(in: items) { return .outOfScope(mismatch) }
        return nil
    }

    package var description: String { "GrantedContent(\(grant.id.rawValue), items: \(items.count))" }
    package var customMirror: Mirror {
        Mirror(self, children: ["grant": grant.id, "items": items.count], displayStyle: .struct)
    }
}

/// Tells one summary request from another of the same grant (chosen by the product layer).
package struct SummaryRequestID: RawRepresentable, Hashable, Sendable, LogSafe {
    /// The number.
    package let rawValue: Int
    /// Wraps a number.
    package init(rawValue: Int) { self.rawValue = rawValue }
    /// Wraps a number.
    package init(_ rawValue: Int) { self.rawValue = rawValue }
    package var logDescription: String { String(rawValue) }
}

/// A summary: points, each citing the messages it was drawn from. Derived from message bodies,
/// so its description shows counts only.
public struct Summary: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// One point of a summary.
    public struct Point: Sendable, Hashable, CustomStringConvertible {
        /// The point's text.
        public let text: String
        /// The messages it was drawn from.
        public let eventIDs: [EventID]

        /// Creates a point.
        public init(text: String, eventIDs: [EventID]) {
            self.text = text
            self.eventIDs = eventIDs
        }

        public var description: String { "Point(cites: \(eventIDs.count))" }
    }

    /// The grant it was made under.
    public let grantID: GrantID
    /// Which summarizer made it (`extractive-lexrank`, …).
    public let backend: String
    /// How many messages it was made from.
    public let itemCount: Int
    /// The points, in conversation order.
    public let points: [Point]
    /// Every message the summary drew from, in conversation order.
    public let citedEventIDs: [EventID]

    /// Creates a summary.
    public init(grantID: GrantID, backend: String, itemCount: Int, points: [Point], citedEventIDs: [EventID]) {
        self.grantID = grantID
        self.backend = backend
        self.itemCount = itemCount
        self.points = points
        self.citedEventIDs = citedEventIDs
    }

    public var description: String { "Summary(\(grantID.rawValue), points: \(points.count))" }
    public var customMirror: Mirror {
        Mirror(self, children: ["grantID": grantID, "points": points.count], displayStyle: .struct)
    }
}

/// Why a grant or a summary did not happen.
public enum StudioFailure: Error, Sendable, Hashable {
    /// The member said no on the consent sheet.
    case declined
    /// No consent sheet could be shown on this device.
    case consentUnavailable
    /// The homeserver says the member is not in the conversation.
    case notRoomMember
    /// The grant was revoked.
    case grantRevoked
    /// The grant expired.
    case grantExpired
    /// The grant belongs to another member.
    case grantForbidden
    /// The service does not know the grant.
    case grantUnknown
    /// The content does not cover exactly the grant's scope (checked on the device, or refused by the service).
    case outOfScope(ScopeMismatch)
    /// The service refused for another reason (its `SY_…` code).
    case rejected(code: String)
    /// The service could not make a summary (its summarizer failed).
    case summarizerUnavailable
    /// The service could not be reached or answered nothing usable.
    case serviceUnreachable(TransportProblem)
    /// The service asked the client to slow down.
    case rateLimited(retryAfter: Duration?)
}
