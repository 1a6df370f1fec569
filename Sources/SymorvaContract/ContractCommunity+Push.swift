import SymorvaKit
import SymorvaMatrix

extension ContractCommunity {
    /// `push.*` and the path `push.counts`: this installation's pusher, the
    /// account's push rules and keywords, the event a push names, and the unread counts. Every
    /// community has them (push is not an optional module).
    var pushMethods: ContractMethods {
        let push = community.push
        var methods = ContractMethods()
        methods.asynchronous["push.gateway"] = { _ in
            let tag = try await mapping("push") { try push.profileTag() }
            return .object(["communityGatewayURL": .string(push.communityGatewayURL), "profileTag": .string(tag)])
        }
        methods.asynchronous["push.setPusher"] = { call in
            let params = call.params
            let pushkey = try params.string("pushkey")
            let appID = try params.string("appID")
            let appDisplayName = try params.string("appDisplayName")
            let deviceDisplayName = try params.string("deviceDisplayName")
            let language = try params.optionalString("language") ?? "en"
            let gatewayURL = try params.optionalString("gatewayURL") ?? push.communityGatewayURL
            let format: PushFormat
            switch try params.optionalString("format") ?? PushFormat.eventIDOnly.rawValue {
            case PushFormat.eventIDOnly.rawValue: format = .eventIDOnly
            case PushFormat.full.rawValue: format = .full
            default: throw ContractError.invalidParams("format", "event_id_only or full")
            }
            let pusher = try await mapping("push") {
                try await push.setPusher(
                    pushkey: pushkey, appID: appID, appDisplayName: appDisplayName,
                    deviceDisplayName: deviceDisplayName, language: language, gatewayURL: gatewayURL, format: format)
            }
            return Self.pusher(pusher)
        }
        methods.asynchronous["push.pushers"] = { _ in
            .array(try await mapping("push") { try await push.pushers() }.map(Self.pusher))
        }
        methods.asynchronous["push.removePusher"] = { _ in
            try await mapping("push") { try await push.removePusher() }
            return .object([:])
        }
        methods.asynchronous["push.rules"] = { _ in
            .array(
                try await mapping("push") { try await push.rules() }.map { rule in
                    .object([
                        "kind": .string(rule.kind.rawValue), "ruleID": .string(rule.ruleID),
                        "isEnabled": .bool(rule.isEnabled), "isDefault": .bool(rule.isDefault),
                        "pattern": rule.pattern.map(JSONValue.string), "notifies": .bool(rule.notifies),
                    ])
                })
        }
        methods.asynchronous["push.addKeyword"] = { call in
            let keyword = try call.params.string("keyword")
            try await mapping("push") { try await push.addKeyword(keyword) }
            return .object([:])
        }
        methods.asynchronous["push.removeKeyword"] = { call in
            let keyword = try call.params.string("keyword")
            try await mapping("push") { try await push.removeKeyword(keyword) }
            return .object([:])
        }
        methods.asynchronous["push.setRuleEnabled"] = { call in
            guard let kind = PushRule.Kind(rawValue: try call.params.string("kind")) else {
                throw ContractError.invalidParams("kind", "override, content, room, sender or underride")
            }
            let ruleID = try call.params.string("ruleID")
            guard let enabled = try call.params.optionalBool("enabled") else {
                throw ContractError.invalidParams("enabled", "a boolean")
            }
            try await mapping("push") { try await push.setRuleEnabled(enabled, kind: kind, ruleID: ruleID) }
            return .object([:])
        }
        methods.asynchronous["push.event"] = { call in
            let roomID = try call.params.roomID("roomID")
            let eventID = try call.params.eventID("eventID")
            let event = try await mapping("push") { try await push.event(roomID: roomID, eventID: eventID) }
            return .object([
                "eventID": .string(event.eventID.rawValue), "roomID": .string(event.roomID.rawValue),
                "sender": .string(event.sender), "type": .string(event.type),
                "originServerTimestamp": event.originServerTimestamp.map { .number(Double($0)) },
                "body": event.body.map(JSONValue.string), "isEncrypted": .bool(event.isEncrypted),
            ])
        }
        methods.asynchronous["push.pusherState"] = { _ in Self.pusherState(push.pusherState) }
        methods.subscriptions["push.counts"] = { _ in
            ContractSource(push.counts) { counts in
                .object([
                    "notifications": .number(Double(counts.notifications)),
                    "highlights": .number(Double(counts.highlights)),
                    "rooms": .object(
                        Dictionary(
                            uniqueKeysWithValues: counts.rooms.map { room, count in
                                (
                                    room.rawValue,
                                    JSONValue.object([
                                        "notifications": .number(Double(count.notifications)),
                                        "highlights": .number(Double(count.highlights)),
                                    ])
                                )
                            })),
                ])
            }
        }
        return methods
    }

    static func pusher(_ pusher: Pusher) -> JSONValue {
        .object([
            "pushkey": .string(pusher.pushkey), "appID": .string(pusher.appID),
            "appDisplayName": .string(pusher.appDisplayName), "deviceDisplayName": .string(pusher.deviceDisplayName),
            "profileTag": .string(pusher.profileTag), "language": .string(pusher.language),
            "gatewayURL": .string(pusher.gatewayURL), "format": .string(pusher.format.rawValue),
        ])
    }

    static func pusherState(_ state: PusherState) -> JSONValue {
        switch state {
        case .unregistered: .object(["kind": "unregistered"])
        case .registering(let pusher): .object(["kind": "registering", "pusher": Self.pusher(pusher)])
        case .registered(let pusher): .object(["kind": "registered", "pusher": Self.pusher(pusher)])
        case .removing(let pusher): .object(["kind": "removing", "pusher": Self.pusher(pusher)])
        case .failed(let pusher, let error):
            .object([
                "kind": "failed", "pusher": Self.pusher(pusher), "error": ContractError(error, domain: "push").json,
            ])
        }
    }
}
