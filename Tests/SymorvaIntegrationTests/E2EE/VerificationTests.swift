import Foundation
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import Testing

/// Interactive verification (SAS over to-device messages) between two SymorvaKit accounts
/// against the real Synapse: the same emoji on both sides, both verified, and the signature on
/// the server changes the trust level.
@Suite(
    "Interactive verification against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct VerificationTests {
    typealias Member = MembershipEncryptionTests.Member

    /// Two members in an encrypted room (so each tracks the other's devices), each with a
    /// cross-signing identity.
    func members() async throws -> (Member, Member) {
        let alice = try await Member.register("valice")
        let bob = try await Member.register("vbob")
        let roomID = try await alice.chat.createRoom(name: "Verify", invitees: [bob.userID], isEncrypted: true)
        try await bob.chat.waitForConversation(roomID, .invited)
        _ = try await bob.chat.join(roomIDOrAlias: roomID.rawValue)
        _ = try await alice.crypto.setUpRecovery()
        _ = try await bob.crypto.setUpRecovery()
        let recovery = RecoveryTests()
        try await recovery.waitForTrust(
            alice.crypto, user: bob.userID, deviceID: bob.crypto.deviceID.rawValue, .crossSigned)
        return (alice, bob)
    }

    func code(of verification: SASVerification) async throws -> SASVerificationState {
        try await verification.state.wait(timeout: .seconds(60)) {
            if case .showingCode = $0 { return true }
            if case .cancelled = $0 { return true }
            return false
        }
        return verification.state.value
    }

    @Test("Request, ready, SAS: the same emoji on both sides, both verified, Bob's devices verified for Alice")
    func requestFlow() async throws {
        let (alice, bob) = try await members()
        let outgoing = try await alice.crypto.verify(bob.userID, device: bob.crypto.deviceID)
        try await bob.crypto.incomingVerification.wait(timeout: .seconds(60)) { $0 != nil }
        let incoming = try #require(bob.crypto.incomingVerification.value)
        #expect(incoming.transactionID == outgoing.transactionID && incoming.otherUserID == alice.userID)
        await incoming.accept()
        try await outgoing.state.wait(timeout: .seconds(60)) { $0 == .ready }
        await outgoing.startSAS()
        let aliceCode = try await code(of: outgoing)
        let bobCode = try await code(of: incoming)
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
        // Alice's user-signing key signed Bob's master key: his device is verified for her.
        try await RecoveryTests().waitForTrust(
            alice.crypto, user: bob.userID, deviceID: bob.crypto.deviceID.rawValue, .verified)
        try await RecoveryTests().waitForTrust(
            bob.crypto, user: alice.userID, deviceID: alice.crypto.deviceID.rawValue, .verified)
    }

    @Test("The codes differ: both sides end cancelled with m.mismatched_sas, nothing verified")
    func mismatch() async throws {
        let (alice, bob) = try await members()
        let outgoing = try await alice.crypto.verify(bob.userID, device: bob.crypto.deviceID, startDirectly: true)
        try await bob.crypto.incomingVerification.wait(timeout: .seconds(60)) { $0 != nil }
        let incoming = try #require(bob.crypto.incomingVerification.value)
        await incoming.accept()
        _ = try await code(of: outgoing)
        _ = try await code(of: incoming)
        await incoming.mismatch()
        try await outgoing.state.wait(timeout: .seconds(60)) {
            $0 == .cancelled(code: "m.mismatched_sas", byUs: false)
        }
        #expect(incoming.state.value == .cancelled(code: "m.mismatched_sas", byUs: true))
        let bobDevice = try await alice.crypto.devices(of: bob.userID).first {
            $0.deviceID == bob.crypto.deviceID.rawValue
        }
        #expect(bobDevice?.trust == .crossSigned)
    }
}
