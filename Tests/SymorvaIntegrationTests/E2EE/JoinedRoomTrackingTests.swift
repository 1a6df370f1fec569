import Foundation
import SymorvaChat
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// A member who joins an encrypted room tracks its members' devices at once, before sending
/// anything (issue 24): SymorvaKit accounts on the real Synapse, with either sync.
@Suite(
    "Joining an encrypted room tracks its members, against Synapse",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"), .shutsDownCommunities)
struct JoinedRoomTrackingTests {
    typealias Member = MembershipEncryptionTests.Member

    /// Bob creates an encrypted room and invites Carol and Alice; Carol joins and fills the
    /// room's recent timeline (more than a sync's timeline limit), so that the sync bringing
    /// Alice's join names only Carol and Alice among its senders: lazy loading then leaves Bob's
    /// membership out, in v2 as with sliding sync (whose list shows one event).
    @Test(
        "Alice joins Bob's encrypted room and, without sending or opening it, knows Bob's device and its trust",
        arguments: [SymorvaConfiguration.Sync.Mode.sliding, .v2])
    func joinerTracksMembers(mode: SymorvaConfiguration.Sync.Mode) async throws {
        var configuration = DevEnvironment.current!.configuration
        configuration.sync = SymorvaConfiguration.Sync(mode: mode)
        let bob = try await Member.register("bob", configuration: configuration)
        let carol = try await Member.register("carol", configuration: configuration)
        let alice = try await Member.register("alice", configuration: configuration)
        let roomID = try await bob.chat.createRoom(
            name: "Bob's", invitees: [carol.userID, alice.userID], isEncrypted: true)
        try await carol.chat.waitForConversation(roomID, .invited)
        _ = try await carol.chat.join(roomIDOrAlias: roomID.rawValue)
        let requester = try #require(carol.fixture.community.requester)
        for index in 0..<25 {
            // Plain events through the raw API: only their sender matters here.
            let path = "/_matrix/client/v3/rooms/\(roomID.rawValue)/send/m.room.message/chatter-\(index)"
            _ = try await requester.send(
                MatrixEndpoint(
                    method: .put, path: path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)!,
                    body: Array(#"{"msgtype": "m.text", "body": "chatter"}"#.utf8), requiresAuth: true))
        }
        try await alice.chat.waitForConversation(roomID, .invited)
        _ = try await alice.chat.join(roomIDOrAlias: roomID.rawValue)

        // Nothing is sent and the conversation is not opened (no room subscription's full state):
        // the join alone must make Alice's crypto track Bob.
        let device = try await alice.crypto.waitForDeviceChange(of: bob.userID, timeout: .seconds(60)) {
            $0.first { $0.deviceID == bob.crypto.deviceID.rawValue }
        }
        let bobKeys = await bob.crypto.identityKeys
        #expect(device.curve25519 == bobKeys?.curve25519)
        // Bob's device is cross-signed by Bob (his automatic bootstrap); Alice has not verified Bob.
        #expect(device.trust == .crossSigned)
    }

    /// With sliding sync a room joined without an invite first appears like a room the window
    /// reached late; the join itself asks for its members.
    @Test("Alice joins Bob's public encrypted room without an invite and, without sending, knows Bob's device")
    func joinerWithoutInviteTracksMembers() async throws {
        let bob = try await Member.register("bob")
        let alice = try await Member.register("alice")
        let roomID = try await bob.chat.createRoom(name: "Bob's public", isEncrypted: true)
        let path = "/_matrix/client/v3/rooms/\(roomID.rawValue)/state/m.room.join_rules/"
        _ = try await bob.fixture.community.requester!.send(
            MatrixEndpoint(
                method: .put, path: path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)!,
                body: Array(#"{"join_rule": "public"}"#.utf8), requiresAuth: true))
        _ = try await alice.chat.join(roomIDOrAlias: roomID.rawValue)

        let device = try await alice.crypto.waitForDeviceChange(of: bob.userID, timeout: .seconds(60)) {
            $0.first { $0.deviceID == bob.crypto.deviceID.rawValue }
        }
        #expect(device.trust == .crossSigned)
    }
}

extension AccountCrypto {
    /// Reads `user`'s devices each time the crypto machine's state changes (a `keys/query`
    /// answering moves it, after its devices are stored) until `match` finds something in
    /// them; fails after `timeout`. No polling: it waits on the machine's observable state.
    func waitForDeviceChange<Found: Sendable>(
        of user: UserID, timeout: Duration, match: @escaping @Sendable ([CryptoDevice]) -> Found?
    ) async throws -> Found {
        try await withThrowingTaskGroup(of: Found?.self) { group in
            group.addTask {
                for await _ in self.state.values {
                    if let found = match(try await self.devices(of: user)) { return found }
                }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let found = first else {
                throw IntegrationFailure(
                    "\(user)'s devices never matched within \(timeout) (known: \(try await devices(of: user)))")
            }
            return found
        }
    }
}
