import Foundation
import SymorvaMachines

/// The Matrix client-server endpoints of the chat feature, as pure request builders.
///
/// Each builder returns a ``MatrixEndpoint`` (method, path, query, JSON body); the interpreters
/// hand it to a ``MatrixRequester``. Paths follow spec v1.11 (`/_matrix/client/v3`); every
/// path segment that comes from data (room IDs, event IDs, transaction IDs, tags) is
/// percent-encoded.
package enum ChatAPI {
    static let prefix = AuthAPI.clientPrefix

    // MARK: Sync

    /// `GET /sync`: `since` (none for an initial sync), the server's long-poll `timeout`, the
    /// uploaded filter, and `set_presence=offline` (the SDK does not publish presence).
    package static func sync(since: SyncToken?, timeout: Duration, filterID: FilterID?) -> MatrixEndpoint {
        var query: [MatrixEndpoint.QueryItem] = []
        if let since { query.append(.init(name: "since", value: since.rawValue)) }
        query.append(.init(name: "timeout", value: String(milliseconds(timeout))))
        if let filterID { query.append(.init(name: "filter", value: filterID.rawValue)) }
        query.append(.init(name: "set_presence", value: "offline"))
        return MatrixEndpoint(method: .get, path: "\(prefix)/sync", query: query, requiresAuth: true)
    }

    /// The sync filter: lazy-loaded members in state and timeline, `timelineLimit` events per
    /// room, and unread counts per thread (`unread_thread_notifications`: `unread_notifications`
    /// is then the main timeline's). Its text is stored with the filter ID so that a changed
    /// definition is uploaded again.
    package static func syncFilterDefinition(timelineLimit: Int) -> String {
        """
        {"room":{"state":{"lazy_load_members":true},"timeline":{"limit":\(timelineLimit),"lazy_load_members":true,"unread_thread_notifications":true}}}
        """
    }

    /// `POST /user/{userId}/filter` with `definition`; the answer holds `filter_id`.
    package static func uploadFilter(userID: UserID, definition: String) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .post, path: "\(prefix)/user/\(percentEncoded(userID.rawValue))/filter",
            body: Array(definition.utf8), requiresAuth: true)
    }

    // MARK: Timeline

    /// `GET /rooms/{roomId}/messages?dir=b&from=…&limit=…` with lazy-loaded members.
    package static func messages(roomID: RoomID, from token: PaginationToken, limit: Int) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .get, path: "\(room(roomID))/messages",
            query: [
                .init(name: "dir", value: "b"), .init(name: "from", value: token.rawValue),
                .init(name: "limit", value: String(max(1, limit))),
                .init(name: "filter", value: #"{"lazy_load_members":true}"#),
            ], requiresAuth: true)
    }

    /// `PUT /rooms/{roomId}/send/{eventType}/{txnId}`: idempotent for one transaction ID.
    package static func send(roomID: RoomID, transactionID: TransactionID, content: MessageContent) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .put,
            path: "\(room(roomID))/send/\(percentEncoded(content.eventType))/\(percentEncoded(transactionID.rawValue))",
            body: Array(content.json.utf8), requiresAuth: true)
    }

    /// `PUT /rooms/{roomId}/redact/{eventId}/{txnId}`.
    package static func redact(roomID: RoomID, eventID: EventID, transactionID: TransactionID) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .put,
            path:
                "\(room(roomID))/redact/\(percentEncoded(eventID.rawValue))/\(percentEncoded(transactionID.rawValue))",
            body: Array("{}".utf8), requiresAuth: true)
    }

    /// `GET /rooms/{roomId}/event/{eventId}`.
    package static func event(roomID: RoomID, eventID: EventID) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .get, path: "\(room(roomID))/event/\(percentEncoded(eventID.rawValue))", requiresAuth: true)
    }

    /// `POST /rooms/{roomId}/receipt/m.read/{eventId}`.
    package static func readReceipt(roomID: RoomID, eventID: EventID) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .post, path: "\(room(roomID))/receipt/m.read/\(percentEncoded(eventID.rawValue))",
            body: Array("{}".utf8), requiresAuth: true)
    }

    /// `POST /rooms/{roomId}/read_markers`: moves the fully-read marker (`m.fully_read`) and
    /// the read receipt together, the receipt private (`m.read.private`: other members do not
    /// see it) when `privately`.
    /// Without `read`, only the fully-read marker moves (a threads-aware client sends its
    /// receipt with `thread_id`, which `read_markers` cannot carry).
    package static func readMarkers(roomID: RoomID, fullyRead: EventID, read: EventID? = nil, privately: Bool = false)
        -> MatrixEndpoint
    {
        var body = JSONObjectWriter()
        body.string("m.fully_read", fullyRead.rawValue)
        if let read { body.string(privately ? "m.read.private" : "m.read", read.rawValue) }
        return MatrixEndpoint(method: .post, path: "\(room(roomID))/read_markers", body: body.bytes, requiresAuth: true)
    }

    /// `PUT /rooms/{roomId}/typing/{userId}`: typing for `timeout` (the server stops showing it
    /// then unless renewed), or stopped.
    package static func typing(roomID: RoomID, userID: UserID, isTyping: Bool, timeout: Duration) -> MatrixEndpoint {
        var body = JSONObjectWriter()
        body.bool("typing", isTyping)
        if isTyping { body.integer("timeout", milliseconds(timeout)) }
        return MatrixEndpoint(
            method: .put, path: "\(room(roomID))/typing/\(percentEncoded(userID.rawValue))", body: body.bytes,
            requiresAuth: true)
    }

    // MARK: Personal settings

    /// `GET` (no `content`) or `PUT` the account's global account data of `type`.
    package static func accountData(_ type: String, userID: UserID, content: [UInt8]? = nil) -> MatrixEndpoint {
        MatrixEndpoint(
            method: content == nil ? .get : .put,
            path: "\(prefix)/user/\(percentEncoded(userID.rawValue))/account_data/\(percentEncoded(type))",
            body: content, requiresAuth: true)
    }

    /// `PUT` (set) or `DELETE` (clear) `/user/{userId}/rooms/{roomId}/tags/{tag}`.
    package static func tag(_ tag: String, set: Bool, roomID: RoomID, userID: UserID) -> MatrixEndpoint {
        let path =
            "\(prefix)/user/\(percentEncoded(userID.rawValue))/rooms/\(percentEncoded(roomID.rawValue))/tags/\(percentEncoded(tag))"
        return set
            ? MatrixEndpoint(method: .put, path: path, body: Array("{}".utf8), requiresAuth: true)
            : MatrixEndpoint(method: .delete, path: path, requiresAuth: true)
    }

    /// Mutes a room with a `room` push rule named after it whose actions do not notify, or
    /// unmutes it by deleting that rule.
    package static func muteRule(roomID: RoomID, muted: Bool) -> MatrixEndpoint {
        let path = "\(prefix)/pushrules/global/room/\(percentEncoded(roomID.rawValue))"
        return muted
            ? MatrixEndpoint(method: .put, path: path, body: Array(#"{"actions":[]}"#.utf8), requiresAuth: true)
            : MatrixEndpoint(method: .delete, path: path, requiresAuth: true)
    }

    // MARK: Rooms

    /// `POST /createRoom`: a private chat (`private_chat`, or `trusted_private_chat` for a
    /// direct chat) with optional name, topic, invitees and `m.room.encryption`.
    package static func createRoom(
        name: String?, topic: String?, invitees: [UserID], isDirect: Bool, isEncrypted: Bool
    ) -> MatrixEndpoint {
        var body = JSONObjectWriter()
        body.string("preset", isDirect ? "trusted_private_chat" : "private_chat")
        if let name { body.string("name", name) }
        if let topic { body.string("topic", topic) }
        if !invitees.isEmpty { body.strings("invite", invitees.map(\.rawValue)) }
        if isDirect { body.bool("is_direct", true) }
        if isEncrypted {
            body.raw(
                "initial_state",
                #"[{"type":"m.room.encryption","state_key":"","content":"# + encryptionContent + "}]")
        }
        return MatrixEndpoint(method: .post, path: "\(prefix)/createRoom", body: body.bytes, requiresAuth: true)
    }

    /// `POST /join/{roomIdOrAlias}`.
    package static func join(_ roomIDOrAlias: String) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .post, path: "\(prefix)/join/\(percentEncoded(roomIDOrAlias))", body: Array("{}".utf8),
            requiresAuth: true)
    }

    /// `POST /rooms/{roomId}/leave`.
    package static func leave(roomID: RoomID) -> MatrixEndpoint {
        MatrixEndpoint(method: .post, path: "\(room(roomID))/leave", body: Array("{}".utf8), requiresAuth: true)
    }

    /// `POST /rooms/{roomId}/invite|kick|ban` for `userID`, with an optional reason.
    package static func membership(
        _ action: MembershipAction, roomID: RoomID, userID: UserID, reason: String?
    ) -> MatrixEndpoint {
        var body = JSONObjectWriter()
        body.string("user_id", userID.rawValue)
        if let reason { body.string("reason", reason) }
        return MatrixEndpoint(
            method: .post, path: "\(room(roomID))/\(action.rawValue)", body: body.bytes, requiresAuth: true)
    }

    /// `GET /rooms/{roomId}/state/{eventType}/{stateKey}`.
    package static func state(roomID: RoomID, type: String, stateKey: String = "") -> MatrixEndpoint {
        MatrixEndpoint(
            method: .get, path: "\(room(roomID))/state/\(percentEncoded(type))/\(percentEncoded(stateKey))",
            requiresAuth: true)
    }

    /// `GET /rooms/{roomId}/members`: the room's current `m.room.member` events, every
    /// membership (a stored member who has since left or been banned is corrected too).
    package static func members(roomID: RoomID) -> MatrixEndpoint {
        MatrixEndpoint(method: .get, path: "\(room(roomID))/members", requiresAuth: true)
    }

    /// `GET /rooms/{roomId}/state`: every current state event of the room.
    package static func roomState(roomID: RoomID) -> MatrixEndpoint {
        MatrixEndpoint(method: .get, path: "\(room(roomID))/state", requiresAuth: true)
    }

    /// `PUT /rooms/{roomId}/state/{eventType}/{stateKey}` with `content` (raw JSON).
    package static func setState(roomID: RoomID, type: String, stateKey: String = "", content: String)
        -> MatrixEndpoint
    {
        MatrixEndpoint(
            method: .put, path: "\(room(roomID))/state/\(percentEncoded(type))/\(percentEncoded(stateKey))",
            body: Array(content.utf8), requiresAuth: true)
    }

    /// The `m.room.encryption` content this SDK turns encryption on with: Megolm, rotated after
    /// 100 messages or a week (the spec's defaults, stated explicitly).
    package static let encryptionContent =
        #"{"algorithm":"m.megolm.v1.aes-sha2","rotation_period_ms":604800000,"rotation_period_msgs":100}"#

    /// The membership changes one member makes to another.
    package enum MembershipAction: String, Sendable, Hashable {
        /// Invite a user.
        case invite
        /// Remove a member (they may join again).
        case kick
        /// Remove a member and keep them out.
        case ban
    }

    static func room(_ roomID: RoomID) -> String { "\(prefix)/rooms/\(percentEncoded(roomID.rawValue))" }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000 + attoseconds / 1_000_000_000_000_000
    }
}

