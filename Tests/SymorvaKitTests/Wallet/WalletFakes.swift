import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaStore
import SymorvaTransport
import Synchronization

/// The HTTP double of the wallet and services tests: answers the services' OpenID exchange by
/// itself (unless a test scripts `POST /_symorva/v1/auth/openid`) and every other request from
/// a script keyed by `METHOD path`, recording what was sent.
///
/// It only stands in for the wire so that the interpreter's *mapping* can be tested; the
/// integration tests talk to the real reference server.
final class FakeHTTPTransport: HTTPTransport {
    typealias Answer = @Sendable (HTTPRequest) -> Result<HTTPResponse, TransportError>

    private let answers: Mutex<[String: Answer]>
    private let sent = Mutex<[HTTPRequest]>([])

    init(_ answers: [String: Answer] = [:]) {
        self.answers = Mutex(answers)
    }

    /// Answers `METHOD path` with `answer` from now on.
    func on(_ method: String, _ path: String, _ answer: @escaping Answer) {
        answers.withLock { $0["\(method) \(path)"] = answer }
    }

    /// Every request sent, except the token exchange.
    var requests: [HTTPRequest] { sent.withLock { $0 } }
    /// How many token exchanges were sent.
    var exchanges: Int { exchangeCount.withLock { $0 } }
    private let exchangeCount = Mutex(0)

    func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        let path = request.url.path
        let answer = answers.withLock { $0["\(request.method.rawValue) \(path)"] }
        if path == "/_symorva/v1/auth/openid" {
            exchangeCount.withLock { $0 += 1 }
            guard let answer else {
                return .json(200, #"{"access_token": "services-token", "expires_in_ms": 3600000}"#)
            }
            return try answer(request).get()
        }
        sent.withLock { $0.append(request) }
        guard let answer else { return .json(404, #"{"errcode": "SY_NOT_FOUND", "error": "no route"}"#) }
        return try answer(request).get()
    }
}

/// Hands out a fixed OpenID token.
struct FixedOpenIDSource: OpenIDTokenSource {
    func requestOpenIDToken() async throws(ServicesError) -> OpenIDToken {
        OpenIDToken(accessToken: Secret("openid-token"), matrixServerName: "localhost", expiresIn: 3600)
    }
}

extension HTTPResponse {
    /// A JSON response.
    static func json(_ status: Int, _ body: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: Array(body.utf8))
    }
}

extension Result where Success == HTTPResponse, Failure == TransportError {
    /// A JSON answer.
    static func json(_ status: Int, _ body: String) -> Self { .success(.json(status, body)) }

    /// The services' rate limit answer: 429 `SY_LIMIT_EXCEEDED`, `retry_after_ms` (when given)
    /// and `Retry-After` in whole seconds, as the reference server sends it.
    static func rateLimited(milliseconds: Int?) -> Self {
        let hint = milliseconds.map { #", "retry_after_ms": \#($0)"# } ?? ""
        var response = HTTPResponse.json(429, #"{"errcode": "SY_LIMIT_EXCEEDED", "error": "slow down"\#(hint)}"#)
        if let milliseconds { response.headers.add(name: "Retry-After", value: String((milliseconds + 999) / 1000)) }
        return .success(response)
    }
}

extension FakeHTTPTransport {
    /// An answer that gives `answers` in turn, then the last one for good.
    static func sequence(_ answers: [Result<HTTPResponse, TransportError>]) -> Answer {
        let queue = AnswerQueue(answers)
        return { _ in queue.next() }
    }
}

/// Answers handed out in turn; the last one repeats.
private final class AnswerQueue: Sendable {
    private let remaining: Mutex<[Result<HTTPResponse, TransportError>]>
    init(_ answers: [Result<HTTPResponse, TransportError>]) { remaining = Mutex(answers) }
    func next() -> Result<HTTPResponse, TransportError> {
        remaining.withLock { queue in queue.count > 1 ? queue.removeFirst() : queue[0] }
    }
}

/// Values shared by the wallet tests.
enum WalletFixtures {
    static let orb = Asset(code: "ORB", precision: 2)
    static let alice = MemberID("@alice:localhost")
    static let bob = MemberID("@bob:localhost")
    static let commandID = CommandID(uuidString: "8d0f1c52-2f7a-4c1e-9a43-5b6c7d8e9f01")!
    static let draftID = DraftID("d_abc")
    static let serverKey = [UInt8](repeating: 7, count: 32)

    static func amount(_ text: String) -> Amount { try! Amount(text, precision: 2) }

    static var summary: TransferSummary {
        TransferSummary(
            draftID: draftID, recipient: bob, asset: orb, amount: amount("25.00"), fee: amount("0.50"),
            total: amount("25.50"))
    }

    static var pending: PendingCommand { PendingCommand(commandID: commandID, summary: summary) }

    static var sealed: SealedVerification {
        SealedVerification(method: .pin, sealedBytes: Secret([1, 2, 3]))
    }

    static let transferJSON = """
        {"transfer_id": "t_1", "kind": "transfer", "command_id": "8d0f1c52-2f7a-4c1e-9a43-5b6c7d8e9f01",
         "draft_id": "d_abc", "sender": "@alice:localhost", "recipient": "@bob:localhost", "asset": "ORB",
         "amount": "25.00", "fee": "0.50", "total": "25.50", "created_at_ms": 1700000000000}
        """

    static var transfer: Transfer { Transfer(id: TransferID("t_1"), commandID: commandID, summary: summary) }

    static func answer(_ status: String, extra: String = "") -> String {
        #"{"status": "\#(status)", "command_id": "\#(commandID.rawValue)"\#(extra)}"#
    }

    static func failure(_ code: String, attemptsLeft: Int? = nil) -> String {
        let attempts = attemptsLeft.map { #", "attempts_left": \#($0)"# } ?? ""
        return answer("failed", extra: #", "failure": {"code": "\#(code)", "message": "m"\#(attempts)}"#)
    }

    static let draftJSON = """
        {"draft_id": "d_abc", "recipient": "@bob:localhost", "asset": "ORB", "precision": 2, "amount": "25.00",
         "fee": "0.50", "total": "25.50", "created_at_ms": 1700000000000, "expires_at_ms": 1700000120000,
         "expires_in_ms": 120000, "verification_methods": ["pin"],
         "sealing_key": {"algorithm": "x25519-xsalsa20poly1305-sealedbox", "key_id": "k1",
                         "public_key": "\(Data(serverKey).base64EncodedString())"},
         "payload_version": "symorva-wallet-confirm/1"}
        """

    static func error(_ code: String) -> String { #"{"errcode": "\#(code)", "error": "refused"}"# }
}
