import Foundation
import SymorvaHTTP
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices
import SymorvaTesting
import Testing

/// An OpenID source that knows the member's Matrix device.
private struct DeviceOpenIDSource: OpenIDTokenSource {
    let device: String?
    func requestOpenIDToken() async throws(ServicesError) -> OpenIDToken {
        OpenIDToken(accessToken: Secret("openid-token"), matrixServerName: "localhost", expiresIn: 3600)
    }
    func deviceID() async -> String? { device }
}

@Suite("Services client: device binding and sign-out")
struct ServicesLogoutTests {
    static let whoami = "/_symorva/v1/whoami"
    static let logout = "/_symorva/v1/auth/logout"

    func client(_ transport: ScriptedHTTPTransport, device: String? = "DEVICEA") -> CommunityServicesClient {
        CommunityServicesClient(
            baseURL: URL(string: "https://services.test")!, transport: transport,
            tokenSource: DeviceOpenIDSource(device: device), clock: ManualClock())
    }

    func exchangeBody(_ transport: ScriptedHTTPTransport) throws -> [String: Any] {
        let request = try #require(transport.requests("POST", ScriptedHTTPTransport.servicesOpenIDPath).first)
        return try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
    }

    func scriptedTransport() -> ScriptedHTTPTransport {
        // Not `communityServices()`: its exchange is unrecorded, and this test reads its body.
        let transport = ScriptedHTTPTransport()
        transport.on("POST", ScriptedHTTPTransport.servicesOpenIDPath) { _ in
            .json(200, #"{"access_token": "services-token", "expires_in_ms": 3600000}"#)
        }
        transport.on("GET", Self.whoami) { _ in .json(200, #"{"user_id": "@alice:localhost"}"#) }
        return transport
    }

    @Test("The OpenID exchange sends the account's Matrix device ID")
    func exchangeSendsDeviceID() async throws {
        let transport = scriptedTransport()
        _ = try await client(transport).send(.get, Self.whoami)
        let body = try exchangeBody(transport)
        #expect(body["device_id"] as? String == "DEVICEA")
        #expect(body["access_token"] as? String == "openid-token")
        #expect(body["matrix_server_name"] as? String == "localhost")
    }

    @Test("Without a known device the exchange leaves device_id out")
    func exchangeWithoutDevice() async throws {
        let transport = scriptedTransport()
        _ = try await client(transport, device: nil).send(.get, Self.whoami)
        #expect(try exchangeBody(transport)["device_id"] == nil)
    }

    @Test("Logging out presents the token in use, returns the revoked count and forgets the token")
    func logOut() async throws {
        let transport = scriptedTransport()
        transport.on("POST", Self.logout) { _ in .json(200, #"{"revoked": 2}"#) }
        let client = client(transport)
        _ = try await client.send(.get, Self.whoami)
        #expect(try await client.logOut() == 2)
        let request = try #require(transport.requests("POST", Self.logout).first)
        #expect(request.bearerToken?.exposedValue == "services-token")
        #expect(Array(request.body) == Array("{}".utf8))
        _ = try await client.send(.get, Self.whoami)
        #expect(await client.exchanges == 2)
    }

    @Test("Logging out of all devices says so in the body")
    func logOutAllDevices() async throws {
        let transport = scriptedTransport()
        transport.on("POST", Self.logout) { _ in .json(200, #"{"revoked": 5}"#) }
        #expect(try await client(transport).logOut(allDevices: true) == 5)
        let request = try #require(transport.requests("POST", Self.logout).first)
        #expect(Array(request.body) == Array(#"{"all_devices": true}"#.utf8))
    }

    @Test("A failed logout is a typed error, and the token is forgotten anyway")
    func logOutFails() async throws {
        let transport = scriptedTransport()
        transport.on("POST", Self.logout) { _ in .json(500, #"{"errcode": "SY_INTERNAL", "error": "x"}"#) }
        let client = client(transport)
        _ = try await client.send(.get, Self.whoami)
        await #expect(throws: ServicesError.server(code: "SY_INTERNAL", status: 500, message: "x", retryAfter: nil)) {
            try await client.logOut()
        }
        _ = try await client.send(.get, Self.whoami)
        #expect(await client.exchanges == 2)
    }
}
