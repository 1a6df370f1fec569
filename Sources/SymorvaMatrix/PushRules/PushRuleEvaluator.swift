/// What a push rule needs to know besides the event: who the user is, the room's size and
/// power levels.
package struct PushContext: Sendable, Hashable {
    /// The account.
    package var userID: String
    /// The account's display name in the room (`contains_display_name`), if it has one.
    package var displayName: String?
    /// Joined members of the room (`room_member_count`).
    package var memberCount: Int
    /// The sender's power level in the room.
    package var senderPowerLevel: Int
    /// The room's `notifications` power levels (`room` defaults to 50 when absent).
    package var notificationLevels: [String: Int]

    /// A context; the notification levels default to the specification's.
    package init(
        userID: String, displayName: String?, memberCount: Int, senderPowerLevel: Int,
        notificationLevels: [String: Int] = [:]
    ) {
        self.userID = userID
        self.displayName = displayName
        self.memberCount = memberCount
        self.senderPowerLevel = senderPowerLevel
        self.notificationLevels = notificationLevels
    }
}

/// Evaluates an account's push rules against an event on the device, as the homeserver would
/// (the specification's "Push Rules" and its conditions, with the intentional-mentions rules):
/// the first enabled rule whose conditions all hold gives the actions.
///
/// Used for encrypted rooms, where the homeserver cannot read the event and its counts are
/// wrong: the device evaluates the decrypted event. Pure and allocation-light (`symorva-bench
/// push-rules` measures it).
package struct PushRuleEvaluator: Sendable {
    /// The rules.
    package let ruleSet: PushRuleSet
    /// The enabled rules, each with whether it is a legacy mention rule.
    private let enabled: [(rule: PushRuleSet.Rule, isLegacyMention: Bool)]

    /// The legacy mention rules, skipped for an event that carries `m.mentions` (the
    /// specification's intentional mentions: such an event says whom it mentions).
    static let legacyMentionRules: Set<String> = [
        ".m.rule.contains_display_name", ".m.rule.contains_user_name", ".m.rule.roomnotif",
    ]

    /// An evaluator over `ruleSet`.
    package init(_ ruleSet: PushRuleSet) {
        self.ruleSet = ruleSet
        enabled = ruleSet.rules.filter(\.isEnabled).map { ($0, Self.legacyMentionRules.contains($0.id)) }
    }

    /// The actions of the first matching rule for `event` (a whole event: `type`, `sender`,
    /// `content`, …, decrypted when it was encrypted), or `nil` when no rule matches.
    package func actions(for event: JSONValue, context: PushContext) -> PushActions? {
        guard case .object(let fields) = event else { return nil }
        var body = LazyBody(fields: fields)
        let hasMentions: Bool
        if case .object(let content)? = fields["content"], content["m.mentions"] != nil {
            hasMentions = true
        } else {
            hasMentions = false
        }
        for (rule, isLegacyMention) in enabled {
            if hasMentions && isLegacyMention { continue }
            var holds = true
            for condition in rule.conditions where !Self.holds(condition, fields, &body, context) {
                holds = false
                break
            }
            if holds { return rule.actions }
        }
        return nil
    }

    /// `content.body`, lowercased once per event when a rule needs it.
    struct LazyBody {
        let fields: [String: JSONValue]
        var scalars: [Unicode.Scalar]??

        init(fields: [String: JSONValue]) {
            self.fields = fields
        }

        mutating func value() -> [Unicode.Scalar]? {
            if let scalars { return scalars }
            var result: [Unicode.Scalar]?
            if case .object(let content)? = fields["content"], case .string(let text)? = content["body"] {
                result = GlobPattern.lowercasedScalars(text)
            }
            scalars = .some(result)
            return result
        }
    }

    private static func holds(
        _ condition: PushCondition, _ fields: [String: JSONValue], _ body: inout LazyBody, _ context: PushContext
    ) -> Bool {
        switch condition {
        case .bodyMatch(let pattern):
            guard let scalars = body.value() else { return false }
            return pattern.matches(lowercased: scalars)
        case .eventMatch(let path, let pattern):
            guard case .string(let value)? = lookup(path, in: fields) else { return false }
            return pattern.matches(value)
        case .eventPropertyIs(let path, let value):
            guard let found = lookup(path, in: fields) else { return false }
            return found == value
        case .eventPropertyContains(let path, let value):
            guard case .array(let list)? = lookup(path, in: fields) else { return false }
            return list.contains(value)
        case .containsDisplayName:
            guard let name = context.displayName, !name.isEmpty, let scalars = body.value() else { return false }
            return GlobPattern(literal: name, wordBoundaries: true).matches(lowercased: scalars)
        case .roomMemberCount(let comparison, let number):
            let count = context.memberCount
            switch comparison {
            case .equal: return count == number
            case .less: return count < number
            case .greater: return count > number
            case .lessOrEqual: return count <= number
            case .greaterOrEqual: return count >= number
            }
        case .senderNotificationPermission(let key):
            return context.senderPowerLevel >= (context.notificationLevels[key] ?? 50)
        case .unsupported:
            return false
        }
    }

    /// The value at `path` in the event, or `nil`.
    private static func lookup(_ path: [String], in fields: [String: JSONValue]) -> JSONValue? {
        var current: [String: JSONValue] = fields
        for (index, key) in path.enumerated() {
            guard let value = current[key] else { return nil }
            if index == path.count - 1 { return value }
            guard case .object(let next) = value else { return nil }
            current = next
        }
        return nil
    }
}
