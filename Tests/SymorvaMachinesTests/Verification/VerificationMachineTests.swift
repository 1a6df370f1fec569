import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

private typealias Machine = VerificationMachine
private typealias F = VerificationFixture

private let stopTimers: [Machine.Effect] = [.cancel(Machine.Keys.overall), .cancel(Machine.Keys.request)]
private let sasReady = VerificationReady(fromDevice: F.bob.deviceID, methods: [KeyVerificationMethod.sas])

@Suite("Verification machine")
struct VerificationMachineTests {
    @Test("Requester: request, ready, start, accept, keys, MACs, done — verified and signed")
    func requesterHappyPath() throws {
        let store = MachineTestStore(Machine(), initial: .idle)
        try store.send(
            .verifyAsked(F.anyDeviceFlow), expecting: .requested(F.anyDeviceFlow),
            effects: [
                .scheduleTimeout(.overall, after: .seconds(600)), .scheduleTimeout(.request, after: .seconds(120)),
                .sendRequest(F.anyDeviceFlow, methods: KeyVerificationMethod.ours),
            ])
        try store.send(
            .readyReceived(sasReady), expecting: .ready(F.requestFlow),
            effects: [.cancel(Machine.Keys.request), .sendAcceptedToOtherDevices(F.requestFlow)])
        let started = SASProgress(flow: F.requestFlow, weStarted: true, start: F.oursStart)
        try store.send(.sasAsked, expecting: .started(started), effects: [.sendStart(F.requestFlow, .ours)])
        let keySent = F.progress()
        try store.send(.acceptReceived(F.goodAccept), expecting: .keySent(keySent), effects: [.sendKey(F.requestFlow)])
        try store.send(.keyReceived(F.matchingKey), expecting: .comparing(F.progress(code: F.code)))
        let withMAC = F.progress(code: F.code, theirMAC: .valid(F.keys))
        try store.send(.macReceived(.valid(F.keys)), expecting: .comparing(withMAC))
        try store.send(
            .codeCompared(matches: true), expecting: .awaitingDone(withMAC, F.keys),
            effects: [
                .sendMAC(F.requestFlow, .hkdfHMACSHA256V2), .crossSign(F.requestFlow, F.keys),
                .sendDone(F.requestFlow),
            ])
        try store.send(.doneReceived, expecting: .verified(F.requestFlow, F.keys), effects: stopTimers)
        try store.assertIgnored(F.sampleEvents)
    }

    @Test("Responder: accept the request, accept the start, send our key after theirs, MAC, done")
    func responderHappyPath() throws {
        let store = MachineTestStore(Machine(), initial: .idle)
        try store.send(
            .requestReceived(F.bobsFlow, age: .seconds(3)), expecting: .requestReceived(F.bobsFlow),
            effects: [
                .scheduleTimeout(.overall, after: .seconds(600)), .scheduleTimeout(.request, after: .seconds(120)),
            ])
        try store.send(
            .acceptAsked, expecting: .ready(F.bobsFlow),
            effects: [.cancel(Machine.Keys.request), .sendReady(F.bobsFlow, methods: KeyVerificationMethod.ours)])
        let accepted = SASProgress(
            flow: F.bobsFlow, weStarted: false, start: F.bobsViewOfAliceStart, agreement: F.agreement)
        try store.send(
            .startReceived(F.bobsFlow, F.bobsViewOfAliceStart), expecting: .accepted(accepted),
            effects: [.sendAccept(F.bobsFlow, F.agreement)])
        var comparing = accepted
        comparing.code = F.code
        try store.send(
            .keyReceived(F.matchingKey), expecting: .comparing(comparing), effects: [.sendKey(F.bobsFlow)])
        try store.send(
            .codeCompared(matches: true), expecting: .macSent(comparing),
            effects: [.sendMAC(F.bobsFlow, .hkdfHMACSHA256V2)])
        try store.send(
            .macReceived(.valid(F.keys)), expecting: .awaitingDone(comparing, F.keys),
            effects: [.crossSign(F.bobsFlow, F.keys), .sendDone(F.bobsFlow)])
        try store.send(.doneReceived, expecting: .verified(F.bobsFlow, F.keys), effects: stopTimers)
    }

