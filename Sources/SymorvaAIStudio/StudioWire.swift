import SymorvaMachines
import SymorvaRuntime

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The studio service's JSON (docs/ai-studio.md, the OpenAPI document) and its conversion to
/// the machine's values.
///
/// ``SummarizeRequest`` is the one body that carries conversation content, and the only way to
/// make one is ``summarizeBody(_:)``, which takes a ``/SymorvaMachines/GrantedContent``: a value only a granted
/// ``/SymorvaMachines/StudioGrantMachine`` makes.
enum StudioWire {
    /// The service's paths.
    enum Path {
        static let grants = "/_symorva/v1/studio/grants"
        static let summaries = "/_symorva/v1/studio/summaries"
        static let audit = "/_symorva/v1/studio/audit"
        static func revoke(_ id: GrantID) -> String { "/_symorva/v1/studio/grants/\(id.rawValue)/revoke" }
        static func grant(_ id: GrantID) -> String { "/_symorva/v1/studio/grants/\(id.rawValue)" }
    }

    // MARK: Requests

    struct Scope: Codable, Equatable {
        var kind: String
        var eventIDs: [String]?
        var sinceEventID: String?
        var sinceTimestamp: Int64?
        enum CodingKeys: String, CodingKey {
            case kind
            case eventIDs = "event_ids"
            case sinceEventID = "since_event_id"
            case sinceTimestamp = "since_ts"
        }
    }

    struct GrantBody: Encodable {
        var roomID: String
        var scope: Scope
        var purpose: String
        var expiresInMilliseconds: Int64
        enum CodingKeys: String, CodingKey {
            case roomID = "room_id"
            case scope, purpose
            case expiresInMilliseconds = "expires_in_ms"
        }
    }

    /// The body of `POST /summaries`: made only from granted content.
    struct SummarizeRequest: Encodable {
        struct Item: Encodable {
            var eventID: String
            var sender: String
            var timestamp: Int64
            var body: String
            enum CodingKeys: String, CodingKey {
                case eventID = "event_id"
                case sender, timestamp, body
            }
        }
        var grantID: String
        var items: [Item]
        enum CodingKeys: String, CodingKey {
            case grantID = "grant_id"
            case items
        }

        fileprivate init(grantID: String, items: [Item]) {
            self.grantID = grantID
            self.items = items
        }
    }

    static func scope(_ scope: GrantScope, since: MatrixTimestamp?) -> Scope {
        switch scope {
        case .selectedMessages(let ids):
            Scope(kind: "selected_messages", eventIDs: ids.map(\.rawValue))
        case .conversation(let first):
            Scope(kind: "conversation_since", sinceEventID: first.rawValue, sinceTimestamp: since?.rawValue ?? 0)
        }
    }

    static func grantBody(_ request: GrantRequest) -> GrantBody {
        GrantBody(
            roomID: request.roomID.rawValue, scope: scope(request.scope, since: request.sinceTimestamp),
            purpose: request.purpose.rawValue, expiresInMilliseconds: max(1, request.lifetime.wholeMilliseconds))
    }

    /// The only constructor of a summarize body.
    static func summarizeBody(_ content: GrantedContent) -> SummarizeRequest {
        SummarizeRequest(
            grantID: content.grant.id.rawValue,
            items: content.items.map {
                .init(
                    eventID: $0.eventID.rawValue, sender: $0.sender.rawValue, timestamp: $0.timestamp.rawValue,
                    body: $0.body)
            })
    }

    // MARK: Answers

    struct Grant: Decodable {
        var grantID: String
        var userID: String
        var roomID: String
        var purpose: String
        var scope: Scope
        var state: String
        var createdAtMilliseconds: Int64
        var expiresAtMilliseconds: Int64
        /// What the grant has left on the service's clock (absent from older services).
        var expiresInMilliseconds: Int64?
        enum CodingKeys: String, CodingKey {
            case grantID = "grant_id"
            case userID = "user_id"
            case roomID = "room_id"
            case purpose, scope, state
            case createdAtMilliseconds = "created_at_ms"
            case expiresAtMilliseconds = "expires_at_ms"
            case expiresInMilliseconds = "expires_in_ms"
        }

        /// The grant, with its expiry on the runtime clock: `now` plus the lifetime the service
        /// gave it (its own clock's difference, so clock skew does not shorten or stretch it).
        func grant(now: Duration) -> StudioGrant? {
            guard let purpose = GrantPurpose(rawValue: purpose), let scope = grantScope else { return nil }
            let lifetime = Duration.milliseconds(max(0, expiresAtMilliseconds - createdAtMilliseconds))
            return StudioGrant(
                id: GrantID(grantID), member: UserID(stored: userID), roomID: RoomID(roomID), scope: scope,
                sinceTimestamp: self.scope.sinceTimestamp.map(MatrixTimestamp.init(milliseconds:)), purpose: purpose,
                expiresAt: Timestamp(millisecondsSince1970: expiresAtMilliseconds), expiryDeadline: now + lifetime)
        }

        var grantScope: GrantScope? {
            switch scope.kind {
            case "selected_messages": scope.eventIDs.map { .selectedMessages($0.map { EventID($0) }) }
            case "conversation_since": scope.sinceEventID.map { .conversation(since: EventID($0)) }
            default: nil
            }
        }
    }

    struct SummaryAnswer: Decodable {
        struct Point: Decodable {
            var text: String
            var eventIDs: [String]
            enum CodingKeys: String, CodingKey {
                case text
                case eventIDs = "event_ids"
            }
        }
        var grantID: String
        var backend: String
        var itemCount: Int
        var points: [Point]
        var citedEventIDs: [String]
        enum CodingKeys: String, CodingKey {
            case grantID = "grant_id"
            case backend, points
            case itemCount = "item_count"
            case citedEventIDs = "cited_event_ids"
        }

        var summary: Summary {
            Summary(
                grantID: GrantID(grantID), backend: backend, itemCount: itemCount,
                points: points.map { .init(text: $0.text, eventIDs: $0.eventIDs.map { EventID($0) }) },
                citedEventIDs: citedEventIDs.map { EventID($0) })
        }
    }

    struct AuditPage: Decodable {
        struct Entry: Decodable {
            var grantID: String?
            var action: String
            var outcome: String
            var itemCount: Int
            var itemIDs: [String]
            enum CodingKeys: String, CodingKey {
                case grantID = "grant_id"
                case action, outcome
                case itemCount = "item_count"
                case itemIDs = "item_ids"
            }
        }
        var entries: [Entry]
    }
}
