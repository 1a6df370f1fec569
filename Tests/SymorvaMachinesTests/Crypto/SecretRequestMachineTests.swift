import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

enum SecretRequestFixture {
    static let master = SecretRequest(requestID: "req-master", name: "m.cross_signing.master")
    static let backup = SecretRequest(requestID: "req-backup", name: "m.megolm_backup.v1")
    static let deadline = Timestamp(millisecondsSince1970: 1_800_000_060_000)
    static let before = Timestamp(millisecondsSince1970: 1_800_000_000_000)
    static let round = SecretRequestRound(
        requests: [master, backup], deviceIDs: ["PHONE", "LAPTOP"], deadline: deadline)
    static let halfway = SecretRequestRound(
        requests: [master, backup], deviceIDs: ["PHONE", "LAPTOP"], deadline: deadline, received: [master.name])
    static let done = SecretRequestRound(
        requests: [master, backup], deviceIDs: ["PHONE", "LAPTOP"], deadline: deadline,
        received: [master.name, backup.name])

    static func arrival(
        _ request: SecretRequest, olm: Bool = true, crossSigned: Bool = true, matches: Bool = true,
        secret: String = "secret-value"
    ) -> SecretArrival {
        SecretArrival(
            requestID: request.requestID, overOlm: olm, fromOwnCrossSignedDevice: crossSigned,
            matchesPublicKey: matches, secret: Secret(secret))
    }

    static let sampleStates: [SecretRequestMachine.State] = [
        .idle, .sending(round), .sending(done), .waiting(round), .waiting(halfway), .cancelling(halfway, .timedOut),
        .finished(received: [master.name], .timedOut),
    ]
    static let sampleEvents: [SecretRequestMachine.Event] = [
        .requested(round), .requestsSent(failure: nil), .requestsSent(failure: .timeout),
        .secretArrived(arrival(master)), .secretArrived(arrival(backup)),
        .secretArrived(arrival(backup, olm: false)), .timedOut, .cancelRequested, .cancellationsSent,
        .restored(now: before), .restored(now: deadline),
    ]
}

@Suite("SecretRequest chart")
struct SecretRequestChartTests {
    @Test("Every (state, event) pair of SecretRequest matches StateCharts/SecretRequest.scxml")
    func conforms() throws {
        let checker = try ChartChecker(machine: SecretRequestMachine())
        try checker.assertConforms(
            states: SecretRequestFixture.sampleStates, events: SecretRequestFixture.sampleEvents, initial: .idle)
    }

    @Test("The checker notices a broken chart: waiting --timedOut--> cancelling changed to finished fails")
    func checkerIsSharp() throws {
        let checker = try ChartChecker(machine: SecretRequestMachine())
        var chart = checker.chart
        let index = try #require(
            chart.transitions.firstIndex { $0.source == "waiting" && $0.event == "timedOut" })
        chart.transitions[index].target = "finished"
        let found = ChartChecker(machine: SecretRequestMachine(), chart: chart).mismatches(
            states: SecretRequestFixture.sampleStates, events: SecretRequestFixture.sampleEvents)
        #expect(!found.isEmpty)
    }
}

@Suite("SecretRequest machine")
struct SecretRequestMachineTests {
    typealias F = SecretRequestFixture

    @Test("Requested, sent, both secrets accepted, everything cancelled, finished")
    func happyPath() throws {
        let store = MachineTestStore(SecretRequestMachine(), initial: .idle)
        try store.send(.requested(F.round), expecting: .sending(F.round), effects: [.sendRequests(F.round)])
        try store.send(
            .requestsSent(failure: nil), expecting: .waiting(F.round), effects: [.scheduleTimeout(F.deadline)])
        try store.send(
            .secretArrived(F.arrival(F.master, secret: "m")), expecting: .waiting(F.halfway),
            effects: [.keepSecret(name: F.master.name, secret: Secret("m"), round: F.halfway)])
        try store.send(
            .secretArrived(F.arrival(F.backup, secret: "b")), expecting: .cancelling(F.done, .allReceived),
            effects: [
                .keepSecret(name: F.backup.name, secret: Secret("b"), round: F.done), .cancelTimeout,
                .sendCancellations(F.done, .allReceived),
            ])
        try store.send(
            .cancellationsSent, expecting: .finished(received: [F.master.name, F.backup.name], .allReceived),
            effects: [.forgetRound])
        try store.assertIgnored([.timedOut, .cancellationsSent, .secretArrived(F.arrival(F.master))])
    }

    @Test("A secret is dropped unless it came over Olm, from an own cross-signed device, and matches the public key")
    func checks() throws {
        let store = MachineTestStore(SecretRequestMachine(), initial: .waiting(F.round))
        try store.send(.secretArrived(F.arrival(F.master, olm: false)), stayingWith: [])
        try store.send(.secretArrived(F.arrival(F.master, crossSigned: false)), stayingWith: [])
        try store.send(.secretArrived(F.arrival(F.master, matches: false)), stayingWith: [])
        try store.assertState(.waiting(F.round))
    }

    @Test("A secret for a request never made, or answered already, is dropped")
    func unknownOrRepeatedRequest() throws {
        let store = MachineTestStore(SecretRequestMachine(), initial: .waiting(F.halfway))
        let stranger = SecretRequest(requestID: "req-other", name: F.backup.name)
        try store.send(.secretArrived(F.arrival(stranger)), stayingWith: [])
        try store.send(.secretArrived(F.arrival(F.master, secret: "again")), stayingWith: [])
        try store.assertState(.waiting(F.halfway))
    }

