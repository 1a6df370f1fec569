import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Where the content of a grant's scope is read on the device.
///
/// The content is read only to be handed to a granted machine; it leaves the device only inside
/// a `GrantedContent`. An app with its own decrypted message store plugs it in
/// here (``AccountStudio`` takes one), so that messages of encrypted rooms are decrypted on the
/// device and never reach the service any other way.
public protocol ConversationContentSource: Sendable {
    /// The `origin_server_ts` of `eventID` in `roomID` (the lower bound of a conversation scope).
    func timestamp(of eventID: EventID, in roomID: RoomID) async throws(StudioError) -> MatrixTimestamp

    /// The messages of `scope` in `roomID`, in conversation order: every selected message, or
    /// the messages from the first one on (at most `limit`).
    func items(
        in roomID: RoomID, scope: GrantScope, since: MatrixTimestamp?, limit: Int
    ) async throws(StudioError) -> [ConversationItem]
}

/// Reads messages from the homeserver as the account (`GET /rooms/{roomId}/event/{eventId}`,
/// `/context/{eventId}` and `/messages?dir=f`).
///
/// Text messages (`m.room.message` with a `body`) only, as the member sees them: an edited message
/// is its latest edit's text (`m.new_content` of the edit the homeserver bundles in
/// `unsigned.m.relations.m.replace`, by the message's own sender), once; edit events themselves and
/// redacted messages are never items. An encrypted event
/// (`m.room.encrypted`) is decrypted on the device by the account's crypto module when the
/// source has a decryptor (the SDK's own source does); without one, or without its room key, it
/// is refused with ``StudioError/contentUnavailable(_:)``: ciphertext is not content the member
/// can consent to share.
public struct HomeserverContentSource: ConversationContentSource {
    private let requester: any MatrixRequester
    private let decryptor: (any StudioEventDecryptor)?

    /// A source reading as `requester`'s account.
    public init(requester: any MatrixRequester) {
        self.requester = requester
        self.decryptor = nil
    }

    /// A source reading as `requester`'s account that decrypts encrypted events with `decryptor`.
    package init(requester: any MatrixRequester, decryptor: any StudioEventDecryptor) {
        self.requester = requester
        self.decryptor = decryptor
    }

    struct RoomEvent: Decodable {
        var type: String
        var eventID: String
        var sender: String
        var originServerTimestamp: Int64
        var content: JSONValue?
        var unsigned: JSONValue?
        enum CodingKeys: String, CodingKey {
            case type, sender, content, unsigned
            case eventID = "event_id"
            case originServerTimestamp = "origin_server_ts"
        }

        /// The message as the member sees it, before its latest edit (``shown(editedBy:)`` applies
        /// that): `nil` for anything that is not a text message the member sees — another type, a
        /// redacted message, or an edit (`m.replace`), whose text belongs to the message it edits.
        var item: ConversationItem? {
            guard type == "m.room.message", !isRedacted, replaced == nil, case .object(let members)? = content,
                case .string(let body)? = members["body"]
            else { return nil }
            return ConversationItem(
                eventID: EventID(eventID), sender: UserID(stored: sender),
                timestamp: MatrixTimestamp(milliseconds: originServerTimestamp), body: body)
        }

        /// Redacted: the homeserver says so in `unsigned.redacted_because`.
        var isRedacted: Bool {
            guard case .object(let members)? = unsigned, let because = members["redacted_because"] else {
                return false
            }
            return because != .null
        }

        /// The event this one edits (`m.relates_to` with `rel_type` `m.replace`).
        var replaced: String? {
            guard case .object(let members)? = content, case .object(let relation)? = members["m.relates_to"],
                case .string("m.replace")? = relation["rel_type"], case .string(let target)? = relation["event_id"]
            else { return nil }
            return target
        }

        /// The latest edit the homeserver bundled with this event (`unsigned.m.relations.m.replace`),
        /// as it came (possibly encrypted).
        var bundledEdit: RoomEvent? {
            guard case .object(let members)? = unsigned, case .object(let relations)? = members["m.relations"],
                let edit = relations["m.replace"], let bytes = try? edit.canonicalEncoding()
            else { return nil }
            return WireJSON.decodeIfValid(RoomEvent.self, from: bytes)
        }

        /// This message's item with the text of `edit` when that is a valid edit of it (the same
        /// sender, a text `m.new_content`, not redacted); with the original text otherwise.
        func shown(editedBy edit: RoomEvent?) -> ConversationItem? {
            guard let item else { return nil }
            guard let edit, edit.type == "m.room.message", edit.sender == sender, edit.replaced == eventID,
                !edit.isRedacted, case .object(let members)? = edit.content,
                case .object(let newContent)? = members["m.new_content"], case .string(let body)? = newContent["body"]
            else { return item }
            return ConversationItem(eventID: item.eventID, sender: item.sender, timestamp: item.timestamp, body: body)
        }
    }

    struct Context: Decodable {
        var event: RoomEvent
        var end: String?
    }

    struct Page: Decodable {
        var chunk: [RoomEvent]
        var end: String?
    }