    @Test("A start without request (matrix-nio starts): accepted by the person, verified at the MACs, no done")
    func startWithoutRequest() throws {
        let store = MachineTestStore(Machine(), initial: .idle)
        let opened = VerificationFlow(
            transactionID: "nio-txn", ourselves: F.alice, peerUserID: F.bob.userID, peerDeviceID: nil,
            usesRequest: true)
        var flow = opened
        flow.peerDeviceID = F.bob.deviceID
        flow.usesRequest = false
        let legacy = SASAgreement(keyAgreement: .curve25519, macMethod: .hkdfHMACSHA256, shortCodeMethods: [.decimal])
        let incoming = SASProgress(flow: flow, weStarted: false, start: F.legacyOnlyStart, agreement: legacy)
        try store.send(
            .startReceived(opened, F.legacyOnlyStart), expecting: .startReceived(incoming),
            effects: [.scheduleTimeout(.overall, after: .seconds(600))])
        try store.send(.acceptAsked, expecting: .accepted(incoming), effects: [.sendAccept(flow, legacy)])
        var comparing = incoming
        comparing.code = F.code
        try store.send(.keyReceived(F.otherKey), expecting: .comparing(comparing), effects: [.sendKey(flow)])
        try store.send(
            .codeCompared(matches: true), expecting: .macSent(comparing), effects: [.sendMAC(flow, .hkdfHMACSHA256)])
        try store.send(
            .macReceived(.valid(F.keys)), expecting: .verified(flow, F.keys),
            effects: [.crossSign(flow, F.keys)] + stopTimers)
    }

    @Test("We start without request (for matrix-nio): start at once, accept with the legacy methods")
    func weStartWithoutRequest() throws {
        let store = MachineTestStore(Machine(), initial: .idle)
        let started = SASProgress(flow: F.directFlow, weStarted: true, start: F.oursStart)
        try store.send(
            .verifyAsked(F.directFlow), expecting: .started(started),
            effects: [.scheduleTimeout(.overall, after: .seconds(600)), .sendStart(F.directFlow, .ours)])
        let legacy = SASAgreement(keyAgreement: .curve25519, macMethod: .hkdfHMACSHA256, shortCodeMethods: [.decimal])
        var keySent = started
        keySent.agreement = legacy
        keySent.commitment = "c"
        try store.send(
            .acceptReceived(SASAccept(agreement: legacy, commitment: "c")), expecting: .keySent(keySent),
            effects: [.sendKey(F.directFlow)])
        try store.send(
            .keyReceived(F.matchingKey), expecting: .cancelled(F.directFlow, .mismatchedCommitment, byUs: true),
            effects: [.sendCancel(F.directFlow, .mismatchedCommitment)] + stopTimers)
    }

    @Test("The person says the codes differ: m.mismatched_sas, nothing signed")
    func codesDiffer() throws {
        let store = MachineTestStore(Machine(), initial: .comparing(F.progress(code: F.code, theirMAC: .valid(F.keys))))
        try store.send(
            .codeCompared(matches: false), expecting: .cancelled(F.requestFlow, .mismatchedSAS, byUs: true),
            effects: [.sendCancel(F.requestFlow, .mismatchedSAS)] + stopTimers)
        try store.assertIgnored([.codeCompared(matches: true), .macReceived(.valid(F.keys)), .doneReceived])
    }

    @Test("A MAC that does not match cancels m.key_mismatch, before or after the person confirms")
    func macMismatch() throws {
        let before = MachineTestStore(Machine(), initial: .comparing(F.progress(code: F.code)))
        try before.send(
            .macReceived(.mismatch), expecting: .cancelled(F.requestFlow, .keyMismatch, byUs: true),
            effects: [.sendCancel(F.requestFlow, .keyMismatch)] + stopTimers)
        let after = MachineTestStore(Machine(), initial: .macSent(F.progress(code: F.code)))
        try after.send(
            .macReceived(.mismatch), expecting: .cancelled(F.requestFlow, .keyMismatch, byUs: true),
            effects: [.sendCancel(F.requestFlow, .keyMismatch)] + stopTimers)
    }

    @Test("Duplicate, late and out-of-order messages cancel m.unexpected_message")
    func unexpectedMessages() throws {
        let cancelled: Machine.State = .cancelled(F.requestFlow, .unexpectedMessage, byUs: true)
        let effects: [Machine.Effect] = [.sendCancel(F.requestFlow, .unexpectedMessage)] + stopTimers
        // A second MAC while the first waits for the person.
        let twice = MachineTestStore(
            Machine(), initial: .comparing(F.progress(code: F.code, theirMAC: .valid(F.keys))))
        try twice.send(.macReceived(.valid(F.keys)), expecting: cancelled, effects: effects)
        // done before any MAC.
        let early = MachineTestStore(Machine(), initial: .comparing(F.progress(code: F.code)))
        try early.send(.doneReceived, expecting: cancelled, effects: effects)
        // A second key.
        let key = MachineTestStore(Machine(), initial: .comparing(F.progress(code: F.code)))
        try key.send(.keyReceived(F.matchingKey), expecting: cancelled, effects: effects)
        // A MAC before the keys.
        let mac = MachineTestStore(Machine(), initial: .keySent(F.progress()))
        try mac.send(.macReceived(.valid(F.keys)), expecting: cancelled, effects: effects)
        // A ready once ready.
        let ready = MachineTestStore(Machine(), initial: .ready(F.requestFlow))
        try ready.send(.readyReceived(sasReady), expecting: cancelled, effects: effects)
    }

