import Foundation
import SymorvaAIStudio
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices
import SymorvaTesting
import Testing

/// The homeserver content source reads text messages only, pages forward from a conversation's
/// first message, and refuses what it cannot share (encrypted or missing messages) by ID.
@Suite("HomeserverContentSource")
struct HomeserverContentSourceTests {
    static let room = RoomID("!room:localhost")

    static func event(_ n: Int, type: String = "m.room.message", hasBody: Bool = true) -> String {
        let body: String? = hasBody ? "text \(n)" : nil
        let content = body.map { #"{"msgtype": "m.text", "body": "\#($0)"}"# } ?? "{}"
        return
            #"{"type": "\#(type)", "event_id": "$m\#(n)", "sender": "@bob:localhost", "origin_server_ts": \#(1000 + n), "content": \#(content)}"#
    }

    static func source(_ transport: ScriptedHTTPTransport) -> HomeserverContentSource {
        HomeserverContentSource(
            requester: FixedTokenMatrixRequester(
                homeserverURL: HomeserverURL("http://127.0.0.1:8008")!, userID: UserID("@alice:localhost"),
                accessToken: Secret("token"), transport: transport))
    }

    static func transport(encryptedSecondPage: Bool = false) -> ScriptedHTTPTransport {
        ScriptedHTTPTransport { request in
            let path = request.url.path
            let query = request.url.query ?? ""
            if path.hasSuffix("/event/$m1") { return .json(200, event(1)) }
            if path.hasSuffix("/event/$m2") { return .json(200, event(2, type: "m.room.encrypted", hasBody: false)) }
            if path.hasSuffix("/event/$m3") { return .json(200, event(3, hasBody: false)) }  // redacted
            if path.hasSuffix("/context/$m4") { return .json(200, #"{"event": \#(event(4)), "end": "t1"}"#) }
            if path.hasSuffix("/messages"), query.contains("from=t1") {
                return .json(
                    200,
                    #"{"chunk": [\#(event(5)), {"type": "m.reaction", "event_id": "$r", "sender": "@bob:localhost", "origin_server_ts": 1006}, \#(event(7))], "end": "t2"}"#
                )
            }
            if path.hasSuffix("/messages"), query.contains("from=t2") {
                let chunk = encryptedSecondPage ? event(8, type: "m.room.encrypted", hasBody: false) : event(8)
                return .json(200, #"{"chunk": [\#(chunk)], "end": "t3"}"#)
            }
            if path.hasSuffix("/messages") { return .json(200, #"{"chunk": [], "end": "t3"}"#) }
            return .json(404, #"{"errcode": "M_NOT_FOUND", "error": "no such event"}"#)
        }
    }

    @Test("Selected messages are read one by one")
    func selected() async throws {
        let items = try await Self.source(Self.transport()).items(
            in: Self.room, scope: .selectedMessages([EventID("$m1")]), since: nil, limit: 10)
        #expect(items.map(\.eventID) == [EventID("$m1")] && items[0].body == "text 1")
    }

    @Test(
        "An encrypted, redacted or unknown message is refused by its ID",
        arguments: ["$m2", "$m3", "$m9"])
    func refused(id: String) async throws {
        await #expect(throws: StudioError.contentUnavailable(EventID(id))) {
            _ = try await Self.source(Self.transport()).items(
                in: Self.room, scope: .selectedMessages([EventID(id)]), since: nil, limit: 10)
        }
    }

    @Test("A conversation is read forward from its first message; other event types are left out")
    func conversation() async throws {
        let items = try await Self.source(Self.transport()).items(
            in: Self.room, scope: .conversation(since: EventID("$m4")), since: MatrixTimestamp(milliseconds: 1004),
            limit: 10)
        #expect(items.map(\.eventID.rawValue) == ["$m4", "$m5", "$m7", "$m8"])
        let limited = try await Self.source(Self.transport()).items(
            in: Self.room, scope: .conversation(since: EventID("$m4")), since: MatrixTimestamp(milliseconds: 1004),
            limit: 2)
        #expect(limited.map(\.eventID.rawValue) == ["$m4", "$m5"])
    }

    @Test("An encrypted message in the conversation refuses the whole read")
    func encryptedInConversation() async throws {
        await #expect(throws: StudioError.contentUnavailable(EventID("$m8"))) {
            _ = try await Self.source(Self.transport(encryptedSecondPage: true)).items(
                in: Self.room, scope: .conversation(since: EventID("$m4")), since: MatrixTimestamp(milliseconds: 1004),
                limit: 10)
        }
    }

    @Test("The first message's timestamp bounds a conversation scope")
    func timestamp() async throws {
        #expect(
            try await Self.source(Self.transport()).timestamp(of: EventID("$m1"), in: Self.room)
                == MatrixTimestamp(milliseconds: 1001))
    }

    // MARK: - The text as the member sees it

    /// An event with its content (and `unsigned`) given as JSON.
    static func raw(_ n: Int, sender: String = "@bob:localhost", content: String, unsigned: String? = nil) -> String {
        let extra = unsigned.map { #", "unsigned": \#($0)"# } ?? ""
        return
            #"{"type": "m.room.message", "event_id": "$m\#(n)", "sender": "\#(sender)", "origin_server_ts": \#(1000 + n), "content": \#(content)\#(extra)}"#
    }

    /// `$m5` edited by its sender (the homeserver bundles the edit `$m6`, which also comes on its own
    /// in the page), `$m7` redacted, `$m8` "edited" by someone else (not an edit the member sees).
    static func editedTransport() -> ScriptedHTTPTransport {
        let edit =
            #"{"type": "m.room.message", "event_id": "$m6", "sender": "@bob:localhost", "origin_server_ts": 1006, "content": {"msgtype": "m.text", "body": "* text 5 as shown", "m.new_content": {"msgtype": "m.text", "body": "text 5 as shown"}, "m.relates_to": {"rel_type": "m.replace", "event_id": "$m5"}}}"#
        let forged =
            #"{"type": "m.room.message", "event_id": "$m9", "sender": "@mallory:localhost", "origin_server_ts": 1009, "content": {"msgtype": "m.text", "body": "* forged", "m.new_content": {"msgtype": "m.text", "body": "forged"}, "m.relates_to": {"rel_type": "m.replace", "event_id": "$m8"}}}"#
        let m5 = raw(
            5, content: #"{"msgtype": "m.text", "body": "text 5 original"}"#,
            unsigned: #"{"m.relations": {"m.replace": \#(edit)}}"#)
        let redaction = #"{"redacted_because": {"type": "m.room.redaction", "sender": "@bob:localhost"}}"#
        let m7 = raw(7, content: "{}", unsigned: redaction)
        let m8 = raw(
            8, content: #"{"msgtype": "m.text", "body": "text 8"}"#,
            unsigned: #"{"m.relations": {"m.replace": \#(forged)}}"#)
        let m10 = raw(10, content: #"{"msgtype": "m.text", "body": "text 10 redacted"}"#, unsigned: redaction)
        return ScriptedHTTPTransport { request in
            let path = request.url.path
            let query = request.url.query ?? ""
            if path.hasSuffix("/event/$m5") { return .json(200, m5) }
            if path.hasSuffix("/event/$m6") { return .json(200, edit) }
            if path.hasSuffix("/event/$m7") { return .json(200, m7) }
            if path.hasSuffix("/context/$m4") { return .json(200, #"{"event": \#(event(4)), "end": "t1"}"#) }
            if path.hasSuffix("/messages"), query.contains("from=t1") {
                return .json(200, #"{"chunk": [\#(m5), \#(edit), \#(m7), \#(m8), \#(forged), \#(m10)], "end": "t2"}"#)
            }
            if path.hasSuffix("/messages") { return .json(200, #"{"chunk": [], "end": "t2"}"#) }
            return .json(404, #"{"errcode": "M_NOT_FOUND", "error": "no such event"}"#)
        }
    }

    @Test("An edited message is sent as its latest edit's text, once; edits and redacted messages are not items")
    func editedConversation() async throws {
        let items = try await Self.source(Self.editedTransport()).items(
            in: Self.room, scope: .conversation(since: EventID("$m4")), since: MatrixTimestamp(milliseconds: 1004),
            limit: 10)
        #expect(items.map(\.eventID.rawValue) == ["$m4", "$m5", "$m8"])
        #expect(items.map(\.body) == ["text 4", "text 5 as shown", "text 8"])
    }

    @Test("A selected edited message is its latest text; a redacted one or an edit event is refused")
    func editedSelected() async throws {
        let items = try await Self.source(Self.editedTransport()).items(
            in: Self.room, scope: .selectedMessages([EventID("$m5")]), since: nil, limit: 10)
        #expect(items.map(\.body) == ["text 5 as shown"])
        for id in ["$m6", "$m7"] {
            await #expect(throws: StudioError.contentUnavailable(EventID(id))) {
                _ = try await Self.source(Self.editedTransport()).items(
                    in: Self.room, scope: .selectedMessages([EventID(id)]), since: nil, limit: 10)
            }
        }
    }
}
