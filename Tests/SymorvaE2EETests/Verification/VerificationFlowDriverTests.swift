import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

@testable import SymorvaE2EE

/// Two flows (Alice's and Bob's) with real libolm SAS keys, their messages passed in process:
/// the machine, the cryptography and the wire contents together, without a server.
@Suite("Verification flow driver")
struct VerificationFlowDriverTests {
    static let alice = VerificationParty(userID: "@alice:localhost", deviceID: DeviceID("ALICEDEV"))
    static let bob = VerificationParty(userID: "@bob:localhost", deviceID: DeviceID("BOBDEV"))
    static let aliceKey = "alice-device-ed25519"
    static let bobKey = "bob-device-ed25519"
    static let bobMaster = "bob-master-key"

    /// One side: its driver and what it signed.
    final class Side {
        let party: VerificationParty
        let driver: VerificationFlowDriver
        var signed: VerifiedKeys?
        var sent: [VerificationMessages.Kind] = []

        init(
            _ party: VerificationParty, ownKey: String, master: String?, peer: VerificationParty, peerKey: String,
            peerMaster: String?
        ) {
            self.party = party
            driver = VerificationFlowDriver(
                driver: OlmCryptoDriver(), ourselves: party, ourDeviceKey: ownKey, ourMasterKey: master,
                peerDeviceKeys: [peer.deviceID: peerKey], peerMasterKey: peerMaster, nowMilliseconds: { 1_000 })
        }

        var code: SASCode? {
            switch driver.state {
            case .comparing(let progress), .macSent(let progress), .awaitingDone(let progress, _): progress.code
            default: nil
            }
        }
    }

    /// A man in the middle's hook: may change a message before it is delivered.
    typealias Tamper = (VerificationMessages.Kind, JSONValue, _ toBob: Bool) -> JSONValue

    /// Passes messages between the sides until none is left.
    static func pump(
        _ work: VerificationWork, from sender: Side, to receiver: Side, tamper: Tamper? = nil
    ) {
        var queue = [(work, sender, receiver)]
        while !queue.isEmpty {
            let (work, from, to) = queue.removeFirst()
            if let keys = work.sign { from.signed = keys }
            for message in work.messages {
                from.sent.append(message.kind)
                guard !message.toOtherDevices else { continue }  // m.accepted: for the devices that did not answer
                let content = tamper?(message.kind, message.content, to.party == Self.bob) ?? message.content
                var opening: VerificationFlow?
                if case .idle = to.driver.state {
                    opening = VerificationFlow(
                        transactionID: VerificationMessages.transactionID(of: content) ?? "", ourselves: to.party,
                        peerUserID: from.party.userID, peerDeviceID: from.party.deviceID,
                        usesRequest: message.kind == .request)
                }
                queue.append((to.driver.receive(message.kind, content, from: from.party, opening: opening), to, from))
            }
        }
    }

    static func sides(bobKnowsAliceKey: String = aliceKey) -> (Side, Side) {
        (
            Side(alice, ownKey: aliceKey, master: nil, peer: bob, peerKey: bobKey, peerMaster: bobMaster),
            Side(bob, ownKey: bobKey, master: bobMaster, peer: alice, peerKey: bobKnowsAliceKey, peerMaster: nil)
        )
    }

    static let flow = VerificationFlow(
        transactionID: "txn-driver", ourselves: alice, peerUserID: bob.userID, peerDeviceID: nil, usesRequest: true)

    @Test("Request, ready, SAS: both show the same emoji and decimals, both confirm, both verified and signed")
    func requestFlow() throws {
        let (alice, bob) = Self.sides()
        Self.pump(alice.driver.handle(.verifyAsked(Self.flow)), from: alice, to: bob)
        guard case .requestReceived = bob.driver.state else {
            Issue.record("bob: \(bob.driver.state.caseName)")
            return
        }
        Self.pump(bob.driver.handle(.acceptAsked), from: bob, to: alice)
        guard case .ready = alice.driver.state else {
            Issue.record("alice: \(alice.driver.state.caseName)")
            return
        }
        Self.pump(alice.driver.handle(.sasAsked), from: alice, to: bob)
        let aliceCode = try #require(alice.code)
        let bobCode = try #require(bob.code)
        #expect(aliceCode == bobCode)
        #expect(aliceCode.emoji.count == 7 && aliceCode.decimals.count == 3)
        Self.pump(alice.driver.handle(.codeCompared(matches: true)), from: alice, to: bob)
        Self.pump(bob.driver.handle(.codeCompared(matches: true)), from: bob, to: alice)
        #expect(alice.driver.state.caseName == "verified")
        #expect(bob.driver.state.caseName == "verified")
        // Alice proved Bob's device and master key; Bob proved Alice's device (she has no master key).
        #expect(alice.signed == VerifiedKeys(deviceKey: Self.bobKey, masterKey: Self.bobMaster))
        #expect(bob.signed == VerifiedKeys(deviceKey: Self.aliceKey, masterKey: nil))
        // The request went to every device of Bob: the ready is followed by m.accepted to his others.
        #expect(alice.sent == [.request, .cancel, .start, .key, .mac, .done])
        #expect(bob.sent == [.ready, .accept, .key, .mac, .done])
    }

