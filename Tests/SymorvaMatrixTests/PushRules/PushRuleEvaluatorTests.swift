import SymorvaMatrix
import Testing

@Suite("Push rules evaluated on the device")
struct PushRuleEvaluatorTests {
    let alice = "@alice:example.org"
    let evaluator = PushRuleEvaluator(PushRuleSet.specificationDefaults(for: "@alice:example.org"))

    func event(
        _ type: String = "m.room.message", sender: String = "@bob:example.org", stateKey: String? = nil,
        content: String
    ) throws -> JSONValue {
        let state = stateKey.map { #", "state_key": "\#($0)""# } ?? ""
        let text =
            #"{"type": "\#(type)", "sender": "\#(sender)", "room_id": "!r:example.org"\#(state), "content": \#(content)}"#
        return try JSONValue(parsing: Array(text.utf8))
    }

    func context(members: Int = 5, senderLevel: Int = 0, displayName: String? = "Alice Liddell") -> PushContext {
        PushContext(userID: alice, displayName: displayName, memberCount: members, senderPowerLevel: senderLevel)
    }

    let message = PushActions(notify: true)
    let oneToOne = PushActions(notify: true, sound: "default")
    let mention = PushActions(notify: true, highlight: true, sound: "default")
    let roomMention = PushActions(notify: true, highlight: true)
    let silent = PushActions()

    @Test("A message notifies; in a room of two it also plays the default sound")
    func messages() throws {
        let hello = try event(content: #"{"msgtype": "m.text", "body": "hello"}"#)
        #expect(evaluator.actions(for: hello, context: context()) == message)
        #expect(evaluator.actions(for: hello, context: context(members: 2)) == oneToOne)
        let encrypted = try event("m.room.encrypted", content: #"{"algorithm": "m.megolm.v1.aes-sha2"}"#)
        #expect(evaluator.actions(for: encrypted, context: context(members: 2)) == oneToOne)
        #expect(evaluator.actions(for: encrypted, context: context()) == message)
    }

    @Test("Notices, edits, reactions and other members' changes do not notify; an invite for the user does")
    func silentEvents() throws {
        let notice = try event(content: #"{"msgtype": "m.notice", "body": "alice: build green"}"#)
        #expect(evaluator.actions(for: notice, context: context()) == silent)
        let edit = try event(
            content:
                #"{"msgtype": "m.text", "body": "* hi alice", "m.relates_to": {"rel_type": "m.replace", "event_id": "$e"}}"#
        )
        #expect(evaluator.actions(for: edit, context: context()) == silent)
        let reaction = try event("m.reaction", content: #"{"m.relates_to": {"rel_type": "m.annotation", "key": "👍"}}"#)
        #expect(evaluator.actions(for: reaction, context: context()) == silent)
        let join = try event("m.room.member", stateKey: "@carol:example.org", content: #"{"membership": "join"}"#)
        #expect(evaluator.actions(for: join, context: context()) == silent)
        let invite = try event("m.room.member", stateKey: alice, content: #"{"membership": "invite"}"#)
        #expect(evaluator.actions(for: invite, context: context()) == PushActions(notify: true, sound: "default"))
        let unknown = try event("org.example.custom", content: "{}")
        #expect(evaluator.actions(for: unknown, context: context()) == nil, "no rule matches")
    }

    @Test("Legacy mentions: the user's localpart or display name as a word highlights, inside a word it does not")
    func legacyMentions() throws {
        for body in ["hi alice", "ALICE, look", "(alice)", "thanks Alice Liddell!", "alice"] {
            let text = try event(content: #"{"msgtype": "m.text", "body": "\#(body)"}"#)
            #expect(evaluator.actions(for: text, context: context()) == mention, "\(body)")
        }
        for body in ["malice aforethought", "alice_b", "alice2", "Liddell"] {
            let text = try event(content: #"{"msgtype": "m.text", "body": "\#(body)"}"#)
            #expect(evaluator.actions(for: text, context: context()) == message, "\(body)")
        }
        let noName = try event(content: #"{"msgtype": "m.text", "body": "Alice Liddell"}"#)
        #expect(
            evaluator.actions(for: noName, context: context(displayName: nil)) == mention, "the localpart still matches"
        )
    }

    @Test("Intentional mentions: m.mentions decides, and the legacy rules are skipped when it is present")
    func intentionalMentions() throws {
        let named = try event(
            content: #"{"msgtype": "m.text", "body": "see this", "m.mentions": {"user_ids": ["@alice:example.org"]}}"#)
        #expect(evaluator.actions(for: named, context: context()) == mention)
        let other = try event(
            content:
                #"{"msgtype": "m.text", "body": "alice said @room", "m.mentions": {"user_ids": ["@carol:example.org"]}}"#
        )
        #expect(evaluator.actions(for: other, context: context(senderLevel: 100)) == message)
        let room = try event(content: #"{"msgtype": "m.text", "body": "all", "m.mentions": {"room": true}}"#)
        #expect(evaluator.actions(for: room, context: context(senderLevel: 50)) == roomMention)
        #expect(evaluator.actions(for: room, context: context(senderLevel: 49)) == message, "needs the room level")
        let roomFalse = try event(content: #"{"msgtype": "m.text", "body": "all", "m.mentions": {"room": "true"}}"#)
        #expect(evaluator.actions(for: roomFalse, context: context(senderLevel: 100)) == message, "exact value only")
    }

    @Test("@room in the body highlights when the sender may notify the room (legacy rule)")
    func legacyRoomMention() throws {
        let all = try event(content: #"{"msgtype": "m.text", "body": "hey @room, meeting"}"#)
        #expect(evaluator.actions(for: all, context: context(senderLevel: 50)) == roomMention)
        #expect(evaluator.actions(for: all, context: context(senderLevel: 0)) == message)
        var raised = context(senderLevel: 50)
        raised.notificationLevels = ["room": 75]
        #expect(evaluator.actions(for: all, context: raised) == message)
        let word = try event(content: #"{"msgtype": "m.text", "body": "@roommate"}"#)
        #expect(evaluator.actions(for: word, context: context(senderLevel: 100)) == message)
    }

    @Test(
        "The account's own rules apply: a disabled default is skipped, the master rule silences all, keywords highlight"
    )
    func accountRules() throws {
        let json = try JSONValue(
            parsing: Array(
                #"""
                {"global": {
                  "override": [{"rule_id": ".m.rule.master", "enabled": true, "conditions": [], "actions": []}],
                  "content": [{"rule_id": "deploy", "pattern": "depl?y*", "enabled": true, "actions": ["notify", {"set_tweak": "highlight"}]}],
                  "room": [{"rule_id": "!quiet:example.org", "enabled": true, "actions": ["dont_notify"]}],
                  "sender": [{"rule_id": "@boss:example.org", "enabled": true, "actions": ["notify", {"set_tweak": "sound", "value": "boss"}]}],
                  "underride": [{"rule_id": ".m.rule.message", "enabled": true,
                    "conditions": [{"kind": "event_match", "key": "type", "pattern": "m.room.message"}], "actions": ["notify"]}]
                }}
                """#.utf8))
        var rules = PushRuleSet(parsing: json)
        let master = PushRuleEvaluator(rules)
        let text = try event(content: #"{"msgtype": "m.text", "body": "deployment today"}"#)
        #expect(master.actions(for: text, context: context()) == silent)

        rules.rules[0].isEnabled = false
        let own = PushRuleEvaluator(rules)
        #expect(own.actions(for: text, context: context()) == PushActions(notify: true, highlight: true))
        let quiet = try JSONValue(
            parsing: Array(
                #"{"type": "m.room.message", "sender": "@bob:example.org", "room_id": "!QUIET:example.org", "content": {"body": "x"}}"#
                    .utf8))
        #expect(own.actions(for: quiet, context: context()) == silent, "room rules match the room, case-insensitively")
        let boss = try event(sender: "@boss:example.org", content: #"{"msgtype": "m.text", "body": "x"}"#)
        #expect(own.actions(for: boss, context: context()) == PushActions(notify: true, sound: "boss"))
    }

    @Test("Unknown conditions and malformed rules never match; other rules still apply")
    func unknownConditions() throws {
        let json = try JSONValue(
            parsing: Array(
                #"""
                {"global": {"override": [
                  {"rule_id": "future", "enabled": true, "conditions": [{"kind": "org.example.future"}], "actions": ["notify"]},
                  {"rule_id": "broken", "enabled": true, "conditions": [{"kind": "event_match", "key": "type"}], "actions": ["notify"]},
                  {"rule_id": "float", "enabled": true, "conditions": [{"kind": "event_property_is", "key": "content.n", "value": 1.5}], "actions": ["notify"]},
                  {"enabled": true, "conditions": [], "actions": ["notify"]},
                  {"rule_id": "count", "enabled": true, "conditions": [{"kind": "room_member_count", "is": ">=3"}], "actions": ["notify", {"set_tweak": "highlight", "value": false}]}
                ]}}
                """#.utf8))
        let rules = PushRuleSet(parsing: json)
        #expect(rules.rules.map(\.id) == ["future", "broken", "float", "count"], "a rule without an ID is dropped")
        let evaluator = PushRuleEvaluator(rules)
        let text = try event(content: #"{"n": 1.5}"#)
        #expect(evaluator.actions(for: text, context: context(members: 3)) == message)
        #expect(evaluator.actions(for: text, context: context(members: 2)) == nil)
    }

    @Test(
        "Room member count comparisons",
        arguments: [
            ("2", 2, true), ("==2", 3, false), ("<3", 2, true), ("<3", 3, false), (">3", 4, true), ("<=2", 2, true),
            (">=10", 9, false), ("x", 2, false),
        ])
    func memberCount(rule: String, members: Int, matches: Bool) throws {
        let json = try JSONValue(
            parsing: Array(
                #"{"global": {"underride": [{"rule_id": "r", "conditions": [{"kind": "room_member_count", "is": "\#(rule)"}], "actions": ["notify"]}]}}"#
                    .utf8))
        let result = PushRuleEvaluator(PushRuleSet(parsing: json)).actions(
            for: try event(content: "{}"), context: context(members: members))
        #expect((result != nil) == matches)
    }

    @Test("Globs: * and ? and classes, case-insensitive, whole values or words of the body")
    func globs() {
        #expect(GlobPattern("m.room.*").matches("M.Room.Message"))
        #expect(!GlobPattern("m.room.*").matches("m.roomx"))
        #expect(GlobPattern("a?c").matches("abc") && !GlobPattern("a?c").matches("ac"))
        #expect(GlobPattern("[ab]x").matches("bx") && !GlobPattern("[ab]x").matches("cx"))
        #expect(GlobPattern("[!ab]x").matches("cx") && !GlobPattern("[!ab]x").matches("ax"))
        #expect(GlobPattern("[a-c]1").matches("B1") && !GlobPattern("[a-c]1").matches("d1"))
        #expect(GlobPattern("[x").matches("[x"), "an unclosed class is a plain bracket")
        #expect(GlobPattern("").matches("") && !GlobPattern("").matches(" "))
        let words = GlobPattern("cat*", wordBoundaries: true)
        #expect(words.matches("the catalogue is here") && words.matches("CAT") && !words.matches("concat"))
        #expect(GlobPattern("élan", wordBoundaries: true).matches("Quel ÉLAN !"))
        #expect(!GlobPattern("élan", wordBoundaries: true).matches("élans"))
        #expect(GlobPattern("bob", wordBoundaries: true).matches("hi bob"), "a word at the end")
    }

    @Test("Keys: dots split fields, a backslash escapes a dot")
    func keyPaths() throws {
        let json = try JSONValue(
            parsing: Array(
                #"{"global": {"override": [{"rule_id": "r", "conditions": [{"kind": "event_property_is", "key": "content.a\\.b.c", "value": 7}], "actions": ["notify"]}]}}"#
                    .utf8))
        let evaluator = PushRuleEvaluator(PushRuleSet(parsing: json))
        #expect(evaluator.actions(for: try event(content: #"{"a.b": {"c": 7}}"#), context: context()) == message)
        #expect(evaluator.actions(for: try event(content: #"{"a": {"b": {"c": 7}}}"#), context: context()) == nil)
    }
}
