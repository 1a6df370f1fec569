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
/// a ``/SymorvaMachines/GrantedContent``. An app with its own decrypted message store plugs it in
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
/// Text messages (`m.room.message` with a `body`) only. An encrypted event
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
        enum CodingKeys: String, CodingKey {
            case type, sender, content
            case eventID = "event_id"
            case originServerTimestamp = "origin_server_ts"
        }

        var item: ConversationItem? {
            guard type == "m.room.message", case .object(let members)? = content,
                case .string(let body)? = members["body"]
            else { return nil }
            return ConversationItem(
                eventID: EventID(eventID), sender: UserID(stored: sender),
                timestamp: MatrixTimestamp(milliseconds: originServerTimestamp), body: body)
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
            case .transport(let problem): throw .failure(.serviceUnreachable(StudioService.problem(problem)))
            case .invalidRequest: throw .contentUnavailable(eventID)
            }
        }
        guard let value = try? JSONDecoder().decode(type, from: Data(response.body)) else {
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

    public func items(
        in roomID: RoomID, scope: GrantScope, since: MatrixTimestamp?, limit: Int
    ) async throws(StudioError) -> [ConversationItem] {
        switch scope {
        case .selectedMessages(let ids):
            var items: [ConversationItem] = []
            for id in ids {
                guard let item = try await event(id, in: roomID).item else { throw .contentUnavailable(id) }
                items.append(item)
            }
            return items.sorted { ($0.timestamp, $0.eventID.rawValue) < ($1.timestamp, $1.eventID.rawValue) }
        case .conversation(let first):
            let context = try await get(
                Context.self, "\(room(roomID))/context/\(percentEncoded(first.rawValue))",
                query: [.init(name: "limit", value: "0")], eventID: first)
            guard let firstItem = try await decrypted(context.event, in: roomID).item else {
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
                var shown: [RoomEvent] = []
                for event in page.chunk { shown.append(try await decrypted(event, in: roomID)) }
                let later = shown.compactMap(\.item).filter { item in since.map { item.timestamp >= $0 } ?? true }
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
