import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaMeetings

/// Janus's HTTP API as the stage session speaks it, against scripted answers: ids, the
/// asynchronous answers of plugin messages (also one that overtakes its `ack`), the error codes
/// the machine decides on, and what the event stream says about the member's handle.
@Suite("Janus signalling")
struct JanusClientTests {
    static let server = "http://janus.test/janus"
    static let link = MediaServerLink(session: 11, handle: 22)
    static let join = MediaRoomJoin(
        MediaSessionDescriptor(
            serverURL: server, plugin: "janus.plugin.audiobridge", room: 42, token: Secret("canary-janus-token"),
            participantID: 7, display: "@me:example.org", expiresAt: Timestamp(millisecondsSince1970: 0)),
        muted: true)

    static func body(_ request: HTTPRequest) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any]) ?? [:]
    }

    /// A transport whose plugin messages are acknowledged, and whose event stream then answers
    /// the last one's transaction with `event` (its `transaction` filled in).
    static func asynchronous(_ event: String) -> ScriptedHTTPTransport {
        let transport = ScriptedHTTPTransport()
        let pending = Lock<String?>(nil)
        transport.on("POST", "/janus/11/22") { request in
            let transaction = body(request)["transaction"] as? String
            pending.withLock { $0 = transaction }
            return .json(200, #"{"janus": "ack", "transaction": "\#(transaction ?? "")"}"#)
        }
        transport.on("GET", "/janus/11") { _ in
            guard let transaction = pending.withLock({ $0.take() }) else {
                return .json(200, #"{"janus": "keepalive"}"#)
            }
            return .json(200, event.replacingOccurrences(of: "$T", with: transaction))
        }
        return transport
    }

    /// Polls the stream until `work` finishes.
    static func withPolling<T: Sendable>(
        _ client: JanusClient, _ work: @escaping @Sendable () async throws(MediaSessionError) -> T
    ) async -> Result<T, MediaSessionError> {
        let poller = Task {
            while !Task.isCancelled {
                _ = try? await client.poll(server, session: 11)
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        defer { poller.cancel() }
        do throws(MediaSessionError) { return .success(try await work()) } catch { return .failure(error) }
    }

    @Test("A session and a handle are created; their ids are Janus's")
    func createAndAttach() async throws {
        let transport = ScriptedHTTPTransport()
        transport.on("POST", "/janus") { _ in .json(200, #"{"janus": "success", "data": {"id": 11}}"#) }
        transport.on("POST", "/janus/11") { _ in .json(200, #"{"janus": "success", "data": {"id": 22}}"#) }
        let client = JanusClient(transport: transport)
        #expect(try await client.createSession(Self.server) == 11)
        #expect(try await client.attach(Self.server, session: 11, plugin: "janus.plugin.audiobridge") == 22)
        #expect(
            Self.body(transport.requests("POST", "/janus/11")[0])["plugin"] as? String == "janus.plugin.audiobridge")
    }

    @Test("A lost session (458) and a refused token (489) are the errors the machine decides on")
    func errors() async {
        let transport = ScriptedHTTPTransport()
        transport.on("POST", "/janus/11") { _ in
            .json(200, #"{"janus": "error", "error": {"code": 458, "reason": "No such session"}}"#)
        }
        let client = JanusClient(transport: transport)
        await #expect(throws: MediaSessionError.sessionLost) { try await client.keepalive(Self.server, session: 11) }

        let refusing = Self.asynchronous(
            #"{"janus": "event", "transaction": "$T", "plugindata": {"plugin": "janus.plugin.audiobridge", "data": {"audiobridge": "event", "error_code": 489, "error": "Unauthorized"}}}"#
        )
        let refused = JanusClient(transport: refusing)
        let outcome = await Self.withPolling(refused) { () async throws(MediaSessionError) in
            try await refused.join(Self.server, Self.link, Self.join)
        }
        #expect(outcome == .failure(.unauthorized))
    }

    @Test("A join waits for its event on the stream; its body carries the token, muted, room and participant")
    func join() async throws {
        let transport = Self.asynchronous(
            #"{"janus": "event", "transaction": "$T", "plugindata": {"plugin": "janus.plugin.audiobridge", "data": {"audiobridge": "joined", "room": 42, "id": 7}}}"#
        )
        let client = JanusClient(transport: transport)
        let outcome = await Self.withPolling(client) { () async throws(MediaSessionError) in
            try await client.join(Self.server, Self.link, Self.join)
        }
        #expect(outcome == .success(7))
        let body = try #require(Self.body(transport.requests("POST", "/janus/11/22")[0])["body"] as? [String: Any])
        #expect(body["request"] as? String == "join" && body["muted"] as? Bool == true)
        #expect(body["token"] as? String == "canary-janus-token" && body["room"] as? Int == 42)
        #expect(!transport.requests.map(\.description).joined().contains("canary"))
    }

    @Test("An answer that overtakes its ack (the stream read it first) is kept for the request")
    func answerBeforeAck() async throws {
        let transport = ScriptedHTTPTransport()
        let holder = Lock<JanusClient?>(nil)
        transport.on("POST", "/janus/11/22") { request in
            let transaction = Self.body(request)["transaction"] as? String ?? ""
            let event =
                #"{"janus": "event", "transaction": "\#(transaction)", "jsep": {"type": "answer", "sdp": "v=0 answer"}, "plugindata": {"data": {"audiobridge": "event", "result": "ok"}}}"#
            let message = try! JSONDecoder().decode(JanusMessage.self, from: Data(event.utf8))
            holder.withLock { $0 }?.dispatch(message)
            return .json(200, #"{"janus": "ack", "transaction": "\#(transaction)"}"#)
        }
        let client = JanusClient(transport: transport)
        holder.withLock { $0 = client }
        let answer = try await client.offer(Self.server, Self.link, SessionDescription(sdp: "v=0 offer"), muted: false)
        #expect(answer == SessionDescription(sdp: "v=0 answer"))
        let jsep = try #require(Self.body(transport.requests("POST", "/janus/11/22")[0])["jsep"] as? [String: Any])
        #expect(jsep["type"] as? String == "offer" && jsep["sdp"] as? String == "v=0 offer")
    }

    @Test(
        "The stream's hangup, timeout, audio media events and the member's own kick are server events; others' are not"
    )
    func serverEvents() throws {
        func message(_ json: String) throws -> JanusMessage {
            try JSONDecoder().decode(JanusMessage.self, from: Data(json.utf8))
        }
        #expect(try message(#"{"janus": "webrtcup", "sender": 22}"#).serverEvent(participantID: 7) == .webrtcUp)
        #expect(try message(#"{"janus": "hangup", "reason": "ICE failed"}"#).serverEvent(participantID: 7) == .hangup)
        #expect(try message(#"{"janus": "timeout"}"#).serverEvent(participantID: 7) == .sessionLost)
        let kicked = #"{"janus": "event", "plugindata": {"data": {"audiobridge": "event", "kicked": 7}}}"#
        #expect(try message(kicked).serverEvent(participantID: 7) == .removed)
        let other = #"{"janus": "event", "plugindata": {"data": {"audiobridge": "event", "leaving": 8}}}"#
        #expect(try message(other).serverEvent(participantID: 7) == nil)
        let ownLeave = #"{"janus": "event", "plugindata": {"data": {"audiobridge": "left", "leaving": "ok"}}}"#
        #expect(try message(ownLeave).serverEvent(participantID: 7) == nil)
        let stopped = #"{"janus": "media", "session_id": 11, "sender": 22, "type": "audio", "receiving": false}"#
        #expect(try message(stopped).serverEvent(participantID: 7) == .audioReceiving(false))
        let back = #"{"janus": "media", "sender": 22, "mid": "0", "type": "audio", "receiving": true}"#
        #expect(try message(back).serverEvent(participantID: 7) == .audioReceiving(true))
        let video = #"{"janus": "media", "sender": 22, "type": "video", "receiving": false}"#
        #expect(try message(video).serverEvent(participantID: 7) == nil)
        // A `type` or `receiving` of another shape elsewhere does not break the message.
        let odd = #"{"janus": "event", "type": 3, "receiving": "yes", "transaction": "t"}"#
        #expect(try message(odd).transaction == "t")
    }
}

extension JanusClientTests {
    @Test(
        "A message the room acknowledges but never answers fails with a timeout; nothing is left waiting",
        .timeLimit(.minutes(1)))
    func unansweredMessageTimesOut() async throws {
        let transport = ScriptedHTTPTransport()
        transport.on("POST", "/janus/11/22") { request in
            .json(200, #"{"janus": "ack", "transaction": "\#(Self.body(request)["transaction"] as? String ?? "")"}"#)
        }
        let client = JanusClient(transport: transport, answerTimeout: .milliseconds(50))
        let started = ContinuousClock.now
        await #expect(throws: MediaSessionError.transport(.timeout)) {
            try await client.configure(Self.server, Self.link, muted: true)
        }
        // The 50 ms deadline fired, not the 15 s default. The bound is that, not a speed: under
        // ThreadSanitizer on a loaded 2-core machine (every full `Scripts/test` run) the 50 ms
        // have taken 5 s.
        #expect(ContinuousClock.now - started < .seconds(12))
        // A late answer finds no waiter: it is kept aside (bounded), never resumes anything twice.
        let late = try JSONDecoder().decode(
            JanusMessage.self, from: Data(#"{"janus": "event", "transaction": "late"}"#.utf8))
        #expect(client.dispatch(late))
    }
}
