import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaFeatureKit
@testable import SymorvaMatrix
@testable import SymorvaSession

/// A homeserver's token rules, scripted on a ``ScriptedHTTPTransport``: `whoami` answers 200 for the
/// currently valid access token and `401 M_UNKNOWN_TOKEN` otherwise; `/refresh` issues the next
/// token. A test holds either at a gate.
final class HomeserverTokens: Sendable {
    static let whoamiPath = "/_matrix/client/v3/account/whoami"
    static let refreshPath = "/_matrix/client/v3/refresh"

    private struct Tokens {
        var valid: String
        var issued = 0
        var softLogout = true
    }

    /// The token state, shared with the transport's answers.
    private final class Shared: Sendable {
        let tokens: Lock<Tokens>
        init(_ tokens: Tokens) { self.tokens = Lock(tokens) }
    }

    /// The transport the account uses.
    let transport = ScriptedHTTPTransport(fallback: { _ in .json(404, #"{"errcode":"M_UNRECOGNIZED"}"#) })
    private let shared: Shared

    init(valid: String) {
        shared = Shared(Tokens(valid: valid))
        transport.on("GET", Self.whoamiPath, whoami)
        transport.on("POST", Self.refreshPath, refresh)
    }

    var refreshCount: Int { transport.count("POST", Self.refreshPath) }
    /// The tokens whoami requests carried, in order.
    var whoamiTokens: [String] {
        transport.requests("GET", Self.whoamiPath).map { $0.bearerToken?.exposedValue ?? "" }
    }
    /// Makes the server forget every token, as if the device was deleted.
    func revokeAll() {
        shared.tokens.withLock {
            $0.valid = "revoked-\(UUID())"
            $0.softLogout = false
        }
    }
    func expire() { shared.tokens.withLock { $0.valid = "nobody" } }

    /// Holds every later whoami at `gate` (`nil`: answers at once again).
    func holdWhoami(at gate: TestGate?) {
        transport.on("GET", Self.whoamiPath, gate.map { ScriptedHTTPTransport.held(by: $0, whoami) } ?? whoami)
    }

    /// Holds every later refresh at `gate`.
    func holdRefresh(at gate: TestGate) {
        transport.on("POST", Self.refreshPath, ScriptedHTTPTransport.held(by: gate, refresh))
    }

    private var whoami: ScriptedHTTPTransport.Answer {
        { [shared] request in
            let token = request.bearerToken?.exposedValue ?? ""
            let (isValid, softLogout) = shared.tokens.withLock { ($0.valid == token, $0.softLogout) }
            guard isValid else {
                return .json(401, #"{"errcode":"M_UNKNOWN_TOKEN","error":"gone","soft_logout":\#(softLogout)}"#)
            }
            return .json(200, #"{"user_id":"@alice:example.org","device_id":"DEVICEA"}"#)
        }
    }

    private var refresh: ScriptedHTTPTransport.Answer {
        { [shared] _ in
            let token = shared.tokens.withLock { tokens in
                tokens.issued += 1
                tokens.valid = "access-\(tokens.issued)"
                return tokens.valid
            }
            return .json(
                200, #"{"access_token":"\#(token)","refresh_token":"refresh-\#(token)","expires_in_ms":300000}"#)
        }
    }
}

/// A wall clock a test sets by hand.
final class SettableWallClock: WallClock {
    private let instant: Lock<Timestamp>
    init(_ instant: Timestamp) { self.instant = Lock(instant) }
    var now: Timestamp { instant.withLock { $0 } }
    func set(_ new: Timestamp) { instant.withLock { $0 = new } }
}

@Suite("Session requester: token refresh around requests")
struct SessionRequesterTests {
    let data = TestDataDirectory()
    let server = HomeserverTokens(valid: "syt_access_CANARY_1234567890")
    let wallClock = SettableWallClock(Timestamp(millisecondsSince1970: 2_000))
    let scope = AccountScope(label: "@alice:example.org")

    /// A running account context restored from a saved session, on the scripted homeserver.
    func context() async throws -> AccountContext {
        let storage = SessionSamples.storage(data)
        try await storage.sessionStore(for: SessionSamples.alice).save(
            SessionSamples.session(), savedAt: Timestamp(millisecondsSince1970: 1_000))
        let configuration = SymorvaConfiguration(
            community: .init(name: "Test"),
            homeserver: .init(url: SessionSamples.server.baseURL, serverName: "example.org"),
            services: .init(url: URL(string: "https://services.example.org")!),
            modules: .init(
                meetings: .init(isEnabled: true), aiStudio: .init(isEnabled: false),
                wallet: .init(isEnabled: false, assets: []), directory: .init(isEnabled: false)))
        let environment = SymorvaEnvironment(
            dataDirectory: data.path, transport: server.transport, clock: ManualClock(), wallClock: wallClock,
            tracer: Tracer(),
            logCenter: LogCenter(threshold: .error))
        return try await AccountContext.start(
            userID: SessionSamples.alice, scope: scope, storage: storage, machine: SessionMachine(),
            configuration: configuration, environment: environment, factories: [])
    }

    func whoami(_ context: AccountContext) async throws(MatrixRequestError) -> Int {
        try await context.requester.send(AuthAPI.whoami()).status
    }

    @Test("A valid token is sent as is")
    func validToken() async throws {
        let context = try await context()
        #expect(try await whoami(context) == 200)
        #expect(server.whoamiTokens == ["syt_access_CANARY_1234567890"])
        #expect(server.refreshCount == 0)
    }

    @Test("M_UNKNOWN_TOKEN with soft_logout refreshes once and retries with the new token")
    func rejectedThenRefreshed() async throws {
        let context = try await context()
        server.expire()
        #expect(try await whoami(context) == 200)
        #expect(server.refreshCount == 1)
        #expect(server.whoamiTokens == ["syt_access_CANARY_1234567890", "access-1"])
    }

    @Test("Concurrent rejected requests share one refresh")
    func concurrentOneRefresh() async throws {
        let context = try await context()
        server.expire()
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<6 { group.addTask { try await whoami(context) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: 6))
        #expect(server.refreshCount == 1)
    }

    @Test("A request rejected for a token a refresh already replaced retries with the new one, no second refresh")
    func staleTokenRetriesWithoutRefresh() async throws {
        let context = try await context()
        let gate = TestGate()
        server.holdWhoami(at: gate)
        async let status = whoami(context)
        try await gate.waitForWaiters(count: 1)
        // A refresh completes while the request is on the wire; the old token is dead now.
        await context.sessionHost.send(.refreshTimerFired)
        _ = await context.sessionHost.wait { state -> Void? in
            if case .signedIn(let session) = state, session.tokens.accessToken.exposedValue == "access-1" { return () }
            return nil
        }
        server.holdWhoami(at: nil)
        gate.open()
        #expect(try await status == 200)
        #expect(server.refreshCount == 1)
        #expect(server.whoamiTokens == ["syt_access_CANARY_1234567890", "access-1"])
    }

    @Test("A token the wall clock says has expired is refreshed before it is sent")
    func expiredBeforeSending() async throws {
        let context = try await context()
        wallClock.set(Timestamp(millisecondsSince1970: 1_000 + 301_000))
        #expect(try await whoami(context) == 200)
        #expect(server.refreshCount == 1)
        #expect(server.whoamiTokens == ["access-1"])
    }

    @Test("M_UNKNOWN_TOKEN without soft_logout wipes the account and fails the request as notSignedIn")
    func hardLogout() async throws {
        let context = try await context()
        server.revokeAll()
        await #expect(throws: MatrixRequestError.notSignedIn) { try await whoami(context) }
        try await context.sessionHost.states.wait(until: { if case .signedOut = $0 { true } else { false } })
        #expect(
            !FileManager.default.fileExists(atPath: AccountDatabase.directory(for: SessionSamples.alice, in: data.path))
        )
        #expect(server.refreshCount == 0)
    }

    @Test("Ending the account's scope fails a request waiting for a token")
    func scopeEndFailsWaiters() async throws {
        let context = try await context()
        let gate = TestGate()
        server.holdRefresh(at: gate)
        server.expire()
        let request = Task { () async throws(MatrixRequestError) -> Int in try await whoami(context) }
        try await gate.waitForWaiters(count: 1)  // the refresh is on the wire; the request waits for it
        scope.end(reason: .switched)
        await #expect(throws: MatrixRequestError.notSignedIn) { try await request.value }
        gate.open()
    }
}
