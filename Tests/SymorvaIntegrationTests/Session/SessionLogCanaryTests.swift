import Foundation
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import SymorvaTransport
import Testing

@testable import SymorvaKit

@Suite("Session log canary", .enabled(if: DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct SessionLogCanaryTests {
    @Test("Passwords and tokens never reach the log or the trace during register, sign-in and sign-out")
    func canary() async throws {
        let password = Secret("canary-password-\(UUID().uuidString)")
        let name = DevEnvironment.uniqueUsername("canary")
        let fixture = CommunityFixture()
        let session = fixture.community.session
        var secrets: [String] = [password.exposedValue]

        try await session.register(username: name, password: password)
        secrets += try tokens(of: fixture)
        try await session.signOut()
        try await session.signIn(username: name, password: password)
        secrets += try tokens(of: fixture)
        await #expect(throws: SessionError.invalidCredentials) {
            try await session.signIn(username: name, password: Secret(password.exposedValue + "-wrong"))
        }
        try await session.signOut()

        let logText = fixture.logs.text
        let traceText = fixture.trace.records.map(\.description).joined(separator: "\n")
        // The lines that should be there are there: the machine's transitions, by case name.
        #expect(logText.contains("Session[sign-in] from=authenticating event=loginResponse to=persisting"))
        #expect(traceText.contains("Session[sign-in] from=registering event=registrationResponse"))
        #expect(logText.contains("AppFlow from=signedIn event=signOutRequested to=signingOut"))
        for secret in secrets {
            #expect(!logText.contains(secret), "a secret reached the log")
            #expect(!traceText.contains(secret), "a secret reached the trace")
            // Nor any 12-character piece of it (a truncated token is still a leak).
            #expect(!logText.contains(String(secret.suffix(12))))
        }
        #expect(secrets.count == 5)
    }

    func tokens(of fixture: CommunityFixture) throws -> [String] {
        guard case .signedIn(let session) = try #require(fixture.activeContext).sessionHost.states.value,
            let refreshToken = session.tokens.refreshToken
        else { throw TestFailure("not signed in with a refresh token") }
        return [session.tokens.accessToken.exposedValue, refreshToken.exposedValue]
    }
}
