import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

/// Room key requests: asking the account's other devices for missing keys, cancelling when
/// the key arrives, answering their requests.
extension CryptoMachineTests {
    static let answeredAll = KeyRequestAnswers(answered: 1)
    static let waitingForDevice = KeyRequestAnswers(answered: 0, waitingForDevices: 1)

    @Test("Missing room keys are sent at once; keys recorded missing meanwhile are sent when the sending answers")
    func missingKeysAreRequested() throws {
        let store = MachineTestStore(machine, initial: .ready(work()))
        try store.send(.roomKeysMissing, expecting: .ready(work(sendingRequests: true)), effects: [.sendKeyRequests])
        try store.send(.roomKeysMissing, expecting: .ready(work(requestsPending: true, sendingRequests: true)))
        try store.send(
            .keyRequestsSent(.success(1)), expecting: .ready(work(sendingRequests: true)), effects: [.sendKeyRequests])
        try store.send(.keyRequestsSent(.success(1)), expecting: .ready(work()))
        // A stale answer changes nothing.
        try store.send(.keyRequestsSent(.success(1)), stayingWith: [])
    }

    @Test("A sending of key requests that fails transiently backs off and is redone; one refused for good is not")
    func requestFailures() throws {
        let store = MachineTestStore(machine, initial: .ready(work(sendingRequests: true)))
        let (jitter, delay) = backoff(attempt: 1)
        try store.send(
            .keyRequestsSent(.failure(.network)),
            expecting: .backingOff(work(failures: 1, jitter: jitter, requestsPending: true)),
            effects: [.scheduleRetry(after: delay)])
        try store.send(
            .timerFired(.retry), expecting: .ready(work(failures: 1, jitter: jitter, sendingRequests: true)),
            effects: [.sendKeyRequests])
        // Refused for good: the requests stay in the store (sent at the next start), not in a loop.
        try store.send(
            .keyRequestsSent(.failure(.rejected(status: 400, errorCode: "M_UNKNOWN"))),
            expecting: .ready(work(failures: 1, jitter: jitter)))
    }

    @Test(
        "To-device processing that stored another own device's request answers it; a requested key's arrival sends the cancellation"
    )
    func toDeviceStartsKeyWork() throws {
        let store = MachineTestStore(machine, initial: .ready(work(processing: true)))
        try store.send(
            .toDeviceProcessed(
                .success(ToDeviceReport(processed: 2, keyRequestsReceived: true, requestedKeysArrived: true))),
            expecting: .ready(work(sendingRequests: true, answering: true)),
            effects: [.sendKeyRequests, .answerKeyRequests])
        try store.send(.keyRequestsAnswered(.success(Self.answeredAll)), expecting: .ready(work(sendingRequests: true)))
        try store.send(.keyRequestsAnswered(.success(Self.answeredAll)), stayingWith: [])
    }

    @Test("Requests of own devices not known yet are answered again after the next successful keys/query")
    func answersWaitForDevices() throws {
        let store = MachineTestStore(machine, initial: .ready(work(answering: true)))
        try store.send(
            .keyRequestsAnswered(.success(Self.waitingForDevice)), expecting: .ready(work(awaitingDevices: true)))
        try store.send(
            .syncCommitted(CryptoSyncSummary(changedUsers: [alice])),
            expecting: .ready(work(querying: [alice], awaitingDevices: true)), effects: [.queryKeys([alice])])
        try store.send(
            .keysQueried(.success(KeyQueryReport(users: [alice]))), expecting: .ready(work(answering: true)),
            effects: [.answerKeyRequests])
        try store.send(.keyRequestsAnswered(.success(Self.answeredAll)), expecting: .ready(work()))
    }

    @Test("An answering that fails transiently backs off and answers again; one refused for good is dropped")
    func answerFailures() throws {
        let store = MachineTestStore(machine, initial: .ready(work(answering: true)))
        let (jitter, delay) = backoff(attempt: 1)
        try store.send(
            .keyRequestsAnswered(.failure(.server(status: 502))),
            expecting: .backingOff(work(failures: 1, jitter: jitter, answersPending: true)),
            effects: [.scheduleRetry(after: delay)])
        try store.send(
            .timerFired(.retry), expecting: .ready(work(failures: 1, jitter: jitter, answering: true)),
            effects: [.answerKeyRequests])
        try store.send(
            .keyRequestsAnswered(.failure(.rejected(status: 403, errorCode: "M_FORBIDDEN"))),
            expecting: .ready(work(failures: 1, jitter: jitter)))
    }

