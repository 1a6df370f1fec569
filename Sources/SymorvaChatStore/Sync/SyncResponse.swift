// What the `/sync` decoder produces: the structure of a response, with every event kept as a
// byte range of the response document and only the fields the store indexes decoded.

/// Why a `/sync` response could not be read at all. A single bad event is not an error: it is
/// skipped and counted (`SyncResponseBody.malformedEvents`).
public enum SyncDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The document is not well-formed JSON: the byte offset where reading stopped.
    case syntax(offset: Int)
    /// The document nests arrays and objects deeper than the decoder accepts (byte offset).
    case tooDeep(offset: Int)
    /// The top level, `rooms` or one of its sections is not a JSON object (byte offset).
    case unexpectedStructure(offset: Int)
    /// The response has no `next_batch` string, so it cannot advance the sync position.
    case missingNextBatch
    /// A `/messages` page has no `chunk`, so it cannot fill a gap.
    case missingChunk

    /// The case and its offset; no part of the document is included.
    public var description: String {
        switch self {
        case .syntax(let offset): "syntax(offset: \(offset))"
        case .tooDeep(let offset): "tooDeep(offset: \(offset))"
        case .unexpectedStructure(let offset): "unexpectedStructure(offset: \(offset))"
        case .missingNextBatch: "missingNextBatch"
        case .missingChunk: "missingChunk"
        }
    }
}

