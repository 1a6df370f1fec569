import Foundation
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// In-room verification (the request an `m.room.message` in an encrypted DM, the steps room
/// events related to it) between two SymorvaKit accounts against the real Synapse.
@Suite(
    "In-room verification against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct InRoomVerificationTests {
    typealias Member = MembershipEncryptionTests.Member

    /// Two members with cross-signing identities in an encrypted DM.
    func dm() async throws -> (Member, Member, RoomID) {
        let alice = try await Member.register("ralice")
        let bob = try await Member.register("rbob")
        let roomID = try await alice.chat.createRoom(invitees: [bob.userID], isDirect: true, isEncrypted: true)
        try await bob.chat.waitForConversation(roomID, .invited)
        _ = try await bob.chat.join(roomIDOrAlias: roomID.rawValue)
        _ = try await alice.crypto.setUpRecovery()
        _ = try await bob.crypto.setUpRecovery()
        try await RecoveryTests().waitForTrust(
            alice.crypto, user: bob.userID, deviceID: bob.crypto.deviceID.rawValue, .crossSigned)
        return (alice, bob, roomID)
    }

    @Test(
        "Request in an encrypted DM: Bob sees it, the same emoji on both sides, both verified, Alice's user-signing key's signature over Bob's master key on Synapse"
    )
    func inRoomFlow() async throws {
        let (alice, bob, roomID) = try await dm()
        let outgoing = try await alice.crypto.verify(bob.userID, inRoom: roomID)
        // The request is an encrypted event of the room, its ID the flow's.
        _ = try await alice.encryptedContent(of: EventID(outgoing.transactionID), in: roomID)
        try await bob.crypto.incomingVerification.wait(timeout: .seconds(60)) {
            $0?.transactionID == outgoing.transactionID
        }
        let incoming = try #require(bob.crypto.incomingVerification.value)
        #expect(incoming.otherUserID == alice.userID && incoming.state.value == .incoming)
        await incoming.accept()
        try await outgoing.state.wait(timeout: .seconds(60)) { $0 == .ready }
        #expect(outgoing.otherDeviceID == bob.crypto.deviceID)
        await outgoing.startSAS()
        let aliceCode = try await VerificationTests().code(of: outgoing)
        let bobCode = try await VerificationTests().code(of: incoming)
        guard case .showingCode(let emoji, let decimals) = aliceCode else {
            Issue.record("Alice: \(aliceCode)")
            return
        }
        #expect(bobCode == aliceCode)
        #expect(emoji.count == 7 && decimals.count == 3)
        await outgoing.confirm()
        await incoming.confirm()
        try await outgoing.state.wait(timeout: .seconds(60)) { $0 == .verified }
        try await incoming.state.wait(timeout: .seconds(60)) { $0 == .verified }
        try await RecoveryTests().waitForTrust(
            alice.crypto, user: bob.userID, deviceID: bob.crypto.deviceID.rawValue, .verified)
        try await RecoveryTests().waitForTrust(
            bob.crypto, user: alice.userID, deviceID: alice.crypto.deviceID.rawValue, .verified)

        // On Synapse: Bob's master key carries a signature by Alice's user-signing key.
        let requester = try #require(alice.fixture.community.requester)
        let answer = try JSONValue(
            parsing: try await requester.send(try E2EEAPI.query(users: [alice.userID, bob.userID])).body)
        guard case .object(let top) = answer, case .object(let userSigning)? = top["user_signing_keys"],
            case .object(let aliceUSK)? = userSigning[alice.userID.rawValue],
            case .object(let uskKeys)? = aliceUSK["keys"],
            let uskKeyID = uskKeys.keys.first,
            case .object(let masters)? = top["master_keys"],
            case .object(let bobMaster)? = masters[bob.userID.rawValue],
            case .object(let signatures)? = bobMaster["signatures"],
            case .object(let byAlice)? = signatures[alice.userID.rawValue]
        else {
            Issue.record("no signature by Alice on Bob's master key")
            return
        }
        #expect(byAlice[uskKeyID] != nil)
    }

    @Test("Bob cancels the in-room request: both end cancelled m.user, nothing verified")
    func inRoomCancel() async throws {
        let (alice, bob, roomID) = try await dm()
        let outgoing = try await alice.crypto.verify(bob.userID, inRoom: roomID)
        try await bob.crypto.incomingVerification.wait(timeout: .seconds(60)) {
            $0?.transactionID == outgoing.transactionID
        }
        let incoming = try #require(bob.crypto.incomingVerification.value)
        await incoming.cancel()
        #expect(incoming.state.value == .cancelled(code: "m.user", byUs: true))
        try await outgoing.state.wait(timeout: .seconds(60)) { $0 == .cancelled(code: "m.user", byUs: false) }
        let bobDevice = try await alice.crypto.devices(of: bob.userID).first {
            $0.deviceID == bob.crypto.deviceID.rawValue
        }
        #expect(bobDevice?.trust == .crossSigned)
    }
}
