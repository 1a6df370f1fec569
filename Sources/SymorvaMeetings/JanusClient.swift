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

/// The media server's HTTP API (Janus), as a stage member's session uses it: sessions, the
/// AudioBridge handle, messages with their asynchronous answers, trickle, keep-alive, the event
/// stream (long poll) and hang-up.
///
/// A message answered asynchronously (`ack`, then an `event` with the same transaction on the
/// session's event stream) waits here until ``dispatch(_:)`` hands it the event that
/// ``poll(session:)`` read; a waiter is registered before its request leaves, so an answer that
/// overtakes the `ack` is never lost. Requests carry the member's token only in the join's body:
/// nothing here logs a request or an answer.
package final class JanusClient: Sendable {
    private let transport: any HTTPTransport
    private let requestTimeout: Duration
    private let pollWait: Duration
    private let answerTimeout: Duration
    private let waiters = Lock<[String: CheckedContinuation<JanusMessage, Never>]>([:])
    private let early = Lock<[String: JanusMessage]>([:])

    /// A client over `transport`. A message acknowledged but not answered on the event stream
    /// within `answerTimeout` fails with a timeout (so a room that never answers a mute change
    /// leaves no request waiting forever).
    package init(
        transport: any HTTPTransport, requestTimeout: Duration = .seconds(10), pollWait: Duration = .seconds(30),
        answerTimeout: Duration = .seconds(15)
    ) {
        self.transport = transport
        self.requestTimeout = requestTimeout
        self.pollWait = pollWait
        self.answerTimeout = answerTimeout
    }

    // MARK: - Requests

    /// Creates a session; its ID.
    package func createSession(_ serverURL: String) async throws(MediaSessionError) -> UInt64 {
        let answer = try await post(try url(serverURL), JanusRequest(janus: "create"))
        guard let id = answer.data?.id else { throw .invalidResponse }
        return id
    }

    /// Attaches `plugin` in `session`; the handle's ID.
    package func attach(_ serverURL: String, session: UInt64, plugin: String) async throws(MediaSessionError) -> UInt64
    {
        var request = JanusRequest(janus: "attach")
        request.plugin = plugin
        let answer = try await post(try url(serverURL, session), request)
        guard let id = answer.data?.id else { throw .invalidResponse }
        return id
    }

    /// Joins the AudioBridge room; the participant ID the room confirms.
    package func join(_ serverURL: String, _ link: MediaServerLink, _ join: MediaRoomJoin)
        async throws(MediaSessionError)
        -> UInt64
    {
        var body = JanusBody(request: "join")
        body.room = join.room
        body.id = join.participantID
        body.display = join.display
        body.token = join.token.exposedValue
        body.muted = join.muted
        let event = try await message(serverURL, link, body: body)
        let data = event.plugindata?.data
        if let code = data?.errorCode { throw Self.error(pluginCode: code) }
        guard data?.audiobridge == "joined" else { throw .invalidResponse }
        return data?.id ?? join.participantID
    }

    /// Sends the offer with the mute state (`configure` with JSEP); the room's answer.
    package func offer(
        _ serverURL: String, _ link: MediaServerLink, _ offer: SessionDescription, muted: Bool
    ) async throws(MediaSessionError) -> SessionDescription {
        var body = JanusBody(request: "configure")
        body.muted = muted
        let event = try await message(serverURL, link, body: body, jsep: JanusJSEP(type: "offer", sdp: offer.sdp))
        if let code = event.plugindata?.data?.errorCode { throw Self.error(pluginCode: code) }
        guard let jsep = event.jsep, jsep.type == "answer" else { throw .invalidResponse }
        return SessionDescription(sdp: jsep.sdp)
    }

    /// Tells the room the member is (un)muted.
    package func configure(_ serverURL: String, _ link: MediaServerLink, muted: Bool) async throws(MediaSessionError) {
        var body = JanusBody(request: "configure")
        body.muted = muted
        let event = try await message(serverURL, link, body: body)
        if let code = event.plugindata?.data?.errorCode { throw Self.error(pluginCode: code) }
    }

    /// Trickles a local candidate, or (with `nil`) the end of gathering.
    package func trickle(_ serverURL: String, _ link: MediaServerLink, _ candidate: IceCandidate?)
        async throws(MediaSessionError)
    {
        var request = JanusRequest(janus: "trickle")
        request.candidate =
            candidate.map { JanusCandidate(candidate: $0.candidate, sdpMLineIndex: $0.mlineIndex) }
            ?? JanusCandidate(completed: true)
        _ = try await post(try url(serverURL, link.session, link.handle), request)
    }

    /// Keeps `session` alive.
    package func keepalive(_ serverURL: String, session: UInt64) async throws(MediaSessionError) {
        _ = try await post(try url(serverURL, session), JanusRequest(janus: "keepalive"))
    }

    /// Leaves the room, hangs the handle up and destroys the session; failures are ignored
    /// (the server times the session out anyway).
    package func hangUp(_ serverURL: String, _ link: MediaServerLink) async {
        if let handleURL = try? url(serverURL, link.session, link.handle) {
            var leave = JanusRequest(janus: "message")
            leave.body = JanusBody(request: "leave")
            _ = try? await post(handleURL, leave)
            _ = try? await post(handleURL, JanusRequest(janus: "hangup"))
        }
        await destroy(serverURL, session: link.session)
    }

    /// Destroys `session`, ignoring failures.
    package func destroy(_ serverURL: String, session: UInt64) async {
        guard let sessionURL = try? url(serverURL, session) else { return }
        _ = try? await post(sessionURL, JanusRequest(janus: "destroy"))
    }

    // MARK: - The event stream

    /// Reads the session's next events (a long poll of up to 30 s); answers to messages are
    /// handed to their waiters, the rest returned.
    package func poll(_ serverURL: String, session: UInt64) async throws(MediaSessionError) -> [JanusMessage] {
        var components = URLComponents(url: try url(serverURL, session), resolvingAgainstBaseURL: false)
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
        var rest: [JanusMessage] = []
        for message in messages {
            if message.janus == "error", message.error?.code == 458 { throw .sessionLost }
            if !dispatch(message) { rest.append(message) }
        }
        return rest
    }

    /// Hands `message` to the waiter of its transaction; whether there was one (or may be one:
    /// an answer that overtook its `ack` is kept for it).
    @discardableResult
    package func dispatch(_ message: JanusMessage) -> Bool {
        guard message.janus == "event", let transaction = message.transaction else { return false }
        let waiter: CheckedContinuation<JanusMessage, Never>? = waiters.withLock { waiters in
            if let waiter = waiters.removeValue(forKey: transaction) { return waiter }
            early.withLock { early in
                // Answers nobody waits for any more (a cancelled request) must not pile up.
                if early.count >= 32 { early.removeAll() }
                early[transaction] = message
            }
            return nil
        }
        waiter?.resume(returning: message)
        return true
    }

    // MARK: - Plumbing

    /// Sends a plugin message and returns its answer: the synchronous one, or the event with its
    /// transaction that the event stream delivers.
    private func message(
        _ serverURL: String, _ link: MediaServerLink, body: JanusBody, jsep: JanusJSEP? = nil
    ) async throws(MediaSessionError) -> JanusMessage {
        var request = JanusRequest(janus: "message")
        request.body = body
        request.jsep = jsep
        let transaction = request.transaction
        let answer = try await post(try url(serverURL, link.session, link.handle), request)
        if answer.janus == "success" { return answer }
        guard answer.janus == "ack" else { throw .invalidResponse }
        return try await awaitEvent(transaction)
    }

    private func awaitEvent(_ transaction: String) async throws(MediaSessionError) -> JanusMessage {
        if let ready = early.withLock({ $0.removeValue(forKey: transaction) }) { return ready }
        let deadline = Task { [self] in
            guard (try? await Task.sleep(for: answerTimeout)) != nil else { return }
            // The waiter, or (not registered yet) a timeout it finds when it registers.
            let waiter: CheckedContinuation<JanusMessage, Never>? = waiters.withLock { waiters in
                if let waiter = waiters.removeValue(forKey: transaction) { return waiter }
                early.withLock { $0[transaction] = JanusMessage(janus: "cancelled") }
                return nil
            }
            waiter?.resume(returning: JanusMessage(janus: "cancelled"))
        }
        defer { deadline.cancel() }
        let message: JanusMessage? = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<JanusMessage, Never>) in
                // The early check and the registration are one step under the waiters' lock, so
                // an answer dispatched in between is never lost.
                let ready: JanusMessage? = waiters.withLock { waiters in
                    if let ready = early.withLock({ $0.removeValue(forKey: transaction) }) { return ready }
                    if Task.isCancelled { return JanusMessage(janus: "cancelled") }
                    waiters[transaction] = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            waiters.withLock { $0.removeValue(forKey: transaction) }?.resume(
                returning: JanusMessage(janus: "cancelled"))
        }
        guard let message, message.janus != "cancelled" else { throw .transport(.timeout) }
        return message
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
    var transaction = String(UInt64.random(in: 1...UInt64.max), radix: 36)
    var plugin: String?
    var body: JanusBody?
    var jsep: JanusJSEP?
    var candidate: JanusCandidate?

    init(janus: String) { self.janus = janus }
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

    init(janus: String) { self.janus = janus }

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

    /// What this message, read on the stream, says about the member's handle, if anything.
    func serverEvent(participantID: UInt64) -> MediaServerEvent? {
        switch janus {
        case "webrtcup": return .webrtcUp
        case "hangup", "detached": return .hangup
        case "timeout": return .sessionLost
        case "media":
            guard type == "audio", let receiving else { return nil }
            return .audioReceiving(receiving)
        case "event":
            guard let body = plugindata?.data else { return nil }
            if body.kicked == participantID || body.leaving == participantID { return .removed }
            return nil
        default: return nil
        }
    }
}