    @Test(
        "Other devices: a request to every device sends m.accepted to the others on the first ready; a ready or start from another device than the flow's is ignored"
    )
    func otherDevices() throws {
        // A request to every device of Bob: BOBDEV answers first, the others hear m.accepted.
        let everyDevice = MachineTestStore(Machine(), initial: .requested(F.anyDeviceFlow))
        try everyDevice.send(
            .readyReceived(sasReady), expecting: .ready(F.requestFlow),
            effects: [.cancel(Machine.Keys.request), .sendAcceptedToOtherDevices(F.requestFlow)])
        // BOBDEV2 answers too, late: ignored, the flow stays with BOBDEV.
        try everyDevice.send(.readyReceived(F.otherDeviceReady), stayingWith: [])
        try everyDevice.send(.startReceived(F.requestFlow, F.otherDeviceStart), stayingWith: [])
        try everyDevice.assertState(.ready(F.requestFlow))
        // The flow's device goes on.
        let accepted = SASProgress(flow: F.requestFlow, weStarted: false, start: F.peerStart, agreement: F.agreement)
        try everyDevice.send(
            .startReceived(F.requestFlow, F.peerStart), expecting: .accepted(accepted),
            effects: [.sendAccept(F.requestFlow, F.agreement)])
        try everyDevice.send(.startReceived(F.requestFlow, F.otherDeviceStart), stayingWith: [])

        // A request to BOBDEV alone: a ready from BOBDEV2 is ignored, no m.accepted when BOBDEV answers.
        let oneDevice = MachineTestStore(Machine(), initial: .requested(F.requestFlow))
        try oneDevice.send(.readyReceived(F.otherDeviceReady), stayingWith: [])
        try oneDevice.send(.startReceived(F.requestFlow, F.otherDeviceStart), stayingWith: [])
        try oneDevice.send(
            .readyReceived(sasReady), expecting: .ready(F.requestFlow), effects: [.cancel(Machine.Keys.request)])

        // Later in the flow, a start or ready from another device changes nothing; from the
        // flow's device it is unexpected.
        for state: Machine.State in [
            .keySent(F.progress()), .comparing(F.progress(code: F.code)), .macSent(F.progress(code: F.code)),
            .awaitingDone(F.progress(code: F.code), F.keys),
        ] {
            let store = MachineTestStore(Machine(), initial: state)
            try store.send(.readyReceived(F.otherDeviceReady), stayingWith: [])
            try store.send(.startReceived(F.requestFlow, F.otherDeviceStart), stayingWith: [])
            try store.send(
                .readyReceived(sasReady), expecting: .cancelled(F.requestFlow, .unexpectedMessage, byUs: true),
                effects: [.sendCancel(F.requestFlow, .unexpectedMessage)] + stopTimers)
        }
    }

    @Test("QR, the scanner: a good scan sends m.reciprocate.v1, the shower's done signs and answers done")
    func qrScanner() throws {
        let store = MachineTestStore(Machine(), initial: .ready(F.requestFlow))
        try store.assertIgnored(.acceptAsked)
        try store.send(
            .qrScanned(.proven(F.keys)), expecting: .reciprocating(F.requestFlow, F.keys),
            effects: [.sendReciprocate(F.requestFlow)])
        try store.assertIgnored(.codeCompared(matches: true))
        try store.assertIgnored(.qrScanned(.proven(F.keys)))
        try store.send(
            .doneReceived, expecting: .verified(F.requestFlow, F.keys),
            effects: [.crossSign(F.requestFlow, F.keys), .sendDone(F.requestFlow)] + stopTimers)
        // A code that does not match cancels with the check's code, and nothing is signed.
        let mismatch = MachineTestStore(Machine(), initial: .ready(F.requestFlow))
        try mismatch.send(
            .qrScanned(.mismatch(.keyMismatch)), expecting: .cancelled(F.requestFlow, .keyMismatch, byUs: true),
            effects: [.sendCancel(F.requestFlow, .keyMismatch)] + stopTimers)
        // Scanning before ready changes nothing; a reciprocate while we reciprocate is unexpected.
        let early = MachineTestStore(Machine(), initial: .requested(F.anyDeviceFlow))
        try early.assertIgnored(.qrScanned(.proven(F.keys)))
        let twice = MachineTestStore(Machine(), initial: .reciprocating(F.requestFlow, F.keys))
        try twice.send(
            .reciprocateReceived(.proven(F.keys)),
            expecting: .cancelled(F.requestFlow, .unexpectedMessage, byUs: true),
            effects: [.sendCancel(F.requestFlow, .unexpectedMessage)] + stopTimers)
    }