    @Test("The deadline cancels every request; what arrived before it is kept")
    func timeout() throws {
        let store = MachineTestStore(SecretRequestMachine(), initial: .waiting(F.halfway))
        #expect(SecretRequestMachine().event(firing: .scheduleTimeout(F.deadline)) == .timedOut)
        try store.send(
            .timedOut, expecting: .cancelling(F.halfway, .timedOut),
            effects: [.cancelTimeout, .sendCancellations(F.halfway, .timedOut)])
        try store.send(
            .cancellationsSent, expecting: .finished(received: [F.master.name], .timedOut), effects: [.forgetRound])
    }

    @Test("An answer before the last request left is kept; the round ends once the requests are out")
    func answerWhileSending() throws {
        let both = SecretRequestRound(
            requests: [F.master], deviceIDs: ["PHONE"], deadline: F.deadline, received: [F.master.name])
        let single = SecretRequestRound(requests: [F.master], deviceIDs: ["PHONE"], deadline: F.deadline)
        let store = MachineTestStore(SecretRequestMachine(), initial: .sending(single))
        try store.send(.secretArrived(F.arrival(F.master, crossSigned: false)), stayingWith: [])
        try store.send(
            .secretArrived(F.arrival(F.master, secret: "m")), expecting: .sending(both),
            effects: [.keepSecret(name: F.master.name, secret: Secret("m"), round: both)])
        try store.send(
            .requestsSent(failure: nil), expecting: .cancelling(both, .allReceived),
            effects: [.cancelTimeout, .sendCancellations(both, .allReceived)])
        store.reset(to: .sending(F.halfway))
        try store.send(
            .requestsSent(failure: nil), expecting: .waiting(F.halfway), effects: [.scheduleTimeout(F.deadline)])
    }

    @Test("Requests that cannot be sent end the round with nothing to cancel")
    func sendFailed() throws {
        let store = MachineTestStore(SecretRequestMachine(), initial: .sending(F.round))
        try store.send(
            .requestsSent(failure: .timeout), expecting: .finished(received: [], .sendFailed), effects: [.forgetRound])
        try store.send(.requested(F.round), expecting: .sending(F.round), effects: [.sendRequests(F.round)])
    }

    @Test("The caller gives up: open requests are cancelled, while sending and while waiting")
    func cancelled() throws {
        let store = MachineTestStore(SecretRequestMachine(), initial: .sending(F.round))
        try store.send(
            .cancelRequested, expecting: .cancelling(F.round, .cancelled),
            effects: [.cancelTimeout, .sendCancellations(F.round, .cancelled)])
        store.reset(to: .waiting(F.halfway))
        try store.send(
            .cancelRequested, expecting: .cancelling(F.halfway, .cancelled),
            effects: [.cancelTimeout, .sendCancellations(F.halfway, .cancelled)])
        try store.assertIgnored(.cancelRequested)
    }

    @Test("A second request while a round is in flight joins it")
    func requestedDuringRound() throws {
        for state: SecretRequestMachine.State in [
            .sending(F.round), .waiting(F.halfway), .cancelling(F.done, .allReceived),
        ] {
            let store = MachineTestStore(SecretRequestMachine(), initial: state)
            try store.send(.requested(F.round), stayingWith: [])
        }
    }

    @Test("After a restart: a round being sent is sent again (same request IDs)")
    func restoredSending() throws {
        let store = MachineTestStore(SecretRequestMachine(), initial: .sending(F.round))
        try store.send(.restored(now: F.before), expecting: .sending(F.round), effects: [.sendRequests(F.round)])
    }

    @Test("After a restart: a waiting round waits on until its stored deadline, or is cancelled past it")
    func restoredWaiting() throws {
        let store = MachineTestStore(SecretRequestMachine(), initial: .waiting(F.halfway))
        try store.send(
            .restored(now: F.before), expecting: .waiting(F.halfway), effects: [.scheduleTimeout(F.deadline)])
        try store.send(
            .restored(now: F.deadline), expecting: .cancelling(F.halfway, .timedOut),
            effects: [.cancelTimeout, .sendCancellations(F.halfway, .timedOut)])
        store.reset(to: .waiting(F.done))
        try store.send(
            .restored(now: F.before), expecting: .cancelling(F.done, .allReceived),
            effects: [.cancelTimeout, .sendCancellations(F.done, .allReceived)])
    }

    @Test("After a restart: cancellations are sent again; nothing stored means nothing to do")
    func restoredCancellingAndIdle() throws {
        let store = MachineTestStore(SecretRequestMachine(), initial: .cancelling(F.halfway, .cancelled))
        try store.send(
            .restored(now: F.before), expecting: .cancelling(F.halfway, .cancelled),
            effects: [.sendCancellations(F.halfway, .cancelled)])
        store.reset(to: .idle)
        try store.assertIgnored(.restored(now: F.before))
    }

    @Test("Events and effects never print a secret")
    func redaction() {
        let arrival = F.arrival(F.master, secret: "canary-secret")
        #expect(!String(describing: SecretRequestMachine.Event.secretArrived(arrival)).contains("canary"))
        #expect(!String(describing: arrival).contains("canary"))
        let keep = SecretRequestMachine.Effect.keepSecret(
            name: F.master.name, secret: Secret("canary-secret"), round: F.halfway)
        #expect(!String(describing: keep).contains("canary"))
        #expect(!String(reflecting: keep).contains("canary"))
    }
}
