import Foundation
import SymorvaMachines
import SymorvaRuntime
import SymorvaTransport

/// The Matrix client-server endpoints of the chat feature, as pure request builders.
///
/// Each builder returns a ``MatrixEndpoint`` (method, path, query, JSON body); the interpreters
/// hand it to a ``MatrixRequester``. Paths follow spec v1.11 (`/_matrix/client/v3`); every
/// path segment that comes from data (room IDs, event IDs, transaction IDs, tags) is
/// percent-encoded.
public enum ChatAPI {
    static let prefix = AuthAPI.clientPrefix

    // MARK: Sync

    /// `GET /sync`: `since` (none for an initial sync), the server's long-poll `timeout`, the
    /// uploaded filter, and `set_presence=offline` (the SDK does not publish presence).
    public static func sync(since: SyncToken?, timeout: Duration, filterID: FilterID?) -> MatrixEndpoint {
        var query: [MatrixEndpoint.QueryItem] = []
        if let since { query.append(.init(name: "since", value: since.rawValue)) }
        query.append(.init(name: "timeout", value: String(milliseconds(timeout))))
        if let filterID { query.append(.init(name: "filter", value: filterID.rawValue)) }
        query.append(.init(name: "set_presence", value: "offline"))
        return MatrixEndpoint(method: .get, path: "\(prefix)/sync", query: query, requiresAuth: true)
    }

    /// The sync filter: lazy-loaded members in state and timeline, `timelineLimit` events per
    /// room. Its text is stored with the filter ID so that a changed definition is uploaded again.
    public static func syncFilterDefinition(timelineLimit: Int) -> String {
        """
        {"room":{"state":{"lazy_load_members":true},"timeline":{"limit":\(timelineLimit),"lazy_load_members":true}}}
        """
    }

