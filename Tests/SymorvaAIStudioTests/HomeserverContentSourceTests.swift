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
}
