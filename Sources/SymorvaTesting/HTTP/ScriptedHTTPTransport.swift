import Foundation
import SymorvaHTTP
import SymorvaRuntime

/// An ``/SymorvaHTTP/HTTPTransport`` that answers from a script keyed by `METHOD path` and records what was
/// sent: the HTTP double of unit tests and benchmarks (the package has no other).
///
/// It stands in for the wire so that an interpreter's or a client's *mapping* of answers can be
/// tested without a server; integration tests talk to the real servers instead. A request is
/// answered by the route for its exact `METHOD path`, else by the route with the longest
/// matching path prefix (``on(_:pathPrefix:_:)``: paths that carry IDs), else by the fallback
/// answer: by default `404` with an `M_NOT_FOUND` body. An answer may suspend
/// (``held(by:_:)``), to keep a request on the wire until the test lets it through.
///
/// ```swift
/// let transport = ScriptedHTTPTransport()
/// transport.on("GET", "/_symorva/v1/wallet/balances") { _ in .json(200, #"{"balances": []}"#) }
/// transport.on("POST", "/submit", ScriptedHTTPTransport.sequence([.failure(.timedOut), .json(200, "{}")]))
/// transport.on("PUT", pathPrefix: "/_matrix/client/v3/rooms/") { _ in .json(200, #"{"event_id": "$1"}"#) }
/// ```
public final class ScriptedHTTPTransport: HTTPTransport {
    /// How one route answers a request. It runs outside the transport's lock and may suspend.
    public typealias Answer = @Sendable (HTTPRequest) async -> Result<HTTPResponse, TransportError>

    private struct Script {
        var answers: [String: Answer] = [:]
        /// Prefix routes by method, then prefix.
        var prefixAnswers: [String: [String: Answer]] = [:]
        var unrecorded: Set<String> = []
        var sent: [HTTPRequest] = []
        var counts: [String: Int] = [:]

        /// The answer for `method path`: the exact route, else the longest matching prefix.
        func answer(method: String, path: String) -> Answer? {
            if let exact = answers["\(method) \(path)"] { return exact }
            let prefixes = prefixAnswers[method, default: [:]].filter { path.hasPrefix($0.key) }
            return prefixes.max { $0.key.count < $1.key.count }?.value
        }
    }

    private let script: Lock<Script>
    private let fallback: Answer

