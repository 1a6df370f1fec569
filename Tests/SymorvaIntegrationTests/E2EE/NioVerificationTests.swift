import Foundation
import SymorvaE2EE
import SymorvaKit
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// Interactive verification (SAS over to-device messages, the flow that begins with `start`)
/// between SymorvaKit and matrix-nio on the real Synapse, with each key agreement method.
///
/// The peer is matrix-nio **0.25.2** on python-olm (libolm), the second peer environment
/// (`NioPeer.olmPython`): 0.26 (vodozemac) writes the `accept` commitment as hex and computes
/// `hkdf-hmac-sha256` with the `.v2` encoding, so no spec-following client verifies with it
/// (docs/e2ee.md, "matrix-nio's departures"). nio signs in as a second device of the SymorvaKit
/// account: nio has no cross-signing, so the signature a flow can upload is our self-signing
/// key's over nio's device.
@Suite(
    "Verification with matrix-nio 0.25 (libolm)",
    .requires(NioPeer.isOlmAvailable, "needs Scripts/dev-server (with the nio-olm venv)"), .shutsDownCommunities,
    .serialized)
struct NioVerificationTests {
    typealias Member = MembershipEncryptionTests.Member

    /// A SymorvaKit account with a cross-signing identity, and nio signed in to it as a second
    /// device; each knows the other's device, and nio's is not verified for SymorvaKit yet.
    func pair() async throws -> (Member, NioPeer, NioPeer.Device) {
        let member = try await Member.register("vnio")
        _ = try await member.crypto.setUpRecovery()
        // An encrypted room: nio tracks the devices of its members (its own user here).
        _ = try await member.chat.createRoom(name: "Verify nio", invitees: [], isEncrypted: true)
        let peer = try NioPeer(python: NioPeer.olmPython)
        let nio = try await peer.login(
            user: member.userID.rawValue, password: testPassword.exposedValue,
            homeserver: try #require(DevEnvironment.current).homeserverURL)
        let version = try await peer.call("nio_version")
        #expect(version["version"] == .string("0.25.2") && version["crypto"] == .string("olm"), "\(version)")
        try await member.crypto.waitForDevice(nio.deviceID, of: member.userID)
        try await peer.call(
            "wait_device",
            ["user_id": .string(member.userID.rawValue), "device_id": .string(member.crypto.deviceID.rawValue)])
        let before = try await member.crypto.devices(of: member.userID).first { $0.deviceID == nio.deviceID }
        #expect(before?.trust == .unverified)
        return (member, peer, nio)
    }

    /// What nio shows and which methods it uses, or why it cancelled.
    struct NioCode: Equatable {
        var emoji: [String] = []
        var decimals: [Int] = []
        var keyAgreement: String?
        var mac: String?
        var cancelled: String?
    }

    func nioCode(_ peer: NioPeer, _ transactionID: String) async throws -> NioCode {
        let answer = try await peer.call("sas_code", ["transaction_id": .string(transactionID)])
        if answer["canceled"] == .bool(true) {
            guard case .string(let code)? = answer["cancel_code"] else { return NioCode(cancelled: "?") }
            return NioCode(cancelled: code)
        }
        guard case .array(let emoji)? = answer["emoji"], case .array(let decimals)? = answer["decimals"],
            case .string(let keyAgreement)? = answer["key_agreement"], case .string(let mac)? = answer["mac"]
        else { throw IntegrationFailure("nio's code: \(answer)") }
        let characters = emoji.compactMap { item -> String? in
            guard case .object(let fields) = item, case .string(let character)? = fields["emoji"] else { return nil }
            return character
        }
        return NioCode(
            emoji: characters, decimals: decimals.compactMap(\.integerValue), keyAgreement: keyAgreement, mac: mac)
    }

    /// Our code as the same fields (nio's table names three emoji differently — `Wrench`,
    /// `Thumbs up`, `Airplane` — so the characters are compared). Our side does not say which
    /// methods it agreed to; equal codes show it: each key agreement derives other bytes.
    func ourCode(_ verification: SASVerification) async throws -> NioCode {
        try await verification.state.wait(timeout: .seconds(60)) {
            if case .showingCode = $0 { return true }
            if case .cancelled = $0 { return true }
            return false
        }
        guard case .showingCode(let emoji, let decimals) = verification.state.value else {
            return NioCode(cancelled: "\(verification.state.value)")
        }
        return NioCode(emoji: emoji.map(\.character), decimals: decimals)
    }

    /// Both confirm; both end verified: nio's store marks our device verified, our self-signing
    /// key signs nio's device, and another account's `keys/query` shows that signature.
    func confirmBoth(
        _ ours: SASVerification, _ peer: NioPeer, _ transactionID: String, member: Member, nio: NioPeer.Device
    ) async throws {
        await ours.confirm()
        try await peer.call("sas_confirm", ["transaction_id": .string(transactionID)])
        let result = try await peer.call("sas_result", ["transaction_id": .string(transactionID)])
        #expect(result["verified"] == .bool(true) && result["device_verified"] == .bool(true), "nio: \(result)")
        try await ours.state.wait(timeout: .seconds(60)) {
            if case .cancelled = $0 { return true }
            return $0 == .verified
        }
        #expect(ours.state.value == .verified)
        // Our self-signing key's signature over nio's device: verified for us …
        try await RecoveryTests().waitForTrust(member.crypto, user: member.userID, deviceID: nio.deviceID, .verified)
        // … and on Synapse: another account's keys/query checks the chain to nio's device.
        let observer = try await registerPeerAccount("vobs")
        #expect(
            try await RecoveryTests().chainTrust(of: nio.deviceID, user: member.userID, seenBy: observer)
                == .crossSigned)
        try await peer.quit()
    }

