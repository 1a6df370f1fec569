// What the `/sync` decoder produces: the structure of a response, with every event kept as a
// byte range of the response document and only the fields the store indexes decoded.

/// Why a `/sync` response could not be read at all. A single bad event is not an error: it is
/// skipped and counted (``SyncResponseBody/malformedEvents``).
public enum SyncDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The document is not well-formed JSON: the byte offset where reading stopped.
    case syntax(offset: Int)
    /// The document nests arrays and objects deeper than the decoder accepts (byte offset).
    case tooDeep(offset: Int)
    /// The top level, `rooms` or one of its sections is not a JSON object (byte offset).
    case unexpectedStructure(offset: Int)
    /// The response has no `next_batch` string, so it cannot advance the sync position.
    case missingNextBatch

    /// The case and its offset; no part of the document is included.
    public var description: String {
        switch self {
        case .syntax(let offset): "syntax(offset: \(offset))"
        case .tooDeep(let offset): "tooDeep(offset: \(offset))"
        case .unexpectedStructure(let offset): "unexpectedStructure(offset: \(offset))"
        case .missingNextBatch: "missingNextBatch"
        }
    }
}

/// The user's membership of a room, as the `rooms` section of `/sync` groups them.
public enum RoomMembership: Int, Sendable, Hashable, CaseIterable {
    /// `rooms.join`.
    case joined = 0
    /// `rooms.invite`: only stripped state is known.
    case invited = 1
    /// `rooms.leave`: left, kicked or banned.
    case left = 2
    /// `rooms.knock`: asked to join; only stripped state is known.
    case knocked = 3
}

/// An event's relation to another event, from `content["m.relates_to"]`.
public struct EventRelation: Sendable, Hashable {
    /// `rel_type`: `m.replace`, `m.annotation`, `m.reference`, `m.thread`; `nil` for a plain
    /// reply (only `m.in_reply_to`).
    public var type: String?
    /// The related event (`event_id`).
    public var eventID: String?
    /// The reaction key of an `m.annotation`.
    public var key: String?
    /// `m.in_reply_to.event_id`: the event this one replies to (also inside threads).
    public var inReplyTo: String?

    /// Creates a relation.
    public init(type: String? = nil, eventID: String? = nil, key: String? = nil, inReplyTo: String? = nil) {
        self.type = type
        self.eventID = eventID
        self.key = key
        self.inReplyTo = inReplyTo
    }
}

/// One event of a response: where it is in the document and the fields the store indexes.
///
/// The event and its content stay raw bytes (``range``, ``content``) of
/// ``SyncResponseBody/document``; everything else about them is decoded only when shown.
public struct SyncEvent: Sendable, Hashable {
    /// The whole event's bytes in the document.
    public var range: Range<Int>
    /// The `content` object's bytes in the document.
    public var content: Range<Int>
    /// `event_id` (absent for ephemeral, account-data, stripped-state and to-device events).
    public var eventID: String?
    /// `type`.
    public var type: String
    /// `sender`.
    public var sender: String?
    /// `origin_server_ts` in milliseconds (0 when absent).
    public var originServerTS: Int64
    /// `state_key`: present exactly for state events.
    public var stateKey: String?
    /// `unsigned.transaction_id`: present on the remote echo of this device's own events.
    public var transactionID: String?
    /// `content["m.relates_to"]`, when present.
    public var relation: EventRelation?
    /// The event an `m.room.redaction` redacts (top-level `redacts`, or `content.redacts` from
    /// room version 11).
    public var redacts: String?
}

/// An event that could not be used (missing or mistyped required fields), kept for diagnosis.
public struct MalformedSyncEvent: Sendable, Hashable {
    /// Where it was: `timeline`, `state`, `to_device`, ….
    public var section: String
    /// The room it came with, if any.
    public var roomID: String?
    /// Its bytes in the document.
    public var range: Range<Int>
    /// What was wrong, in fixed words (`missing event_id`).
    public var reason: String
}

/// Everything `/sync` said about one room.
public struct SyncRoomUpdate: Sendable, Hashable {
    /// The room.
    public var roomID: String
    /// Which section of `rooms` it was in.
    public var membership: RoomMembership
    /// `state.events` (or `invite_state` / `knock_state` for invites and knocks).
    public var state: [SyncEvent] = []
    /// `timeline.events`, oldest first.
    public var timeline: [SyncEvent] = []
    /// `timeline.limited`: events were left out before the first one given.
    public var isLimited = false
    /// `timeline.prev_batch`: where back-pagination continues from.
    public var previousBatch: String?
    /// `ephemeral.events` (receipts, typing).
    public var ephemeral: [SyncEvent] = []
    /// `account_data.events` of the room (tags, fully-read marker).
    public var accountData: [SyncEvent] = []
    /// `summary["m.heroes"]`, when sent.
    public var heroes: [String]?
    /// `summary["m.joined_member_count"]`, when sent.
    public var joinedMemberCount: Int64?
    /// `summary["m.invited_member_count"]`, when sent.
    public var invitedMemberCount: Int64?
    /// `unread_notifications.notification_count`, when sent.
    public var notificationCount: Int64?
    /// `unread_notifications.highlight_count`, when sent.
    public var highlightCount: Int64?

    /// An update with nothing in it yet.
    public init(roomID: String, membership: RoomMembership) {
        self.roomID = roomID
        self.membership = membership
    }
}

/// The top level of a response, without its rooms (which the decoder hands over in batches).
public struct SyncResponseHead: Sendable, Hashable {
    /// `next_batch`: the `since` of the next request, committed with what this response holds.
    public var nextBatch: String = ""
    /// Global `account_data.events`.
    public var accountData: [SyncEvent] = []
    /// `to_device.events`, kept raw for the crypto machine.
    public var toDevice: [SyncEvent] = []
    /// `device_lists.changed`: users whose device lists must be queried again.
    public var deviceListsChanged: [String] = []
    /// `device_lists.left`: users who no longer share an encrypted room with us.
    public var deviceListsLeft: [String] = []
    /// `device_one_time_keys_count`, by algorithm.
    public var oneTimeKeyCounts: [String: Int64] = [:]
    /// Events skipped because they were unusable, across the whole document.
    public var malformedEvents: [MalformedSyncEvent] = []
}

/// A decoded response: its document bytes, its head and all its rooms.
public struct SyncResponseBody: Sendable {
    /// The response's bytes; every ``SyncEvent`` range points into them.
    public let document: [UInt8]
    /// `next_batch`, account data, to-device events, device lists, key counts.
    public var head: SyncResponseHead
    /// `rooms.join`, `rooms.invite`, `rooms.knock` and `rooms.leave`, in document order.
    public var rooms: [SyncRoomUpdate]

    /// Events skipped as unusable.
    public var malformedEvents: [MalformedSyncEvent] { head.malformedEvents }
    /// `next_batch`.
    public var nextBatch: String { head.nextBatch }

    /// The bytes of `range` in the document, as a string (for tests and diagnostics).
    public func text(_ range: Range<Int>) -> String {
        String(decoding: document[range], as: UTF8.self)
    }
}
