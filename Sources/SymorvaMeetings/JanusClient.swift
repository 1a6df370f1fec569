import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The media server's HTTP API (Janus), as a stage member's session uses it on the session and
/// AudioBridge handle the community services joined for the member: the offer and mute changes,
/// trickle, keep-alive, the event stream (long poll) and hang-up.
///
/// Nothing waits here for an asynchronous answer: a plugin message is sent under the transaction
/// its machine chose and Janus acknowledges it; its answer (an `event` with that transaction)
/// arrives on the event stream, which ``poll(_:)`` reads and the interpreter hands to the machine
/// as an event (``JanusMessage/event(participantID:)``). The member holds no token; nothing here
/// logs a request or an answer.
package struct JanusClient: Sendable {
    private let transport: any HTTPTransport
    private let requestTimeout: Duration
    private let pollWait: Duration

    /// A client over `transport`.
    package init(
        transport: any HTTPTransport, requestTimeout: Duration = .seconds(10), pollWait: Duration = .seconds(30)
    ) {
        self.transport = transport
        self.requestTimeout = requestTimeout
        self.pollWait = pollWait
    }

    // MARK: - Requests

    /// Sends the offer with the mute state (`configure` with JSEP) under `transaction`. `nil` once
    /// Janus acknowledged it (the room's answer comes on the event stream), or the reply when
    /// Janus answered at once.
    package func offer(
        _ link: MediaServerLink, _ offer: SessionDescription, muted: Bool, transaction: String
    ) async throws(MediaSessionError) -> MediaServerReply? {
        var body = JanusBody(request: "configure")
        body.muted = muted
        return try await message(
            link, body: body, jsep: JanusJSEP(type: "offer", sdp: offer.sdp), transaction: transaction)
    }

    /// Tells the room the member is (un)muted; its reply is not waited for.
    package func configure(_ link: MediaServerLink, muted: Bool) async throws(MediaSessionError) {
        var body = JanusBody(request: "configure")
        body.muted = muted
        _ = try await message(link, body: body, transaction: JanusRequest.newTransaction())
    }

    /// Trickles a local candidate, or (with `nil`) the end of gathering.
    package func trickle(_ link: MediaServerLink, _ candidate: IceCandidate?) async throws(MediaSessionError) {
        var request = JanusRequest(janus: "trickle")
        request.candidate =
            candidate.map { JanusCandidate(candidate: $0.candidate, sdpMLineIndex: $0.mlineIndex) }
            ?? JanusCandidate(completed: true)
        _ = try await post(try url(link.serverURL, link.session, link.handle), request)
    }

    /// Keeps the link's session alive.
    package func keepalive(_ link: MediaServerLink) async throws(MediaSessionError) {
        _ = try await post(try url(link.serverURL, link.session), JanusRequest(janus: "keepalive"))
    }

    /// Leaves the room, hangs the handle up and destroys the session; failures are ignored
    /// (the server times the session out anyway).
    package func hangUp(_ link: MediaServerLink) async {
        if let handleURL = try? url(link.serverURL, link.session, link.handle) {
            var leave = JanusRequest(janus: "message")
            leave.body = JanusBody(request: "leave")
            _ = try? await post(handleURL, leave)
            _ = try? await post(handleURL, JanusRequest(janus: "hangup"))
        }
        if let sessionURL = try? url(link.serverURL, link.session) {
            _ = try? await post(sessionURL, JanusRequest(janus: "destroy"))
        }
    }

    // MARK: - The event stream

    /// Reads the session's next events (a long poll of up to 30 s), in order.
    package func poll(_ link: MediaServerLink) async throws(MediaSessionError) -> [JanusMessage] {
        var components = URLComponents(url: try url(link.serverURL, link.session), resolvingAgainstBaseURL: false)
        components?.queryItems = [URLQueryItem(name: "maxev", value: "10")]
        guard let pollURL = components?.url else { throw .invalidResponse }
        let response: HTTPResponse
        do {
            response = try await transport.send(
                HTTPRequest(method: .get, url: pollURL, timeout: pollWait + requestTimeout))
        } catch {
            throw Self.error(transport: error)
        }
        guard response.isSuccess else { throw .transport(.serverError(status: response.status)) }
        let messages: [JanusMessage]
        if let list = WireJSON.decodeIfValid([JanusMessage].self, from: response.body) {
            messages = list
        } else if let one = WireJSON.decodeIfValid(JanusMessage.self, from: response.body) {
            messages = [one]
        } else {
            throw .invalidResponse
        }
        if messages.contains(where: { $0.janus == "error" && $0.error?.code == 458 }) { throw .sessionLost }
        return messages
    }

    // MARK: - Plumbing

    /// Sends a plugin message under `transaction`: `nil` when acknowledged (the answer comes on
    /// the event stream), the reply when Janus answered at once.
    private func message(
        _ link: MediaServerLink, body: JanusBody, jsep: JanusJSEP? = nil, transaction: String
    ) async throws(MediaSessionError) -> MediaServerReply? {
        var request = JanusRequest(janus: "message")
        request.transaction = transaction
        request.body = body
        request.jsep = jsep
        let answer = try await post(try url(link.serverURL, link.session, link.handle), request)
        switch answer.janus {
        case "ack": return nil
        case "success": return answer.reply
        default: throw .invalidResponse
        }
    }

    private func post(_ url: URL, _ request: JanusRequest) async throws(MediaSessionError) -> JanusMessage {
        let body: [UInt8]
        do throws(WireJSONError) { body = try WireJSON.encode(request) } catch { throw .invalidResponse }
        var http = HTTPRequest.json(.post, url: url, body: body)
        http.timeout = requestTimeout
        let response: HTTPResponse
        do { response = try await transport.send(http) } catch { throw Self.error(transport: error) }
        guard response.isSuccess else { throw .transport(.serverError(status: response.status)) }
        guard let answer = WireJSON.decodeIfValid(JanusMessage.self, from: response.body) else {
            throw .invalidResponse
        }
        if answer.janus == "error" { throw Self.error(janusCode: answer.error?.code ?? 0) }
        return answer
    }

    private func url(_ serverURL: String, _ path: UInt64...) throws(MediaSessionError) -> URL {
        guard var url = URL(string: serverURL) else { throw .invalidResponse }
        for component in path { url.appendPathComponent(String(component)) }
        return url
    }

    /// Janus core error codes: 458 no such session, 459 no such handle.
    static func error(janusCode code: Int) -> MediaSessionError {
        switch code {
        case 458, 459: .sessionLost
        default: .refused(code: code)
        }
    }

    /// AudioBridge error codes: 485 no such room, 489 unauthorized (token not allowed), 490 forbidden.
    static func error(pluginCode code: Int) -> MediaSessionError {
        switch code {
        case 485: .roomUnavailable
        case 489, 490: .unauthorized
        default: .refused(code: code)
        }
    }

    /// A failed exchange with Janus, classified as every other exchange of the SDK
    /// (``/SymorvaMachines/TransportProblem/init(_:)``).
    static func error(transport error: TransportError) -> MediaSessionError {
        .transport(TransportProblem(error))
    }
}

