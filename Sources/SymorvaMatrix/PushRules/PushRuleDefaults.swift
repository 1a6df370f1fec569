import Foundation

extension PushRuleSet {
    /// The default rules of the specification (Matrix 1.18, intentional mentions included) for
    /// `userID`, as a homeserver gives a new account: used until the account's `m.push_rules`
    /// arrive, which always take their place.
    package static func specificationDefaults(for userID: String) -> PushRuleSet {
        let localpart = userID.dropFirst().split(separator: ":", maxSplits: 1).first.map(String.init) ?? userID
        let text =
            defaultRulesTemplate
            .replacingOccurrences(of: "USER_ID", with: jsonEscaped(userID))
            .replacingOccurrences(of: "LOCALPART", with: jsonEscaped(localpart))
        guard let json = try? JSONValue(parsing: Array(text.utf8)) else { return PushRuleSet(rules: []) }
        return PushRuleSet(parsing: json)
    }

    private static func jsonEscaped(_ text: String) -> String {
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case _ where scalar.value < 0x20: escaped += String(format: "\\u%04x", scalar.value)
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// `m.push_rules`' `global` scope with `USER_ID` and `LOCALPART` to fill in.
    private static let defaultRulesTemplate = #"""
        {"global": {
          "override": [
            {"conditions": [], "actions": [], "rule_id": ".m.rule.master", "enabled": false},
            {"conditions": [{"kind": "event_match", "key": "content.msgtype", "pattern": "m.notice"}], "actions": [], "rule_id": ".m.rule.suppress_notices", "enabled": true},
            {"conditions": [{"kind": "event_match", "key": "type", "pattern": "m.room.member"}, {"kind": "event_match", "key": "content.membership", "pattern": "invite"}, {"kind": "event_match", "key": "state_key", "pattern": "USER_ID"}], "actions": ["notify", {"set_tweak": "highlight", "value": false}, {"set_tweak": "sound", "value": "default"}], "rule_id": ".m.rule.invite_for_me", "enabled": true},
            {"conditions": [{"kind": "event_match", "key": "type", "pattern": "m.room.member"}], "actions": [], "rule_id": ".m.rule.member_event", "enabled": true},
            {"conditions": [{"kind": "event_property_contains", "key": "content.m\\.mentions.user_ids", "value": "USER_ID"}], "actions": ["notify", {"set_tweak": "highlight"}, {"set_tweak": "sound", "value": "default"}], "rule_id": ".m.rule.is_user_mention", "enabled": true},
            {"conditions": [{"kind": "contains_display_name"}], "actions": ["notify", {"set_tweak": "highlight"}, {"set_tweak": "sound", "value": "default"}], "rule_id": ".m.rule.contains_display_name", "enabled": true},
            {"conditions": [{"kind": "event_property_is", "key": "content.m\\.mentions.room", "value": true}, {"kind": "sender_notification_permission", "key": "room"}], "actions": ["notify", {"set_tweak": "highlight"}], "rule_id": ".m.rule.is_room_mention", "enabled": true},
            {"conditions": [{"kind": "sender_notification_permission", "key": "room"}, {"kind": "event_match", "key": "content.body", "pattern": "@room"}], "actions": ["notify", {"set_tweak": "highlight"}], "rule_id": ".m.rule.roomnotif", "enabled": true},
            {"conditions": [{"kind": "event_match", "key": "type", "pattern": "m.room.tombstone"}, {"kind": "event_match", "key": "state_key", "pattern": ""}], "actions": ["notify", {"set_tweak": "highlight"}], "rule_id": ".m.rule.tombstone", "enabled": true},
            {"conditions": [{"kind": "event_match", "key": "type", "pattern": "m.reaction"}], "actions": [], "rule_id": ".m.rule.reaction", "enabled": true},
            {"conditions": [{"kind": "event_match", "key": "type", "pattern": "m.room.server_acl"}, {"kind": "event_match", "key": "state_key", "pattern": ""}], "actions": [], "rule_id": ".m.rule.room.server_acl", "enabled": true},
            {"conditions": [{"kind": "event_property_is", "key": "content.m\\.relates_to.rel_type", "value": "m.replace"}], "actions": [], "rule_id": ".m.rule.suppress_edits", "enabled": true}
          ],
          "content": [
            {"actions": ["notify", {"set_tweak": "highlight"}, {"set_tweak": "sound", "value": "default"}], "rule_id": ".m.rule.contains_user_name", "pattern": "LOCALPART", "enabled": true}
          ],
          "room": [
          ],
          "sender": [
          ],
          "underride": [
            {"conditions": [{"kind": "event_match", "key": "type", "pattern": "m.call.invite"}], "actions": ["notify", {"set_tweak": "sound", "value": "ring"}, {"set_tweak": "highlight", "value": false}], "rule_id": ".m.rule.call", "enabled": true},
            {"conditions": [{"kind": "event_match", "key": "type", "pattern": "m.room.encrypted"}, {"kind": "room_member_count", "is": "2"}], "actions": ["notify", {"set_tweak": "sound", "value": "default"}, {"set_tweak": "highlight", "value": false}], "rule_id": ".m.rule.encrypted_room_one_to_one", "enabled": true},
            {"conditions": [{"kind": "event_match", "key": "type", "pattern": "m.room.message"}, {"kind": "room_member_count", "is": "2"}], "actions": ["notify", {"set_tweak": "sound", "value": "default"}, {"set_tweak": "highlight", "value": false}], "rule_id": ".m.rule.room_one_to_one", "enabled": true},
            {"conditions": [{"kind": "event_match", "key": "type", "pattern": "m.room.message"}], "actions": ["notify", {"set_tweak": "highlight", "value": false}], "rule_id": ".m.rule.message", "enabled": true},
            {"conditions": [{"kind": "event_match", "key": "type", "pattern": "m.room.encrypted"}], "actions": ["notify", {"set_tweak": "highlight", "value": false}], "rule_id": ".m.rule.encrypted", "enabled": true}
          ]
        }}
        """#
}