    /// A transport answering `answers` (keys `"METHOD path"`), and every other request with
    /// `fallback`.
    public init(_ answers: [String: Answer] = [:], fallback: Answer? = nil) {
        script = Lock(Script(answers: answers))
        self.fallback = fallback ?? { _ in .json(404, #"{"errcode": "M_NOT_FOUND", "error": "no route"}"#) }
    }

    /// Answers `METHOD path` with `answer` from now on.
    public func on(_ method: String, _ path: String, _ answer: @escaping Answer) {
        script.withLock { $0.answers["\(method) \(path)"] = answer }
    }

    /// Answers every `METHOD` request whose path starts with `prefix` and has no route of its
    /// own with `answer` from now on; of several matching prefixes the longest wins. For paths
    /// that carry IDs: `/_matrix/client/v3/rooms/!room:example.org/send/m.reaction/`.
    public func on(_ method: String, pathPrefix prefix: String, _ answer: @escaping Answer) {
        script.withLock { $0.prefixAnswers[method, default: [:]][prefix] = answer }
    }

    /// Answers `METHOD path` with `answer` from now on without recording its requests in
    /// ``requests`` (they are still counted by ``count(_:_:)``): for a route that is plumbing to
    /// the test, such as a token exchange.
    public func onUnrecorded(_ method: String, _ path: String, _ answer: @escaping Answer) {
        script.withLock {
            $0.answers["\(method) \(path)"] = answer
            $0.unrecorded.insert("\(method) \(path)")
        }
    }

    /// Every recorded request, in the order sent (a held request is recorded when it is sent).
    public var requests: [HTTPRequest] { script.withLock { $0.sent } }

    /// The recorded requests to `METHOD path`, in the order sent.
    public func requests(_ method: String, _ path: String) -> [HTTPRequest] {
        requests.filter { $0.method.rawValue == method && $0.url.path == path }
    }

    /// How many requests were sent to `METHOD path`, recorded or not.
    public func count(_ method: String, _ path: String) -> Int {
        script.withLock { $0.counts["\(method) \(path)", default: 0] }
    }

    /// Answers `request` from the script.
    public func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        let key = "\(request.method.rawValue) \(request.url.path)"
        let answer = script.withLock { script -> Answer? in
            script.counts[key, default: 0] += 1
            if !script.unrecorded.contains(key) { script.sent.append(request) }
            return script.answer(method: request.method.rawValue, path: request.url.path)
        }
        return try await (answer ?? fallback)(request).get()
    }

    /// An answer that waits at `gate` before giving `answer`: the request stays on the wire, like
    /// I/O that cannot be interrupted, until the test opens the gate (`gate.waitForWaiters(count:)`
    /// tells the test it is there). Cancelling the sender does not end the wait.
    public static func held(by gate: TestGate, _ answer: @escaping Answer) -> Answer {
        { request in
            await gate.wait()
            return await answer(request)
        }
    }

    /// An answer that gives `answers` in turn, then the last one for good.
    public static func sequence(_ answers: [Result<HTTPResponse, TransportError>]) -> Answer {
        precondition(!answers.isEmpty, "a sequence needs at least one answer")
        let queue = Lock(answers)
        return { _ in queue.withLock { queue in queue.count > 1 ? queue.removeFirst() : queue[0] } }
    }
}

extension ScriptedHTTPTransport {
    /// A transport on which every request fails with `error` (by default: the connection is
    /// refused), for code that must not need the network, such as a launch from stored data.
    /// Requests are still recorded.
    public static func unreachable(_ error: TransportError = .connectFailed) -> ScriptedHTTPTransport {
        ScriptedHTTPTransport(fallback: { _ in .failure(error) })
    }

    /// The community services' token exchange path.
    public static let servicesOpenIDPath = "/_symorva/v1/auth/openid"

    /// A transport for community-services clients: the OpenID exchange
    /// (`POST /_symorva/v1/auth/openid`) is answered with a services token valid for an hour and
    /// left out of ``requests`` (count it with `count("POST", servicesOpenIDPath)`); a test may
    /// script it again with ``on(_:_:_:)``. Unscripted routes answer the services' `404`
    /// (`SY_NOT_FOUND`).
    public static func communityServices(_ answers: [String: Answer] = [:]) -> ScriptedHTTPTransport {
        let transport = ScriptedHTTPTransport(answers) { _ in
            .json(404, #"{"errcode": "SY_NOT_FOUND", "error": "no route"}"#)
        }
        transport.onUnrecorded("POST", servicesOpenIDPath) { _ in
            .json(200, #"{"access_token": "services-token", "expires_in_ms": 3600000}"#)
        }
        return transport
    }
}

extension HTTPResponse {
    /// A response with a JSON body and `Content-Type: application/json`.
    public static func json(_ status: Int, _ body: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: Array(body.utf8))
    }
}

extension Result where Success == HTTPResponse, Failure == TransportError {
    /// A JSON answer.
    public static func json(_ status: Int, _ body: String) -> Self { .success(.json(status, body)) }

    /// The community services' rate-limit answer: 429 `SY_LIMIT_EXCEEDED`, `retry_after_ms`
    /// (when given) and `Retry-After` in whole seconds, as the reference server sends it.
    public static func rateLimited(milliseconds: Int?) -> Self {
        let hint = milliseconds.map { #", "retry_after_ms": \#($0)"# } ?? ""
        var response = HTTPResponse.json(429, #"{"errcode": "SY_LIMIT_EXCEEDED", "error": "slow down"\#(hint)}"#)
        if let milliseconds { response.headers.add(name: "Retry-After", value: String((milliseconds + 999) / 1000)) }
        return .success(response)
    }
}
