import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

enum SecretAnswerFixture {
    static let master = IncomingSecretRequest(deviceID: "LAPTOP", requestID: "r1", name: "m.cross_signing.master")
    static let backup = IncomingSecretRequest(deviceID: "LAPTOP", requestID: "r2", name: "m.megolm_backup.v1")
    static let tablet = IncomingSecretRequest(deviceID: "TABLET", requestID: "t1", name: "m.cross_signing.master")

    static func check(_ request: IncomingSecretRequest, crossSigned: Bool = true, held: Bool = true)
        -> SecretRequestCheck
    {
        SecretRequestCheck(request: request, fromOwnCrossSignedDevice: crossSigned, secretHeld: held)
    }

    static let sampleStates: [SecretAnswerMachine.State] = [
        .idle, .checking(batch: [master], queued: []), .checking(batch: [master], queued: [tablet]),
        .answering(batch: [master], queued: []), .answering(batch: [master], queued: [tablet]),
    ]
    static let sampleEvents: [SecretAnswerMachine.Event] = [
        .requestReceived(tablet), .requestReceived(master), .cancellationReceived(deviceID: "LAPTOP", requestID: "r1"),
        .cancellationReceived(deviceID: "TABLET", requestID: "t1"),
        .cancellationReceived(deviceID: "LAPTOP", requestID: "unknown"), .requestsChecked([check(master)]),
        .requestsChecked([check(master, crossSigned: false)]), .answersSent(failure: nil),
        .answersSent(failure: .timeout), .restored,
    ]
}

@Suite("SecretAnswer chart")
struct SecretAnswerChartTests {
    @Test("Every (state, event) pair of SecretAnswer matches StateCharts/SecretAnswer.scxml")
    func conforms() throws {
        let checker = try ChartChecker(machine: SecretAnswerMachine())
        try checker.assertConforms(
            states: SecretAnswerFixture.sampleStates, events: SecretAnswerFixture.sampleEvents, initial: .idle)
    }

    @Test("The checker notices a broken chart: answering --answersSent--> idle changed to answering fails")
    func checkerIsSharp() throws {
        let checker = try ChartChecker(machine: SecretAnswerMachine())
        var chart = checker.chart
        let index = try #require(
            chart.transitions.firstIndex {
                $0.source == "answering" && $0.event == "answersSent" && $0.target == "idle"
            })
        chart.transitions[index].target = "answering"
        let found = ChartChecker(machine: SecretAnswerMachine(), chart: chart).mismatches(
            states: SecretAnswerFixture.sampleStates, events: SecretAnswerFixture.sampleEvents)
        #expect(!found.isEmpty)
    }
}

@Suite("SecretAnswer machine")
struct SecretAnswerMachineTests {
    typealias F = SecretAnswerFixture

    @Test("A request from an own cross-signed device for a held secret is checked, answered, then forgotten")
    func answered() throws {
        let store = MachineTestStore(SecretAnswerMachine(), initial: .idle)
        try store.send(
            .requestReceived(F.master), expecting: .checking(batch: [F.master], queued: []),
            effects: [.checkRequests([F.master])])
        try store.send(
            .requestsChecked([F.check(F.master)]), expecting: .answering(batch: [F.master], queued: []),
            effects: [.sendAnswers([F.master])])
        try store.send(.answersSent(failure: nil), expecting: .idle, effects: [.forgetRequests([F.master])])
    }

    @Test(
        "Refused: a device not cross-signed, or a secret not held, gets no answer; only the answerable part of a batch is sent"
    )
    func refused() throws {
        let store = MachineTestStore(SecretAnswerMachine(), initial: .idle)
        try store.send(
            .requestReceived(F.master), expecting: .checking(batch: [F.master], queued: []),
            effects: [.checkRequests([F.master])])
        try store.send(
            .requestsChecked([F.check(F.master, crossSigned: false)]), expecting: .idle,
            effects: [.forgetRequests([F.master])])

        let batch = MachineTestStore(
            SecretAnswerMachine(), initial: .checking(batch: [F.master, F.backup, F.tablet], queued: []))
        try batch.send(
            .requestsChecked([
                F.check(F.master), F.check(F.backup, held: false), F.check(F.tablet, crossSigned: false),
            ]),
            expecting: .answering(batch: [F.master], queued: []),
            effects: [.forgetRequests([F.backup, F.tablet]), .sendAnswers([F.master])])
    }

    @Test("A request missing from the checks (the interpreter could not say) is not answered")
    func uncheckedNotAnswered() throws {
        let store = MachineTestStore(
            SecretAnswerMachine(), initial: .checking(batch: [F.master, F.backup], queued: []))
        try store.send(
            .requestsChecked([F.check(F.backup)]), expecting: .answering(batch: [F.backup], queued: []),
            effects: [.forgetRequests([F.master]), .sendAnswers([F.backup])])
    }