    @Test(
        "QR, the shower: a reciprocate with the code's secret waits for the person; yes signs and sends done, no cancels m.user; a wrong secret m.key_mismatch"
    )
    func qrShower() throws {
        let store = MachineTestStore(Machine(), initial: .ready(F.requestFlow))
        try store.send(.reciprocateReceived(.proven(F.keys)), expecting: .scanned(F.requestFlow, F.keys))
        try store.send(
            .codeCompared(matches: true), expecting: .scanConfirmed(F.requestFlow, F.keys),
            effects: [.crossSign(F.requestFlow, F.keys), .sendDone(F.requestFlow)])
        try store.send(.doneReceived, expecting: .verified(F.requestFlow, F.keys), effects: stopTimers)
        let no = MachineTestStore(Machine(), initial: .scanned(F.requestFlow, F.keys))
        try no.send(
            .codeCompared(matches: false), expecting: .cancelled(F.requestFlow, .user, byUs: true),
            effects: [.sendCancel(F.requestFlow, .user)] + stopTimers)
        let early = MachineTestStore(Machine(), initial: .scanned(F.requestFlow, F.keys))
        try early.send(
            .doneReceived, expecting: .cancelled(F.requestFlow, .unexpectedMessage, byUs: true),
            effects: [.sendCancel(F.requestFlow, .unexpectedMessage)] + stopTimers)
        let wrong = MachineTestStore(Machine(), initial: .ready(F.requestFlow))
        try wrong.send(
            .reciprocateReceived(.mismatch(.keyMismatch)),
            expecting: .cancelled(F.requestFlow, .keyMismatch, byUs: true),
            effects: [.sendCancel(F.requestFlow, .keyMismatch)] + stopTimers)
        let timedOut = MachineTestStore(Machine(), initial: .scanConfirmed(F.requestFlow, F.keys))
        try timedOut.send(
            .timedOut(.overall), expecting: .cancelled(F.requestFlow, .timeout, byUs: true),
            effects: [.sendCancel(F.requestFlow, .timeout)] + stopTimers)
    }

