import Foundation
import SymorvaHTTP
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTransport
import Testing

@testable import SymorvaKit
@testable import SymorvaSession

/// Passes requests on; keeps the bearer tokens the SDK presented to the services' `whoami`, the
/// answers to the services logout, and the order of the services and Matrix logouts.
private final class ServicesTokenCapture: HTTPTransport {
    static let servicesLogout = "/_symorva/v1/auth/logout"
    static let matrixLogout = "/_matrix/client/v3/logout"

    /// The services' answer to one logout.
    struct LogoutAnswer: Decodable {
        let revoked: Int
    }

    let base: any HTTPTransport
    private let tokens = Lock<[Secret<String>]>([])
    private let logouts = Lock<[(path: String, status: Int, body: [UInt8])]>([])
    private let exchangeCount = Lock(0)

    init(_ base: any HTTPTransport) { self.base = base }

    func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        let path = request.url.path
        if path == "/_symorva/v1/whoami", let token = request.bearerToken {
            tokens.withLock { $0.append(token) }
        }
        if path == "/_symorva/v1/auth/openid" { exchangeCount.withLock { $0 += 1 } }
        let response = try await base.send(request)
        if path == Self.servicesLogout || path == Self.matrixLogout {
            logouts.withLock { $0.append((path, response.status, response.body)) }
        }
        return response
    }

    var last: Secret<String>? { tokens.withLock { $0.last } }

    /// How many OpenID exchanges the services were asked for.
    var exchanges: Int { exchangeCount.withLock { $0 } }

    /// The paths of the services and Matrix logouts, in the order they were answered.
    var logoutPaths: [String] { logouts.withLock { $0.map(\.path) } }

    /// How many tokens each successful services logout revoked.
    var revoked: [Int] {
        logouts.withLock { logouts in
            logouts.filter { $0.path == Self.servicesLogout && $0.status == 200 }
                .compactMap { WireJSON.decodeIfValid(LogoutAnswer.self, from: $0.body)?.revoked }
        }
    }
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

    /// The services logout was answered (it revoked tokens) before the Matrix logout, and the
    /// best-effort failure path was not taken.
    fileprivate func expectServicesSignedOutFirst(_ capture: ServicesTokenCapture, logs: String) {
        #expect(
            capture.logoutPaths == [ServicesTokenCapture.servicesLogout, ServicesTokenCapture.matrixLogout],
            "\(capture.logoutPaths)")
        #expect(capture.revoked.count == 1 && capture.revoked.allSatisfy { $0 >= 1 }, "\(capture.revoked)")
        #expect(logs.contains("signed out of the services"))
        #expect(!logs.contains("signing out of the services failed"))
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
        expectServicesSignedOutFirst(capture, logs: fixture.logs.text)
        // The token the client held was presented: the sign-out made no exchange of its own.
        #expect(capture.exchanges == 1)
    }

    @Test("A services token of an earlier launch is revoked by a sign-out that never used the services")
    func earlierLaunchTokenRevokedAtSignOut() async throws {
        let data = TemporaryDataDirectory()
        let first = ServicesTokenCapture(CurlTransport())
        let launched = CommunityFixture(data: data, transport: first)
        await launched.community.launch()
        try await launched.community.session.register(
            username: DevEnvironment.uniqueUsername("svcold"), password: testPassword)
        _ = try await #require(launched.activeContext).services.send(.get, "/_symorva/v1/whoami")
        let token = try #require(first.last)
        await launched.community.shutdown()

        // The next launch restores the account; its services client holds no token.
        let capture = ServicesTokenCapture(CurlTransport())
        let relaunched = CommunityFixture(data: data, transport: capture)
        await relaunched.community.launch()
        #expect(relaunched.community.session.state.value.account != nil)
        #expect(try await rawWhoAmIStatus(token, environment: relaunched.environment) == 200)

        try await relaunched.community.session.signOut()
        #expect(relaunched.community.session.state.value == .signedOut)
        #expect(try await rawWhoAmIStatus(token, environment: relaunched.environment) == 401)
        expectServicesSignedOutFirst(capture, logs: relaunched.logs.text)
        // None held: the sign-out host's live session answered the OpenID request.
        #expect(capture.exchanges == 1)
    }
}