/// The user's membership of a room, as the `rooms` section of `/sync` groups them.
package enum RoomMembership: Int, Sendable, Hashable, CaseIterable {
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
package struct EventRelation: Sendable, Hashable {
    /// `rel_type`: `m.replace`, `m.annotation`, `m.reference`, `m.thread`; `nil` for a plain
    /// reply (only `m.in_reply_to`).
    package var type: String?
    /// The related event (`event_id`).
    package var eventID: String?
    /// The reaction key of an `m.annotation`.
    package var key: String?
    /// `m.in_reply_to.event_id`: the event this one replies to (also inside threads).
    package var inReplyTo: String?

    /// Creates a relation.
    package init(type: String? = nil, eventID: String? = nil, key: String? = nil, inReplyTo: String? = nil) {
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
package struct SyncEvent: Sendable, Hashable {
    /// The whole event's bytes in the document.
    package var range: Range<Int>
    /// The `content` object's bytes in the document.
    package var content: Range<Int>
    /// `event_id` (absent for ephemeral, account-data, stripped-state and to-device events).
    package var eventID: String?
    /// `type`.
    package var type: String
    /// `sender`.
    package var sender: String?
    /// `origin_server_ts` in milliseconds (0 when absent).
    package var originServerTS: Int64
    /// `state_key`: present exactly for state events.
    package var stateKey: String?
    /// `unsigned.transaction_id`: present on the remote echo of this device's own events.
    package var transactionID: String?
    /// `content["m.relates_to"]`, when present.
    package var relation: EventRelation?
    /// The event an `m.room.redaction` redacts (top-level `redacts`, or `content.redacts` from
    /// room version 11).
    package var redacts: String?
    /// Whether `unsigned` carries `m.relations` (bundled aggregations: a thread root's
    /// `m.thread` count and latest reply). Read only for those events.
    package var hasBundledRelations = false
}

/// An event that could not be used (missing or mistyped required fields), kept for diagnosis.
package struct MalformedSyncEvent: Sendable, Hashable {
    /// Where it was: `timeline`, `state`, `to_device`, ….
    package var section: String
    /// The room it came with, if any.
    package var roomID: String?
    /// Its bytes in the document.
    package var range: Range<Int>
    /// What was wrong, in fixed words (`missing event_id`).
    package var reason: String
}

/// Everything `/sync` said about one room.
package struct SyncRoomUpdate: Sendable, Hashable {
    /// The room.
    package var roomID: String
    /// Which section of `rooms` it was in.
    package var membership: RoomMembership
    /// `state.events` (or `invite_state` / `knock_state` for invites and knocks).
    package var state: [SyncEvent] = []
    /// `timeline.events`, oldest first.
    package var timeline: [SyncEvent] = []
    /// `timeline.limited`: events were left out before the first one given.
    package var isLimited = false
    /// `timeline.prev_batch`: where back-pagination continues from.
    package var previousBatch: String?
    /// `ephemeral.events` (receipts, typing).
    package var ephemeral: [SyncEvent] = []
    /// `account_data.events` of the room (tags, fully-read marker).
    package var accountData: [SyncEvent] = []
    /// `summary["m.heroes"]`, when sent.
    package var heroes: [String]?
    /// Display names the response gives with its heroes (sliding sync's `heroes[].displayname`),
    /// used when the room's state holds no membership event for the hero (v2 sends the heroes'
    /// members in the state; sliding sync lazy-loads only the timeline's senders).
    package var heroNames: [String: String] = [:]
    /// `summary["m.joined_member_count"]`, when sent.
    package var joinedMemberCount: Int64?
    /// `summary["m.invited_member_count"]`, when sent.
    package var invitedMemberCount: Int64?
    /// `unread_notifications.notification_count`, when sent.
    package var notificationCount: Int64?
    /// `unread_notifications.highlight_count`, when sent.
    package var highlightCount: Int64?
    /// `unread_thread_notifications`: the counts of each thread with unread events, by root
    /// (sent when the filter asks; `unread_notifications` is then the main timeline's).
    package var threadCounts: [String: DeviceCounts.Counts] = [:]
    /// Whether the timeline holds this account's join: one of its own membership events there
    /// makes it a member (a profile change of a member is no join), and none after it leaves. Sliding sync's decoder sets
    /// it; a room first seen with it was joined just now (on another device, say), not brought
    /// in by a growing window.
    package var timelineHasOwnJoin = false

    /// An update with nothing in it yet.
    package init(roomID: String, membership: RoomMembership) {
        self.roomID = roomID
        self.membership = membership
    }
}

/// The top level of a response, without its rooms (which the decoder hands over in batches).
package struct SyncResponseHead: Sendable, Hashable {
    /// `next_batch`: the `since` of the next request, committed with what this response holds.
    package var nextBatch: String = ""
    /// Global `account_data.events`.
    package var accountData: [SyncEvent] = []
    /// `to_device.events`, kept raw for the crypto machine.
    package var toDevice: [SyncEvent] = []
    /// `device_lists.changed`: users whose device lists must be queried again.
    package var deviceListsChanged: [String] = []
    /// `device_lists.left`: users who no longer share an encrypted room with us.
    package var deviceListsLeft: [String] = []
    /// `device_one_time_keys_count`, by algorithm.
    package var oneTimeKeyCounts: [String: Int64] = [:]
    /// `device_unused_fallback_key_types` (or its unstable MSC2732 name), when present.
    package var unusedFallbackKeyTypes: [String]?
    /// Events skipped because they were unusable, across the whole document.
    package var malformedEvents: [MalformedSyncEvent] = []
}

/// A decoded response: its document bytes, its head and all its rooms.
package struct SyncResponseBody: Sendable {
    /// The response's bytes; every ``SyncEvent`` range points into them.
    package let document: [UInt8]
    /// `next_batch`, account data, to-device events, device lists, key counts.
    package var head: SyncResponseHead
    /// `rooms.join`, `rooms.invite`, `rooms.knock` and `rooms.leave`, in document order.
    package var rooms: [SyncRoomUpdate]

    /// Events skipped as unusable.
    package var malformedEvents: [MalformedSyncEvent] { head.malformedEvents }
    /// `next_batch`.
    package var nextBatch: String { head.nextBatch }

    /// The bytes of `range` in the document, as a string (for tests and diagnostics).
    package func text(_ range: Range<Int>) -> String {
        String(decoding: document[range], as: UTF8.self)
    }
}

/// A decoded `/messages` page (``SyncResponseDecoder/decodeMessages(_:)``): its events as byte
/// ranges of the page's document, decoded like a `/sync` timeline's.
package struct MessagesPage: Sendable {
    /// The page's bytes; every ``SyncEvent`` range points into them.
    package var document: [UInt8] = []
    /// `chunk`, in the order the server sent it (newest first for `dir=b`).
    package var chunk: [SyncEvent] = []
    /// `state`: state events (members, with lazy loading) that the chunk's events need.
    package var state: [SyncEvent] = []
    /// `start`: the token the page was read from.
    package var start: String?
    /// `end`: where the next page continues; `nil` when there is nothing further.
    package var end: String?
    /// Events skipped because they were unusable.
    package var malformedEvents: [MalformedSyncEvent] = []

    /// An empty page.
    package init() {}

    /// The bytes of `range` in the document, as a string (for tests and diagnostics).
    package func text(_ range: Range<Int>) -> String {
        String(decoding: document[range], as: UTF8.self)
    }
}

extension SyncEvent {
    /// Edits, reactions and redactions change other items instead of being items themselves.
    package var isRelation: Bool {
        if type == "m.room.redaction" || type == "m.reaction" { return true }
        return relation?.type == "m.replace" || relation?.type == "m.annotation"
    }

    /// A reply in a thread (`rel_type` `m.thread`): shown in its thread, not the main timeline.
    package var isThreadReply: Bool { relation?.type == "m.thread" && relation?.eventID != nil }
}
