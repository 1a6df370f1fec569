import Foundation
import SymorvaChat
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// Timeline rows carry the sending device's trust at decryption, against the real Synapse: a
/// message from a device its owner has not cross-signed is marked; once the owner sets up
/// cross-signing, the next message is not (and the earlier one keeps its mark). The marks are
/// what the permissive policy shows: here Alice's manifest says `crossSignedWhenAvailable`, and
/// Bob's `crossSigningBootstrap: manual` (he starts without an identity). Under the default
/// strict policy the first message is not shown at all (`StrictPolicyTests`).
@Suite(
    "Messages from devices not cross-signed are marked, against Synapse",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"), .shutsDownCommunities)
struct SenderTrustTimelineTests {
    @Test("Bob's message before his cross-signing is marked not cross-signed; his message after it is cross-signed")
    func markedUntilCrossSigned() async throws {
        let environment = try #require(DevEnvironment.current)
        var permissive = environment.configuration
        permissive.encryption.roomKeyPolicy = .crossSignedWhenAvailable
        var manual = permissive
        manual.encryption.crossSigningBootstrap = .manual
        let alice = try await MembershipEncryptionTests.Member.register("stalice", configuration: permissive)
        let bob = try await MembershipEncryptionTests.Member.register("stbob", configuration: manual)
        // Bob's room: Alice joins, Bob's device tracks hers (the sender knows the recipient's
        // device before sending, as every E2EE test waits for).
        let roomID = try await bob.chat.createRoom(name: "Trust marks", invitees: [alice.userID], isEncrypted: true)
        try await alice.chat.waitForConversation(roomID, .invited)
        _ = try await alice.chat.join(roomIDOrAlias: roomID.rawValue)
        try await bob.chat.waitForConversation(roomID)
        try await bob.crypto.waitForDevice(alice.crypto.deviceID.rawValue, of: alice.userID)
        let bobRoom = try await bob.chat.conversation(id: roomID)
        let aliceRoom = try await alice.chat.conversation(id: roomID)
        let stopAlice = aliceRoom.observe()
        defer { stopAlice() }
        let before = "from a device not cross-signed \(UUID().uuidString.prefix(8))"
        try await bobRoom.send(.text(before)).waitUntilSent()
        var items = try await aliceRoom.waitForTimeline { $0.texts.contains(before) }
        let marked = try #require(items.first { $0.text == before }?.encryption)
        #expect(marked.senderTrust == .notCrossSigned)
        #expect(marked.isFromDeviceNotCrossSigned)
        #expect(marked.senderDeviceID == bob.crypto.deviceID.rawValue)

        // Bob cross-signs his device; Alice's next query of him sees it.
        _ = try await bob.crypto.setUpRecovery()
        try await RecoveryTests().waitForTrust(
            alice.crypto, user: bob.userID, deviceID: bob.crypto.deviceID.rawValue, .crossSigned)
        let after = "from a cross-signed device \(UUID().uuidString.prefix(8))"
        try await bobRoom.send(.text(after)).waitUntilSent()
        items = try await aliceRoom.waitForTimeline { $0.texts.contains(after) }
        let crossSigned = try #require(items.first { $0.text == after }?.encryption)
        #expect(crossSigned.senderTrust == .crossSigned)
        #expect(!crossSigned.isFromDeviceNotCrossSigned)
        // What was read before keeps the trust it was read with.
        #expect(items.first { $0.text == before }?.encryption?.senderTrust == .notCrossSigned)
        // Bob's own echo: this device's own message, trust not recorded, never marked.
        let stopBob = bobRoom.observe()
        defer { stopBob() }
        let own = try await bobRoom.waitForTimeline { items in
            items.contains { $0.text == after && $0.sendState == nil && $0.encryption != nil }
        }
        #expect(own.first { $0.text == after && $0.sendState == nil }?.encryption?.isFromDeviceNotCrossSigned == false)
    }
}
