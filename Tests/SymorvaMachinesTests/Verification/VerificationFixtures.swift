import SymorvaMachines
import SymorvaRuntime

enum VerificationFixture {
    static let alice = VerificationParty(userID: "@alice:localhost", deviceID: DeviceID("ALICEDEV"))
    static let bob = VerificationParty(userID: "@bob:localhost", deviceID: DeviceID("BOBDEV"))

    /// Alice's flow with Bob, begun with a request to his device (Alice is the smaller party).
    static let requestFlow = VerificationFlow(
        transactionID: "txn-1", ourselves: alice, peerUserID: bob.userID, peerDeviceID: bob.deviceID,
        usesRequest: true)
    /// Alice's request to every device of Bob: the device is learned from ready.
    static let anyDeviceFlow = VerificationFlow(
        transactionID: "txn-1", ourselves: alice, peerUserID: bob.userID, peerDeviceID: nil, usesRequest: true)
    /// Alice starting at once (matrix-nio style, no request).
    static let directFlow = VerificationFlow(
        transactionID: "txn-1", ourselves: alice, peerUserID: bob.userID, peerDeviceID: bob.deviceID,
        usesRequest: false)
    /// Bob's view of a flow with Alice (Bob is the larger party: Alice's start wins).
    static let bobsFlow = VerificationFlow(
        transactionID: "txn-1", ourselves: bob, peerUserID: alice.userID, peerDeviceID: alice.deviceID,
        usesRequest: true)

    static let agreement = SASAgreement(
        keyAgreement: .curve25519HKDFSHA256, macMethod: .hkdfHMACSHA256V2, shortCodeMethods: [.decimal, .emoji])
    static let oursStart = SASStart(fromDevice: alice.deviceID, method: KeyVerificationMethod.sas, offer: .ours)
    static let peerStart = SASStart(fromDevice: bob.deviceID, method: KeyVerificationMethod.sas, offer: .ours)
    static let bobsViewOfAliceStart = SASStart(
        fromDevice: alice.deviceID, method: KeyVerificationMethod.sas, offer: .ours)
    static let qrStart = SASStart(fromDevice: bob.deviceID, method: "m.reciprocate.v1", offer: .ours)
    static let legacyOnlyStart = SASStart(
        fromDevice: bob.deviceID, method: KeyVerificationMethod.sas,
        offer: SASOffer(
            keyAgreementProtocols: ["curve25519"], hashes: ["sha256"], macMethods: ["hkdf-hmac-sha256"],
            shortCodeMethods: ["decimal"]))
    static let noCommonStart = SASStart(
        fromDevice: bob.deviceID, method: KeyVerificationMethod.sas,
        offer: SASOffer(
            keyAgreementProtocols: ["x448"], hashes: ["sha256"], macMethods: ["hkdf-hmac-sha256.v2"],
            shortCodeMethods: ["decimal"]))

    /// Another device of Bob's than the one a flow is with.
    static let bobsOtherDevice = DeviceID("BOBDEV2")
    static let otherDeviceReady = VerificationReady(fromDevice: bobsOtherDevice, methods: [KeyVerificationMethod.sas])
    static let otherDeviceStart = SASStart(
        fromDevice: bobsOtherDevice, method: KeyVerificationMethod.sas, offer: .ours)

    static let commitment = "commitment-of-bobs-key"
    static let code = SASCode(bytes: [1, 2, 3, 4, 5, 6])!
    static let keys = VerifiedKeys(deviceKey: "bob-ed25519", masterKey: "bob-master")
    static let goodAccept = SASAccept(agreement: agreement, commitment: commitment)
    static let unknownAccept = SASAccept(agreement: nil, commitment: commitment)
    static let matchingKey = SASKeyFacts(commitment: commitment, code: code)
    static let otherKey = SASKeyFacts(commitment: "commitment-of-another-key", code: code)

    static func progress(
        _ flow: VerificationFlow = requestFlow, weStarted: Bool = true, agreement: SASAgreement? = agreement,
        commitment: String? = commitment, code: SASCode? = nil, theirMAC: MACVerdict? = nil
    ) -> SASProgress {
        SASProgress(
            flow: flow, weStarted: weStarted, start: weStarted ? oursStart : peerStart, agreement: agreement,
            commitment: commitment, code: code, theirMAC: theirMAC)
    }

    static let sampleStates: [VerificationMachine.State] = [
        .idle,
        .requested(anyDeviceFlow), .requested(requestFlow),
        .requestReceived(bobsFlow),
        .ready(requestFlow), .ready(bobsFlow),
        .startReceived(progress(directFlow, weStarted: false, commitment: nil)),
        .started(progress(commitment: nil)),
        .started(SASProgress(flow: bobsFlow, weStarted: true, start: oursStart)),
        .accepted(progress(weStarted: false, commitment: nil)),
        .keySent(progress()),
        .comparing(progress(code: code)),
        .comparing(progress(code: code, theirMAC: .valid(keys))),
        .comparing(progress(directFlow, code: code, theirMAC: .valid(keys))),
        .macSent(progress(code: code)), .macSent(progress(directFlow, code: code)),
        .awaitingDone(progress(code: code), keys),
        .verified(requestFlow, keys),
        .cancelled(requestFlow, .user, byUs: true),
        .reciprocating(requestFlow, keys), .scanned(requestFlow, keys), .scanConfirmed(requestFlow, keys),
    ]

    static let sampleEvents: [VerificationMachine.Event] = [
        .verifyAsked(requestFlow), .verifyAsked(directFlow),
        .requestReceived(bobsFlow, age: .seconds(5)), .requestReceived(bobsFlow, age: .seconds(700)),
        .acceptAsked,
        .readyReceived(VerificationReady(fromDevice: bob.deviceID, methods: [KeyVerificationMethod.sas])),
        .readyReceived(VerificationReady(fromDevice: bob.deviceID, methods: ["m.qr_code.show.v1"])),
        .readyReceived(VerificationReady(fromDevice: alice.deviceID, methods: [KeyVerificationMethod.sas])),
        .readyReceived(otherDeviceReady), .startReceived(bobsFlow, otherDeviceStart),
        .startReceived(
            bobsFlow,
            SASStart(fromDevice: alice.deviceID, method: KeyVerificationMethod.sas, offer: noCommonStart.offer)),
        .sasAsked,
        .startReceived(bobsFlow, peerStart), .startReceived(bobsFlow, bobsViewOfAliceStart),
        .startReceived(bobsFlow, noCommonStart), .startReceived(bobsFlow, qrStart),
        .acceptReceived(goodAccept), .acceptReceived(unknownAccept),
        .keyReceived(matchingKey), .keyReceived(otherKey),
        .codeCompared(matches: true), .codeCompared(matches: false),
        .macReceived(.valid(keys)), .macReceived(.mismatch),
        .doneReceived, .invalidMessageReceived,
        .cancelReceived(.user), .cancelAsked,
        .timedOut(.overall), .timedOut(.request),
        .readyReceived(VerificationReady(fromDevice: bob.deviceID, methods: ["org.example.method"])),
        .qrScanned(.proven(keys)), .qrScanned(.mismatch(.keyMismatch)),
        .reciprocateReceived(.proven(keys)), .reciprocateReceived(.mismatch(.keyMismatch)),
    ]
}
