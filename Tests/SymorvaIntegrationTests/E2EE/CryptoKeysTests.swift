import Foundation
import SymorvaCrypto
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTransport
import Testing

/// The account's device keys and one-time keys against the real Synapse.
@Suite(
    "End-to-end encryption keys against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct CryptoKeysTests {
    let transport = CurlTransport()

    /// Bob's view of the server: `keys/query` and `keys/claim` as another account.
    func requester(for account: RegisteredAccount) -> FixedTokenMatrixRequester {
        let environment = DevEnvironment.current!
        return FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL(environment.homeserverURL.absoluteString)!, userID: UserID(account.userID)!,
            accessToken: account.accessToken, transport: transport)
    }

    func waitUntilReady(_ crypto: AccountCrypto) async throws {
        try await crypto.state.wait(timeout: .seconds(60)) { state in
            if case .ready(let work) = state { return !work.isUploading && work.querying == nil }
            if case .failed(let error) = state { Issue.record("crypto failed: \(error)") }
            return false
        }
    }

    @Test(
        "A signed-in device publishes self-signed device keys, 50 one-time keys and a fallback key; others verify them")
    func publishesKeys() async throws {
        let fixture = CommunityFixture()
        let account = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("keys"), password: testPassword)
        let crypto = try #require(fixture.community.module(AccountCrypto.self))
        try await waitUntilReady(crypto)
        let keys = try #require(await crypto.identityKeys)

        let bob = requester(
            for: try await RegisteredAccount.register(
                DevEnvironment.uniqueUsername("bob"), in: fixture.environment, transport: transport))
        let answer = try JSONValue(
            parsing: try await bob.send(try E2EEAPI.query(users: [account.userID])).body)
        let (devices, refused) = DeviceKeys.verifiedDevices(in: answer, driver: OlmCryptoDriver())
        #expect(refused == 0)
        let device = try #require(devices[account.userID]?.first)
        #expect(device.deviceID == crypto.deviceID.rawValue)
        #expect(device.ed25519 == keys.ed25519)
        #expect(device.curve25519 == keys.curve25519)

        // The account knows its own device from its own query.
        let own = try await crypto.ownDevices()
        #expect(own.map(\.deviceID) == [crypto.deviceID.rawValue])

        // Claiming hands out a signed one-time key, which verifies with the device's key.
        let claimed = try JSONValue(
            parsing: try await bob.send(try E2EEAPI.claim([account.userID: [crypto.deviceID.rawValue]])).body)
        guard case .object(let top) = claimed, case .object(let byUser)? = top["one_time_keys"],
            case .object(let byDevice)? = byUser[account.userID.rawValue],
            case .object(let keysOfDevice)? = byDevice[crypto.deviceID.rawValue],
            let (keyID, signedKey) = keysOfDevice.first, case .object(var members) = signedKey,
            case .object(let signatures)? = members["signatures"],
            case .object(let mine)? = signatures[account.userID.rawValue],
            case .string(let signature)? = mine["ed25519:\(crypto.deviceID.rawValue)"]
        else {
            Issue.record("no claimed key: \(claimed)")
            return
        }
        #expect(keyID.hasPrefix("signed_curve25519:"))
        members["signatures"] = nil
        try OlmCryptoDriver().verifyEd25519(
            signature: signature, of: try JSONValue.object(members).canonicalEncoding(), key: keys.ed25519)
    }

    @Test(
        "One-time keys claimed below half are topped up on the next sync; when they run out, the fallback key is handed out and replaced"
    )
    func topUpAndFallback() async throws {
        let fixture = CommunityFixture()
        let account = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("topup"), password: testPassword)
        let crypto = try #require(fixture.community.module(AccountCrypto.self))
        try await waitUntilReady(crypto)
        let bob = requester(
            for: try await RegisteredAccount.register(
                DevEnvironment.uniqueUsername("bob"), in: fixture.environment, transport: transport))
        let device = [account.userID: [crypto.deviceID.rawValue]]

        // Claim all 50 one-time keys and then the fallback key.
        var claimedIDs: Set<String> = []
        for _ in 0..<51 {
            let answer = try JSONValue(parsing: try await bob.send(try E2EEAPI.claim(device)).body)
            guard case .object(let top) = answer, case .object(let byUser)? = top["one_time_keys"],
                case .object(let byDevice)? = byUser[account.userID.rawValue],
                case .object(let keys)? = byDevice[crypto.deviceID.rawValue], let keyID = keys.keys.first
            else { break }
            claimedIDs.insert(keyID)
        }
        #expect(claimedIDs.count == 51, "50 one-time keys and the fallback key")

        // Something must make the server send a sync: a message in a room of Alice's.
        let roomID = try await fixture.community.chat.createRoom(name: "Nudge")
        _ = try await fixture.community.chat.conversation(id: roomID).send(.text("nudge"))
        try await crypto.state.wait(timeout: .seconds(60)) { state in
            guard case .ready(let work) = state else { return false }
            return !work.isUploading && (work.serverOneTimeKeyCount ?? 0) >= 50
        }

        // New one-time keys and a new fallback key are on the server.
        let fresh = try JSONValue(parsing: try await bob.send(try E2EEAPI.claim(device)).body)
        guard case .object(let top) = fresh, case .object(let byUser)? = top["one_time_keys"],
            case .object(let byDevice)? = byUser[account.userID.rawValue],
            case .object(let keys)? = byDevice[crypto.deviceID.rawValue], let keyID = keys.keys.first,
            case .object(let key)? = keys[keyID]
        else {
            Issue.record("no key after the top-up: \(fresh)")
            return
        }
        #expect(!claimedIDs.contains(keyID))
        #expect(key["fallback"] == nil, "a fresh one-time key, not the fallback key")
    }
}
