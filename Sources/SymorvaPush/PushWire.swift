import SymorvaFeatureKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaServices

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The JSON of pushers, push rules and pushed events, and how failures become ``PushError``s.
enum PushWire {
    struct PusherJSON: Codable {
        struct DataJSON: Codable {
            var url: String?
            var format: String?
        }
        var pushkey: String
        var kind: String?
        var appID: String
        var appDisplayName: String?
        var deviceDisplayName: String?
        var profileTag: String?
        var lang: String?
        var data: DataJSON?
        enum CodingKeys: String, CodingKey {
            case pushkey, kind, lang, data
            case appID = "app_id"
            case appDisplayName = "app_display_name"
            case deviceDisplayName = "device_display_name"
            case profileTag = "profile_tag"
        }

        var pusher: Pusher {
            Pusher(
                pushkey: pushkey, appID: appID, appDisplayName: appDisplayName ?? "",
                deviceDisplayName: deviceDisplayName ?? "", profileTag: profileTag ?? "", language: lang ?? "",
                gatewayURL: data?.url ?? "",
                format: data?.format == PushFormat.eventIDOnly.rawValue ? .eventIDOnly : .full)
        }
    }

    struct PushersResponse: Decodable { var pushers: [PusherJSON] }

    /// `POST /pushers/set` for `pusher` (`append: false`: this pushkey is this app's only one).
    static func setBody(_ pusher: Pusher) -> [UInt8] {
        var body = JSONObjectWriter()
        body.string("pushkey", pusher.pushkey)
        body.string("kind", "http")
        body.string("app_id", pusher.appID)
        body.string("app_display_name", pusher.appDisplayName)
        body.string("device_display_name", pusher.deviceDisplayName)
        body.string("profile_tag", pusher.profileTag)
        body.string("lang", pusher.language)
        var data = JSONObjectWriter()
        data.string("url", pusher.gatewayURL)
        if pusher.format == .eventIDOnly { data.string("format", PushFormat.eventIDOnly.rawValue) }
        body.raw("data", data.text)
        body.raw("append", "false")
        return body.bytes
    }

    /// `POST /pushers/set` that deletes the pusher (`kind: null`).
    static func removeBody(_ pusher: Pusher) -> [UInt8] {
        var body = JSONObjectWriter()
        body.string("pushkey", pusher.pushkey)
        body.string("app_id", pusher.appID)
        body.raw("kind", "null")
        return body.bytes
    }

    struct RulesResponse: Decodable {
        struct Rule: Decodable {
            var ruleID: String
            var isDefault: Bool
            var enabled: Bool
            var pattern: String?
            var actions: [JSONValue]
            enum CodingKeys: String, CodingKey {
                case enabled, pattern, actions
                case ruleID = "rule_id"
                case isDefault = "default"
            }
        }
        struct Ruleset: Decodable {
            var override: [Rule]?
            var content: [Rule]?
            var room: [Rule]?
            var sender: [Rule]?
            var underride: [Rule]?
        }
        var global: Ruleset

        var rules: [PushRule] {
            let kinds: [(PushRule.Kind, [Rule]?)] = [
                (.override, global.override), (.content, global.content), (.room, global.room),
                (.sender, global.sender), (.underride, global.underride),
            ]
            return kinds.flatMap { kind, rules in
                (rules ?? []).map { rule in
                    PushRule(
                        kind: kind, ruleID: rule.ruleID, isEnabled: rule.enabled, isDefault: rule.isDefault,
                        pattern: rule.pattern, notifies: rule.actions.contains(.string("notify")))
                }
            }
        }
    }

    struct EventJSON: Decodable {
        struct Content: Decodable {
            var body: String?
            var msgtype: String?
        }
        var eventID: String
        var roomID: String?
        var sender: String
        var type: String
        var originServerTS: Int64?
        var content: Content?
        enum CodingKeys: String, CodingKey {
            case sender, type, content
            case eventID = "event_id"
            case roomID = "room_id"
            case originServerTS = "origin_server_ts"
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, from body: [UInt8]) throws(PushError) -> T {
        guard let value = WireJSON.decodeIfValid(type, from: body) else { throw .malformedResponse }
        return value
    }

    /// A failed homeserver request in push's terms (``/SymorvaFeatureKit/FailureClass``).
    static func error(_ error: MatrixRequestError) -> PushError { self.error(FailureClass(error)) }

    /// A failed community services request (the reference gateway) in push's terms.
    static func error(_ error: ServicesError) -> PushError { self.error(FailureClass(error)) }

    /// Push's refusals by status and code; everything else by its class.
    static func error(_ failure: FailureClass) -> PushError {
        switch failure {
        case .transport(let problem): return .transport(problem)
        case .rateLimited(let wait): return .rateLimited(retryAfter: wait)
        case .refused(let code, let status):
            switch (code, status) {
            case (_, 404): return .notFound
            case (_, 403), (_, 409): return .forbidden
            case ("M_INVALID_PARAM", _), ("M_BAD_JSON", _), ("M_MISSING_PARAM", _): return .invalidInput(code)
            default: return .server(code: code, status: status)
            }
        case .signInRequired: return .notSignedIn
        case .moduleDisabled: return .forbidden
        case .invalidRequest: return .invalidInput("request")
        case .malformedResponse: return .malformedResponse
        }
    }
}
