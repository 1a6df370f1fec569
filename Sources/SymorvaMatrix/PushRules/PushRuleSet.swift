/// An account's push rules (`m.push_rules`, scope `global`) compiled for evaluation on the device.
///
/// The homeserver evaluates push rules for the counts it sends, but it cannot read encrypted
/// messages: for those, the device evaluates the same rules against the decrypted event
/// (``PushRuleEvaluator``). The rules are the account's own — the server's defaults with the
/// user's changes, as the account data carries them — so the device agrees with the server on
/// every unencrypted event; ``PushRuleSet/serverDefaults(for:)`` stands in only until the account
/// data arrives.
///
/// Parsing never fails as a whole: a rule the device cannot read (an unknown condition kind, a
/// malformed field) is kept and never matches, as the specification says of unknown conditions.
package struct PushRuleSet: Sendable, Hashable {
    /// The rules in evaluation order: override, content, room, sender, underride.
    package var rules: [PushRuleSet.Rule]

    /// One rule, its conditions compiled.
    package struct Rule: Sendable, Hashable {
        /// The rule's kind.
        package var kind: Kind
        /// `rule_id` (a room ID for room rules, a user ID for sender rules).
        package var id: String
        /// Whether the rule takes part in evaluation.
        package var isEnabled: Bool
        /// All must hold for the rule to match.
        package var conditions: [PushCondition]
        /// What a match means.
        package var actions: PushActions

        /// A rule.
        package init(kind: Kind, id: String, isEnabled: Bool, conditions: [PushCondition], actions: PushActions) {
            self.kind = kind
            self.id = id
            self.isEnabled = isEnabled
            self.conditions = conditions
            self.actions = actions
        }
    }

    /// The five kinds, in the order they are evaluated.
    package enum Kind: String, Sendable, Hashable, CaseIterable {
        case override, content, room, sender, underride
    }

    /// Rules in order.
    package init(rules: [PushRuleSet.Rule]) {
        self.rules = rules
    }

    /// The rule set of the `global` scope of an `m.push_rules` content (or of `GET /pushrules/`).
    package init(parsing json: JSONValue) {
        var rules: [PushRuleSet.Rule] = []
        let global: [String: JSONValue]
        if case .object(let top) = json, case .object(let scope)? = top["global"] {
            global = scope
        } else {
            global = [:]
        }
        for kind in Kind.allCases {
            guard case .array(let list)? = global[kind.rawValue] else { continue }
            for case .object(let fields) in list {
                if let rule = Self.rule(kind: kind, fields) { rules.append(rule) }
            }
        }
        self.rules = rules
    }

    /// The `global` rule set of `m.push_rules` account data (UTF-8 JSON), or `nil` when it is
    /// not JSON.
    package init?(accountData bytes: some Collection<UInt8>) {
        guard let json = try? JSONValue(parsing: bytes) else { return nil }
        self.init(parsing: json)
    }

    private static func rule(kind: Kind, _ fields: [String: JSONValue]) -> PushRuleSet.Rule? {
        guard case .string(let id)? = fields["rule_id"] else { return nil }
        let isEnabled: Bool
        if case .bool(let enabled)? = fields["enabled"] { isEnabled = enabled } else { isEnabled = true }
        var conditions: [PushCondition]
        switch kind {
        case .override, .underride:
            if case .array(let list)? = fields["conditions"] {
                conditions = list.map(PushCondition.init(parsing:))
            } else {
                conditions = []
            }
        case .content:
            guard case .string(let pattern)? = fields["pattern"] else {
                conditions = [.unsupported]
                break
            }
            conditions = [.bodyMatch(GlobPattern(pattern, wordBoundaries: true))]
        case .room:
            conditions = [.eventMatch(path: ["room_id"], pattern: GlobPattern(literal: id))]
        case .sender:
            conditions = [.eventMatch(path: ["sender"], pattern: GlobPattern(literal: id))]
        }
        let actions: PushActions
        if case .array(let list)? = fields["actions"] {
            actions = PushActions(parsing: list)
        } else {
            actions = PushActions()
        }
        return PushRuleSet.Rule(kind: kind, id: id, isEnabled: isEnabled, conditions: conditions, actions: actions)
    }
}

