import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

@Suite("Matrix auth API: response decoding")
struct AuthResponsesTests {
    let now = Timestamp(millisecondsSince1970: 1_700_000_000_000)

    func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test("The spec's .well-known example yields its homeserver base URL")
    func wellKnown() throws {
        let body = bytes(
            #"{"m.homeserver": {"base_url": "https://matrix.example.com"}, "#
                + #""m.identity_server": {"base_url": "https://identity.example.com"}, "#
                + #""org.example.custom.property": {"app_url": "https://custom.app.example.org"}}"#)
        #expect(try ClientWellKnown.homeserverURL(from: body) == HomeserverURL("https://matrix.example.com"))
    }

    @Test(".well-known without m.homeserver fails discovery")
    func wellKnownMissingHomeserver() {
        #expect(throws: SessionError.discoveryFailed(reason: "m.homeserver is missing or unreadable")) {
            try ClientWellKnown.homeserverURL(from: self.bytes(#"{"m.identity_server": {"base_url": "https://id"}}"#))
        }
    }

    @Test(".well-known with a bad base URL fails discovery")
    func wellKnownBadURL() {
        #expect(throws: SessionError.discoveryFailed(reason: "m.homeserver.base_url is not an absolute http(s) URL")) {
            try ClientWellKnown.homeserverURL(
                from: self.bytes(#"{"m.homeserver": {"base_url": "matrix.example.com"}}"#))
        }
    }

    @Test(".well-known reached over https may not send the client to a plain-http base URL")
    func wellKnownPlainHTTPDowngrade() {
        #expect(throws: SessionError.discoveryFailed(reason: ClientWellKnown.plainHTTPReason)) {
            try ClientWellKnown.homeserverURL(
                from: self.bytes(#"{"m.homeserver": {"base_url": "http://matrix.example.com"}}"#))
        }
        #expect(ClientWellKnown.plainHTTPReason.contains("m.homeserver.base_url"))
    }

    @Test(".well-known may name a loopback plain-http base URL (the dev environment)")
    func wellKnownLoopbackHTTP() throws {
        let body = bytes(#"{"m.homeserver": {"base_url": "http://127.0.0.1:8008"}}"#)
        #expect(try ClientWellKnown.homeserverURL(from: body) == HomeserverURL("http://127.0.0.1:8008"))
    }

    @Test("Synapse's /versions answer: versions and unstable features")
    func versions() throws {
        let body = bytes(
            #"{"versions": ["r0.0.1", "r0.6.1", "v1.1", "v1.2", "v1.3", "v1.11", "v1.12"], "#
                + #""unstable_features": {"org.matrix.simplified_msc3575": true, "org.matrix.msc3882": false}}"#)
        let versions = try AuthAPI.decode(VersionsResponse.self, from: body).serverVersions
        #expect(versions.isSupported)
        #expect(versions.supportsRefreshTokens)
        #expect(versions.supportsSimplifiedSlidingSync)
        #expect(versions.unstableFeatures["org.matrix.msc3882"] == false)
    }

    @Test("A login with refresh token stamps the expiry from the arrival time")
    func loginWithRefreshToken() throws {
        let body = bytes(
            #"{"user_id": "@cheeky_monkey:matrix.org", "access_token": "abc123", "device_id": "GHTYAJCE", "#
                + #""expires_in_ms": 60000, "refresh_token": "def456", "home_server": "matrix.org", "#
                + #""well_known": {"m.homeserver": {"base_url": "https://example.org"}}}"#)
        let response = try AuthAPI.decode(LoginResponse.self, from: body)
        #expect(
            response.grant(receivedAt: now)
                == SessionGrant(
                    userID: UserID("@cheeky_monkey:matrix.org"), deviceID: DeviceID("GHTYAJCE"),
                    tokens: SessionTokens(
                        accessToken: Secret("abc123"), refreshToken: Secret("def456"),
                        expiry: TokenExpiry(issuedAt: now, lifetime: .seconds(60)))))
        #expect(!String(describing: response).contains("abc123"))
        #expect(!String(describing: response).contains("def456"))
    }

    @Test("A login without refresh token has no expiry")
    func loginWithoutRefreshToken() throws {
        let body = bytes(#"{"user_id": "@alice:localhost", "access_token": "abc", "device_id": "D"}"#)
        let grant = try AuthAPI.decode(LoginResponse.self, from: body).grant(receivedAt: now)
        #expect(grant.tokens == SessionTokens(accessToken: Secret("abc")))
    }

    @Test("A login answer without access_token is an invalid response naming the field")
    func loginMissingToken() {
        #expect(throws: SessionError.invalidResponse(reason: "missing access_token")) {
            try AuthAPI.decode(
                LoginResponse.self, from: self.bytes(#"{"user_id": "@alice:localhost", "device_id": "D"}"#))
        }
    }

    @Test("A login answer with a malformed user ID is invalid")
    func loginBadUserID() {
        #expect(throws: SessionError.invalidResponse(reason: "invalid value at user_id")) {
            try AuthAPI.decode(
                LoginResponse.self, from: self.bytes(#"{"user_id": "alice", "access_token": "a", "device_id": "D"}"#))
        }
    }

    @Test("Synapse's first /register 401 offers m.login.dummy with a session")
    func registerChallenge() throws {
        let body = bytes(
            #"{"session": "xxxxxx", "flows": [{"stages": ["m.login.dummy"]}, "#
                + #"{"stages": ["m.login.recaptcha", "m.login.terms"]}], "#
                + #""params": {"m.login.terms": {"policies": {"privacy_policy": {"version": "1.0"}}}}}"#)
        let response = try AuthAPI.decode(UserInteractiveAuthResponse.self, from: body)
        #expect(
            response.challenge
                == AuthenticationChallenge(
                    session: "xxxxxx",
                    flows: [
                        AuthenticationFlow(stages: ["m.login.dummy"]),
                        AuthenticationFlow(stages: ["m.login.recaptcha", "m.login.terms"]),
                    ]))
        #expect(
            response.params?["m.login.terms"]
                == .object(["policies": .object(["privacy_policy": .object(["version": .string("1.0")])])]))
        #expect(SessionMachine.nextStage(for: response.challenge) == .dummy(session: "xxxxxx"))
    }

    @Test("The spec's UIA example keeps completed stages")
    func specChallenge() throws {
        let body = bytes(
            #"{"completed": ["example.type.foo"], "flows": [{"stages": ["example.type.foo", "example.type.bar"]}, "#
                + #"{"stages": ["example.type.foo", "example.type.baz"]}], "#
                + #""params": {"example.type.baz": {"example_key": "foobar"}}, "session": "xxxxxxyz"}"#)
        let challenge = try AuthAPI.decode(UserInteractiveAuthResponse.self, from: body).challenge
        #expect(challenge.completed == ["example.type.foo"])
        #expect(SessionMachine.nextStage(for: challenge) == nil)
    }

    @Test("A successful /register carries a login")
    func registered() throws {
        let body = bytes(
            #"{"user_id": "@cheeky_monkey:matrix.org", "access_token": "abc123", "device_id": "GHTYAJCE", "#
                + #""refresh_token": "r1", "expires_in_ms": 300000}"#)
        let grant = try AuthAPI.decode(RegisterResponse.self, from: body).grant(receivedAt: now)
        #expect(grant.userID == UserID("@cheeky_monkey:matrix.org"))
        #expect(grant.tokens.expiry == TokenExpiry(issuedAt: now, lifetime: .seconds(300)))
    }

    @Test("A /register with inhibit_login cannot sign in")
    func registeredInhibited() throws {
        let response = try AuthAPI.decode(RegisterResponse.self, from: bytes(#"{"user_id": "@a:localhost"}"#))
        #expect(throws: SessionError.invalidResponse(reason: "missing device_id in /register")) {
            try response.grant(receivedAt: self.now)
        }
    }

    @Test("The spec's /refresh example")
    func refresh() throws {
        let body = bytes(
            #"{"access_token": "a_new_token", "expires_in_ms": 60000, "refresh_token": "another_new_token"}"#)
        let tokens = try AuthAPI.decode(RefreshResponse.self, from: body).tokens(receivedAt: now)
        #expect(
            tokens
                == SessionTokens(
                    accessToken: Secret("a_new_token"), refreshToken: Secret("another_new_token"),
                    expiry: TokenExpiry(issuedAt: now, lifetime: .seconds(60))))
    }

    @Test("A /refresh without refresh_token leaves the old one to the machine")
    func refreshWithoutRefreshToken() throws {
        let tokens = try AuthAPI.decode(RefreshResponse.self, from: bytes(#"{"access_token": "t"}"#))
            .tokens(receivedAt: now)
        #expect(tokens.refreshToken == nil && tokens.expiry == nil)
    }

    @Test("The spec's whoami example")
    func whoami() throws {
        let body = bytes(#"{"device_id": "ABC1234", "is_guest": false, "user_id": "@joe:example.org"}"#)
        let response = try AuthAPI.decode(WhoAmIResponse.self, from: body)
        #expect(response.userID == UserID("@joe:example.org"))
        #expect(response.deviceID == DeviceID("ABC1234"))
        #expect(response.isGuest == false)
    }

    @Test("The spec's OpenID token example")
    func openID() throws {
        let body = bytes(
            #"{"access_token": "SomeT0kenHere", "token_type": "Bearer", "matrix_server_name": "example.com", "#
                + #""expires_in": 3600}"#)
        let response = try AuthAPI.decode(OpenIDTokenResponse.self, from: body)
        #expect(response.tokenType == "Bearer")
        let token = response.openIDToken
        #expect(token.accessToken == Secret("SomeT0kenHere"))
        #expect(token.matrixServerName == "example.com" && token.expiresIn == 3600)
        #expect(!String(describing: response).contains("SomeT0kenHere"))
    }

    @Test("A body that is not JSON is an invalid response")
    func notJSON() {
        #expect(throws: SessionError.invalidResponse(reason: "not JSON")) {
            try AuthAPI.decode(VersionsResponse.self, from: self.bytes("<html>"))
        }
    }
}