    /// `POST /user/{userId}/filter` with `definition`; the answer holds `filter_id`.
    public static func uploadFilter(userID: UserID, definition: String) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .post, path: "\(prefix)/user/\(percentEncoded(userID.rawValue))/filter",
            body: Array(definition.utf8), requiresAuth: true)
    }

    // MARK: Timeline

    /// `GET /rooms/{roomId}/messages?dir=b&from=…&limit=…` with lazy-loaded members.
    public static func messages(roomID: RoomID, from token: PaginationToken, limit: Int) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .get, path: "\(room(roomID))/messages",
            query: [
                .init(name: "dir", value: "b"), .init(name: "from", value: token.rawValue),
                .init(name: "limit", value: String(max(1, limit))),
                .init(name: "filter", value: #"{"lazy_load_members":true}"#),
            ], requiresAuth: true)
    }

    /// `PUT /rooms/{roomId}/send/{eventType}/{txnId}`: idempotent for one transaction ID.
    public static func send(roomID: RoomID, transactionID: TransactionID, content: MessageContent) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .put,
            path: "\(room(roomID))/send/\(percentEncoded(content.eventType))/\(percentEncoded(transactionID.rawValue))",
            body: Array(content.json.utf8), requiresAuth: true)
    }

    /// `PUT /rooms/{roomId}/redact/{eventId}/{txnId}`.
    public static func redact(roomID: RoomID, eventID: EventID, transactionID: TransactionID) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .put,
            path:
                "\(room(roomID))/redact/\(percentEncoded(eventID.rawValue))/\(percentEncoded(transactionID.rawValue))",
            body: Array("{}".utf8), requiresAuth: true)
    }

    /// `GET /rooms/{roomId}/event/{eventId}`.
    public static func event(roomID: RoomID, eventID: EventID) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .get, path: "\(room(roomID))/event/\(percentEncoded(eventID.rawValue))", requiresAuth: true)
    }

    /// `POST /rooms/{roomId}/receipt/m.read/{eventId}`.
    public static func readReceipt(roomID: RoomID, eventID: EventID) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .post, path: "\(room(roomID))/receipt/m.read/\(percentEncoded(eventID.rawValue))",
            body: Array("{}".utf8), requiresAuth: true)
    }

    // MARK: Personal settings

    /// `PUT` (set) or `DELETE` (clear) `/user/{userId}/rooms/{roomId}/tags/{tag}`.
    public static func tag(_ tag: String, set: Bool, roomID: RoomID, userID: UserID) -> MatrixEndpoint {
        let path =
            "\(prefix)/user/\(percentEncoded(userID.rawValue))/rooms/\(percentEncoded(roomID.rawValue))/tags/\(percentEncoded(tag))"
        return set
            ? MatrixEndpoint(method: .put, path: path, body: Array("{}".utf8), requiresAuth: true)
            : MatrixEndpoint(method: .delete, path: path, requiresAuth: true)
    }

    /// Mutes a room with a `room` push rule named after it whose actions do not notify, or
    /// unmutes it by deleting that rule.
    public static func muteRule(roomID: RoomID, muted: Bool) -> MatrixEndpoint {
        let path = "\(prefix)/pushrules/global/room/\(percentEncoded(roomID.rawValue))"
        return muted
            ? MatrixEndpoint(method: .put, path: path, body: Array(#"{"actions":[]}"#.utf8), requiresAuth: true)
            : MatrixEndpoint(method: .delete, path: path, requiresAuth: true)
    }

    // MARK: Rooms

    /// `POST /createRoom`: a private chat (`private_chat`, or `trusted_private_chat` for a
    /// direct chat) with optional name, topic, invitees and `m.room.encryption`.
    public static func createRoom(
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
                #"[{"type":"m.room.encryption","state_key":"","content":{"algorithm":"m.megolm.v1.aes-sha2"}}]"#)
        }
        return MatrixEndpoint(method: .post, path: "\(prefix)/createRoom", body: body.bytes, requiresAuth: true)
    }

    /// `POST /join/{roomIdOrAlias}`.
    public static func join(_ roomIDOrAlias: String) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .post, path: "\(prefix)/join/\(percentEncoded(roomIDOrAlias))", body: Array("{}".utf8),
            requiresAuth: true)
    }

    /// `POST /rooms/{roomId}/leave`.
    public static func leave(roomID: RoomID) -> MatrixEndpoint {
        MatrixEndpoint(method: .post, path: "\(room(roomID))/leave", body: Array("{}".utf8), requiresAuth: true)
    }

    /// `POST /rooms/{roomId}/invite|kick|ban` for `userID`, with an optional reason.
    public static func membership(
        _ action: MembershipAction, roomID: RoomID, userID: UserID, reason: String?
    ) -> MatrixEndpoint {
        var body = JSONObjectWriter()
        body.string("user_id", userID.rawValue)
        if let reason { body.string("reason", reason) }
        return MatrixEndpoint(
            method: .post, path: "\(room(roomID))/\(action.rawValue)", body: body.bytes, requiresAuth: true)
    }

    /// `GET /rooms/{roomId}/state/{eventType}/{stateKey}`.
    public static func state(roomID: RoomID, type: String, stateKey: String = "") -> MatrixEndpoint {
        MatrixEndpoint(
            method: .get, path: "\(room(roomID))/state/\(percentEncoded(type))/\(percentEncoded(stateKey))",
            requiresAuth: true)
    }

    /// The membership changes one member makes to another.
    public enum MembershipAction: String, Sendable, Hashable {
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
struct JSONObjectWriter {
    private var output: [UInt8] = []

    mutating func key(_ name: String) {
        output.append(output.isEmpty ? UInt8(ascii: "{") : UInt8(ascii: ","))
        RawJSON.appendQuoted(name, to: &output)
        output.append(UInt8(ascii: ":"))
    }

    mutating func string(_ name: String, _ value: String) {
        key(name)
        RawJSON.appendQuoted(value, to: &output)
    }

    mutating func strings(_ name: String, _ values: [String]) {
        key(name)
        output.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            RawJSON.appendQuoted(value, to: &output)
        }
        output.append(UInt8(ascii: "]"))
    }

    mutating func bool(_ name: String, _ value: Bool) {
        key(name)
        output += Array((value ? "true" : "false").utf8)
    }

    mutating func integer(_ name: String, _ value: Int64) {
        key(name)
        output += Array(String(value).utf8)
    }

    /// A value that is already JSON text.
    mutating func raw(_ name: String, _ json: String) {
        key(name)
        output += Array(json.utf8)
    }

    /// A value that is already JSON bytes.
    mutating func raw(_ name: String, bytes: [UInt8]) {
        key(name)
        output += bytes
    }

    var bytes: [UInt8] { output.isEmpty ? Array("{}".utf8) : output + [UInt8(ascii: "}")] }
    var text: String { String(decoding: bytes, as: UTF8.self) }
}

/// Why a chat operation failed. Every case is safe to log: none carries a message body, a room
/// name or server text.
public enum ChatError: Error, Sendable, Hashable, CustomStringConvertible, LogSafe {
    /// No usable answer from the homeserver (offline, connection refused, timed out).
    case network
    /// The homeserver refused the request: HTTP status and Matrix `errcode` (`M_FORBIDDEN`,
    /// `M_NOT_FOUND`, …).
    case server(status: Int, errorCode: String)
    /// The homeserver rate-limited the request; try again after `retryAfter` when given.
    case rateLimited(retryAfter: Duration?)
    /// The access token was rejected (`M_UNKNOWN_TOKEN`) even after the requester's refresh:
    /// a session problem, reported to the session rather than handled by chat.
    case tokenRejected
    /// No account is signed in (``ChatClient`` has no account to act for), or the requester
    /// has no session.
    case notSignedIn
    /// The handle (a ``Conversation``, an ``AccountChat``) belongs to an account that was
    /// switched away from or signed out: it never acts for the account that is active now.
    case accountEnded
    /// The member's power level in the room is below what the action needs.
    case insufficientPowerLevel(required: Int, actual: Int)
    /// No such conversation in this account's store.
    case unknownConversation(RoomID)
    /// No such event in the conversation's stored timeline.
    case unknownEvent(EventID)
    /// An argument is not valid (an empty message, an ID of the wrong form); names the argument.
    case invalidArgument(name: String)
    /// The homeserver's answer could not be read.
    case unexpectedResponse
    /// The account's chat database failed.
    case store(ChatStoreError)

