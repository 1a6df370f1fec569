import SymorvaMachines
import SymorvaRuntime

/// `GET /.well-known/matrix/client`: where the server name's homeserver (and identity server) is.
package struct ClientWellKnown: Decodable, Sendable, Hashable {
    /// One `{"base_url": …}` entry.
    package struct ServerInformation: Decodable, Sendable, Hashable {
        /// The base URL as published, not yet validated.
        package var baseURL: String
        enum CodingKeys: String, CodingKey { case baseURL = "base_url" }
    }

    /// `m.homeserver`: required.
    package var homeserver: ServerInformation
    /// `m.identity_server`: optional and unused by this SDK.
    package var identityServer: ServerInformation?

    enum CodingKeys: String, CodingKey {
        case homeserver = "m.homeserver"
        case identityServer = "m.identity_server"
    }

    /// The discovery failure of a `.well-known` that points at a plain-http, non-loopback base URL.
    package static let plainHTTPReason =
        "m.homeserver.base_url uses plain http to a host that is not loopback (no downgrade from https)"

    /// Reads a `.well-known` body into a validated base URL, failing discovery as the spec says
    /// (`FAIL_PROMPT` for a missing or unreadable `m.homeserver`, `FAIL_ERROR` for a bad URL).
    package static func homeserverURL(from body: [UInt8]) throws(SessionError) -> HomeserverURL {
        let wellKnown: ClientWellKnown
        do {
            wellKnown = try AuthAPI.decode(ClientWellKnown.self, from: body)
        } catch {
            throw .discoveryFailed(reason: "m.homeserver is missing or unreadable")
        }
        // Discovery always reads `.well-known` over https; a plain-http base URL (loopback
        // excepted) would downgrade every later request, credentials included.
        switch HomeserverURL.validate(wellKnown.homeserver.baseURL) {
        case .success(let url): return url
        case .failure(.notAbsoluteHTTPURL):
            throw .discoveryFailed(reason: "m.homeserver.base_url is not an absolute http(s) URL")
        case .failure(.plainHTTP):
            throw .discoveryFailed(reason: Self.plainHTTPReason)
        }
    }
}

/// `GET /_matrix/client/versions`.
package struct VersionsResponse: Decodable, Sendable, Hashable {
    /// Supported spec versions.
    package var versions: [String]
    /// Unstable features and whether each is on.
    package var unstableFeatures: [String: Bool]?

    enum CodingKeys: String, CodingKey {
        case versions
        case unstableFeatures = "unstable_features"
    }

    /// The machine's view of the answer.
    package var serverVersions: ServerVersions {
        ServerVersions(versions: versions, unstableFeatures: unstableFeatures ?? [:])
    }
}

/// The tokens part shared by `/login`, `/register` and `/refresh` answers, wrapped in
/// ``Secret`` as soon as they are decoded so that no description of a response shows them.
private struct TokenFields: Decodable, Sendable {
    var accessToken: Secret<String>?
    var refreshToken: Secret<String>?
    var expiresInMilliseconds: Int64?

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case refreshToken = "refresh_token"
        case expiresInMilliseconds = "expires_in_ms"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        accessToken = try container.decodeIfPresent(String.self, forKey: .accessToken).map(Secret.init)
        refreshToken = try container.decodeIfPresent(String.self, forKey: .refreshToken).map(Secret.init)
        expiresInMilliseconds = try container.decodeIfPresent(Int64.self, forKey: .expiresInMilliseconds)
    }

    func tokens(receivedAt: Timestamp, context: String) throws(SessionError) -> SessionTokens {
        guard let accessToken else { throw .invalidResponse(reason: "missing access_token in \(context)") }
        return SessionTokens(
            accessToken: accessToken, refreshToken: refreshToken,
            expiry: expiresInMilliseconds.map { TokenExpiry(issuedAt: receivedAt, lifetime: .milliseconds($0)) })
    }
}

/// `POST /login` → 200. Tokens are ``Secret``s from the moment they are decoded.
package struct LoginResponse: Decodable, Sendable, Equatable {
    /// The signed-in user.
    package var userID: UserID
    /// The device the tokens belong to.
    package var deviceID: DeviceID
    /// The tokens, stamped with the time the response arrived.
    package var accessToken: Secret<String>
    /// The refresh token, when `refresh_token: true` was asked and the server supports it.
    package var refreshToken: Secret<String>?
    /// The access token's lifetime (`expires_in_ms`).
    package var expiresIn: Duration?

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case deviceID = "device_id"
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        userID = try container.decode(UserID.self, forKey: .userID)
        deviceID = try container.decode(DeviceID.self, forKey: .deviceID)
        let tokens = try TokenFields(from: decoder)
        guard let access = tokens.accessToken else {
            throw DecodingError.keyNotFound(
                TokenFields.CodingKeys.accessToken, .init(codingPath: [], debugDescription: "access_token"))
        }
        accessToken = access
        refreshToken = tokens.refreshToken
        expiresIn = tokens.expiresInMilliseconds.map { .milliseconds($0) }
    }

    /// The machine's grant, expiry stamped from `receivedAt`.
    package func grant(receivedAt: Timestamp) -> SessionGrant {
        SessionGrant(
            userID: userID, deviceID: deviceID,
            tokens: SessionTokens(
                accessToken: accessToken, refreshToken: refreshToken,
                expiry: expiresIn.map { TokenExpiry(issuedAt: receivedAt, lifetime: $0) }))
    }
}

