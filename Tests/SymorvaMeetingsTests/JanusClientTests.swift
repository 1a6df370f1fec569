import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaMeetings

/// Janus's HTTP API as the stage session speaks it on the session the services joined, against
/// scripted answers: a plugin message goes out under its machine's transaction and nothing waits
/// for its answer, which the event stream reads and hands to the machine as an event; the error
/// codes the machine decides on; what the stream says about the member's handle.
@Suite("Janus signalling")
struct JanusClientTests {
    static let server = "http://janus.test/janus"
    static let link = MediaServerLink(serverURL: server, session: 11, handle: 22, participantID: 7)

    static func body(_ request: HTTPRequest) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any]) ?? [:]
    }

    static func message(_ json: String) throws -> JanusMessage {
        try JSONDecoder().decode(JanusMessage.self, from: Data(json.utf8))
    }

    @Test(
        "The offer leaves under the machine's transaction with its JSEP and the mute state; the ack is all it waits for"
    )
    func offer() async throws {
        let transport = ScriptedHTTPTransport()
        transport.on("POST", "/janus/11/22") { request in
            .json(200, #"{"janus": "ack", "transaction": "\#(Self.body(request)["transaction"] as? String ?? "")"}"#)
        }
        let client = JanusClient(transport: transport)
        let reply = try await client.offer(
            Self.link, SessionDescription(sdp: "v=0 offer"), muted: true, transaction: "offer-3")
        #expect(reply == nil)
        let sent = Self.body(transport.requests("POST", "/janus/11/22")[0])
        #expect(sent["transaction"] as? String == "offer-3")
        let body = try #require(sent["body"] as? [String: Any])
        #expect(body["request"] as? String == "configure" && body["muted"] as? Bool == true)
        #expect(body["token"] == nil && body["id"] == nil)  // the member joins nothing itself
        let jsep = try #require(sent["jsep"] as? [String: Any])
        #expect(jsep["type"] as? String == "offer" && jsep["sdp"] as? String == "v=0 offer")
    }

    @Test("The room's answer read on the stream is the machine's event for the offer's transaction, whenever it comes")
    func answerIsAnEvent() async throws {
        let transport = ScriptedHTTPTransport()
        transport.on("GET", "/janus/11") { _ in
            .json(
                200,
                #"[{"janus": "event", "transaction": "offer-3", "jsep": {"type": "answer", "sdp": "v=0 answer"}, "plugindata": {"data": {"audiobridge": "event", "result": "ok"}}}, {"janus": "event", "transaction": "mute", "plugindata": {"data": {"audiobridge": "event", "error_code": 489, "error": "Unauthorized"}}}]"#
            )
        }
        let events = try await JanusClient(transport: transport).poll(Self.link).map {
            $0.event(participantID: 7)
        }
        #expect(
            events == [
                .serverReplied(transaction: "offer-3", .description(SessionDescription(sdp: "v=0 answer"))),
                .serverReplied(transaction: "mute", .failed(.unauthorized)),
            ])
    }

    @Test(
        "A lost session (458) on a request or on the stream, and the AudioBridge codes, are the errors the machine decides on"
    )
    func errors() async throws {
        let transport = ScriptedHTTPTransport()
        transport.on("POST", "/janus/11") { _ in
            .json(200, #"{"janus": "error", "error": {"code": 458, "reason": "No such session"}}"#)
        }
        transport.on("GET", "/janus/11") { _ in
            .json(200, #"{"janus": "error", "error": {"code": 458, "reason": "No such session"}}"#)
        }
        let client = JanusClient(transport: transport)
        await #expect(throws: MediaSessionError.sessionLost) { try await client.keepalive(Self.link) }
        await #expect(throws: MediaSessionError.sessionLost) { _ = try await client.poll(Self.link) }
        #expect(JanusClient.error(pluginCode: 485) == .roomUnavailable)
        #expect(JanusClient.error(pluginCode: 489) == .unauthorized)
        #expect(JanusClient.error(janusCode: 459) == .sessionLost)
        let refused = try Self.message(
            #"{"janus": "event", "transaction": "offer-1", "plugindata": {"data": {"error_code": 485}}}"#)
        #expect(refused.event(participantID: 7) == .serverReplied(transaction: "offer-1", .failed(.roomUnavailable)))
    }

    @Test(
        "The stream's hangup, timeout, audio media events and the member's own kick are server events; others' are not"
    )
    func serverEvents() throws {
        let message = Self.message
        #expect(try message(#"{"janus": "webrtcup", "sender": 22}"#).event(participantID: 7) == .serverEvent(.webrtcUp))
        #expect(
            try message(#"{"janus": "hangup", "reason": "ICE failed"}"#).event(participantID: 7)
                == .serverEvent(.hangup))
        #expect(try message(#"{"janus": "timeout"}"#).event(participantID: 7) == .serverEvent(.sessionLost))
        let kicked = #"{"janus": "event", "plugindata": {"data": {"audiobridge": "event", "kicked": 7}}}"#
        #expect(try message(kicked).event(participantID: 7) == .serverEvent(.removed))
        let other = #"{"janus": "event", "plugindata": {"data": {"audiobridge": "event", "leaving": 8}}}"#
        #expect(try message(other).event(participantID: 7) == nil)
        let stopped = #"{"janus": "media", "session_id": 11, "sender": 22, "type": "audio", "receiving": false}"#
        #expect(try message(stopped).event(participantID: 7) == .serverEvent(.audioReceiving(false)))
        let back = #"{"janus": "media", "sender": 22, "mid": "0", "type": "audio", "receiving": true}"#
        #expect(try message(back).event(participantID: 7) == .serverEvent(.audioReceiving(true)))
        let video = #"{"janus": "media", "sender": 22, "type": "video", "receiving": false}"#
        #expect(try message(video).event(participantID: 7) == nil)
        // A `type` or `receiving` of another shape elsewhere does not break the message.
        let odd = #"{"janus": "event", "type": 3, "receiving": "yes", "transaction": "t"}"#
        #expect(try message(odd).transaction == "t")
    }

    @Test("A mute change is sent and not waited for; a failure of it changes nothing")
    func configure() async throws {
        let transport = ScriptedHTTPTransport()
        transport.on("POST", "/janus/11/22") { _ in .failure(.timedOut) }
        let client = JanusClient(transport: transport)
        await #expect(throws: MediaSessionError.transport(.timeout)) {
            try await client.configure(Self.link, muted: false)
        }
        let body = try #require(Self.body(transport.requests("POST", "/janus/11/22")[0])["body"] as? [String: Any])
        #expect(body["request"] as? String == "configure" && body["muted"] as? Bool == false)
    }
}