    /// The case and its codes.
    public var description: String {
        switch self {
        case .network: "network"
        case .server(let status, let errorCode): "server(\(status), \(errorCode))"
        case .rateLimited(let retryAfter): "rateLimited(\(retryAfter.map { "\($0)" } ?? "nil"))"
        case .tokenRejected: "tokenRejected"
        case .notSignedIn: "notSignedIn"
        case .accountEnded: "accountEnded"
        case .insufficientPowerLevel(let required, let actual):
            "insufficientPowerLevel(required: \(required), actual: \(actual))"
        case .unknownConversation(let roomID): "unknownConversation(\(roomID))"
        case .unknownEvent(let eventID): "unknownEvent(\(eventID))"
        case .invalidArgument(let name): "invalidArgument(\(name))"
        case .unexpectedResponse: "unexpectedResponse"
        case .store(let error): "store(\(error))"
        }
    }

    /// Same as ``description``.
    public var logDescription: String { description }

    /// Maps a requester failure.
    init(_ error: MatrixRequestError) {
        switch error {
        case .transport: self = .network
        case .notSignedIn: self = .notSignedIn
        case .invalidRequest: self = .invalidArgument(name: "request")
        case .matrix(let matrix):
            switch matrix.code {
            case .unknownToken, .missingToken: self = .tokenRejected
            case .limitExceeded: self = .rateLimited(retryAfter: matrix.retryAfter?.delay(from: Date()))
            default: self = .server(status: matrix.status, errorCode: matrix.code.errcode)
            }
        }
    }
}

/// How the interpreters classify a failed request: the one place that decides what is
/// transient, what is the session's business and what is final.
enum RequestFailure {
    /// What a failed `/sync` means for the sync machine. `nil`: the token was rejected.
    static func syncError(_ error: MatrixRequestError) -> SyncError? {
        switch error {
        case .transport: return .network
        case .notSignedIn: return nil
        case .invalidRequest: return .rejected(status: 0, errorCode: "invalid_request")
        case .matrix(let matrix):
            switch matrix.code {
            case .unknownToken, .missingToken: return nil
            case .limitExceeded: return .rateLimited(retryAfter: matrix.retryAfter?.delay(from: Date()))
            default:
                if matrix.status >= 500 || matrix.status == 408 { return .server(status: matrix.status) }
                return .rejected(status: matrix.status, errorCode: matrix.code.errcode)
            }
        }
    }

    /// What a failed PUT means for the send queue.
    static func sendError(_ error: MatrixRequestError) -> SendError {
        switch error {
        case .transport: return .network
        case .notSignedIn: return .unknownToken
        case .invalidRequest: return .permanent(.rejected(status: 0, errorCode: "invalid_request"))
        case .matrix(let matrix):
            switch matrix.code {
            case .unknownToken, .missingToken: return .unknownToken
            case .limitExceeded: return .rateLimited(retryAfter: matrix.retryAfter?.delay(from: Date()))
            case .forbidden: return .permanent(.forbidden)
            case .tooLarge: return .permanent(.tooLarge)
            default:
                if matrix.status >= 500 || matrix.status == 408 { return .server(status: matrix.status) }
                if matrix.status == 413 { return .permanent(.tooLarge) }
                return .permanent(.rejected(status: matrix.status, errorCode: matrix.code.errcode))
            }
        }
    }

    /// What a failed `/messages` means for the timeline machine.
    static func timelineError(_ error: MatrixRequestError) -> TimelineError {
        switch error {
        case .transport: return .network
        case .notSignedIn: return .server(status: 401, errorCode: "M_UNKNOWN_TOKEN")
        case .invalidRequest: return .server(status: 0, errorCode: nil)
        case .matrix(let matrix): return .server(status: matrix.status, errorCode: matrix.code.errcode)
        }
    }

    /// Whether the error is the session's business (an access token the requester could not renew).
    static func isTokenProblem(_ error: MatrixRequestError) -> Bool {
        switch error {
        case .notSignedIn: return true
        case .matrix(let matrix): return matrix.code == .unknownToken || matrix.code == .missingToken
        case .transport, .invalidRequest: return false
        }
    }
}
