import Foundation
import SymorvaHTTP
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices
import SymorvaTesting
import Testing

/// A services client over the fake transport and a manual clock: nothing leaves the process,
/// and time moves only when the test says.
private struct ClientHarness {
    let transport = ScriptedHTTPTransport.communityServices()
    let clock = ManualClock()
    let client: CommunityServicesClient

    init(policy: RateLimitPolicy = .standard) {
        client = CommunityServicesClient(
            baseURL: URL(string: "http://services.test")!, transport: transport, tokenSource: FixedOpenIDSource(),
            clock: clock, rateLimitPolicy: policy)
    }

    static let whoami = "/_symorva/v1/whoami"
    static let ok = Result<HTTPResponse, TransportError>.json(200, #"{"user_id": "@alice:localhost"}"#)

    /// `GET /whoami` through the client, as a result.
    func whoami() async -> Result<[UInt8], ServicesError> {
        do throws(ServicesError) {
            return .success(try await client.send(.get, Self.whoami))
        } catch {
            return .failure(error)
        }
    }
}

@Suite("Services client: a 429 is a typed rate limit")
struct ServicesRateLimitMappingTests {
    @Test(
        "A 429 becomes rateLimited with the exact hint, else the header's seconds, else none",
        arguments: [
            (
                Result<HTTPResponse, TransportError>.rateLimited(milliseconds: 1_500),
                Duration?.some(.milliseconds(1_500))
            ),
            (.rateLimited(milliseconds: nil), nil),
            (.success(HTTPResponse(status: 429, headers: ["Retry-After": "3"], body: Array("busy".utf8))), .seconds(3)),
            (.json(429, #"{"errcode": "SY_LIMIT_EXCEEDED", "error": "x", "retry_after_ms": -5}"#), nil),
        ])
    func mapping(answer: Result<HTTPResponse, TransportError>, retryAfter: Duration?) async {
        let harness = ClientHarness(policy: .never)
        harness.transport.on("GET", ClientHarness.whoami) { _ in answer }
        #expect(await harness.whoami() == .failure(.rateLimited(retryAfter: retryAfter)))
        #expect(harness.transport.requests.count == 1)
    }

    @Test(
        "A 429's hint is clamped to the server-wait floor and ceiling; a negative or past one counts as none or the floor",
        arguments: [
            (
                Result<HTTPResponse, TransportError>.json(
                    429, #"{"errcode": "SY_LIMIT_EXCEEDED", "error": "x", "retry_after_ms": 999999999}"#),
                Duration?.some(.seconds(300))
            ),
            (.json(429, #"{"errcode": "SY_LIMIT_EXCEEDED", "error": "x", "retry_after_ms": 0}"#), .seconds(1)),
            (.json(429, #"{"errcode": "SY_LIMIT_EXCEEDED", "error": "x", "retry_after_ms": "soon"}"#), nil),
            (.success(HTTPResponse(status: 429, headers: ["Retry-After": "999999999"], body: [])), .seconds(300)),
            (.success(HTTPResponse(status: 429, headers: ["Retry-After": "-5"], body: [])), nil),
            (
                .success(
                    HTTPResponse(status: 429, headers: ["Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"], body: [])),
                .seconds(1)
            ),
        ])
    func mappingClamped(answer: Result<HTTPResponse, TransportError>, retryAfter: Duration?) async {
        let harness = ClientHarness(policy: .never)
        harness.transport.on("GET", ClientHarness.whoami) { _ in answer }
        #expect(await harness.whoami() == .failure(.rateLimited(retryAfter: retryAfter)))
    }

    @Test("A non-429 error's negative hint counts as none, a huge one is clamped")
    func otherErrorsClamped() async {
        let harness = ClientHarness()
        harness.transport.on("GET", ClientHarness.whoami) { _ in
            .json(503, #"{"errcode": "SY_INJECTED_FAULT", "error": "x", "retry_after_ms": -5}"#)
        }
        #expect(
            await harness.whoami()
                == .failure(.server(code: "SY_INJECTED_FAULT", status: 503, message: "x", retryAfter: nil)))
        harness.transport.on("GET", ClientHarness.whoami) { _ in
            .json(503, #"{"errcode": "SY_INJECTED_FAULT", "error": "x", "retry_after_ms": 999999999}"#)
        }
        #expect(
            await harness.whoami()
                == .failure(.server(code: "SY_INJECTED_FAULT", status: 503, message: "x", retryAfter: .seconds(300))))
    }

    @Test("Other errors keep their meaning: a 503 with a hint is a server error")
    func otherErrors() async {
        let harness = ClientHarness()
        harness.transport.on("GET", ClientHarness.whoami) { _ in
            .json(503, #"{"errcode": "SY_INJECTED_FAULT", "error": "x", "retry_after_ms": 1200}"#)
        }
        #expect(
            await harness.whoami()
                == .failure(
                    .server(code: "SY_INJECTED_FAULT", status: 503, message: "x", retryAfter: .milliseconds(1_200))))
        #expect(harness.transport.requests.count == 1)
    }

    @Test("A rate limit is transient, carries its hint and logs without the server's text")
    func errorProperties() {
        let error = ServicesError.rateLimited(retryAfter: .milliseconds(250))
        #expect(error.isTransient)
        #expect(error.retryAfter == .milliseconds(250))
        #expect(ServicesError.rateLimited(retryAfter: nil).retryAfter == nil)
        #expect(ServicesError.unauthorized(code: "SY_UNKNOWN_TOKEN").retryAfter == nil)
        #expect(error.logDescription == "rateLimited(retryAfter: 0.25 seconds)")
    }

    @Test("The policy waits the hint, the default without one, and gives up after its retries or a long hint")
    func policy() {
        let policy = RateLimitPolicy(retries: 2, longestWait: .seconds(10), waitWithoutHint: .seconds(1))
        #expect(policy.delay(retryAfter: .milliseconds(1_300), retriesSoFar: 0) == .milliseconds(1_300))
        #expect(policy.delay(retryAfter: nil, retriesSoFar: 1) == .seconds(1))
        #expect(policy.delay(retryAfter: .milliseconds(1_300), retriesSoFar: 2) == nil)
        #expect(policy.delay(retryAfter: .seconds(11), retriesSoFar: 0) == nil)
        #expect(policy.delay(retryAfter: .seconds(-1), retriesSoFar: 0) == .seconds(1))
        #expect(policy.delay(retryAfter: .zero, retriesSoFar: 0) == .seconds(1))
        #expect(
            RateLimitPolicy(retries: 2, longestWait: .seconds(10), waitWithoutHint: .zero).delay(
                retryAfter: nil, retriesSoFar: 0) == .seconds(1))
        #expect(RateLimitPolicy.never.delay(retryAfter: .zero, retriesSoFar: 0) == nil)
        #expect(RateLimitPolicy(retries: -3, longestWait: .seconds(1), waitWithoutHint: .zero).retries == 0)
    }
}

@Suite("Services client: rate-limited requests are sent again after the hint")
struct ServicesRateLimitRetryTests {
    @Test("A read limited once waits the hint on the client's clock, then succeeds")
    func retriesAfterHint() async throws {
        let harness = ClientHarness()
        harness.transport.on(
            "GET", ClientHarness.whoami,
            ScriptedHTTPTransport.sequence([.rateLimited(milliseconds: 1_700), ClientHarness.ok]))
        async let result = harness.whoami()
        try await harness.clock.waitForSleepers(count: 1)
        #expect(harness.clock.pendingDeadlines == [.milliseconds(1_700)])
        #expect(harness.transport.requests.count == 1)
        await harness.clock.advance(by: .milliseconds(1_700))
        #expect(try await result.get() == Array(#"{"user_id": "@alice:localhost"}"#.utf8))
        #expect(harness.transport.requests.count == 2)
    }

    @Test("Repeated 429s with a 0 hint back off by the floor instead of spinning")
    func zeroHintBacksOff() async throws {
        let harness = ClientHarness()
        harness.transport.on("GET", ClientHarness.whoami) { _ in .rateLimited(milliseconds: 0) }
        async let result = harness.whoami()
        for sleeper in 1...2 {
            try await harness.clock.waitForSleepers(count: 1)
            #expect(harness.clock.pendingDeadlines == [harness.clock.now + .seconds(1)])
            #expect(harness.transport.requests.count == sleeper)
            await harness.clock.advance(by: .seconds(1))
        }
        #expect(await result == .failure(.rateLimited(retryAfter: .seconds(1))))
        #expect(harness.transport.requests.count == 3)
    }

    @Test("A 999999999 ms hint is reported at once as the ceiling, never waited for")
    func hugeHint() async {
        let harness = ClientHarness()
        harness.transport.on("GET", ClientHarness.whoami) { _ in .rateLimited(milliseconds: 999_999_999) }
        #expect(await harness.whoami() == .failure(.rateLimited(retryAfter: .seconds(300))))
        #expect(harness.transport.requests.count == 1)
        #expect(harness.clock.sleeperCount == 0)
    }

    @Test("A request still limited after the policy's retries reports the last hint")
    func boundedRetries() async throws {
        let harness = ClientHarness()
        harness.transport.on("GET", ClientHarness.whoami) { _ in .rateLimited(milliseconds: 1_400) }
        async let result = harness.whoami()
        for sleeper in 1...2 {
            try await harness.clock.waitForSleepers(count: 1)
            #expect(harness.transport.requests.count == sleeper)
            await harness.clock.advance(by: .milliseconds(1_400))
        }
        #expect(await result == .failure(.rateLimited(retryAfter: .milliseconds(1_400))))
        #expect(harness.transport.requests.count == 3)
    }

    @Test("A hint longer than the policy waits is reported at once")
    func longHint() async {
        let harness = ClientHarness()
        harness.transport.on("GET", ClientHarness.whoami) { _ in .rateLimited(milliseconds: 60_000) }
        #expect(await harness.whoami() == .failure(.rateLimited(retryAfter: .seconds(60))))
        #expect(harness.transport.requests.count == 1)
        #expect(harness.clock.sleeperCount == 0)
    }

    @Test("A request delivered at most once is never sent again: the caller gets the rate limit")
    func atMostOnce() async {
        let harness = ClientHarness()
        harness.transport.on("POST", "/_symorva/v1/wallet/transfers/confirm") { _ in .rateLimited(milliseconds: 1_100) }
        await #expect(throws: ServicesError.rateLimited(retryAfter: .milliseconds(1_100))) {
            _ = try await harness.client.send(
                .post, "/_symorva/v1/wallet/transfers/confirm", json: Array("{}".utf8), deliversAtMostOnce: true)
        }
        #expect(harness.transport.requests.count == 1)
        #expect(harness.clock.sleeperCount == 0)
    }

    @Test("A caller cancelled while waiting gets cancelled, and nothing is sent again")
    func cancelledWhileWaiting() async throws {
        let harness = ClientHarness()
        harness.transport.on("GET", ClientHarness.whoami) { _ in .rateLimited(milliseconds: 5_000) }
        let task = Task { await harness.whoami() }
        try await harness.clock.waitForSleepers(count: 1)
        task.cancel()
        #expect(await task.value == .failure(.transport(.cancelled)))
        #expect(harness.transport.requests.count == 1)
    }

    @Test("A rate-limited OpenID exchange is sent again with the same token after the hint")
    func exchangeRetried() async throws {
        let harness = ClientHarness()
        harness.transport.on(
            "POST", "/_symorva/v1/auth/openid",
            ScriptedHTTPTransport.sequence([
                .rateLimited(milliseconds: 1_900),
                .json(200, #"{"access_token": "services-token", "expires_in_ms": 3600000}"#),
            ]))
        harness.transport.on("GET", ClientHarness.whoami) { _ in ClientHarness.ok }
        async let result = harness.whoami()
        try await harness.clock.waitForSleepers(count: 1)
        #expect(harness.transport.count("POST", ScriptedHTTPTransport.servicesOpenIDPath) == 1)
        await harness.clock.advance(by: .milliseconds(1_900))
        _ = try await result.get()
        #expect(harness.transport.count("POST", ScriptedHTTPTransport.servicesOpenIDPath) == 2)
        #expect(await harness.client.exchanges == 1)
    }
}

/// Hands out a fixed OpenID token.
struct FixedOpenIDSource: OpenIDTokenSource {
    func requestOpenIDToken() async throws(ServicesError) -> OpenIDToken {
        OpenIDToken(accessToken: Secret("openid-token"), matrixServerName: "localhost", expiresIn: 3600)
    }
}
