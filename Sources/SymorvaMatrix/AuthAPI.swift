import Foundation
import SymorvaMachines

/// The Matrix client-server endpoints of the session feature, as pure request builders.
///
/// Each builder returns a ``MatrixEndpoint``; the matching response types (``LoginResponse``,
/// ``RegisterResponse``, ``UserInteractiveAuthResponse``, …) decode the answers, and
/// ``sessionError(for:status:errcode:softLogout:retryAfter:)`` maps an error answer to a
/// ``SessionError``. Paths follow spec v1.11 (`/_matrix/client/v3`).
package enum AuthAPI {
    /// The prefix of the stable client-server endpoints.
    package static let clientPrefix = "/_matrix/client/v3"

    /// The operations whose errors are mapped differently (`M_FORBIDDEN` means a wrong
    /// password on `/login` but disabled registration on `/register`).
    package enum Operation: Sendable, Hashable {
        /// `GET /.well-known/matrix/client`.
        case wellKnown
        /// `GET /_matrix/client/versions`.
        case versions
        /// `POST /login`.
        case login
        /// `POST /register`.
        case register
        /// `POST /refresh`.
        case refresh
        /// `POST /logout`.
        case logout
        /// `GET /account/whoami`.
        case whoami
        /// A request behind user-interactive authentication (a cross-signing reset, removing a
        /// device).
        case authorized
        /// `POST /user/{userId}/openid/request_token`.
        case openIDToken
    }

    // MARK: - Builders

    /// `GET https://<server name>/.well-known/matrix/client`: use with
    /// ``SymorvaMachines/HomeserverURL/init(serverName:)`` as the base.
    package static func wellKnown() -> MatrixEndpoint {
        MatrixEndpoint(method: .get, path: "/.well-known/matrix/client", requiresAuth: false)
    }

    /// `GET /_matrix/client/versions`: spec versions and unstable features.
    package static func versions() -> MatrixEndpoint {
        MatrixEndpoint(method: .get, path: "/_matrix/client/versions", requiresAuth: false)
    }

    /// `POST /login` with a password (`m.id.user` identifier) or a login token, asking for a
    /// refresh token when `request.requestsRefreshToken`.
    package static func login(_ request: LoginRequest) -> MatrixEndpoint {
        var body = LoginBody(
            type: "", deviceID: request.deviceID?.rawValue, initialDeviceDisplayName: request.deviceDisplayName,
            refreshToken: request.requestsRefreshToken)
        switch request.credentials {
        case .password(let username, let password):
            body.type = "m.login.password"
            body.identifier = UserIdentifier(type: "m.id.user", user: username)
            body.password = password.exposedValue
        case .loginToken(let token):
            body.type = "m.login.token"
            body.token = token.exposedValue
        }
        return MatrixEndpoint(method: .post, path: clientPrefix + "/login", body: encode(body), requiresAuth: false)
    }

    /// `POST /register?kind=user`: without `auth` the server answers `401` with the flows; with
    /// `auth` it completes that stage of the UIA session.
    package static func register(_ request: RegisterRequest) -> MatrixEndpoint {
        let auth = request.auth.map { auth -> AuthBody in
            switch auth {
            case .dummy(let session): AuthBody(type: auth.stageType, session: session)
            }
        }
        let body = RegisterBody(
            username: request.username, password: request.password.exposedValue, auth: auth,
            initialDeviceDisplayName: request.deviceDisplayName, inhibitLogin: false,
            refreshToken: request.requestsRefreshToken)
        return MatrixEndpoint(
            method: .post, path: clientPrefix + "/register", query: [.init(name: "kind", value: "user")],
            body: encode(body), requiresAuth: false)
    }

    /// `POST /refresh`: authenticated by the refresh token in the body, not by the access token.
    package static func refresh(_ request: RefreshRequest) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .post, path: clientPrefix + "/refresh",
            body: encode(RefreshBody(refreshToken: request.refreshToken.exposedValue)), requiresAuth: false)
    }

    /// `POST /logout`: ends the device's session and invalidates its tokens.
    package static func logout() -> MatrixEndpoint {
        MatrixEndpoint(method: .post, path: clientPrefix + "/logout", body: Array("{}".utf8), requiresAuth: true)
    }

    /// `GET /account/whoami`: which user and device the access token belongs to.
    package static func whoami() -> MatrixEndpoint {
        MatrixEndpoint(method: .get, path: clientPrefix + "/account/whoami", requiresAuth: true)
    }

    /// `POST /user/{userId}/openid/request_token`: a token the community services verify with
    /// the homeserver to learn who the member is.
    package static func requestOpenIDToken(for userID: UserID) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .post, path: clientPrefix + "/user/\(percentEncoded(userID.rawValue))/openid/request_token",
            body: Array("{}".utf8), requiresAuth: true)
    }

    // MARK: - Errors

    /// The ``SessionError`` for an error answer of `operation`: HTTP `status`, the body's
    /// `errcode` and `soft_logout`, and the rate limit's `retry_after_ms` (or `Retry-After`).
    package static func sessionError(
        for operation: Operation, status: Int, errcode: String?, softLogout: Bool = false, retryAfter: Duration? = nil
    ) -> SessionError {
        switch (errcode, operation) {
        case ("M_LIMIT_EXCEEDED", _): return .rateLimited(retryAfter: retryAfter)
        case ("M_UNKNOWN_TOKEN", _): return .unknownToken(softLogout: softLogout)
        case ("M_USER_DEACTIVATED", _): return .userDeactivated
        case ("M_FORBIDDEN", .login): return .invalidCredentials
        case ("M_USER_IN_USE", .register): return .userInUse
        case ("M_INVALID_USERNAME", .register), ("M_EXCLUSIVE", .register): return .invalidUsername
        case (_, .register) where status == 403: return .registrationDisabled
        case (_, .wellKnown): return .discoveryFailed(reason: "HTTP \(status) from .well-known")
        case _ where status == 429: return .rateLimited(retryAfter: retryAfter)
        default: return .serverError(status: status, errcode: errcode)
        }
    }

    // MARK: - Encoding and decoding

    static func encode(_ body: some Encodable) -> [UInt8] {
        // The bodies are plain strings and booleans: encoding cannot fail.
        (try? WireJSON.encode(body)) ?? Array("{}".utf8)
    }

    /// Decodes a response body, mapping failures to ``SessionError/invalidResponse(reason:)``
    /// with the field path only (never the values, which may be tokens): ``WireJSON``'s reason.
    package static func decode<Response: Decodable>(_ type: Response.Type, from body: [UInt8])
        throws(SessionError) -> Response
    {
        do throws(WireJSONError) {
            return try WireJSON.decode(Response.self, from: body)
        } catch {
            throw .invalidResponse(reason: error.reason)
        }
    }
}

