import Foundation
import SymorvaHTTP
import SymorvaKit
import SymorvaRuntime
import SymorvaServices
import SymorvaTransport
import Testing

/// The real transport, with every answer's status noted: how a test sees that the server did
/// limit requests that the client then waited out.
final class StatusRecordingTransport: HTTPTransport {
    private let base: any HTTPTransport
    private let recorded = Lock<[Int]>([])

    init(_ base: any HTTPTransport) { self.base = base }

    /// The status of every answer so far, in order.
    var statuses: [Int] { recorded.withLock { $0 } }

    func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        let response = try await base.send(request)
        recorded.withLock { $0.append(response.status) }
        return response
    }
}

/// Sends `GET path` until the services answer 429; returns how many requests it took and the
/// hint, or `nil` when the limit never came.
func burstUntilRateLimited(
    _ client: CommunityServicesClient, _ path: String = "/_symorva/v1/whoami", maximum: Int = 200
) async throws -> (requests: Int, retryAfter: Duration?)? {
    for sent in 1...maximum {
        do throws(ServicesError) {
            _ = try await client.send(.get, path)
        } catch {
            guard case .rateLimited(let retryAfter) = error else { throw error }
            return (sent, retryAfter)
        }
    }
    return nil
}

/// Rate limits of the reference server, with the `low` profile that `Scripts/test` starts it
/// with. Every test uses fresh members: limits are per member, so the other tests of the
/// shared servers never meet the buckets these tests empty.
@Suite(
    "Community services rate limits against the reference server", .serialized,
    .requires(
        DevEnvironment.hasLowServicesRateLimits,
        "needs the services with SYMORVA_SERVICES_RATE_LIMIT=low (what Scripts/test starts)"))
struct ServicesRateLimitIntegrationTests {
    let environment = DevEnvironment.current!
    let transport = CurlTransport()

    /// A services client for a newly registered member.
    func member(
        _ prefix: String, policy: RateLimitPolicy, transport: (any HTTPTransport)? = nil
    ) async throws -> CommunityServicesClient {
        let account = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername(prefix), in: environment, transport: self.transport)
        return CommunityServicesClient(
            baseURL: environment.servicesURL, transport: transport ?? self.transport,
            tokenSource: HomeserverOpenIDSource(account: account, environment: environment, transport: self.transport),
            rateLimitPolicy: policy)
    }

    @Test("A burst of one member's reads meets a typed rate limit; waiting its hint is enough; others go on")
    func burstWaitSucceed() async throws {
        let alice = try await member("limited", policy: .never)
        let limit = try #require(try await burstUntilRateLimited(alice), "200 quick reads were never limited")
        #expect(limit.requests > 1, "the bucket's burst passes before the limit")
        let retryAfter = try #require(limit.retryAfter, "a 429 of the reference server carries its hint")
        #expect(retryAfter > .zero && retryAfter <= .seconds(1))

        // Limits are per member: someone else is served at once.
        let bob = try await member("unlimited", policy: .never)
        _ = try await bob.send(.get, "/_symorva/v1/whoami")

        try await Task.sleep(for: retryAfter)
        _ = try await alice.send(.get, "/_symorva/v1/whoami")
    }

    @Test("With the standard policy the client waits each hint out: a sequential burst all succeeds")
    func clientWaitsOut() async throws {
        let recording = StatusRecordingTransport(transport)
        let alice = try await member("patient", policy: .standard, transport: recording)
        for _ in 0..<30 { _ = try await alice.send(.get, "/_symorva/v1/whoami") }
        let statuses = recording.statuses
        #expect(statuses.contains(429), "the server limited some of the 30 reads")
        #expect(statuses.filter { $0 == 200 }.count == 31)  // the exchange and the 30 reads
        #expect(Set(statuses) == [200, 429])
    }
}
