import SymorvaMachines
import Testing

/// Two users, Alice and Bob, and two devices of Alice's: every key distinct.
private enum QRKeys {
    static let aliceMaster = [UInt8](repeating: 0xA0, count: 32)
    static let bobMaster = [UInt8](repeating: 0xB0, count: 32)
    static let aliceOldDevice = [UInt8](repeating: 0xA1, count: 32)
    static let aliceNewDevice = [UInt8](repeating: 0xA2, count: 32)
    static let bobDevice = [UInt8](repeating: 0xB1, count: 32)
    static let other = [UInt8](repeating: 0xEE, count: 32)
    static let secret: [UInt8] = [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]
    static let flow = "txn-qr"

    /// Bob scanning Alice's code (another user): he knows his master key and hers.
    static let bobKnows = QRKnownKeys(
        selfVerification: false, ourDeviceKey: bobDevice, ourMasterKey: bobMaster, ourMasterKeyTrusted: true,
        peerMasterKey: aliceMaster, peerDeviceKey: aliceOldDevice)
    /// Alice's old device (trusts the master key) in a flow with her new device.
    static let oldDeviceKnows = QRKnownKeys(
        selfVerification: true, ourDeviceKey: aliceOldDevice, ourMasterKey: aliceMaster, ourMasterKeyTrusted: true,
        peerMasterKey: nil, peerDeviceKey: aliceNewDevice)
    /// Alice's new device (does not trust the master key yet) in a flow with her old device.
    static let newDeviceKnows = QRKnownKeys(
        selfVerification: true, ourDeviceKey: aliceNewDevice, ourMasterKey: aliceMaster, ourMasterKeyTrusted: false,
        peerMasterKey: nil, peerDeviceKey: aliceOldDevice)

    static func payload(_ mode: QRVerificationMode, _ first: [UInt8], _ second: [UInt8]) throws
        -> QRVerificationPayload
    {
        try QRVerificationPayload(mode: mode, flowID: flow, firstKey: first, secondKey: second, sharedSecret: secret)
    }
}

@Suite("QR verification checks")
struct QRVerificationCheckTests {
    @Test("0x00: Alice shows her master key and Bob's; Bob's scan proves Alice's master key")
    func verifyingAnotherUser() throws {
        let code = try QRKeys.payload(.verifyingAnotherUser, QRKeys.aliceMaster, QRKeys.bobMaster)
        #expect(
            code.scannerCheck(flowID: QRKeys.flow, known: QRKeys.bobKnows) == .match(.peerMasterKey(QRKeys.aliceMaster))
        )
        // Alice, once Bob reciprocates with the secret, has Bob's master key proven.
        #expect(code.reciprocateCheck(secret: QRKeys.secret) == .match(.peerMasterKey(QRKeys.bobMaster)))

