import Foundation
import SymorvaHTTP
import SymorvaRuntime
import SymorvaTransport
import Testing

@testable import SymorvaKit
@testable import SymorvaSession

/// Passes requests on and keeps the bearer tokens the SDK presented to the services.
private final class ServicesTokenCapture: HTTPTransport {
    let base: any HTTPTransport
    private let tokens = Lock<[Secret<String>]>([])

    init(_ base: any HTTPTransport) { self.base = base }

    func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        if request.url.path == "/_symorva/v1/whoami", let token = request.bearerToken {
            tokens.withLock { $0.append(token) }
        }
        return try await base.send(request)
    }

    var last: Secret<String>? { tokens.withLock { $0.last } }
}

@Suite(
    "Services sign-out against the reference server",
    .enabled(if: DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct ServicesSignOutIntegrationTests {
    /// `GET /whoami` on the services with `token`, bypassing the SDK.
    func rawWhoAmIStatus(_ token: Secret<String>, environment: DevEnvironment) async throws -> Int {
        let url = environment.servicesURL.appendingPathComponent("_symorva/v1/whoami")
        return try await CurlTransport().send(HTTPRequest(method: .get, url: url, bearerToken: token)).status
    }

    @Test("After the SDK signs out, its old services token is refused with 401")
    func oldTokenRefusedAfterSignOut() async throws {
        let capture = ServicesTokenCapture(CurlTransport())
        let fixture = CommunityFixture(transport: capture)
        await fixture.community.launch()
        try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("svcout"), password: testPassword)
        let services = try #require(fixture.activeContext).services
        _ = try await services.send(.get, "/_symorva/v1/whoami")
        let token = try #require(capture.last)
        #expect(try await rawWhoAmIStatus(token, environment: fixture.environment) == 200)

        try await fixture.community.session.signOut()
        #expect(fixture.community.session.state.value == .signedOut)
        #expect(try await rawWhoAmIStatus(token, environment: fixture.environment) == 401)
    }
}