/// Builds a flat JSON object as bytes without Foundation, keys in insertion order.
package struct JSONObjectWriter {
    private var output: [UInt8] = []

    /// An empty object.
    package init() {}

    mutating func key(_ name: String) {
        output.append(output.isEmpty ? UInt8(ascii: "{") : UInt8(ascii: ","))
        Self.appendQuoted(name, to: &output)
        output.append(UInt8(ascii: ":"))
    }

    package mutating func string(_ name: String, _ value: String) {
        key(name)
        Self.appendQuoted(value, to: &output)
    }

    mutating func strings(_ name: String, _ values: [String]) {
        key(name)
        output.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            Self.appendQuoted(value, to: &output)
        }
        output.append(UInt8(ascii: "]"))
    }

    package mutating func bool(_ name: String, _ value: Bool) {
        key(name)
        output += Array((value ? "true" : "false").utf8)
    }

    mutating func integer(_ name: String, _ value: Int64) {
        key(name)
        output += Array(String(value).utf8)
    }

    /// A value that is already JSON text.
    package mutating func raw(_ name: String, _ json: String) {
        key(name)
        output += Array(json.utf8)
    }

    /// A value that is already JSON bytes.
    mutating func raw(_ name: String, bytes: [UInt8]) {
        key(name)
        output += bytes
    }

    package var bytes: [UInt8] { output.isEmpty ? Array("{}".utf8) : output + [UInt8(ascii: "}")] }
    package var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Appends `text` as a JSON string literal.
    package static func appendQuoted(_ text: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                output.append(UInt8(ascii: "\\"))
                output.append(byte)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                output += Array("\\u00".utf8)
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0xF)])
            default:
                output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}