// MARK: - Wire

/// A request to the Janus API.
struct JanusRequest: Encodable {
    var janus: String
    var transaction = JanusRequest.newTransaction()
    var plugin: String?
    var body: JanusBody?
    var jsep: JanusJSEP?
    var candidate: JanusCandidate?

    init(janus: String) { self.janus = janus }

    /// A transaction for a request whose answer nobody matches.
    static func newTransaction() -> String { String(UInt64.random(in: 1...UInt64.max), radix: 36) }
}

/// An AudioBridge request body.
struct JanusBody: Encodable {
    var request: String
    var room: UInt64?
    var id: UInt64?
    var display: String?
    var token: String?
    var muted: Bool?

    init(request: String) { self.request = request }
}

/// A session description on the wire.
struct JanusJSEP: Codable {
    var type: String
    var sdp: String
}

/// A trickled candidate, or the end of gathering.
struct JanusCandidate: Encodable {
    var candidate: String?
    var sdpMLineIndex: UInt32?
    var completed: Bool?

    init(candidate: String, sdpMLineIndex: UInt32) {
        self.candidate = candidate
        self.sdpMLineIndex = sdpMLineIndex
    }

    init(completed: Bool) { self.completed = completed }
}

/// Anything Janus sends: an answer, an event on the stream.
package struct JanusMessage: Decodable, Sendable {
    struct Data: Decodable, Sendable { var id: UInt64? }
    struct Failure: Decodable, Sendable { var code: Int? }
    struct PluginData: Decodable, Sendable {
        struct Body: Decodable, Sendable {
            var audiobridge: String?
            var errorCode: Int?
            var id: UInt64?
            var kicked: UInt64?
            var leaving: UInt64?

            enum CodingKeys: String, CodingKey {
                case audiobridge, id, kicked, leaving
                case errorCode = "error_code"
            }

            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                audiobridge = try? container.decodeIfPresent(String.self, forKey: .audiobridge)
                errorCode = try? container.decodeIfPresent(Int.self, forKey: .errorCode)
                id = try? container.decodeIfPresent(UInt64.self, forKey: .id)
                kicked = try? container.decodeIfPresent(UInt64.self, forKey: .kicked)
                // `leaving` is a participant ID, or "ok" in the answer to one's own leave.
                leaving = try? container.decodeIfPresent(UInt64.self, forKey: .leaving)
            }
        }
        var data: Body?
    }

    var janus: String
    var transaction: String?
    var sender: UInt64?
    var data: Data?
    var error: Failure?
    var plugindata: PluginData?
    var jsep: JanusJSEP?
    /// A `media` event's kind of media and whether it arrives.
    var type: String?
    var receiving: Bool?

    enum CodingKeys: String, CodingKey {
        case janus, transaction, sender, data, error, plugindata, jsep, type, receiving
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        janus = try container.decode(String.self, forKey: .janus)
        transaction = try container.decodeIfPresent(String.self, forKey: .transaction)
        sender = try container.decodeIfPresent(UInt64.self, forKey: .sender)
        data = try container.decodeIfPresent(Data.self, forKey: .data)
        error = try container.decodeIfPresent(Failure.self, forKey: .error)
        plugindata = try container.decodeIfPresent(PluginData.self, forKey: .plugindata)
        jsep = try container.decodeIfPresent(JanusJSEP.self, forKey: .jsep)
        // Only `media` events have these; elsewhere a field of that name means something else.
        type = try? container.decodeIfPresent(String.self, forKey: .type)
        receiving = try? container.decodeIfPresent(Bool.self, forKey: .receiving)
    }

    /// The plugin's reply in this message: the room's answer to an offer, a refusal, or done.
    var reply: MediaServerReply {
        if let code = plugindata?.data?.errorCode { return .failed(JanusClient.error(pluginCode: code)) }
        if let jsep, jsep.type == "answer" { return .description(SessionDescription(sdp: jsep.sdp)) }
        return .accepted
    }

    /// This message, read on the stream, as an event of the member's media session: a reply to one
    /// of its requests (by transaction), or what it says about the member's handle; `nil` for the
    /// rest (other participants joining, talking…).
    package func event(participantID: UInt64) -> MediaSessionMachine.Event? {
        switch janus {
        case "webrtcup": return .serverEvent(.webrtcUp)
        case "hangup", "detached": return .serverEvent(.hangup)
        case "timeout": return .serverEvent(.sessionLost)
        case "media":
            guard type == "audio", let receiving else { return nil }
            return .serverEvent(.audioReceiving(receiving))
        case "event":
            if let transaction { return .serverReplied(transaction: transaction, reply) }
            guard let body = plugindata?.data else { return nil }
            if body.kicked == participantID || body.leaving == participantID { return .serverEvent(.removed) }
            return nil
        default: return nil
        }
    }
}