    @Test("A start without request (the matrix-nio way): the person accepts, verified at the MACs without done")
    func startWithoutRequest() throws {
        let (alice, bob) = Self.sides()
        var direct = Self.flow
        direct.peerDeviceID = Self.bob.deviceID
        direct.usesRequest = false
        Self.pump(alice.driver.handle(.verifyAsked(direct)), from: alice, to: bob)
        guard case .startReceived = bob.driver.state else {
            Issue.record("bob: \(bob.driver.state.caseName)")
            return
        }
        Self.pump(bob.driver.handle(.acceptAsked), from: bob, to: alice)
        #expect(try #require(alice.code) == (try #require(bob.code)))
        Self.pump(bob.driver.handle(.codeCompared(matches: true)), from: bob, to: alice)
        Self.pump(alice.driver.handle(.codeCompared(matches: true)), from: alice, to: bob)
        #expect(alice.driver.state.caseName == "verified" && bob.driver.state.caseName == "verified")
        #expect(!alice.sent.contains(.done) && !bob.sent.contains(.done))
    }

    @Test("A key swapped in the middle: the starter sees the broken commitment and both end cancelled")
    func swappedKey() throws {
        let (alice, bob) = Self.sides()
        let intruder = try SASExchange(driver: OlmCryptoDriver())
        let tamper: Tamper = { kind, content, toBob in
            guard kind == .key, !toBob, case .object(var fields) = content else { return content }
            fields["key"] = .string(intruder.publicKey)
            return .object(fields)
        }
        Self.pump(alice.driver.handle(.verifyAsked(Self.flow)), from: alice, to: bob, tamper: tamper)
        Self.pump(bob.driver.handle(.acceptAsked), from: bob, to: alice, tamper: tamper)
        Self.pump(alice.driver.handle(.sasAsked), from: alice, to: bob, tamper: tamper)
        #expect(alice.driver.state == .cancelled(stateFlow(alice), .mismatchedCommitment, byUs: true))
        #expect(bob.driver.state == .cancelled(stateFlow(bob), .mismatchedCommitment, byUs: false))
        #expect(alice.signed == nil && bob.signed == nil)
    }

    @Test("A MAC over a device key other than the one known: m.key_mismatch, nothing signed")
    func wrongDeviceKey() throws {
        let (alice, bob) = Self.sides(bobKnowsAliceKey: "another-key-for-alice")
        Self.pump(alice.driver.handle(.verifyAsked(Self.flow)), from: alice, to: bob)
        Self.pump(bob.driver.handle(.acceptAsked), from: bob, to: alice)
        Self.pump(alice.driver.handle(.sasAsked), from: alice, to: bob)
        Self.pump(alice.driver.handle(.codeCompared(matches: true)), from: alice, to: bob)
        #expect(bob.driver.state == .cancelled(stateFlow(bob), .keyMismatch, byUs: true))
        #expect(alice.driver.state == .cancelled(stateFlow(alice), .keyMismatch, byUs: false))
        #expect(alice.signed == nil && bob.signed == nil)
    }

    @Test("The person says the codes differ: m.mismatched_sas on both sides")
    func codesDiffer() {
        let (alice, bob) = Self.sides()
        Self.pump(alice.driver.handle(.verifyAsked(Self.flow)), from: alice, to: bob)
        Self.pump(bob.driver.handle(.acceptAsked), from: bob, to: alice)
        Self.pump(alice.driver.handle(.sasAsked), from: alice, to: bob)
        Self.pump(bob.driver.handle(.codeCompared(matches: false)), from: bob, to: alice)
        #expect(bob.driver.state == .cancelled(stateFlow(bob), .mismatchedSAS, byUs: true))
        #expect(alice.driver.state == .cancelled(stateFlow(alice), .mismatchedSAS, byUs: false))
    }

    @Test("A malformed key cancels m.invalid_message")
    func malformedKey() {
        let (alice, bob) = Self.sides()
        let tamper: Tamper = { kind, content, toBob in
            guard kind == .key, toBob, case .object(var fields) = content else { return content }
            fields["key"] = .string("not a key")
            return .object(fields)
        }
        Self.pump(alice.driver.handle(.verifyAsked(Self.flow)), from: alice, to: bob, tamper: tamper)
        Self.pump(bob.driver.handle(.acceptAsked), from: bob, to: alice, tamper: tamper)
        Self.pump(alice.driver.handle(.sasAsked), from: alice, to: bob, tamper: tamper)
        #expect(bob.driver.state == .cancelled(stateFlow(bob), .invalidMessage, byUs: true))
    }