    private func room(_ roomID: RoomID) -> String { "/_matrix/client/v3/rooms/\(percentEncoded(roomID.rawValue))" }

    private func get<T: Decodable>(
        _ type: T.Type, _ path: String, query: [MatrixEndpoint.QueryItem] = [], eventID: EventID
    ) async throws(StudioError) -> T {
        let response: HTTPResponse
        do throws(MatrixRequestError) {
            response = try await requester.send(
                MatrixEndpoint(method: .get, path: path, query: query, requiresAuth: true))
        } catch {
            switch error {
            case .matrix: throw .contentUnavailable(eventID)
            case .notSignedIn: throw .accountEnded
            case .transport(let problem): throw .failure(.serviceUnreachable(TransportProblem(problem)))
            case .invalidRequest: throw .contentUnavailable(eventID)
            }
        }
        guard let value = WireJSON.decodeIfValid(type, from: response.body) else {
            throw .contentUnavailable(eventID)
        }
        return value
    }

    private func event(_ eventID: EventID, in roomID: RoomID) async throws(StudioError) -> RoomEvent {
        try await decrypted(
            try await get(
                RoomEvent.self, "\(room(roomID))/event/\(percentEncoded(eventID.rawValue))", eventID: eventID),
            in: roomID)
    }

    /// An encrypted event as its plaintext event (decrypted on the device); any other as it is.
    private func decrypted(_ event: RoomEvent, in roomID: RoomID) async throws(StudioError) -> RoomEvent {
        guard event.type == "m.room.encrypted" else { return event }
        let eventID = EventID(event.eventID)
        guard let decryptor, let content = event.content, let bytes = try? content.canonicalEncoding(),
            let plaintext = await decryptor.plaintext(
                of: bytes, eventID: eventID, roomID: roomID, sender: UserID(stored: event.sender)),
            let inner = try? JSONValue(parsing: plaintext.content.exposedValue)
        else { throw .contentUnavailable(eventID) }
        var shown = event
        shown.type = plaintext.type
        shown.content = inner
        return shown
    }

    public func timestamp(of eventID: EventID, in roomID: RoomID) async throws(StudioError) -> MatrixTimestamp {
        MatrixTimestamp(milliseconds: try await event(eventID, in: roomID).originServerTimestamp)
    }

    /// The message as the member sees it: its latest edit's text (the edit the homeserver bundles,
    /// decrypted on the device when it is encrypted), never a redacted message or an edit by itself.
    private func shown(_ event: RoomEvent, in roomID: RoomID) async throws(StudioError) -> ConversationItem? {
        guard event.item != nil else { return nil }
        var edit = event.bundledEdit
        if let bundled = edit, bundled.type == "m.room.encrypted" {
            edit = try? await decrypted(bundled, in: roomID)  // an edit without its key: the original text
        }
        return event.shown(editedBy: edit)
    }

    public func items(
        in roomID: RoomID, scope: GrantScope, since: MatrixTimestamp?, limit: Int
    ) async throws(StudioError) -> [ConversationItem] {
        switch scope {
        case .selectedMessages(let ids):
            var items: [ConversationItem] = []
            for id in ids {
                guard let item = try await shown(try await event(id, in: roomID), in: roomID) else {
                    throw .contentUnavailable(id)
                }
                items.append(item)
            }
            return items.sorted { ($0.timestamp, $0.eventID.rawValue) < ($1.timestamp, $1.eventID.rawValue) }
        case .conversation(let first):
            let context = try await get(
                Context.self, "\(room(roomID))/context/\(percentEncoded(first.rawValue))",
                query: [.init(name: "limit", value: "0")], eventID: first)
            guard let firstItem = try await shown(try await decrypted(context.event, in: roomID), in: roomID) else {
                throw .contentUnavailable(first)
            }
            var items = [firstItem]
            var from = context.end
            while items.count < limit, let token = from {
                let page = try await get(
                    Page.self, "\(room(roomID))/messages",
                    query: [
                        .init(name: "dir", value: "f"), .init(name: "from", value: token),
                        .init(name: "limit", value: String(min(100, limit - items.count))),
                    ], eventID: first)
                if page.chunk.isEmpty { break }
                var visible: [ConversationItem] = []
                for event in page.chunk {
                    if let item = try await shown(try await decrypted(event, in: roomID), in: roomID) {
                        visible.append(item)
                    }
                }
                let later = visible.filter { item in since.map { item.timestamp >= $0 } ?? true }
                items.append(contentsOf: later.prefix(limit - items.count))
                from = page.end == token ? nil : page.end
            }
            return items
        }
    }
}

/// Decrypts an encrypted event on the device for the studio's content source (the account's
/// crypto module): content leaves only through a granted request, as plaintext the member saw.
package protocol StudioEventDecryptor: Sendable {
    /// The plaintext type and content of an `m.room.encrypted` event, or `nil` without its key.
    func plaintext(of content: [UInt8], eventID: EventID, roomID: RoomID, sender: UserID) async
        -> (type: String, content: Secret<[UInt8]>)?
}