/// `POST /register` → 200. Without `inhibit_login` it carries a login like ``LoginResponse``.
package struct RegisterResponse: Decodable, Sendable {
    /// The new account.
    package var userID: UserID
    /// The device, absent with `inhibit_login`.
    package var deviceID: DeviceID?
    private var fields: TokenFields

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case deviceID = "device_id"
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        userID = try container.decode(UserID.self, forKey: .userID)
        deviceID = try container.decodeIfPresent(DeviceID.self, forKey: .deviceID)
        fields = try TokenFields(from: decoder)
    }

    /// The machine's grant; fails when the server registered without signing in.
    package func grant(receivedAt: Timestamp) throws(SessionError) -> SessionGrant {
        guard let deviceID else { throw .invalidResponse(reason: "missing device_id in /register") }
        return SessionGrant(
            userID: userID, deviceID: deviceID, tokens: try fields.tokens(receivedAt: receivedAt, context: "/register"))
    }
}

/// A `401` of a user-interactive-authentication endpoint (`/register`, …).
package struct UserInteractiveAuthResponse: Decodable, Sendable, Hashable {
    /// One flow: its stages in order.
    package struct Flow: Decodable, Sendable, Hashable {
        /// Stage types.
        package var stages: [String]
    }

    /// The UIA session to send back with the next stage.
    package var session: String?
    /// The accepted flows.
    package var flows: [Flow]
    /// Stages completed so far.
    package var completed: [String]?
    /// Per-stage parameters (terms documents, captcha keys), as JSON.
    package var params: [String: JSONValue]?
    /// Set when the last stage failed.
    package var errcode: String?

    /// The machine's view of the challenge.
    package var challenge: AuthenticationChallenge {
        AuthenticationChallenge(
            session: session, flows: flows.map { AuthenticationFlow(stages: $0.stages) }, completed: completed ?? [])
    }
}

/// `POST /refresh` → 200.
package struct RefreshResponse: Decodable, Sendable {
    private var fields: TokenFields

    package init(from decoder: any Decoder) throws {
        fields = try TokenFields(from: decoder)
        guard fields.accessToken != nil else {
            throw DecodingError.keyNotFound(
                TokenFields.CodingKeys.accessToken, .init(codingPath: [], debugDescription: "access_token"))
        }
    }

    /// The new tokens; a `nil` refresh token means the old one stays valid.
    package func tokens(receivedAt: Timestamp) throws(SessionError) -> SessionTokens {
        try fields.tokens(receivedAt: receivedAt, context: "/refresh")
    }
}

/// `GET /account/whoami` → 200.
package struct WhoAmIResponse: Decodable, Sendable, Hashable {
    /// The token's user.
    package var userID: UserID
    /// The token's device (absent for application services).
    package var deviceID: DeviceID?
    /// Whether the account is a guest.
    package var isGuest: Bool?

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case deviceID = "device_id"
        case isGuest = "is_guest"
    }
}

/// `POST /user/{userId}/openid/request_token` → 200: proof of identity for the community services.
package struct OpenIDTokenResponse: Decodable, Sendable {
    /// The token the services exchange at the homeserver's federation `openid/userinfo`.
    package var accessToken: Secret<String>
    /// Always `Bearer`.
    package var tokenType: String
    /// The homeserver that vouches for the token.
    package var matrixServerName: String
    /// Seconds until the token expires.
    package var expiresIn: Int

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case matrixServerName = "matrix_server_name"
        case expiresIn = "expires_in"
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        accessToken = Secret(try container.decode(String.self, forKey: .accessToken))
        tokenType = try container.decode(String.self, forKey: .tokenType)
        matrixServerName = try container.decode(String.self, forKey: .matrixServerName)
        expiresIn = try container.decode(Int.self, forKey: .expiresIn)
    }

    /// The token as the community services client takes it.
    package var openIDToken: OpenIDToken {
        OpenIDToken(accessToken: accessToken, matrixServerName: matrixServerName, expiresIn: expiresIn)
    }
}

/// A Matrix OpenID token: proof of the member's identity that a third party (the community
/// services) can check with the homeserver without ever seeing the Matrix access token.
public struct OpenIDToken: Sendable {
    /// The token itself.
    public var accessToken: Secret<String>
    /// The homeserver name the services must check the token with.
    public var matrixServerName: String
    /// Seconds the token stays valid.
    public var expiresIn: Int

    /// Creates a token.
    public init(accessToken: Secret<String>, matrixServerName: String, expiresIn: Int) {
        self.accessToken = accessToken
        self.matrixServerName = matrixServerName
        self.expiresIn = expiresIn
    }
}
