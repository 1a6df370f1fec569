import SymorvaHTTP
import SymorvaMatrix
import SymorvaRuntime

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Where the community services client gets OpenID tokens: the signed-in Matrix session.
public protocol OpenIDTokenSource: Sendable {
    /// Asks the homeserver for a fresh OpenID token for the signed-in member.
    func requestOpenIDToken() async throws(ServicesError) -> OpenIDToken

    /// The Matrix device ID the member is signed in with, or `nil` when unknown. The client
    /// sends it with the exchange (`device_id`), so that the services token is bound to that
    /// device and ``CommunityServicesClient/logOut(allDevices:timeout:)`` revokes every token the device
    /// was issued.
    func deviceID() async -> String?
}

extension OpenIDTokenSource {
    /// No device: the services token is bound to the member only.
    public func deviceID() async -> String? { nil }
}

/// Talks to the community services (`/_symorva/v1/…`) as one signed-in member.
///
/// It exchanges a Matrix OpenID token for the services' own bearer token, keeps that token
/// until shortly before it expires, and shares one exchange between concurrent callers (one
/// request per key). A request rejected with `SY_UNKNOWN_TOKEN` gets one fresh token and one
/// retry. A rate-limited request (429) is sent again after the services' hint as its
/// ``RateLimitPolicy`` allows, unless it must be delivered at most once; anything else is
/// reported as a typed ``ServicesError``.
public actor CommunityServicesClient {
    /// The services' base URL (from the manifest).
    public nonisolated let baseURL: URL
    /// How rate-limited requests are sent again.
    public nonisolated let rateLimitPolicy: RateLimitPolicy
    /// The transport it sends over (the media engine reaches Janus over the same one).
    nonisolated package let transport: any HTTPTransport
    private let tokenSource: any OpenIDTokenSource
    private let clock: any RuntimeClock
    private let wallClock: any WallClock
    private let logger = Logger(category: "services")
    private var token: (value: Secret<String>, expiresAt: Duration)?
    private var exchange: Task<Result<(Secret<String>, Duration), ServicesError>, Never>?
    private(set) var exchangeCount = 0

    /// Creates a client for the services at `baseURL`. It waits for rate limits on `clock` and
    /// reads `Retry-After` dates against `wallClock`.
    public init(
        baseURL: URL, transport: any HTTPTransport, tokenSource: any OpenIDTokenSource,
        clock: any RuntimeClock = SystemClock(), wallClock: any WallClock = SystemWallClock(),
        rateLimitPolicy: RateLimitPolicy = .standard
    ) {
        self.baseURL = baseURL
        self.transport = transport
        self.tokenSource = tokenSource
        self.clock = clock
        self.wallClock = wallClock
        self.rateLimitPolicy = rateLimitPolicy
    }

    /// How many OpenID exchanges this client has made (tests check single-flight with it).
    public var exchanges: Int { exchangeCount }

    /// Signs out of the services (`POST /_symorva/v1/auth/logout`): the token in use and every
    /// services token issued for the same Matrix device stop working at once; with
    /// `allDevices`, every services token of the member. The client forgets its token whatever
    /// the outcome. Call it before the Matrix logout, while the session can still answer an
    /// OpenID request should the client need a token to present.
    ///
    /// - Returns: how many services tokens the services revoked.
    /// - Throws: the typed ``ServicesError`` of the request; the token is forgotten anyway.
    @discardableResult
    public func logOut(allDevices: Bool = false, timeout: Duration? = nil) async throws(ServicesError) -> Int {
        let body = allDevices ? Array(#"{"all_devices": true}"#.utf8) : Array("{}".utf8)
        let answer: [UInt8]
        do {
            answer = try await send(.post, "/_symorva/v1/auth/logout", json: body, timeout: timeout)
        } catch {
            invalidate()
            throw error
        }
        invalidate()
        guard let decoded = WireJSON.decodeIfValid(LogoutResponse.self, from: answer) else {
            throw .malformedResponse(status: 200)
        }
        return decoded.revoked
    }

    /// Hands the services token over to another client and forgets it: the running account's
    /// client gives it to the one that signs the account out of the services, which then needs
    /// no OpenID exchange. `nil` when the client holds no unexpired token.
    package func handOverToken() -> HeldServicesToken? {
        defer { invalidate() }
        guard let token, token.expiresAt > clock.now else { return nil }
        return HeldServicesToken(value: token.value, expiresAt: token.expiresAt)
    }

    /// Takes over a token another client on the same clock handed over (``handOverToken()``).
    package func adopt(_ held: HeldServicesToken) {
        token = (held.value, held.expiresAt)
    }

    /// Forgets the services token (sign-out, account switch).
    public func invalidate() {
        token = nil
        exchange?.cancel()
        exchange = nil
    }

    /// Sends an authenticated request and returns the body of a 2xx answer.
    ///
    /// - Parameters:
    ///   - path: the path below the base URL, e.g. `/_symorva/v1/wallet/balances`.
    ///   - body: a JSON body, or `nil` for none.
    ///   - deliversAtMostOnce: the transport must never resend the request by itself (a command
    ///     whose outcome is found out by query); see ``/SymorvaHTTP/HTTPRequest/deliversAtMostOnce``. The one
    ///     retry after `SY_UNKNOWN_TOKEN` still happens: the services refuse an unknown token
    ///     before routing, so the first request did nothing. A 429 is not retried: the caller
    ///     gets ``ServicesError/rateLimited(retryAfter:)`` and decides.
    /// - Throws: ``ServicesError/rateLimited(retryAfter:)`` when the request is still limited
    ///   after the policy's retries, or the hint is longer than the policy waits.
    public func send(
        _ method: HTTPMethod, _ path: String, query: [URLQueryItem] = [], json body: [UInt8]? = nil,
        timeout: Duration? = nil, deliversAtMostOnce: Bool = false
    ) async throws(ServicesError) -> [UInt8] {
        let url = try makeURL(path, query: query)
        var retried = false
        var rateLimitRetries = 0
        while true {
            let bearer = try await currentToken()
            var request = HTTPRequest(method: method, url: url, body: body ?? [], bearerToken: bearer, timeout: timeout)
            if body != nil { request.headers.add(name: "Content-Type", value: "application/json") }
            request.deliversAtMostOnce = deliversAtMostOnce
            let response: HTTPResponse
            do {
                response = try await transport.send(request)
            } catch {
                throw .transport(error)
            }
            if response.isSuccess { return response.body }
            let failure = Self.decodeError(response, now: wallClock.now)
            if case .unauthorized = failure, !retried {
                logger.info("services token rejected; exchanging a new one")
                if let current = token, current.value == bearer { token = nil }
                retried = true
                continue
            }
            if case .rateLimited(let hint) = failure, !deliversAtMostOnce,
                let wait = rateLimitPolicy.delay(retryAfter: hint, retriesSoFar: rateLimitRetries)
            {
                rateLimitRetries += 1
                logger.info("services rate limited; sending again in \(wait) (retry \(rateLimitRetries))")
                try await Self.pause(for: wait, on: clock)
                continue
            }
            throw failure
        }
    }

    /// Sends `body` encoded by the SDK's one JSON coder (``/SymorvaMatrix/WireJSON``), as
    /// ``send(_:_:query:json:timeout:deliversAtMostOnce:)`` does.
    ///
    /// - Throws: ``ServicesError/malformedResponse(status:)`` with status 0 when `body` cannot
    ///   be encoded (nothing is sent), like a request whose URL cannot be built.
    package func send<Body: Encodable & Sendable>(
        _ method: HTTPMethod, _ path: String, query: [URLQueryItem] = [], body: Body, timeout: Duration? = nil,
        deliversAtMostOnce: Bool = false
    ) async throws(ServicesError) -> [UInt8] {
        let json: [UInt8]
        do throws(WireJSONError) { json = try WireJSON.encode(body) } catch { throw .malformedResponse(status: 0) }
        return try await send(
            method, path, query: query, json: json, timeout: timeout, deliversAtMostOnce: deliversAtMostOnce)
    }

    /// Sleeps on `clock`; a cancelled caller gets the transport's `cancelled`.
    private static func pause(for wait: Duration, on clock: any RuntimeClock) async throws(ServicesError) {
        do { try await clock.sleep(for: wait) } catch { throw .transport(.cancelled) }
    }

    /// A request that needs no token (health, discovery).
    public func sendUnauthenticated(_ method: HTTPMethod, _ path: String) async throws(ServicesError) -> [UInt8] {
        let request = HTTPRequest(method: method, url: try makeURL(path, query: []))
        let response: HTTPResponse
        do { response = try await transport.send(request) } catch { throw .transport(error) }
        guard response.isSuccess else { throw Self.decodeError(response, now: wallClock.now) }
        return response.body
    }

    private func makeURL(_ path: String, query: [URLQueryItem]) throws(ServicesError) -> URL {
        guard var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: false) else {
            throw .malformedResponse(status: 0)
        }
        components.path = components.path.trimmingSuffix("/") + path
        if !query.isEmpty { components.queryItems = query }
        guard let url = components.url else { throw .malformedResponse(status: 0) }
        return url
    }

    // MARK: - Token

    private func currentToken() async throws(ServicesError) -> Secret<String> {
        if let token, token.expiresAt > clock.now { return token.value }
        let task: Task<Result<(Secret<String>, Duration), ServicesError>, Never>
        if let exchange {
            task = exchange
        } else {
            exchangeCount += 1
            let transport = transport
            let tokenSource = tokenSource
            let url = try makeURL("/_symorva/v1/auth/openid", query: [])
            let clock = clock
            let wallClock = wallClock
            let policy = rateLimitPolicy
            task = Task {
                do throws(ServicesError) {
                    return .success(
                        try await Self.exchangeOpenID(
                            transport: transport, source: tokenSource, url: url, clock: clock, wallClock: wallClock,
                            policy: policy))
                } catch {
                    return .failure(error)
                }
            }
            exchange = task
        }
        let result = await task.value
        if exchange == task { exchange = nil }
        let (value, expiresAt) = try result.get()
        token = (value, expiresAt)
        return value
    }

    /// Exchanges an OpenID token. The services limit exchanges per client address, and refuse a
    /// limited one before asking the homeserver, so the same OpenID token is sent again after
    /// the hint as `policy` allows.
    private static func exchangeOpenID(
        transport: any HTTPTransport, source: any OpenIDTokenSource, url: URL, clock: any RuntimeClock,
        wallClock: any WallClock, policy: RateLimitPolicy
    ) async throws(ServicesError) -> (Secret<String>, Duration) {
        let openID = try await source.requestOpenIDToken()
        let payload = ExchangeRequest(
            accessToken: openID.accessToken.exposedValue, matrixServerName: openID.matrixServerName,
            expiresIn: openID.expiresIn, deviceID: await source.deviceID())
        let body: [UInt8]
        do throws(WireJSONError) { body = try WireJSON.encode(payload) } catch { throw .malformedResponse(status: 0) }
        var response: HTTPResponse
        var retries = 0
        while true {
            let now = clock.now
            do { response = try await transport.send(.json(.post, url: url, body: body)) } catch {
                throw .transport(error)
            }
            if response.isSuccess { return try token(from: response, now: now) }
            let failure = decodeError(response, now: wallClock.now)
            guard case .rateLimited(let hint) = failure,
                let wait = policy.delay(retryAfter: hint, retriesSoFar: retries)
            else { throw failure }
            retries += 1
            try await pause(for: wait, on: clock)
        }
    }

    private static func token(from response: HTTPResponse, now: Duration) throws(ServicesError) -> (
        Secret<String>, Duration
    ) {
        guard let answer = WireJSON.decodeIfValid(ExchangeResponse.self, from: response.body) else {
            throw .malformedResponse(status: response.status)
        }
        let lifetime = answer.expiresInMilliseconds
        // Renew a little early so that a token never expires in flight.
        let margin = min(Duration.milliseconds(lifetime) / 10, .seconds(30))
        return (Secret(answer.accessToken), now + .milliseconds(lifetime) - margin)
    }

    /// Reads the services' error format: `{"errcode", "error", "retry_after_ms"}`.
    ///
    /// A 429 is ``ServicesError/rateLimited(retryAfter:)`` whatever its body: the hint is
    /// `retry_after_ms` (exact), else the `Retry-After` header (whole seconds, or a date read
    /// against `now`). Every hint is clamped by ``/SymorvaRuntime/ServerWait``; a negative or
    /// unreadable one counts as none.
    static func decodeError(_ response: HTTPResponse, now: Timestamp) -> ServicesError {
        let body = WireJSON.decodeIfValid(ErrorBody.self, from: response.body)
        let exact = ServerWait.clamp(milliseconds: body?.retryAfterMilliseconds)
        if response.status == 429 {
            let header = response.headers["Retry-After"].flatMap(RetryAfter.init(headerValue:))
            return .rateLimited(retryAfter: exact ?? header?.wait(from: now))
        }
        guard let body else { return .malformedResponse(status: response.status) }
        if response.status == 401 { return .unauthorized(code: body.errcode) }
        return .server(code: body.errcode, status: response.status, message: body.error ?? "", retryAfter: exact)
    }

    private struct ExchangeRequest: Encodable {
        var accessToken: String
        var matrixServerName: String
        var expiresIn: Int
        var tokenType = "Bearer"
        /// Binds the services token to this Matrix device; left out when unknown.
        var deviceID: String?
        enum CodingKeys: String, CodingKey {
            case deviceID = "device_id"
            case accessToken = "access_token"
            case matrixServerName = "matrix_server_name"
            case expiresIn = "expires_in"
            case tokenType = "token_type"
        }
    }

    private struct ExchangeResponse: Decodable {
        var accessToken: String
        var expiresInMilliseconds: Int
        enum CodingKeys: String, CodingKey {
            case accessToken = "access_token"
            case expiresInMilliseconds = "expires_in_ms"
        }
    }

    private struct LogoutResponse: Decodable {
        var revoked: Int
    }

    private struct ErrorBody: Decodable {
        var errcode: String
        var error: String?
        var retryAfterMilliseconds: Double?
        enum CodingKeys: String, CodingKey {
            case errcode, error
            case retryAfterMilliseconds = "retry_after_ms"
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            errcode = try container.decode(String.self, forKey: .errcode)
            error = try container.decodeIfPresent(String.self, forKey: .error)
            // A garbage hint (a string, a huge number) counts as none; it never loses the errcode.
            retryAfterMilliseconds = try? container.decodeIfPresent(Double.self, forKey: .retryAfterMilliseconds)
        }
    }
}

/// A services token one ``CommunityServicesClient`` hands over to another, with its renewal
/// instant on the clients' runtime clock.
package struct HeldServicesToken: Sendable {
    /// The bearer token.
    package let value: Secret<String>
    /// When the client stops using it (before it expires), on the runtime clock.
    package let expiresAt: Duration
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
