import Foundation
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaKit
@testable import SymorvaMatrix
@testable import SymorvaSession

/// Token refresh against Synapse with a short `refreshable_access_token_lifetime`.
///
/// `Scripts/test` starts the servers with `SYMORVA_ACCESS_TOKEN_LIFETIME=20s`, which every
/// SDK-session integration test then runs under; these tests need it (at most a minute) and skip
/// themselves otherwise.
@Suite(
    "Token refresh against Synapse",
    .requires(DevEnvironment.isAvailable && DevEnvironment.shortTokenLifetime != nil, "needs a short token lifetime"),
    .shutsDownCommunities
)
struct SessionRefreshTests {
    let lifetime = DevEnvironment.shortTokenLifetime ?? .seconds(20)

    @Test("Tokens rotate several times before they expire, requests keep working, no logout")
    func severalRotations() async throws {
        let fixture = CommunityFixture()
        let states = StateLog(fixture.community.session.state)
        let account = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("rotate"), password: testPassword)
        let requester = try #require(fixture.community.requester)
        var tokens: [Secret<String>] = [try #require(fixture.accessToken)]
        for rotation in 1...3 {
            try await waitUntil(timeout: lifetime * 3, "refresh \(rotation)") {
                guard let token = fixture.accessToken else { return false }  // nil while refreshing
                return fixture.transport.count("/refresh") >= rotation && token != tokens.last
            }
            tokens.append(try #require(fixture.accessToken))
            let response = try await requester.send(AuthAPI.whoami())
            #expect(try AuthAPI.decode(WhoAmIResponse.self, from: response.body).userID == account.userID)
        }
        #expect(fixture.transport.count("/refresh") == 3)
        #expect(Set(tokens.map(\.exposedValue)).count == 4)
        #expect(fixture.community.session.state.value == .signedIn(account))
        #expect(
            states.values.allSatisfy { state in
                switch state {
                case .softLoggedOut, .unavailable, .signingOut: false
                default: true
                }
            })
    }

    @Test("Concurrent requests that meet an expired token share one refresh")
    func concurrentRequestsOneRefresh() async throws {
        // A frozen wall clock and a manual runtime clock: the client never refreshes on its own,
        // so the server's 401 (M_UNKNOWN_TOKEN, soft_logout: true) is what triggers the refresh.
        let fixture = CommunityFixture(clock: ManualClock(), wallClock: FrozenWallClock())
        let account = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("flight"), password: testPassword)
        let expired = try #require(fixture.accessToken)
        try await waitUntilRejected(expired, fixture: fixture)

        let requester = try #require(fixture.community.requester)
        let users = try await withThrowingTaskGroup(of: UserID.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let response = try await requester.send(AuthAPI.whoami())
                    return try AuthAPI.decode(WhoAmIResponse.self, from: response.body).userID
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(users == Array(repeating: account.userID, count: 8))
        #expect(fixture.transport.count("/refresh") == 1)
        #expect(fixture.accessToken != expired)
        #expect(fixture.community.session.state.value == .signedIn(account))
    }

    /// Waits until the server refuses `token` as expired.
    func waitUntilRejected(_ token: Secret<String>, fixture: CommunityFixture) async throws {
        try await waitUntil(timeout: lifetime * 3, "the server to reject the token") {
            do {
                _ = try await fixture.rawWhoAmI(token)
                return false
            } catch let error as MatrixRequestError {
                guard case .matrix(let matrix) = error else { return false }
                return matrix.code == .unknownToken && matrix.isSoftLogout
            } catch {
                return false
            }
        }
    }
}

/// Every product state published, in order.
final class StateLog: Sendable {
    private let storage = Lock<[SessionState]>([])
    private let unsubscribe = Lock<ObservableValue<SessionState>.Unsubscribe?>(nil)

    init(_ observable: ObservableValue<SessionState>) {
        let token = observable.subscribe { [weak self] state in self?.storage.withLock { $0.append(state) } }
        unsubscribe.withLock { $0 = token }
    }

    deinit { unsubscribe.withLock { $0 }?() }

    var values: [SessionState] { storage.withLock { $0 } }
}

/// Polls `condition` every 200 ms until it holds; fails after `timeout`. For conditions that live
/// on the server (a token's expiry), which no observable reports.
func waitUntil(
    timeout: Duration, _ what: String, fileID: String = #fileID, line: Int = #line,
    _ condition: () async -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while !(await condition()) {
        guard ContinuousClock.now < deadline else {
            throw TestFailure("timed out waiting for \(what)", fileID: fileID, line: line)
        }
        try await Task.sleep(for: .milliseconds(200))
    }
}