// MARK: - Request bodies

struct UserIdentifier: Encodable {
    var type: String
    var user: String
}

struct LoginBody: Encodable {
    var type: String
    var identifier: UserIdentifier?
    var password: String?
    var token: String?
    var deviceID: String?
    var initialDeviceDisplayName: String?
    var refreshToken: Bool

    init(type: String, deviceID: String?, initialDeviceDisplayName: String?, refreshToken: Bool) {
        self.type = type
        self.deviceID = deviceID
        self.initialDeviceDisplayName = initialDeviceDisplayName
        self.refreshToken = refreshToken
    }

    enum CodingKeys: String, CodingKey {
        case type, identifier, password, token
        case deviceID = "device_id"
        case initialDeviceDisplayName = "initial_device_display_name"
        case refreshToken = "refresh_token"
    }
}

struct AuthBody: Encodable {
    var type: String
    var session: String?
}

struct RegisterBody: Encodable {
    var username: String
    var password: String
    var auth: AuthBody?
    var initialDeviceDisplayName: String?
    var inhibitLogin: Bool
    var refreshToken: Bool

    enum CodingKeys: String, CodingKey {
        case username, password, auth
        case initialDeviceDisplayName = "initial_device_display_name"
        case inhibitLogin = "inhibit_login"
        case refreshToken = "refresh_token"
    }
}

struct RefreshBody: Encodable {
    var refreshToken: String

    enum CodingKeys: String, CodingKey {
        case refreshToken = "refresh_token"
    }
}