    @Test(
        "Methods in common or m.unknown_method: a start of an unknown method, a ready with nothing in common, an accept of nothing offered"
    )
    func unknownMethods() throws {
        let ready = MachineTestStore(Machine(), initial: .ready(F.requestFlow))
        try ready.send(
            .startReceived(F.requestFlow, F.qrStart), expecting: .cancelled(F.requestFlow, .unknownMethod, byUs: true),
            effects: [.sendCancel(F.requestFlow, .unknownMethod)] + stopTimers)
        let requested = MachineTestStore(Machine(), initial: .requested(F.anyDeviceFlow))
        try requested.send(
            .readyReceived(VerificationReady(fromDevice: F.bob.deviceID, methods: ["org.example.method"])),
            expecting: .cancelled(F.requestFlow, .unknownMethod, byUs: true),
            effects: [.sendCancel(F.requestFlow, .unknownMethod)] + stopTimers)
        let started = MachineTestStore(Machine(), initial: .started(F.progress(commitment: nil)))
        try started.send(
            .acceptReceived(F.unknownAccept), expecting: .cancelled(F.requestFlow, .unknownMethod, byUs: true),
            effects: [.sendCancel(F.requestFlow, .unknownMethod)] + stopTimers)
        let idle = MachineTestStore(Machine(), initial: .idle)
        var flow = F.bobsFlow
        flow.peerDeviceID = F.bob.deviceID
        flow.usesRequest = false
        try idle.send(
            .startReceived(F.bobsFlow, F.noCommonStart), expecting: .cancelled(flow, .unknownMethod, byUs: true),
            effects: [.sendCancel(flow, .unknownMethod)])
        #expect(SASAgreement.negotiate(F.noCommonStart.offer) == nil)
        #expect(
            SASAgreement.negotiate(
                SASOffer(
                    keyAgreementProtocols: ["curve25519"], hashes: ["sha256"], macMethods: ["hkdf-hmac-sha256"],
                    shortCodeMethods: ["emoji"])) == nil)
    }

    @Test("Both start: the smaller party's start stands, the other side accepts it")
    func bothStart() throws {
        // Alice (smaller) keeps hers and drops Bob's.
        let alice = MachineTestStore(Machine(), initial: .started(F.progress(commitment: nil)))
        try alice.send(.startReceived(F.requestFlow, F.peerStart), stayingWith: [])
        // Bob gives way and accepts Alice's.
        let bobsStart = SASProgress(flow: F.bobsFlow, weStarted: true, start: F.oursStart)
        let bob = MachineTestStore(Machine(), initial: .started(bobsStart))
        let accepted = SASProgress(
            flow: F.bobsFlow, weStarted: false, start: F.bobsViewOfAliceStart, agreement: F.agreement)
        try bob.send(
            .startReceived(F.bobsFlow, F.bobsViewOfAliceStart), expecting: .accepted(accepted),
            effects: [.sendAccept(F.bobsFlow, F.agreement)])
    }

    @Test("Timeouts: an unanswered request and the whole flow cancel m.timeout; a late request timer changes nothing")
    func timeouts() throws {
        let requested = MachineTestStore(Machine(), initial: .requested(F.anyDeviceFlow))
        try requested.send(
            .timedOut(.request), expecting: .cancelled(F.anyDeviceFlow, .timeout, byUs: true),
            effects: [.sendCancel(F.anyDeviceFlow, .timeout)] + stopTimers)
        let comparing = MachineTestStore(Machine(), initial: .comparing(F.progress(code: F.code)))
        try comparing.send(.timedOut(.request), stayingWith: [])
        try comparing.send(
            .timedOut(.overall), expecting: .cancelled(F.requestFlow, .timeout, byUs: true),
            effects: [.sendCancel(F.requestFlow, .timeout)] + stopTimers)
        #expect(Machine().event(firing: .scheduleTimeout(.overall, after: .seconds(600))) == .timedOut(.overall))
        #expect(Machine().event(firing: .sendDone(F.requestFlow)) == nil)
        #expect(
            Machine.Effect.scheduleTimeout(.request, after: .seconds(120)).directive
                == .timer(Machine.Keys.request, .after(.seconds(120))))
    }

    @Test("Cancels: the person's sends m.user; the peer's is kept with its code; an old request is not shown")
    func cancels() throws {
        let mine = MachineTestStore(Machine(), initial: .ready(F.requestFlow))
        try mine.send(
            .cancelAsked, expecting: .cancelled(F.requestFlow, .user, byUs: true),
            effects: [.sendCancel(F.requestFlow, .user)] + stopTimers)
        let theirs = MachineTestStore(Machine(), initial: .macSent(F.progress(code: F.code)))
        let code = VerificationCancelCode(rawValue: "org.example.custom")
        try theirs.send(
            .cancelReceived(code), expecting: .cancelled(F.requestFlow, code, byUs: false), effects: stopTimers)
        let invalid = MachineTestStore(Machine(), initial: .accepted(F.progress(weStarted: false, commitment: nil)))
        try invalid.send(
            .invalidMessageReceived, expecting: .cancelled(F.requestFlow, .invalidMessage, byUs: true),
            effects: [.sendCancel(F.requestFlow, .invalidMessage)] + stopTimers)
        let old = MachineTestStore(Machine(), initial: .idle)
        try old.send(.requestReceived(F.bobsFlow, age: .seconds(601)), stayingWith: [])
        try old.send(.requestReceived(F.bobsFlow, age: .seconds(-301)), stayingWith: [])
        try old.assertIgnored([
            .acceptAsked, .sasAsked, .cancelAsked, .cancelReceived(.user), .doneReceived, .invalidMessageReceived,
        ])
    }

    @Test("Traces never show keys, commitments or codes")
    func redaction() {
        let facts = SASKeyFacts(commitment: "canary-commitment", code: F.code)
        #expect(!String(describing: Machine.Event.keyReceived(facts)).contains("canary"))
        #expect(
            !String(describing: Machine.Event.macReceived(.valid(VerifiedKeys(deviceKey: "canary", masterKey: nil))))
                .contains("canary"))
        #expect(!String(describing: F.code).contains("1"))
        #expect(
            !String(
                describing: Machine.Effect.crossSign(F.requestFlow, VerifiedKeys(deviceKey: "canary", masterKey: nil))
            )
            .contains("canary"))
    }
}