    @Test(
        "Requests arriving during a batch wait for it, a resend of a held one is one request; the queue is the next batch"
    )
    func queued() throws {
        let store = MachineTestStore(SecretAnswerMachine(), initial: .checking(batch: [F.master], queued: []))
        try store.send(.requestReceived(F.tablet), expecting: .checking(batch: [F.master], queued: [F.tablet]))
        try store.send(.requestReceived(F.master), stayingWith: [])
        try store.send(.requestReceived(F.tablet), stayingWith: [])
        try store.send(
            .requestsChecked([F.check(F.master)]), expecting: .answering(batch: [F.master], queued: [F.tablet]),
            effects: [.sendAnswers([F.master])])
        try store.send(
            .requestReceived(F.backup), expecting: .answering(batch: [F.master], queued: [F.tablet, F.backup]))
        try store.send(
            .answersSent(failure: .timeout), expecting: .checking(batch: [F.tablet, F.backup], queued: []),
            effects: [.forgetRequests([F.master]), .checkRequests([F.tablet, F.backup])])
        // None of the next batch answerable, nothing queued: idle.
        try store.send(
            .requestsChecked([F.check(F.tablet, crossSigned: false), F.check(F.backup, held: false)]),
            expecting: .idle, effects: [.forgetRequests([F.tablet, F.backup])])
    }

    @Test(
        "request_cancellation: a queued request is dropped, one being checked is not answered, one being sent cannot be called back; unknown ones change nothing"
    )
    func cancellations() throws {
        let store = MachineTestStore(SecretAnswerMachine(), initial: .checking(batch: [F.master], queued: [F.tablet]))
        try store.send(.cancellationReceived(deviceID: "LAPTOP", requestID: "nope"), stayingWith: [])
        // The same request ID from another device is another request.
        try store.send(.cancellationReceived(deviceID: "TABLET", requestID: "r1"), stayingWith: [])
        try store.send(
            .cancellationReceived(deviceID: "TABLET", requestID: "t1"),
            expecting: .checking(batch: [F.master], queued: []),
            effects: [.forgetRequests([F.tablet])])
        try store.send(
            .cancellationReceived(deviceID: "LAPTOP", requestID: "r1"), expecting: .checking(batch: [], queued: []),
            effects: [.forgetRequests([F.master])])
        // Its check comes back: nothing to answer.
        try store.send(.requestsChecked([F.check(F.master)]), expecting: .idle)

        let sending = MachineTestStore(
            SecretAnswerMachine(), initial: .answering(batch: [F.master], queued: [F.tablet]))
        try sending.send(
            .cancellationReceived(deviceID: "TABLET", requestID: "t1"),
            expecting: .answering(batch: [F.master], queued: []),
            effects: [.forgetRequests([F.tablet])])
        try sending.send(
            .cancellationReceived(deviceID: "LAPTOP", requestID: "r1"), expecting: .answering(batch: [], queued: []),
            effects: [.forgetRequests([F.master])])
        try sending.send(.answersSent(failure: nil), expecting: .idle)
        try sending.assertIgnored(.cancellationReceived(deviceID: "LAPTOP", requestID: "r1"))
    }

    @Test("After a restart the stored requests are checked again, whatever phase they were in; idle has nothing to do")
    func restored() throws {
        let stored = MachineTestStore(
            SecretAnswerMachine(), initial: .checking(batch: [F.master, F.tablet], queued: []))
        try stored.send(
            .restored, expecting: .checking(batch: [F.master, F.tablet], queued: []),
            effects: [.checkRequests([F.master, F.tablet])])
        let answering = MachineTestStore(
            SecretAnswerMachine(), initial: .answering(batch: [F.master], queued: [F.tablet]))
        try answering.send(
            .restored, expecting: .checking(batch: [F.master, F.tablet], queued: []),
            effects: [.checkRequests([F.master, F.tablet])])
        let idle = MachineTestStore(SecretAnswerMachine(), initial: .idle)
        try idle.assertIgnored(.restored)
        try idle.assertIgnored(.answersSent(failure: nil))
        try idle.assertIgnored(.requestsChecked([F.check(F.master)]))
    }

    @Test("Results for another phase are ignored: a late check while answering, a send result while checking")
    func latePhaseResults() throws {
        let answering = MachineTestStore(SecretAnswerMachine(), initial: .answering(batch: [F.master], queued: []))
        try answering.assertIgnored(.requestsChecked([F.check(F.master)]))
        let checking = MachineTestStore(SecretAnswerMachine(), initial: .checking(batch: [F.master], queued: []))
        try checking.assertIgnored(.answersSent(failure: nil))
    }

    @Test("No secret in an event's or effect's description")
    func descriptions() {
        #expect(SecretAnswerMachine.Event.requestReceived(F.master).description == "requestReceived")
        #expect(SecretAnswerMachine.Effect.sendAnswers([F.master]).description == "sendAnswers")
    }
}