    @Test(
        "nio starts, SymorvaKit accepts: the same emoji and decimals, both verified, the signature on Synapse",
        arguments: ["curve25519-hkdf-sha256", "curve25519"])
    func nioStarts(keyAgreement: String) async throws {
        let (member, peer, nio) = try await pair()
        let started = try await peer.call(
            "sas_start",
            [
                "user_id": .string(member.userID.rawValue), "device_id": .string(member.crypto.deviceID.rawValue),
                "key_agreements": .array([.string(keyAgreement)]),
            ])
        guard case .string(let transactionID)? = started["transaction_id"] else {
            throw IntegrationFailure("\(started)")
        }
        try await member.crypto.incomingVerification.wait(timeout: .seconds(60)) { $0?.transactionID == transactionID }
        let incoming = try #require(member.crypto.incomingVerification.value)
        #expect(incoming.otherUserID == member.userID && incoming.otherDeviceID?.rawValue == nio.deviceID)
        await incoming.accept()
        let ours = try await ourCode(incoming)
        let theirs = try await nioCode(peer, transactionID)
        #expect(ours.cancelled == nil && theirs.cancelled == nil)
        #expect(theirs.emoji == ours.emoji && theirs.decimals == ours.decimals, "nio: \(theirs) ours: \(ours)")
        // The method asked for, and the spec's original MAC (nio 0.25 knows no `.v2`).
        #expect(theirs.keyAgreement == keyAgreement && theirs.mac == "hkdf-hmac-sha256")
        #expect(ours.emoji.count == 7 && ours.decimals.count == 3)
        try await confirmBoth(incoming, peer, transactionID, member: member, nio: nio)
    }

    @Test(
        "SymorvaKit starts, nio accepts: the same emoji and decimals, both verified, the signature on Synapse",
        arguments: ["curve25519-hkdf-sha256", "curve25519"])
    func symorvaStarts(keyAgreement: String) async throws {
        let (member, peer, nio) = try await pair()
        let outgoing = try await member.crypto.verify(
            member.userID, device: DeviceID(nio.deviceID), startDirectly: true)
        let incoming = try await peer.call(
            "sas_incoming",
            ["user_id": .string(member.userID.rawValue), "device_id": .string(member.crypto.deviceID.rawValue)])
        #expect(incoming["transaction_id"] == .string(outgoing.transactionID))
        // nio takes curve25519-hkdf-sha256 whenever it is offered (we offer both): told to
        // choose from one, it accepts that one.
        try await peer.call(
            "sas_accept",
            [
                "transaction_id": .string(outgoing.transactionID), "key_agreements": .array([.string(keyAgreement)]),
            ])
        let ours = try await ourCode(outgoing)
        let theirs = try await nioCode(peer, outgoing.transactionID)
        #expect(ours.cancelled == nil && theirs.cancelled == nil)
        #expect(theirs.emoji == ours.emoji && theirs.decimals == ours.decimals, "nio: \(theirs) ours: \(ours)")
        // The method asked for, and the spec's original MAC (nio 0.25 knows no `.v2`).
        #expect(theirs.keyAgreement == keyAgreement && theirs.mac == "hkdf-hmac-sha256")
        #expect(ours.emoji.count == 7 && ours.decimals.count == 3)
        try await confirmBoth(outgoing, peer, outgoing.transactionID, member: member, nio: nio)
    }

    @Test("nio says the codes differ: both end cancelled m.mismatched_sas, nio's device stays unverified")
    func nioRejects() async throws {
        let (member, peer, nio) = try await pair()
        let outgoing = try await member.crypto.verify(
            member.userID, device: DeviceID(nio.deviceID), startDirectly: true)
        let transactionID = outgoing.transactionID
        _ = try await peer.call(
            "sas_incoming",
            ["user_id": .string(member.userID.rawValue), "device_id": .string(member.crypto.deviceID.rawValue)])
        try await peer.call("sas_accept", ["transaction_id": .string(transactionID)])
        let ours = try await ourCode(outgoing)
        let theirs = try await nioCode(peer, transactionID)
        #expect(theirs.emoji == ours.emoji && theirs.decimals == ours.decimals, "nio: \(theirs) ours: \(ours)")
        try await peer.call("sas_reject", ["transaction_id": .string(transactionID)])
        try await outgoing.state.wait(timeout: .seconds(60)) {
            if case .cancelled = $0 { return true }
            return false
        }
        #expect(outgoing.state.value == .cancelled(code: "m.mismatched_sas", byUs: false))
        let result = try await peer.call("sas_result", ["transaction_id": .string(transactionID)])
        #expect(result["canceled"] == .bool(true) && result["cancel_code"] == .string("m.mismatched_sas"))
        #expect(result["verified"] == .bool(false) && result["device_verified"] == .bool(false))
        // Our confirm after the cancel changes nothing: the flow is over.
        await outgoing.confirm()
        #expect(outgoing.state.value == .cancelled(code: "m.mismatched_sas", byUs: false))
        let device = try await member.crypto.devices(of: member.userID).first { $0.deviceID == nio.deviceID }
        #expect(device?.trust == .unverified)
        try await peer.quit()
    }
}
