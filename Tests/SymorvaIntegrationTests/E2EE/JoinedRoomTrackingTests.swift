import Foundation
import SymorvaChat
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import Testing

/// A member who joins an encrypted room tracks its members' devices at once, before sending
/// anything (issue 24): SymorvaKit accounts on the real Synapse, on the default sync (sliding
/// sync, whose list brings only the timeline senders' members).
@Suite(
    "Joining an encrypted room tracks its members, against Synapse",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"), .shutsDownCommunities)
struct JoinedRoomTrackingTests {
    typealias Member = MembershipEncryptionTests.Member

    @Test("Alice joins Bob's encrypted room and, without sending, knows Bob's device and its trust")
    func joinerTracksMembers() async throws {
        let bob = try await Member.register("bob")
        let alice = try await Member.register("alice")
        let roomID = try await bob.chat.createRoom(name: "Bob's", invitees: [alice.userID], isEncrypted: true)
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