        let wrongFirst = try QRKeys.payload(.verifyingAnotherUser, QRKeys.other, QRKeys.bobMaster)
        #expect(wrongFirst.scannerCheck(flowID: QRKeys.flow, known: QRKeys.bobKnows) == .mismatch(.firstKey))
        let wrongSecond = try QRKeys.payload(.verifyingAnotherUser, QRKeys.aliceMaster, QRKeys.other)
        #expect(wrongSecond.scannerCheck(flowID: QRKeys.flow, known: QRKeys.bobKnows) == .mismatch(.secondKey))
    }

    @Test("0x01: the old device shows the master key and the new device's key; the scan proves the master key")
    func selfVerifyingTrusted() throws {
        let code = try QRKeys.payload(.selfVerifyingTrustedMasterKey, QRKeys.aliceMaster, QRKeys.aliceNewDevice)
        #expect(
            code.scannerCheck(flowID: QRKeys.flow, known: QRKeys.newDeviceKnows)
                == .match(.ourMasterKey(QRKeys.aliceMaster)))
        #expect(code.reciprocateCheck(secret: QRKeys.secret) == .match(.peerDeviceKey(QRKeys.aliceNewDevice)))

        let wrongMaster = try QRKeys.payload(.selfVerifyingTrustedMasterKey, QRKeys.other, QRKeys.aliceNewDevice)
        #expect(wrongMaster.scannerCheck(flowID: QRKeys.flow, known: QRKeys.newDeviceKnows) == .mismatch(.firstKey))
        let wrongDevice = try QRKeys.payload(.selfVerifyingTrustedMasterKey, QRKeys.aliceMaster, QRKeys.other)
        #expect(wrongDevice.scannerCheck(flowID: QRKeys.flow, known: QRKeys.newDeviceKnows) == .mismatch(.secondKey))
    }

    @Test("0x02: the new device shows its key and the master key; the trusting device's scan proves the new device")
    func selfVerifyingUntrusted() throws {
        let code = try QRKeys.payload(.selfVerifyingUntrustedMasterKey, QRKeys.aliceNewDevice, QRKeys.aliceMaster)
        #expect(
            code.scannerCheck(flowID: QRKeys.flow, known: QRKeys.oldDeviceKnows)
                == .match(.peerDeviceKey(QRKeys.aliceNewDevice)))
        #expect(code.reciprocateCheck(secret: QRKeys.secret) == .match(.ourMasterKey(QRKeys.aliceMaster)))
        // A device that does not trust the master key either cannot vouch for it.
        var untrusting = QRKeys.oldDeviceKnows
        untrusting.ourMasterKeyTrusted = false
        #expect(code.scannerCheck(flowID: QRKeys.flow, known: untrusting) == .mismatch(.masterKeyNotTrusted))

        let wrongDevice = try QRKeys.payload(.selfVerifyingUntrustedMasterKey, QRKeys.other, QRKeys.aliceMaster)
        #expect(wrongDevice.scannerCheck(flowID: QRKeys.flow, known: QRKeys.oldDeviceKnows) == .mismatch(.firstKey))
        let wrongMaster = try QRKeys.payload(.selfVerifyingUntrustedMasterKey, QRKeys.aliceNewDevice, QRKeys.other)
        #expect(wrongMaster.scannerCheck(flowID: QRKeys.flow, known: QRKeys.oldDeviceKnows) == .mismatch(.secondKey))
    }

    @Test("Another flow, a mode for the other kind of flow, or an unknown key never match")
    func flowAndModeMismatches() throws {
        let other = try QRKeys.payload(.verifyingAnotherUser, QRKeys.aliceMaster, QRKeys.bobMaster)
        #expect(other.scannerCheck(flowID: "txn-other", known: QRKeys.bobKnows) == .mismatch(.flowID))
        // Mode 0x00 in a flow with our own device, and a self mode in a flow with another user.
        #expect(other.scannerCheck(flowID: QRKeys.flow, known: QRKeys.oldDeviceKnows) == .mismatch(.modeNotForThisFlow))
        let selfCode = try QRKeys.payload(.selfVerifyingTrustedMasterKey, QRKeys.bobMaster, QRKeys.bobDevice)
        #expect(selfCode.scannerCheck(flowID: QRKeys.flow, known: QRKeys.bobKnows) == .mismatch(.modeNotForThisFlow))
        var noMaster = QRKeys.bobKnows
        noMaster.peerMasterKey = nil
        #expect(other.scannerCheck(flowID: QRKeys.flow, known: noMaster) == .mismatch(.keyUnknown))
    }

    @Test("A reciprocate secret must be the code's: any other, shorter or longer one is refused")
    func reciprocateSecret() throws {
        let code = try QRKeys.payload(.verifyingAnotherUser, QRKeys.aliceMaster, QRKeys.bobMaster)
        var flipped = QRKeys.secret
        flipped[9] ^= 0x01
        for secret in [
            flipped, Array(QRKeys.secret.dropLast()), QRKeys.secret + [0], [], Array(QRKeys.secret.prefix(8)),
        ] {
            #expect(code.reciprocateCheck(secret: secret) == .mismatch(.sharedSecret))
        }
        // 256 bytes longer: the lengths differ by a multiple of 256 yet it is still refused.
        #expect(
            code.reciprocateCheck(secret: QRKeys.secret + [UInt8](repeating: 0, count: 256)) == .mismatch(.sharedSecret)
        )
    }

    @Test("Cancel codes: m.unknown_transaction for another flow, m.key_mismatch for everything else")
    func cancelCodes() {
        #expect(QRVerificationMismatch.flowID.cancelCode.rawValue == "m.unknown_transaction")
        let keyMismatches: [QRVerificationMismatch] = [
            .modeNotForThisFlow, .masterKeyNotTrusted, .keyUnknown, .firstKey, .secondKey, .sharedSecret,
        ]
        for mismatch in keyMismatches {
            #expect(mismatch.cancelCode.rawValue == "m.key_mismatch")
        }
        #expect(KeyVerificationMethod.reciprocate == "m.reciprocate.v1")
        #expect(KeyVerificationMethod.qrCodeShow == "m.qr_code.show.v1")
        #expect(KeyVerificationMethod.qrCodeScan == "m.qr_code.scan.v1")
    }
}
