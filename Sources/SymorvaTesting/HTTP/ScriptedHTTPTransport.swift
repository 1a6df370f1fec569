import Foundation
import SymorvaHTTP
import Synchronization

/// An ``/SymorvaHTTP/HTTPTransport`` that answers from a script keyed by `METHOD path` and records what was
/// sent: the HTTP double of unit tests and benchmarks.
///
/// It stands in for the wire so that an interpreter's or a client's *mapping* of answers can be
/// tested without a server; integration tests talk to the real servers instead. A request with
/// no scripted answer gets the fallback answer: by default `404` with an `M_NOT_FOUND` body.
///
/// ```swift
/// let transport = ScriptedHTTPTransport()
/// transport.on("GET", "/_symorva/v1/wallet/balances") { _ in .json(200, #"{"balances": []}"#) }
/// transport.on("POST", "/submit", ScriptedHTTPTransport.sequence([.failure(.timedOut), .json(200, "{}")]))
/// ```
public final class ScriptedHTTPTransport: HTTPTransport {
    /// How one route answers a request.
    public typealias Answer = @Sendable (HTTPRequest) -> Result<HTTPResponse, TransportError>

    private struct Script {
        var answers: [String: Answer] = [:]
        var unrecorded: Set<String> = []
        var sent: [HTTPRequest] = []
        var counts: [String: Int] = [:]
    }

    private let script: Mutex<Script>
    private let fallback: Answer

    /// A transport answering `answers` (keys `"METHOD path"`), and every other request with
    /// `fallback`.
    public init(_ answers: [String: Answer] = [:], fallback: Answer? = nil) {
        script = Mutex(Script(answers: answers))
        self.fallback = fallback ?? { _ in .json(404, #"{"errcode": "M_NOT_FOUND", "error": "no route"}"#) }
    }

    /// Answers `METHOD path` with `answer` from now on.
    public func on(_ method: String, _ path: String, _ answer: @escaping Answer) {
        script.withLock { $0.answers["\(method) \(path)"] = answer }
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

    /// Every recorded request, in the order sent.
    public var requests: [HTTPRequest] { script.withLock { $0.sent } }

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
            return script.answers[key]
        }
        return try (answer ?? fallback)(request).get()
    }

    /// An answer that gives `answers` in turn, then the last one for good.
    public static func sequence(_ answers: [Result<HTTPResponse, TransportError>]) -> Answer {
        precondition(!answers.isEmpty, "a sequence needs at least one answer")
        let queue = Mutex(answers)
        return { _ in queue.withLock { queue in queue.count > 1 ? queue.removeFirst() : queue[0] } }
    }
}

extension ScriptedHTTPTransport {
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
