import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

@Suite("Matrix auth API: request builders")
struct AuthAPIRequestTests {
    let base = HomeserverURL("http://127.0.0.1:8008")!

    func bodyText(_ endpoint: MatrixEndpoint) -> String? {
        endpoint.body.map { String(decoding: $0, as: UTF8.self) }
    }

    @Test("Password login: m.id.user identifier, device name, refresh token requested")
    func passwordLogin() {
        let endpoint = AuthAPI.login(
            LoginRequest(
                homeserverURL: base, credentials: .password(username: "alice", password: Secret("s3cret")),
                deviceDisplayName: "Orbit on Linux"))
        #expect(endpoint.method == .post)
        #expect(endpoint.path == "/_matrix/client/v3/login")
        #expect(!endpoint.requiresAuth)
        #expect(
            bodyText(endpoint)
                == #"{"identifier":{"type":"m.id.user","user":"alice"},"initial_device_display_name":"Orbit on Linux","#
                + #""password":"s3cret","refresh_token":true,"type":"m.login.password"}"#)
        #expect(endpoint.urlString(relativeTo: base) == "http://127.0.0.1:8008/_matrix/client/v3/login")
    }

    @Test("Re-authentication after soft logout names the existing device")
    func reauthenticationLogin() {
        let endpoint = AuthAPI.login(
            LoginRequest(
                homeserverURL: base, credentials: .password(username: "@alice:localhost", password: Secret("pw")),
                deviceID: DeviceID("ALICEPHONE"), requestsRefreshToken: true))
        #expect(
            bodyText(endpoint)
                == #"{"device_id":"ALICEPHONE","identifier":{"type":"m.id.user","user":"@alice:localhost"},"#
                + #""password":"pw","refresh_token":true,"type":"m.login.password"}"#)
    }

    @Test("Token login uses m.login.token")
    func tokenLogin() {
        let endpoint = AuthAPI.login(
            LoginRequest(homeserverURL: base, credentials: .loginToken(Secret("tok")), requestsRefreshToken: false))
        #expect(bodyText(endpoint) == #"{"refresh_token":false,"token":"tok","type":"m.login.token"}"#)
    }

    @Test("First /register call has no auth and asks for kind=user")
    func registerFirstCall() {
        let endpoint = AuthAPI.register(
            RegisterRequest(homeserverURL: base, username: "alice", password: Secret("pw")))
        #expect(endpoint.path == "/_matrix/client/v3/register")
        #expect(endpoint.query == [.init(name: "kind", value: "user")])
        #expect(
            bodyText(endpoint)
                == #"{"inhibit_login":false,"password":"pw","refresh_token":true,"username":"alice"}"#)
        #expect(endpoint.urlString(relativeTo: base) == "http://127.0.0.1:8008/_matrix/client/v3/register?kind=user")
    }

    @Test("Second /register call completes m.login.dummy with the UIA session")
    func registerDummyStage() {
        let endpoint = AuthAPI.register(
            RegisterRequest(
                homeserverURL: base, username: "alice", password: Secret("pw"), auth: .dummy(session: "xxxxx"),
                deviceDisplayName: "Orbit"))
        #expect(
            bodyText(endpoint)
                == #"{"auth":{"session":"xxxxx","type":"m.login.dummy"},"inhibit_login":false,"#
                + #""initial_device_display_name":"Orbit","password":"pw","refresh_token":true,"username":"alice"}"#)
    }

    @Test("Refresh is authenticated by its body, not the access token")
    func refresh() {
        let endpoint = AuthAPI.refresh(RefreshRequest(homeserverURL: base, refreshToken: Secret("rt")))
        #expect(endpoint.path == "/_matrix/client/v3/refresh")
        #expect(!endpoint.requiresAuth)
        #expect(bodyText(endpoint) == #"{"refresh_token":"rt"}"#)
    }

    @Test("Logout, whoami and the OpenID token need the access token")
    func authenticatedEndpoints() {
        #expect(
            AuthAPI.logout()
                == MatrixEndpoint(
                    method: .post, path: "/_matrix/client/v3/logout", body: Array("{}".utf8), requiresAuth: true))
        #expect(
            AuthAPI.whoami()
                == MatrixEndpoint(method: .get, path: "/_matrix/client/v3/account/whoami", requiresAuth: true))
        let openID = AuthAPI.requestOpenIDToken(for: UserID("@alice:localhost"))
        #expect(openID.path == "/_matrix/client/v3/user/%40alice%3Alocalhost/openid/request_token")
        #expect(openID.requiresAuth && openID.method == .post)
    }

    @Test("Discovery endpoints need no token")
    func discoveryEndpoints() {
        #expect(AuthAPI.wellKnown().path == "/.well-known/matrix/client")
        #expect(AuthAPI.versions().path == "/_matrix/client/versions")
        #expect(
            AuthAPI.wellKnown().urlString(relativeTo: HomeserverURL(serverName: "example.org")!)
                == "https://example.org/.well-known/matrix/client")
    }

    @Test("An endpoint's description never shows its body")
    func endpointRedaction() {
        let endpoint = AuthAPI.login(
            LoginRequest(homeserverURL: base, credentials: .password(username: "alice", password: Secret("CANARY"))))
        var dumped = ""
        dump(endpoint, to: &dumped)
        for text in [String(describing: endpoint), String(reflecting: endpoint), dumped] {
            #expect(!text.contains("CANARY"))
        }
        #expect(endpoint.description == "POST /_matrix/client/v3/login <body redacted>")
    }
}

@Suite("Matrix auth API: error mapping")
struct AuthAPIErrorTests {
    @Test(
        "Error answers map to typed session errors",
        arguments: [
            (AuthAPI.Operation.login, 403, "M_FORBIDDEN" as String?, false, SessionError.invalidCredentials),
            (.login, 403, "M_USER_DEACTIVATED", false, .userDeactivated),
            (.login, 429, "M_LIMIT_EXCEEDED", false, .rateLimited(retryAfter: .milliseconds(2_000))),
            (.register, 400, "M_USER_IN_USE", false, .userInUse),
            (.register, 400, "M_INVALID_USERNAME", false, .invalidUsername),
            (.register, 400, "M_EXCLUSIVE", false, .invalidUsername),
            (.register, 403, "M_FORBIDDEN", false, .registrationDisabled),
            (.refresh, 401, "M_UNKNOWN_TOKEN", true, .unknownToken(softLogout: true)),
            (.refresh, 401, "M_UNKNOWN_TOKEN", false, .unknownToken(softLogout: false)),
            (.logout, 401, "M_UNKNOWN_TOKEN", false, .unknownToken(softLogout: false)),
            (.whoami, 500, "M_UNKNOWN", false, .serverError(status: 500, errcode: "M_UNKNOWN")),
            (.versions, 502, nil, false, .serverError(status: 502, errcode: nil)),
            (.wellKnown, 500, nil, false, .discoveryFailed(reason: "HTTP 500 from .well-known")),
        ])
    func mapping(operation: AuthAPI.Operation, status: Int, errcode: String?, softLogout: Bool, expected: SessionError)
    {
        let retryAfter: Duration? = errcode == "M_LIMIT_EXCEEDED" ? .milliseconds(2_000) : nil
        #expect(
            AuthAPI.sessionError(
                for: operation, status: status, errcode: errcode, softLogout: softLogout, retryAfter: retryAfter)
                == expected)
    }
}
