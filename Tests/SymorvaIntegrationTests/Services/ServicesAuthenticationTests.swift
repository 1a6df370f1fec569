import Foundation
import SymorvaHTTP
import SymorvaKit
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices
import SymorvaTransport
import Testing

/// Gets OpenID tokens straight from the homeserver for a registered account.
struct HomeserverOpenIDSource: OpenIDTokenSource {
    let account: RegisteredAccount
    let environment: DevEnvironment
    let transport: any HTTPTransport

    func requestOpenIDToken() async throws(ServicesError) -> OpenIDToken {
        let url = environment.homeserverURL.appending(
            path: "/_matrix/client/v3/user/\(account.userID)/openid/request_token")
        let response: HTTPResponse
        do {
            response = try await transport.send(
                .json(.post, url: url, body: Array("{}".utf8), bearerToken: account.accessToken))
        } catch {
            throw .transport(error)
        }
        struct Answer: Decodable {
            let access_token: String
            let matrix_server_name: String
            let expires_in: Int
        }
        guard response.isSuccess, let answer = try? JSONDecoder().decode(Answer.self, from: Data(response.body)) else {
            throw .openIDRefused(MatrixError.decode(from: response)?.code ?? .unknown, status: response.status)
        }
        return OpenIDToken(
            accessToken: Secret(answer.access_token), matrixServerName: answer.matrix_server_name,
            expiresIn: answer.expires_in)
    }
}

/// An OpenID source that forges tokens the homeserver never issued.
struct ForgedOpenIDSource: OpenIDTokenSource {
    let serverName: String
    func requestOpenIDToken() async throws(ServicesError) -> OpenIDToken {
        OpenIDToken(
            accessToken: Secret("forged-token-that-synapse-never-issued"), matrixServerName: serverName, expiresIn: 3600
        )
    }
}

@Suite("Community services sign-in over OpenID", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct ServicesAuthenticationTests {
    let environment = DevEnvironment.current!
    let transport = CurlTransport()

    @Test("A newly registered member gets a services token through the OpenID flow and is recognised")
    func openIDExchange() async throws {
        let account = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername("services"), in: environment, transport: transport)
        let client = CommunityServicesClient(
            baseURL: environment.servicesURL, transport: transport,
            tokenSource: HomeserverOpenIDSource(account: account, environment: environment, transport: transport))
        let body = try await client.send(.get, "/_symorva/v1/whoami")
        struct WhoAmI: Decodable { let user_id: String }
        #expect(try JSONDecoder().decode(WhoAmI.self, from: Data(body)).user_id == account.userID)
        #expect(await client.exchanges == 1)
    }

    @Test("Concurrent first requests share one OpenID exchange")
    func singleFlight() async throws {
        let account = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername("flight"), in: environment, transport: transport)
        let client = CommunityServicesClient(
            baseURL: environment.servicesURL, transport: transport,
            tokenSource: HomeserverOpenIDSource(account: account, environment: environment, transport: transport))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 { group.addTask { _ = try await client.send(.get, "/_symorva/v1/whoami") } }
            try await group.waitForAll()
        }
        #expect(await client.exchanges == 1)
    }

    @Test("A forged OpenID token is refused with a typed unauthorized error")
    func forgedToken() async throws {
        let client = CommunityServicesClient(
            baseURL: environment.servicesURL, transport: transport,
            tokenSource: ForgedOpenIDSource(serverName: environment.serverName))
        await #expect(throws: ServicesError.unauthorized(code: "SY_UNKNOWN_TOKEN")) {
            _ = try await client.send(.get, "/_symorva/v1/whoami")
        }
    }

    @Test("A token from a foreign homeserver name is refused as forbidden")
    func foreignServer() async throws {
        let client = CommunityServicesClient(
            baseURL: environment.servicesURL, transport: transport,
            tokenSource: ForgedOpenIDSource(serverName: "elsewhere.example"))
        await #expect(throws: ServicesError.unauthorized(code: "SY_FORBIDDEN")) {
            _ = try await client.send(.get, "/_symorva/v1/whoami")
        }
    }

    @Test("Health and discovery answer without a token; capabilities do not")
    func unauthenticatedEndpoints() async throws {
        let client = CommunityServicesClient(
            baseURL: environment.servicesURL, transport: transport,
            tokenSource: ForgedOpenIDSource(serverName: environment.serverName))
        _ = try await client.sendUnauthenticated(.get, "/_symorva/v1/health")
        _ = try await client.sendUnauthenticated(.get, "/.well-known/symorva")
        await #expect(throws: ServicesError.unauthorized(code: "SY_MISSING_TOKEN")) {
            _ = try await client.sendUnauthenticated(.get, "/_symorva/v1/capabilities")
        }
    }
}
