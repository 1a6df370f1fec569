// Values of the chat feature that the store produces and the product API shows.

/// A member's profile in a room, from their `m.room.member` state.
public struct SenderProfile: Sendable, Hashable, CustomStringConvertible {
    /// `displayname`, if set. User content: never logged.
    public var displayName: String?
    /// `avatar_url` (an `mxc://` URI), if set.
    public var avatarURL: String?

    /// A profile.
    public init(displayName: String? = nil, avatarURL: String? = nil) {
        self.displayName = displayName
        self.avatarURL = avatarURL
    }

    /// Redacted: display names are user content.
    public var description: String { "SenderProfile(<private>)" }
}

/// The last message of a room as the conversation list shows it.
///
/// Its text is user content: every textual form of this value names the event type only.
public struct MessagePreview: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The previewed event.
    public var eventID: String
    /// Who sent it.
    public var sender: String
    /// Its type (`m.room.message`, `m.room.encrypted`, …).
    public var type: String
    /// When the server received it (milliseconds since 1970).
    public var originServerTS: Int64
    /// `content.body`, cut to the store's preview length; `nil` for encrypted,
    /// redacted or body-less events.
    public var body: String?
    /// `content.msgtype` of a message (`m.text`, `m.image`, …).
    public var messageType: String?
    /// Whether the event was redacted.
    public var isRedacted: Bool

    /// A preview.
    public init(
        eventID: String, sender: String, type: String, originServerTS: Int64, body: String?, messageType: String?,
        isRedacted: Bool
    ) {
        self.eventID = eventID
        self.sender = sender
        self.type = type
        self.originServerTS = originServerTS
        self.body = body
        self.messageType = messageType
        self.isRedacted = isRedacted
    }

    /// The type only.
    public var description: String { "MessagePreview(\(type), <private>)" }
    /// No children: the body must not be reflected into logs.
    public var customMirror: Mirror { Mirror(self, children: ["type": type], displayStyle: .struct) }
}
