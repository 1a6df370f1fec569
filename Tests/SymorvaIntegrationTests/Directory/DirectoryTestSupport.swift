import Foundation
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTransport
import Testing

extension DevEnvironment {
    /// The dev community's manifest with the member directory enabled (what `Scripts/dev-server`
    /// writes), built in code.
    var directoryConfiguration: SymorvaConfiguration {
        var configuration = self.configuration
        configuration.modules.directory = .init(isEnabled: true)
        return configuration
    }
}

/// A member signed in to their own community (own data folder) on the dev servers.
struct DirectoryTestMember {
    let fixture: CommunityFixture
    let userID: UserID
    var community: SymorvaCommunity { fixture.community }

    /// Registers a new member and signs them in.
    static func register(
        _ prefix: String, directory: Bool = true, syncMode: SymorvaConfiguration.Sync.Mode? = nil
    ) async throws -> DirectoryTestMember {
        let environment = DevEnvironment.current!
        var configuration = directory ? environment.directoryConfiguration : environment.configuration
        if let syncMode { configuration.sync = SymorvaConfiguration.Sync(mode: syncMode) }
        let fixture = CommunityFixture(configuration: configuration)
        let account = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername(prefix), password: testPassword)
        return DirectoryTestMember(fixture: fixture, userID: account.userID)
    }

    /// The server admin (`SYMORVA_ADMIN_USER`), signed in: the dev community's services admin too.
    static func admin() async throws -> DirectoryTestMember {
        let (user, password) = try #require(DevEnvironment.admin)
        let localpart = String(user.dropFirst().prefix { $0 != ":" })
        let fixture = CommunityFixture(configuration: DevEnvironment.current!.directoryConfiguration)
        let account = try await fixture.community.session.signIn(username: localpart, password: Secret(password))
        return DirectoryTestMember(fixture: fixture, userID: account.userID)
    }

    /// Makes an invite-only room (what `chat.createRoom` makes) joinable by anyone.
    func makeJoinable(_ roomID: RoomID) async throws {
        try await raw(
            .put, "/_matrix/client/v3/rooms/\(percentEncoded(roomID.rawValue))/state/m.room.join_rules/",
            body: #"{"join_rule": "public"}"#)
    }

    /// A raw client-server request with the member's token (to set the scene: aliases, profiles).
    func raw(_ method: MatrixEndpoint.Method, _ path: String, body: String) async throws {
        let requester = FixedTokenMatrixRequester(
            homeserverURL: fixture.environment.configuration.homeserver.url, userID: userID,
            accessToken: try #require(fixture.accessToken), transport: CurlTransport())
        _ = try await requester.send(
            MatrixEndpoint(method: method, path: path, body: Array(body.utf8), requiresAuth: true))
    }
}

/// A community nobody is signed in to.
func signedOutCommunity() -> CommunityFixture {
    CommunityFixture(configuration: DevEnvironment.current!.directoryConfiguration)
}

/// Polls `body` until it returns a value (at most `timeout`).
func eventually<T>(
    timeout: Duration = .seconds(15), _ what: String, _ body: () async throws -> T?
) async throws -> T {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while clock.now < deadline {
        if let value = try await body() { return value }
        try await Task.sleep(for: .milliseconds(200))
    }
    throw IntegrationFailure("timed out waiting for \(what)")
}
