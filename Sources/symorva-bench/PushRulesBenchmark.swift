import SymorvaMatrix

/// `symorva-bench push-rules [--events N] [--runs N] [--keywords N]`: the device's push rule
/// evaluator (`PushRuleEvaluator`, what counts encrypted rooms' notifications) over the
/// specification's default rules plus `--keywords` keyword rules, on `--events` generated
/// events of every kind the rules look at (messages with and without `m.mentions`, the user's
/// name and display name as words and inside words, `@room`, notices, edits, reactions, member
/// events, encrypted events), already parsed as decryption leaves them. Each run evaluates them
/// all; the figure is ns per event (p50, p90, max over runs). Goal (issue 27): ≤ 5 µs.
struct PushRulesBenchmark: BenchmarkMode {
    let name = "push-rules"
    let argumentsSynopsis = "[--events N] [--runs N] [--keywords N]"
    let summary = "push rule evaluation per event with the default rules (+ N keywords), on the device"

    func run(arguments: [String]) async -> Int32 {
        var options = Options(arguments, known: ["events", "runs", "keywords"])
        let count = options.integer("events", default: 10_000)
        let runs = options.integer("runs", default: 50)
        let keywords = options.integer("keywords", default: 0, minimum: 0)
        guard options.problems.isEmpty else {
            print("usage: symorva-bench \(name) \(argumentsSynopsis)  (\(options.problems.joined(separator: "; ")))")
            return 2
        }
        let user = "@alice:example.org"
        var rules = PushRuleSet.specificationDefaults(for: user)
        let contentStart = rules.rules.firstIndex { $0.kind != .override } ?? rules.rules.count
        rules.rules.insert(
            contentsOf: (0..<keywords).map { index in
                PushRuleSet.Rule(
                    kind: .content, id: "keyword\(index)", isEnabled: true,
                    conditions: [
                        .eventMatch(
                            path: ["content", "body"], pattern: GlobPattern("keyword\(index)", wordBoundaries: true))
                    ],
                    actions: PushActions(notify: true, highlight: true))
            }, at: contentStart)
        let evaluator = PushRuleEvaluator(rules)
        let events = Self.events(count, user: user)
        let contexts = [
            PushContext(userID: user, displayName: "Alice Liddell", memberCount: 12, senderPowerLevel: 0),
            PushContext(userID: user, displayName: "Alice Liddell", memberCount: 2, senderPowerLevel: 100),
        ]
        var notified = 0
        var highlighted = 0
        for (index, event) in events.enumerated() {
            guard let actions = evaluator.actions(for: event, context: contexts[index % 2]) else { continue }
            if actions.notify { notified += 1 }
            if actions.highlight { highlighted += 1 }
        }
        print(
            "push-rules: \(rules.rules.count) rules (\(keywords) keywords), \(events.count) events: "
                + "\(notified) notify, \(highlighted) highlight")
        var perEvent: [Double] = []
        var sink = 0
        for _ in 0..<runs {
            let start = ContinuousClock.now
            for (index, event) in events.enumerated() {
                if evaluator.actions(for: event, context: contexts[index & 1])?.notify == true { sink &+= 1 }
            }
            perEvent.append((ContinuousClock.now - start).seconds * 1e9 / Double(events.count))
        }
        let sorted = perEvent.sorted()
        print(
            "  per event           p50 \(fixed(percentile(sorted, 0.5), 0)) ns  p90 \(fixed(percentile(sorted, 0.9), 0)) ns"
                + "  max \(fixed(sorted.last ?? .nan, 0)) ns  (\(runs) runs)  [\(sink % 2)]")
        return 0
    }

    /// `count` events of the kinds the default rules tell apart, in a fixed mix.
    static func events(_ count: Int, user: String) -> [JSONValue] {
        let bodies = [
            "hello there, see you at the meeting", "alice can you look at this?", "malice aforethought",
            "thanks Alice Liddell!", "@room the build is green",
            "a longer message about the deployment plan for "
                + "next week, with several clauses and no mention of anyone in particular at all",
        ]
        return (0..<count).map { index in
            let body = bodies[index % bodies.count]
            let text: String
            switch index % 10 {
            case 0: text = #"{"type": "m.room.message", "content": {"msgtype": "m.notice", "body": "\#(body)"}}"#
            case 1:
                text =
                    #"{"type": "m.room.message", "content": {"msgtype": "m.text", "body": "* \#(body)", "m.relates_to": {"rel_type": "m.replace", "event_id": "$e"}}}"#
            case 2:
                text =
                    #"{"type": "m.reaction", "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$e", "key": "👍"}}}"#
            case 3:
                text =
                    #"{"type": "m.room.member", "state_key": "@carol:example.org", "content": {"membership": "join"}}"#
            case 4:
                text =
                    #"{"type": "m.room.message", "content": {"msgtype": "m.text", "body": "\#(body)", "m.mentions": {"user_ids": ["\#(user)"]}}}"#
            case 5:
                text =
                    #"{"type": "m.room.message", "content": {"msgtype": "m.text", "body": "\#(body)", "m.mentions": {}}}"#
            case 6: text = #"{"type": "m.room.encrypted", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}"#
            default: text = #"{"type": "m.room.message", "content": {"msgtype": "m.text", "body": "\#(body)"}}"#
            }
            let event = "{\"sender\": \"@bob:example.org\", \"room_id\": \"!r:example.org\", " + text.dropFirst()
            return (try? JSONValue(parsing: Array(event.utf8))) ?? .null
        }
    }
}
