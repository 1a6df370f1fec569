import Foundation
import SymorvaChat
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// The default room key policy (MSC4153's `crossSignedOnly`) with the automatic bootstrap at the
/// first sign-in, against the real Synapse. The sensitive case: a new device of an account,
/// which its owner has not cross-signed yet, gets no room key and its messages are not shown
/// (a typed reason, not dropped); once it restores with the recovery key it signs itself, its
/// message refused before is shown, it gets the next keys and its next message is shown.
@Suite(
    "The strict room key policy by default, against Synapse",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"), .shutsDownCommunities)
struct StrictPolicyTests {
    @Test(
        "A new own device not cross-signed gets no room key and is not shown (senderNotCrossSigned) until the recovery key cross-signs it; then its earlier message is shown"
    )
    func newOwnDeviceUntilRecovered() async throws {
        // Every account gets its identity at its first sign-in; no recovery key yet.
        let alice = try await MembershipEncryptionTests.Member.register("strictalice")
        let bob = try await MembershipEncryptionTests.Member.register("strictbob")
        for member in [alice, bob] {
            #expect(member.crypto.automaticBootstrap.value == .finished(created: true))
            try await member.crypto.identityState.wait(timeout: .seconds(60)) { $0 == .ready }
        }
        let recoveryKey = try await alice.crypto.setUpRecovery()

        // Bob's room (its creator tracks the members' devices from the start: the way every E2EE
        // test has the sender know the recipients first).
        let roomID = try await bob.chat.createRoom(name: "Strict", invitees: [alice.userID], isEncrypted: true)
        try await alice.chat.waitForConversation(roomID, .invited)
        _ = try await alice.chat.join(roomIDOrAlias: roomID.rawValue)
        try await bob.chat.waitForConversation(roomID)

        // Alice's second device: the account's identity exists, this device does not hold it.
        let second = try await MembershipEncryptionTests.Member.signIn(alice.userID)
        #expect(second.crypto.automaticBootstrap.value == .finished(created: false))
        try await second.crypto.identityState.wait(timeout: .seconds(60)) { $0 == .needsRecovery }
        try await second.chat.waitForConversation(roomID)
        // Bob knows it, not cross-signed.
        try await bob.crypto.waitForDevice(second.crypto.deviceID.rawValue, of: alice.userID)
        let listed = try await bob.crypto.devices(of: alice.userID).first {
            $0.deviceID == second.crypto.deviceID.rawValue
        }
        #expect(listed?.trust == .unverified)

        // Bob's message: Alice's first device reads it, the new one got no key for it.
        let bobRoom = try await bob.chat.conversation(id: roomID)
        let aliceRoom = try await alice.chat.conversation(id: roomID)
        let secondRoom = try await second.chat.conversation(id: roomID)
        let stops = [aliceRoom.observe(), secondRoom.observe(), bobRoom.observe()]
        defer { for stop in stops { stop() } }
        try await bob.crypto.waitForCrossSigned(alice.crypto.deviceID.rawValue, of: alice.userID)
        let fromBob = "to Alice's cross-signed devices \(UUID().uuidString.prefix(8))"
        let bobEvent = try await bobRoom.send(.text(fromBob)).sentEventID()
        try await aliceRoom.waitForTimeline { $0.texts.contains(fromBob) }
        let sessionID = try MembershipEncryptionTests.sessionID(
            of: try await second.encryptedContent(of: bobEvent, in: roomID))
        #expect(
            try await second.crypto.roomKey(roomID: roomID, sessionID: sessionID) == nil,
            "a device its owner did not cross-sign gets no room key")
        let shownToSecond = try await secondRoom.waitForTimeline { items in
            items.contains { $0.eventID == bobEvent }
        }
        #expect(shownToSecond.first { $0.eventID == bobEvent }?.content == .unableToDecrypt(.missingKey))

        // The new device's message: neither Alice's first device nor Bob shows it.
        let fromSecond = "from a device not cross-signed \(UUID().uuidString.prefix(8))"
        let secondEvent = try await secondRoom.send(.text(fromSecond)).sentEventID()
        for room in [aliceRoom, bobRoom] {
            let items = try await room.waitForTimeline { items in
                items.contains { $0.eventID == secondEvent && $0.content == .unableToDecrypt(.senderNotCrossSigned) }
            }
            #expect(!items.texts.contains(fromSecond))
        }

        // The recovery key: the device signs itself with the identity's keys.
        try await second.crypto.restore(recoveryKey: recoveryKey)
        try await second.crypto.identityState.wait(timeout: .seconds(60)) { $0 == .ready }
        try await bob.crypto.waitForCrossSigned(second.crypto.deviceID.rawValue, of: alice.userID)
        try await alice.crypto.waitForCrossSigned(second.crypto.deviceID.rawValue, of: alice.userID)
        // The refusal was a state, not the end: its message sent before is shown now, as from a
        // cross-signed device.
        for room in [aliceRoom, bobRoom] {
            let items = try await room.waitForTimeline { $0.texts.contains(fromSecond) }
            #expect(items.first { $0.text == fromSecond }?.encryption?.isFromDeviceNotCrossSigned == false)
        }

        // Now it gets the room's key, and its messages are shown.
        let afterRecovery = "to every cross-signed device \(UUID().uuidString.prefix(8))"
        try await bobRoom.send(.text(afterRecovery)).waitUntilSent()
        try await secondRoom.waitForTimeline { $0.texts.contains(afterRecovery) }
        let fromRecovered = "from the recovered device \(UUID().uuidString.prefix(8))"
        try await secondRoom.send(.text(fromRecovered)).waitUntilSent()
        for room in [aliceRoom, bobRoom] {
            let items = try await room.waitForTimeline { $0.texts.contains(fromRecovered) }
            #expect(items.first { $0.text == fromRecovered }?.encryption?.isFromDeviceNotCrossSigned == false)
        }
    }
}