    @Test("While publishing, missing keys are recorded and requested once the device keys are accepted")
    func publishingRecordsMissingKeys() throws {
        let store = MachineTestStore(
            machine, initial: .publishing(work(count: nil, upload: Self.firstUpload, uploading: true)))
        try store.send(
            .roomKeysMissing,
            expecting: .publishing(work(count: nil, upload: Self.firstUpload, uploading: true, requestsPending: true)))
        try store.send(.roomKeysMissing, stayingWith: [])
        // Nothing but the upload is in flight while publishing.
        try store.assertIgnored([
            .keyRequestsSent(.success(1)), .keyRequestsAnswered(.success(Self.answeredAll)),
        ])
        try store.send(
            .keysUploaded(.success(50)), expecting: .ready(work(count: 50, sendingRequests: true)),
            effects: [.sendKeyRequests])
    }

    @Test(
        "While backing off, results of key request work in flight are applied and missing keys recorded; the timer starts what waits"
    )
    func keyWorkWhileBackingOff() throws {
        let store = MachineTestStore(
            machine, initial: .backingOff(work(failures: 1, sendingRequests: true, answering: true)))
        try store.send(
            .roomKeysMissing,
            expecting: .backingOff(work(failures: 1, requestsPending: true, sendingRequests: true, answering: true)))
        try store.send(
            .keyRequestsSent(.failure(.network)),
            expecting: .backingOff(work(failures: 1, requestsPending: true, answering: true)))
        try store.send(
            .keyRequestsAnswered(.success(Self.waitingForDevice)),
            expecting: .backingOff(work(failures: 1, requestsPending: true, awaitingDevices: true)))
        // Stale answers change nothing.
        try store.send(.keyRequestsSent(.success(1)), stayingWith: [])
        try store.send(.keyRequestsAnswered(.success(Self.answeredAll)), stayingWith: [])
        try store.send(
            .timerFired(.retry), expecting: .ready(work(failures: 1, sendingRequests: true, awaitingDevices: true)),
            effects: [.sendKeyRequests])
    }

    @Test("While backing off, a query's success and to-device reports mark key work that the timer then starts")
    func reportsWhileBackingOff() throws {
        let store = MachineTestStore(
            machine, initial: .backingOff(work(querying: [alice], processing: true, failures: 1, awaitingDevices: true))
        )
        try store.send(
            .keysQueried(.success(KeyQueryReport(users: [alice]))),
            expecting: .backingOff(work(processing: true, failures: 1, answersPending: true)))
        try store.send(
            .toDeviceProcessed(.success(ToDeviceReport(processed: 1, requestedKeysArrived: true))),
            expecting: .backingOff(work(failures: 1, requestsPending: true, answersPending: true)))
        try store.send(
            .keyRequestsSent(.failure(.rejected(status: 400, errorCode: "M_UNKNOWN"))), stayingWith: [])
        try store.send(
            .timerFired(.retry), expecting: .ready(work(failures: 1, sendingRequests: true, answering: true)),
            effects: [.sendKeyRequests, .answerKeyRequests])
    }

    @Test("A start resumes the key requests and answers the store holds")
    func startResumesKeyWork() throws {
        let store = MachineTestStore(machine, initial: .loading(CryptoStart(jitterSeed: Self.seed)))
        try store.send(
            .accountLoaded(
                .success(
                    CryptoAccountStatus(
                        deviceKeysPublished: true, serverOneTimeKeyCount: 50, hasKeyRequestsToSend: true,
                        hasKeyRequestsToAnswer: true))),
            expecting: .ready(work(sendingRequests: true, answering: true)),
            effects: [.sendKeyRequests, .answerKeyRequests])
    }

    @Test(
        "Before a start, while loading and after a failure, key request events are ignored (the load reads the store)")
    func keyEventsIgnoredWhenNotRunning() throws {
        let events: [CryptoMachine.Event] = [
            .roomKeysMissing, .keyRequestsSent(.success(1)), .keyRequestsSent(.failure(.network)),
            .keyRequestsAnswered(.success(Self.answeredAll)), .keyRequestsAnswered(.failure(.network)),
        ]
        for state in [CryptoMachine.State.idle, .loading(CryptoStart(jitterSeed: 1)), .failed(.accountUnreadable)] {
            let store = MachineTestStore(machine, initial: state)
            try store.assertIgnored(events)
        }
    }
}
