/// A `GET /_matrix/client/v3/pushrules/` answer as Synapse gives a new account (its server-default
/// rules, conditions and actions as the specification lists them), plus keyword rules and
/// muted rooms of the caller's choice: for push tests and `symorva-bench push`.
///
/// ```swift
/// transport.on("GET", pathPrefix: "/_matrix/client/v3/pushrules") { _ in
///     .json(200, PushRulesJSON.synapseDefaults(keywords: ["budget"], mutedRooms: ["!quiet:localhost"]))
/// }
/// ```
public enum PushRulesJSON {
    /// The default ruleset with `keywords` as enabled content rules (notify and highlight) and
    /// `mutedRooms` as room rules that do not notify, in the homeserver's evaluation order.
    public static func synapseDefaults(keywords: [String] = [], mutedRooms: [String] = []) -> String {
        let override = [
            rule(".m.rule.master", enabled: false, actions: "[]", conditions: "[]"),
            rule(
                ".m.rule.suppress_notices", actions: "[\"dont_notify\"]",
                conditions: eventMatch("content.msgtype", "m.notice")),
            rule(
                ".m.rule.invite_for_me", actions: notifySound(highlight: false),
                conditions: "[\(match("type", "m.room.member")), \(match("content.membership", "invite")), "
                    + "{\"kind\": \"event_match\", \"key\": \"state_key\", \"pattern\": \"@alice:localhost\"}]"),
            rule(".m.rule.member_event", actions: "[\"dont_notify\"]", conditions: eventMatch("type", "m.room.member")),
            rule(
                ".m.rule.is_user_mention", actions: notifySound(highlight: true),
                conditions:
                    "[{\"kind\": \"event_property_contains\", \"key\": \"content.m\\\\.mentions.user_ids\", \"value\": \"@alice:localhost\"}]"
            ),
            rule(
                ".m.rule.contains_display_name", actions: notifySound(highlight: true),
                conditions: "[{\"kind\": \"contains_display_name\"}]"),
            rule(
                ".m.rule.is_room_mention", actions: highlightOnly,
                conditions:
                    "[{\"kind\": \"event_property_is\", \"key\": \"content.m\\\\.mentions.room\", \"value\": true}, "
                    + "{\"kind\": \"sender_notification_permission\", \"key\": \"room\"}]"),
            rule(
                ".m.rule.roomnotif", actions: highlightOnly,
                conditions:
                    "[{\"kind\": \"sender_notification_permission\", \"key\": \"room\"}, \(match("content.body", "@room"))]"
            ),
            rule(
                ".m.rule.tombstone", actions: highlightOnly,
                conditions: "[\(match("type", "m.room.tombstone")), \(match("state_key", ""))]"),
            rule(".m.rule.reaction", actions: "[]", conditions: eventMatch("type", "m.reaction")),
            rule(
                ".m.rule.room.server_acl", actions: "[]",
                conditions: "[\(match("type", "m.room.server_acl")), \(match("state_key", ""))]"),
            rule(
                ".m.rule.suppress_edits", actions: "[]",
                conditions:
                    "[{\"kind\": \"event_property_is\", \"key\": \"content.m\\\\.relates_to.rel_type\", \"value\": \"m.replace\"}]"
            ),
        ]
        var content = [
            "{\"rule_id\": \".m.rule.contains_user_name\", \"default\": true, \"enabled\": true, "
                + "\"pattern\": \"alice\", \"actions\": \(notifySound(highlight: true))}"
        ]
        content += keywords.map { keyword in
            "{\"rule_id\": \"\(keyword)\", \"default\": false, \"enabled\": true, \"pattern\": \"\(keyword)\", "
                + "\"actions\": [\"notify\", {\"set_tweak\": \"highlight\"}]}"
        }
        let room = mutedRooms.map { roomID in
            "{\"rule_id\": \"\(roomID)\", \"default\": false, \"enabled\": true, \"actions\": [\"dont_notify\"], "
                + "\"conditions\": [{\"kind\": \"event_match\", \"key\": \"room_id\", \"pattern\": \"\(roomID)\"}]}"
        }
        let underride = [
            rule(".m.rule.call", actions: notifyRing, conditions: eventMatch("type", "m.call.invite")),
            rule(
                ".m.rule.encrypted_room_one_to_one", actions: notifySound(highlight: false),
                conditions: "[{\"kind\": \"room_member_count\", \"is\": \"2\"}, \(match("type", "m.room.encrypted"))]"),
            rule(
                ".m.rule.room_one_to_one", actions: notifySound(highlight: false),
                conditions: "[{\"kind\": \"room_member_count\", \"is\": \"2\"}, \(match("type", "m.room.message"))]"),
            rule(".m.rule.message", actions: "[\"notify\"]", conditions: eventMatch("type", "m.room.message")),
            rule(".m.rule.encrypted", actions: "[\"notify\"]", conditions: eventMatch("type", "m.room.encrypted")),
        ]
        return "{\"global\": {\"override\": [\(override.joined(separator: ", "))], "
            + "\"content\": [\(content.joined(separator: ", "))], \"room\": [\(room.joined(separator: ", "))], "
            + "\"sender\": [], \"underride\": [\(underride.joined(separator: ", "))]}}"
    }

    private static let highlightOnly = "[\"notify\", {\"set_tweak\": \"highlight\"}]"
    private static let notifyRing =
        "[\"notify\", {\"set_tweak\": \"sound\", \"value\": \"ring\"}, {\"set_tweak\": \"highlight\", \"value\": false}]"

    private static func notifySound(highlight: Bool) -> String {
        "[\"notify\", {\"set_tweak\": \"sound\", \"value\": \"default\"}, {\"set_tweak\": \"highlight\", \"value\": \(highlight)}]"
    }

    private static func match(_ key: String, _ pattern: String) -> String {
        "{\"kind\": \"event_match\", \"key\": \"\(key)\", \"pattern\": \"\(pattern)\"}"
    }

    private static func eventMatch(_ key: String, _ pattern: String) -> String { "[\(match(key, pattern))]" }

    private static func rule(_ id: String, enabled: Bool = true, actions: String, conditions: String) -> String {
        "{\"rule_id\": \"\(id)\", \"default\": true, \"enabled\": \(enabled), \"conditions\": \(conditions), "
            + "\"actions\": \(actions)}"
    }
}
