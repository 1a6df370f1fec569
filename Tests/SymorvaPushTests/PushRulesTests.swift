import SymorvaHTTP
import SymorvaMachines
import SymorvaPush
import SymorvaTesting
import Testing

/// The account's push rules as the product reads them, keyword and rule edits, and what is
/// refused before anything is sent.
@Suite("Push rules")
struct PushRulesTests {
    static func client(rules: String) -> (PushClient, ScriptedHTTPTransport) {
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on("GET", pathPrefix: "/_matrix/client/v3/pushrules") { _ in .json(200, rules) }
        transport.on("PUT", pathPrefix: "/_matrix/client/v3/pushrules/global/") { _ in .json(200, "{}") }
        transport.on("DELETE", pathPrefix: "/_matrix/client/v3/pushrules/global/") { _ in .json(200, "{}") }
        return (PushFixtures.client(transport), transport)
    }

    @Test("Synapse's default ruleset reads in evaluation order, each rule with what it does")
    func defaultRuleset() async throws {
        let (push, _) = Self.client(
            rules: PushRulesJSON.synapseDefaults(keywords: ["budget", "vote"], mutedRooms: ["!quiet:localhost"]))
        let rules = try await push.rules()
        // Kinds in the homeserver's order: override, content, room, sender, underride.
        let order: [Int] = rules.map { rule in PushRule.Kind.allCases.firstIndex(of: rule.kind) ?? -1 }
        #expect(order == order.sorted())
        #expect(rules.count == 21)  // 12 override, 3 content, 1 room, 5 underride
        #expect(
            rules.first
                == PushRule(
                    kind: .override, ruleID: ".m.rule.master", isEnabled: false, isDefault: true, pattern: nil,
                    notifies: false))
        let byID = Dictionary(uniqueKeysWithValues: rules.map { ($0.ruleID, $0) })
        // `dont_notify` and empty actions do not notify; `notify` with tweaks does.
        #expect(byID[".m.rule.suppress_notices"]?.notifies == false)
        #expect(byID[".m.rule.reaction"]?.notifies == false)
        #expect(byID[".m.rule.contains_display_name"]?.notifies == true)
        #expect(byID[".m.rule.call"]?.notifies == true)
        #expect(
            byID["budget"]
                == PushRule(
                    kind: .content, ruleID: "budget", isEnabled: true, isDefault: false, pattern: "budget",
                    notifies: true))
        #expect(
            byID["!quiet:localhost"]
                == PushRule(
                    kind: .room, ruleID: "!quiet:localhost", isEnabled: true, isDefault: false, pattern: nil,
                    notifies: false))
        #expect(rules.last?.ruleID == ".m.rule.encrypted")
    }

    @Test("Kinds the server leaves out are empty; an answer that is not a ruleset is malformed")
    func sparseAndMalformed() async throws {
        let (empty, _) = Self.client(rules: #"{"global": {}}"#)
        #expect(try await empty.rules().isEmpty)
        let (wrong, _) = Self.client(rules: #"{"global": {"override": [{"rule_id": 3}]}}"#)
        await #expect(throws: PushError.malformedResponse) { try await wrong.rules() }
        let (notJSON, _) = Self.client(rules: "<html>")
        await #expect(throws: PushError.malformedResponse) { try await notJSON.rules() }
    }

    @Test("A keyword is trimmed and becomes its own rule's path; removing deletes that rule")
    func keywordPaths() async throws {
        let (push, transport) = Self.client(rules: PushRulesJSON.synapseDefaults())
        try await push.addKeyword("  budget\n")
        try await push.removeKeyword("budget")
        #expect(transport.requests("PUT", "/_matrix/client/v3/pushrules/global/content/budget").count == 1)
        #expect(transport.requests("DELETE", "/_matrix/client/v3/pushrules/global/content/budget").count == 1)
    }

    @Test(
        "Keywords that cannot be a rule ID are refused before anything is sent",
        arguments: ["", "   ", "a/b", "a\\b", ".m.rule.master", String(repeating: "k", count: 101)])
    func invalidKeywords(keyword: String) async {
        let (push, transport) = Self.client(rules: PushRulesJSON.synapseDefaults())
        await #expect(throws: PushError.invalidInput("keyword")) { try await push.addKeyword(keyword) }
        await #expect(throws: PushError.invalidInput("keyword")) { try await push.removeKeyword(keyword) }
        #expect(transport.requests.isEmpty)
    }

    @Test("A rule ID that is no path segment is refused; a server-default rule is switched at its path")
    func enablingRules() async throws {
        let (push, transport) = Self.client(rules: PushRulesJSON.synapseDefaults())
        for ruleID in ["", "a/b", "a\\b"] {
            await #expect(throws: PushError.invalidInput("ruleID")) {
                try await push.setRuleEnabled(true, kind: .override, ruleID: ruleID)
            }
        }
        #expect(transport.requests.isEmpty)
        try await push.setRuleEnabled(true, kind: .override, ruleID: ".m.rule.master")
        let sent = try #require(
            transport.requests("PUT", "/_matrix/client/v3/pushrules/global/override/.m.rule.master/enabled").first)
        #expect(
            String(decoding: sent.body, as: UTF8.self).replacingOccurrences(of: " ", with: "") == #"{"enabled":true}"#)
    }

    @Test("A refused rule edit is the typed error: not found, forbidden, rate limited, server failure")
    func refusedEdits() async {
        let answers: [(Result<HTTPResponse, TransportError>, PushError)] = [
            (.json(404, #"{"errcode": "M_NOT_FOUND", "error": "no rule"}"#), .notFound),
            (.json(403, #"{"errcode": "M_FORBIDDEN", "error": "no"}"#), .forbidden),
            (
                .json(429, #"{"errcode": "M_LIMIT_EXCEEDED", "retry_after_ms": 2000}"#),
                .rateLimited(retryAfter: .seconds(2))
            ),
            (.json(500, #"{"errcode": "M_UNKNOWN"}"#), .transport(.serverError(status: 500))),
            (.failure(.timedOut), .transport(.timeout)),
        ]
        for (answer, expected) in answers {
            let transport = ScriptedHTTPTransport.communityServices()
            transport.on("PUT", pathPrefix: "/_matrix/client/v3/pushrules/global/") { _ in answer }
            let push = PushFixtures.client(transport)
            await #expect(throws: expected) { try await push.addKeyword("budget") }
        }
    }
}