/// What a matching rule asks for: whether the event notifies, whether it is highlighted, and
/// the sound a push would play.
package struct PushActions: Sendable, Hashable {
    /// The event counts as a notification.
    package var notify: Bool
    /// The event is highlighted (a mention): it counts for the highlight count too.
    package var highlight: Bool
    /// The `sound` tweak, when set.
    package var sound: String?

    /// No notification.
    package init(notify: Bool = false, highlight: Bool = false, sound: String? = nil) {
        self.notify = notify
        self.highlight = highlight
        self.sound = sound
    }

    /// The actions of a rule: `notify` (and the legacy `coalesce`) notify, `dont_notify` and
    /// unknown actions do nothing; `set_tweak` `highlight` is true unless its value is `false`.
    init(parsing list: [JSONValue]) {
        self.init()
        for action in list {
            switch action {
            case .string("notify"), .string("coalesce"): notify = true
            case .object(let fields):
                guard case .string(let tweak)? = fields["set_tweak"] else { continue }
                switch tweak {
                case "highlight":
                    if case .bool(let value)? = fields["value"] { highlight = value } else { highlight = true }
                case "sound":
                    if case .string(let value)? = fields["value"] { sound = value }
                default: continue
                }
            default: continue
            }
        }
    }
}

/// One condition of a push rule, compiled.
package enum PushCondition: Sendable, Hashable {
    /// `event_match` on any key but `content.body`: the string at `path` matches a glob as a whole.
    case eventMatch(path: [String], pattern: GlobPattern)
    /// `event_match` on `content.body`: the glob matches words of the body.
    case bodyMatch(GlobPattern)
    /// `event_property_is`: the value at `path` is exactly `value` (string, integer, boolean or null).
    case eventPropertyIs(path: [String], value: JSONValue)
    /// `event_property_contains`: the array at `path` holds `value`.
    case eventPropertyContains(path: [String], value: JSONValue)
    /// `contains_display_name`: `content.body` holds the user's display name as a word.
    case containsDisplayName
    /// `room_member_count`: the room's joined members compared with a number.
    case roomMemberCount(Comparison, Int)
    /// `sender_notification_permission`: the sender's power level reaches the room's
    /// `notifications.<key>` level.
    case senderNotificationPermission(key: String)
    /// A condition the device cannot read: it never matches.
    case unsupported

    /// How `room_member_count` compares.
    package enum Comparison: Sendable, Hashable {
        case equal, less, greater, lessOrEqual, greaterOrEqual
    }

    init(parsing json: JSONValue) {
        guard case .object(let fields) = json, case .string(let kind)? = fields["kind"] else {
            self = .unsupported
            return
        }
        let path: [String]? = {
            guard case .string(let key)? = fields["key"] else { return nil }
            return Self.path(key)
        }()
        switch kind {
        case "event_match":
            guard let path, case .string(let pattern)? = fields["pattern"] else { break }
            if path == ["content", "body"] {
                self = .bodyMatch(GlobPattern(pattern, wordBoundaries: true))
            } else {
                self = .eventMatch(path: path, pattern: GlobPattern(pattern))
            }
            return
        case "event_property_is", "event_property_contains":
            guard let path, let value = fields["value"], Self.isExactValue(value) else { break }
            self =
                kind == "event_property_is"
                ? .eventPropertyIs(path: path, value: value)
                : .eventPropertyContains(path: path, value: value)
            return
        case "contains_display_name":
            self = .containsDisplayName
            return
        case "room_member_count":
            guard case .string(let text)? = fields["is"], let parsed = Self.memberCount(text) else { break }
            self = .roomMemberCount(parsed.0, parsed.1)
            return
        case "sender_notification_permission":
            guard case .string(let key)? = fields["key"] else { break }
            self = .senderNotificationPermission(key: key)
            return
        default:
            break
        }
        self = .unsupported
    }

    /// A dotted key split into its fields; `\.` is a dot inside a field and `\\` a backslash
    /// (`content.m\.relates_to.rel_type`).
    static func path(_ key: String) -> [String] {
        var fields: [String] = []
        var current = ""
        var escaped = false
        for character in key {
            if escaped {
                if character != "." && character != "\\" { current.append("\\") }
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "." {
                fields.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        if escaped { current.append("\\") }
        fields.append(current)
        return fields
    }

    /// Strings, booleans, null and integers (no fractions, as canonical JSON allows).
    private static func isExactValue(_ value: JSONValue) -> Bool {
        switch value {
        case .string, .bool, .null: true
        case .number: value.integerValue != nil
        case .array, .object: false
        }
    }

    /// `2`, `==2`, `<2`, `>2`, `<=2`, `>=2`.
    private static func memberCount(_ text: String) -> (Comparison, Int)? {
        let operators: [(String, Comparison)] = [
            ("==", .equal), ("<=", .lessOrEqual), (">=", .greaterOrEqual), ("<", .less), (">", .greater),
        ]
        for (prefix, comparison) in operators where text.hasPrefix(prefix) {
            return Int(text.dropFirst(prefix.count)).map { (comparison, $0) }
        }
        return Int(text).map { (.equal, $0) }
    }
}
