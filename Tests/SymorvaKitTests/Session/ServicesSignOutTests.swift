import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaKit
@testable import SymorvaSession
@testable import SymorvaWallet

/// What the OpenID exchanges sent.
final class ExchangeLog: Sendable {
    private let bodies = Lock<[[UInt8]]>([])
    func append(_ body: [UInt8]) { bodies.withLock { $0.append(body) } }
    var first: [UInt8]? { bodies.withLock { $0.first } }
    var count: Int { bodies.withLock { $0.count } }
}

/// Signing out of an account signs it out of the community services first, best effort.
@Suite("Sign-out revokes the services token before the Matrix logout")
struct ServicesSignOutTests {
    let clients = CommunityClientsTests()
    /// The bodies of the OpenID exchanges (the script leaves them out of its requests).
    let exchanges = ExchangeLog()
    static let servicesLogout = "/_symorva/v1/auth/logout"
    static let matrixLogout = "/_matrix/client/v3/logout"

    /// The services (wallet balances, logout) and the homeserver (OpenID, logout) of alice.
    func transport(servicesLogout: @escaping ScriptedHTTPTransport.Answer) -> ScriptedHTTPTransport {
        let transport = ScriptedHTTPTransport.communityServicesWithOpenID()
        let exchanges = exchanges
        transport.on("POST", ScriptedHTTPTransport.servicesOpenIDPath) { request in
            exchanges.append(request.body)
            return .json(200, #"{"access_token": "services-token", "expires_in_ms": 3600000}"#)
        }
        transport.on("GET", "/_symorva/v1/wallet/balances") { _ in .json(200, #"{"balances": []}"#) }
        transport.on("POST", Self.servicesLogout, servicesLogout)
        transport.on("POST", Self.matrixLogout) { _ in .json(200, "{}") }
        return transport
    }

    func paths(_ transport: ScriptedHTTPTransport) -> [String] {
        transport.requests.map(\.url.path).filter { $0 == Self.servicesLogout || $0 == Self.matrixLogout }
    }

    @Test("The exchange binds the services token to the session's device; sign-out logs it out, then Matrix")
    func servicesLogoutFirst() async throws {
        let transport = transport { _ in .json(200, #"{"revoked": 1}"#) }
        let community = try await clients.signedInCommunity(wallet: true, transport: transport)
        _ = try await #require(community.wallet).refreshBalances()
        try expectExchangeNamedTheDevice()

        try await community.session.signOut()
        try expectServicesLogoutFirst(transport, community)
        await community.shutdown()
    }

    @Test("A token held at sign-out is presented as it is: no new OpenID exchange")
    func heldTokenNeedsNoExchange() async throws {
        let transport = transport { _ in .json(200, #"{"revoked": 1}"#) }
        let community = try await clients.signedInCommunity(wallet: true, transport: transport)
        _ = try await #require(community.wallet).refreshBalances()
        #expect(exchanges.count == 1)

        try await community.session.signOut()
        #expect(paths(transport) == [Self.servicesLogout, Self.matrixLogout])
        #expect(exchanges.count == 1)
        await community.shutdown()
    }

    @Test("With no services token held, sign-out gets one from the still-live session, then logs out of Matrix")
    func servicesLogoutWithoutHeldToken() async throws {
        let transport = transport { _ in .json(200, #"{"revoked": 1}"#) }
        let community = try await clients.signedInCommunity(wallet: true, transport: transport)

        try await community.session.signOut()
        #expect(exchanges.count == 1)
        try expectExchangeNamedTheDevice()
        try expectServicesLogoutFirst(transport, community)
        await community.shutdown()
    }

    /// The OpenID exchange (the first) named the Matrix device.
    func expectExchangeNamedTheDevice() throws {
        let exchange = try #require(exchanges.first)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(exchange)) as? [String: Any])
        #expect(body["device_id"] as? String == "DEVICE")
    }

    /// The services logout, with the services token, came before the Matrix logout, and the
    /// community went back to the other stored account.
    func expectServicesLogoutFirst(_ transport: ScriptedHTTPTransport, _ community: SymorvaCommunity) throws {
        #expect(paths(transport) == [Self.servicesLogout, Self.matrixLogout])
        let logout = try #require(transport.requests("POST", Self.servicesLogout).first)
        #expect(logout.bearerToken?.exposedValue == "services-token")
        #expect(community.session.state.value.account?.userID == SessionSamples.bob)
    }

    @Test("A services logout that never answers holds the sign-out up for the timeout only")
    func servicesLogoutTimeout() async throws {
        let gate = TestGate()
        let transport = transport(servicesLogout: ScriptedHTTPTransport.held(by: gate) { _ in .json(200, "{}") })
        let clock = ManualClock()
        let community = try await clients.signedInCommunity(wallet: true, transport: transport, clock: clock)
        _ = try await #require(community.wallet).refreshBalances()

        let start = clock.now
        let signOut = Task { try await community.session.signOut() }
        try await gate.waitForWaiters(count: 1)
        try await clock.waitForDeadline(start + ServicesSignOut.timeout)
        #expect(transport.requests("POST", Self.matrixLogout).isEmpty)
        await clock.advance(by: ServicesSignOut.timeout)
        try await signOut.value
        #expect(paths(transport) == [Self.servicesLogout, Self.matrixLogout])
        #expect(community.session.state.value.account?.userID == SessionSamples.bob)
        gate.open()
        await community.shutdown()
    }

    @Test("A failing services logout never blocks the sign-out: Matrix is logged out and the account wiped")
    func servicesLogoutFailureIsBestEffort() async throws {
        let transport = transport { _ in .failure(.connectFailed) }
        let community = try await clients.signedInCommunity(wallet: true, transport: transport)
        _ = try await #require(community.wallet).refreshBalances()

        try await community.session.signOut()
        #expect(paths(transport) == [Self.servicesLogout, Self.matrixLogout])
        #expect(community.session.state.value.account?.userID == SessionSamples.bob)
        #expect(!community.session.accounts.value.contains { $0.userID == SessionSamples.alice })
        await community.shutdown()
    }
}
