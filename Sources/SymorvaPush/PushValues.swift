import SymorvaMachines

/// One push rule of the account (`GET /pushrules/`).
public struct PushRule: Sendable, Hashable {
    /// The rule's kind, in the order the homeserver evaluates them.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// Rules before everything (`.m.rule.master`, …).
        case override
        /// Keyword rules: a pattern in the message body.
        case content
        /// Per-room rules (a muted room's rule is one).
        case room
        /// Per-sender rules.
        case sender
        /// Rules after everything (`.m.rule.message`, …).
        case underride
    }

    /// The kind.
    public var kind: Kind
    /// The rule's ID (`.m.rule.contains_display_name`, a keyword, a room ID).
    public var ruleID: String
    /// Whether the rule is on.
    public var isEnabled: Bool
    /// Whether the homeserver defines it (server-default rules are enabled and disabled, not removed).
    public var isDefault: Bool
    /// A content rule's glob pattern (the keyword).
    public var pattern: String?
    /// Whether a match notifies (its actions hold `notify`).
    public var notifies: Bool

    /// A rule.
    public init(kind: Kind, ruleID: String, isEnabled: Bool, isDefault: Bool, pattern: String?, notifies: Bool) {
        self.kind = kind
        self.ruleID = ruleID
        self.isEnabled = isEnabled
        self.isDefault = isDefault
        self.pattern = pattern
        self.notifies = notifies
    }
}

/// Unread notification and highlight counts, as the homeserver computes them with the
/// account's push rules (a muted room counts nothing).
public struct NotificationCounts: Sendable, Hashable {
    /// One room's counts.
    public struct Room: Sendable, Hashable {
        /// Unread messages that notify.
        public var notifications: Int
        /// Unread messages that highlight (mentions, keywords).
        public var highlights: Int

        /// Counts.
        public init(notifications: Int, highlights: Int) {
            self.notifications = notifications
            self.highlights = highlights
        }
    }

    /// Every joined room with a count above zero.
    public var rooms: [RoomID: Room]

    /// Counts per room.
    public init(rooms: [RoomID: Room] = [:]) { self.rooms = rooms }

    /// Notifications across every room.
    public var notifications: Int { rooms.values.reduce(0) { $0 + $1.notifications } }
    /// Highlights across every room.
    public var highlights: Int { rooms.values.reduce(0) { $0 + $1.highlights } }
}

/// The event a push names, fetched for display (the notification-service use case).
public struct PushedEvent: Sendable, Hashable, CustomStringConvertible {
    /// The event.
    public var eventID: EventID
    /// Its room.
    public var roomID: RoomID
    /// Who sent it.
    public var sender: String
    /// Its type (`m.room.message`, `m.room.encrypted`, …).
    public var type: String
    /// When the sender's server received it (ms since 1970).
    public var originServerTimestamp: Int64?
    /// The message text of an unencrypted `m.room.message`; `nil` otherwise.
    public var body: String?
    /// Whether the event is end-to-end encrypted: it is shown once the E2EE work decrypts it
    /// (today: a placeholder such as "encrypted message").
    public var isEncrypted: Bool

    /// An event.
    public init(
        eventID: EventID, roomID: RoomID, sender: String, type: String, originServerTimestamp: Int64?, body: String?,
        isEncrypted: Bool
    ) {
        self.eventID = eventID
        self.roomID = roomID
        self.sender = sender
        self.type = type
        self.originServerTimestamp = originServerTimestamp
        self.body = body
        self.isEncrypted = isEncrypted
    }

    /// IDs and type only: the body is a message.
    public var description: String { "PushedEvent(\(eventID.rawValue), \(type), body: <private>)" }
}

/// A notification the community's reference Push Gateway received for a pushkey.
package struct GatewayNotification: Sendable, Hashable {
    /// Increasing; pass the last one as `after` to read only newer ones.
    package var sequence: Int
    /// The event it was for.
    package var eventID: String?
    /// The event's room.
    package var roomID: String?
    /// The event's sender.
    package var sender: String?
    /// The unread count the homeserver sent with it.
    package var unread: Int?
    /// `high` or `low`.
    package var priority: String?

    /// A notification.
    package init(sequence: Int, eventID: String?, roomID: String?, sender: String?, unread: Int?, priority: String?) {
        self.sequence = sequence
        self.eventID = eventID
        self.roomID = roomID
        self.sender = sender
        self.unread = unread
        self.priority = priority
    }
}