    func stateFlow(_ side: Side) -> VerificationFlow { side.driver.state.flow ?? Self.flow }

    /// Sides with well-formed keys (a QR code carries them as 32 bytes).
    static func qrSides() -> (Side, Side, aliceMaster: String, bobMaster: String) {
        let key = { (byte: UInt8) in UnpaddedBase64.encode([UInt8](repeating: byte, count: 32)) }
        let (aliceDevice, aliceMaster, bobDevice, bobMaster) = (key(1), key(2), key(3), key(4))
        return (
            Side(alice, ownKey: aliceDevice, master: aliceMaster, peer: bob, peerKey: bobDevice, peerMaster: bobMaster),
            Side(bob, ownKey: bobDevice, master: bobMaster, peer: alice, peerKey: aliceDevice, peerMaster: aliceMaster),
            aliceMaster, bobMaster
        )
    }

    static let oneDeviceFlow = VerificationFlow(
        transactionID: "txn-qr", ourselves: alice, peerUserID: bob.userID, peerDeviceID: bob.deviceID,
        usesRequest: true)

    @Test(
        "QR 0x00 in process: Bob shows, Alice scans and reciprocates, Bob confirms: both verified, each signs the other's master key"
    )
    func qrFlow() throws {
        let (alice, bob, aliceMaster, bobMaster) = Self.qrSides()
        Self.pump(alice.driver.handle(.verifyAsked(Self.oneDeviceFlow)), from: alice, to: bob)
        #expect(bob.driver.qrCode() == nil)  // not ready yet
        Self.pump(bob.driver.handle(.acceptAsked), from: bob, to: alice)
        let code = try #require(bob.driver.qrCode())
        #expect(bob.driver.qrCode() == code)
        let payload = try QRVerificationPayload(parsing: code)
        #expect(payload.mode == .verifyingAnotherUser && payload.flowID == "txn-qr")
        #expect(throws: QRVerificationPayloadError.self) { try alice.driver.scanned(Array(code.prefix(20))) }
        Self.pump(try alice.driver.scanned(code), from: alice, to: bob)
        #expect(alice.driver.state.caseName == "reciprocating")
        #expect(bob.driver.state.caseName == "scanned")
        Self.pump(bob.driver.handle(.codeCompared(matches: true)), from: bob, to: alice)
        #expect(alice.driver.state.caseName == "verified")
        #expect(bob.driver.state.caseName == "verified")
        #expect(alice.signed == VerifiedKeys(deviceKey: nil, masterKey: bobMaster))
        #expect(bob.signed == VerifiedKeys(deviceKey: nil, masterKey: aliceMaster))
        #expect(alice.sent == [.request, .start, .done])
        #expect(bob.sent == [.ready, .done])
    }

    @Test("QR: a reciprocate with another secret cancels m.key_mismatch on both sides, nothing signed")
    func qrWrongSecret() throws {
        let (alice, bob, _, _) = Self.qrSides()
        Self.pump(alice.driver.handle(.verifyAsked(Self.oneDeviceFlow)), from: alice, to: bob)
        Self.pump(bob.driver.handle(.acceptAsked), from: bob, to: alice)
        let code = try #require(bob.driver.qrCode())
        Self.pump(try alice.driver.scanned(code), from: alice, to: bob) { kind, content, _ in
            guard kind == .start, case .object(var fields) = content else { return content }
            fields["secret"] = .string(UnpaddedBase64.encode([UInt8](repeating: 9, count: 16)))
            return .object(fields)
        }
        #expect(bob.driver.state == .cancelled(stateFlow(bob), .keyMismatch, byUs: true))
        #expect(alice.driver.state == .cancelled(stateFlow(alice), .keyMismatch, byUs: false))
        #expect(alice.signed == nil && bob.signed == nil)
    }

    @Test("QR: no code for a device that cannot scan (its ready names SAS alone); the other side still shows one")
    func qrNeedsAScanner() throws {
        let (alice, bob, _, _) = Self.qrSides()
        Self.pump(alice.driver.handle(.verifyAsked(Self.oneDeviceFlow)), from: alice, to: bob)
        Self.pump(bob.driver.handle(.acceptAsked), from: bob, to: alice) { kind, content, _ in
            guard kind == .ready, case .object(var fields) = content else { return content }
            fields["methods"] = .array([.string(KeyVerificationMethod.sas)])
            return .object(fields)
        }
        #expect(alice.driver.state.caseName == "ready")
        #expect(alice.driver.qrCode() == nil)
        #expect(bob.driver.qrCode() != nil)  // Alice's request offered to scan
    }
}
