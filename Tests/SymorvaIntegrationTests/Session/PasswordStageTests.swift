import Foundation
import SymorvaCrypto
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaSession
import SymorvaTransport
import Testing

/// The session machine's `m.login.password` stage against the real Synapse, through the
/// product path (`SessionClient.authorize`): a first cross-signing identity needs no password,
/// replacing it does, and a wrong password is `invalidCredentials` with the identity unchanged.
@Suite(
    "User-interactive authentication: the password stage",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct PasswordStageTests {
    let path = "/_matrix/client/v3/keys/device_signing/upload"

    func identity(for user: UserID) throws -> (CrossSigningKeys, [UInt8]) {
        let keys = try CrossSigningKeys(newFor: user, driver: OlmCryptoDriver())
        return (keys, try JSONValue.object(try keys.uploadBody()).canonicalEncoding())
    }

    @Test("A reset asks for the password and succeeds with it; a wrong password is refused and changes nothing")
    func passwordStage() async throws {
        let fixture = CommunityFixture()
        let account = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("uia"), password: testPassword)
        let session = fixture.community.session

        // The account's first identity: Synapse asks for nothing (MSC3967).
        let (first, firstBody) = try identity(for: account.userID)
        _ = try await session.authorize(method: "POST", path: path, body: firstBody, password: testPassword)

        // A wrong password: the server asks again after it, which the machine reports as such.
        let (_, wrongBody) = try identity(for: account.userID)
        await #expect(throws: SessionError.invalidCredentials) {
            try await session.authorize(method: "POST", path: path, body: wrongBody, password: Secret("not it"))
        }
        #expect(try await masterKey(of: account.userID, in: fixture) == first.master.publicKey)

        // The right password: the reset goes through on the second send.
        let (reset, resetBody) = try identity(for: account.userID)
        _ = try await session.authorize(method: "POST", path: path, body: resetBody, password: testPassword)
        #expect(try await masterKey(of: account.userID, in: fixture) == reset.master.publicKey)
    }

    /// The account's master key as `keys/query` lists it.
    func masterKey(of user: UserID, in fixture: CommunityFixture) async throws -> String? {
        let other = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername("uia-peer"), in: fixture.environment, transport: CurlTransport())
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL(fixture.environment.homeserverURL.absoluteString)!,
            userID: UserID(other.userID)!, accessToken: other.accessToken, transport: CurlTransport())
        let answer = try JSONValue(parsing: try await requester.send(try E2EEAPI.query(users: [user])).body)
        return CrossSigningChain.identities(in: answer, ownUser: user, ownMasterKey: nil, driver: OlmCryptoDriver())[
            user]?.masterKey
    }
}
