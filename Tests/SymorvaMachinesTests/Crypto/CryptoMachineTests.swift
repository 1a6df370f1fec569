import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@Suite("CryptoMachine")
struct CryptoMachineTests {
    let machine = CryptoMachine()
    let alice = UserID("@alice:example.org")
    let bob = UserID("@bob:example.org")
    let carol = UserID("@carol:example.org")
    static let seed: UInt64 = 11

    func work(
        count: Int? = 50, upload: KeyUploadPlan? = nil, uploading: Bool = false, querying: [UserID]? = nil,
        outdated: Set<UserID> = [], processing: Bool = false, toDevicePending: Bool = false, failures: Int = 0,
        jitter: JitterSource = JitterSource(seed: seed), requestsPending: Bool = false, sendingRequests: Bool = false,
        answersPending: Bool = false, answering: Bool = false, awaitingDevices: Bool = false
    ) -> CryptoWork {
        var work = CryptoWork(
            maxOneTimeKeys: 100, serverOneTimeKeyCount: count, upload: upload, isUploading: uploading,
            querying: querying, outdated: outdated, isProcessingToDevice: processing, toDevicePending: toDevicePending,
            failures: failures, jitter: jitter)
        work.keyRequestsPending = requestsPending
        work.isSendingKeyRequests = sendingRequests
        work.keyAnswersPending = answersPending
        work.isAnsweringKeyRequests = answering
        work.answersAwaitDevices = awaitingDevices
        return work
    }

    /// The jitter stream after one draw for `attempt`, and the delay drawn.
    func backoff(attempt: Int, from jitter: JitterSource = JitterSource(seed: seed), retryAfter: Duration? = nil)
        -> (JitterSource, Duration)
    {
        var jitter = jitter
        let delay = jitter.delay(attempt: attempt, backoff: .crypto, retryAfter: retryAfter)
        return (jitter, delay)
    }

    static let firstUpload = KeyUploadPlan(deviceKeys: true, newOneTimeKeys: 50, rotateFallbackKey: true)

    // MARK: Loading and publishing

    @Test("A start loads the account")
    func start() throws {
        let store = MachineTestStore(machine, initial: .idle)
        try store.send(
            .started(CryptoStart(jitterSeed: Self.seed)), expecting: .loading(CryptoStart(jitterSeed: Self.seed)),
            effects: [.loadAccount])
    }

    @Test(
        "An account whose device keys were never accepted publishes them first, with half its capacity of one-time keys and a fallback key"
    )
    func newAccountPublishes() throws {
        let store = MachineTestStore(machine, initial: .loading(CryptoStart(jitterSeed: Self.seed)))
        try store.send(
            .accountLoaded(.success(CryptoAccountStatus(deviceKeysPublished: false, outdatedUsers: [bob]))),
            expecting: .publishing(work(count: nil, upload: Self.firstUpload, uploading: true, outdated: [bob])),
            effects: [.uploadKeys(Self.firstUpload)])
    }

    @Test("While the device keys are being published nothing else leaves; their acceptance starts what waited")
    func publishingHoldsTheRest() throws {
        let store = MachineTestStore(
            machine, initial: .publishing(work(count: nil, upload: Self.firstUpload, uploading: true)))
        try store.send(
            .syncCommitted(CryptoSyncSummary(oneTimeKeyCount: 0, changedUsers: [bob], toDeviceEvents: 2)),
            expecting: .publishing(
                work(count: 0, upload: Self.firstUpload, uploading: true, outdated: [bob], toDevicePending: true)))
        try store.send(
            .usersTracked([carol]),
            expecting: .publishing(
                work(
                    count: 0, upload: Self.firstUpload, uploading: true, outdated: [bob, carol], toDevicePending: true))
        )
        try store.send(
            .keysUploaded(.success(50)),
            expecting: .ready(work(count: 50, querying: [bob, carol], processing: true)),
            effects: [.queryKeys([bob, carol]), .processToDevice])
    }

    @Test("A first upload that fails transiently backs off and publishes again when the timer fires")
    func publishingRetries() throws {
        let store = MachineTestStore(
            machine, initial: .publishing(work(count: nil, upload: Self.firstUpload, uploading: true)))
        let (jitter, delay) = backoff(attempt: 1)
        try store.send(
            .keysUploaded(.failure(.network)),
            expecting: .backingOff(work(count: nil, upload: Self.firstUpload, failures: 1, jitter: jitter)),
            effects: [.scheduleRetry(after: delay)])
        try store.send(
            .timerFired(.retry),
            expecting: .publishing(
                work(count: nil, upload: Self.firstUpload, uploading: true, failures: 1, jitter: jitter)),
            effects: [.uploadKeys(Self.firstUpload)])
    }

    @Test("A restart after a SIGKILL before the upload's answer sends the same plan again, not an error loop")
    func restartRepublishes() throws {
        // The store says what it said before the kill: never accepted. The plan is the same one,
        // and the interpreter re-sends the keys it stored with the account instead of new ones.
        let store = MachineTestStore(machine, initial: .loading(CryptoStart(jitterSeed: Self.seed)))
        try store.send(
            .accountLoaded(.success(CryptoAccountStatus(deviceKeysPublished: false, serverOneTimeKeyCount: 50))),
            expecting: .publishing(work(count: 50, upload: Self.firstUpload, uploading: true)),
            effects: [.uploadKeys(Self.firstUpload)])
        try store.send(.keysUploaded(.success(50)), expecting: .ready(work(count: 50)))
    }

    @Test("A published account starts the top-up, the queries and the to-device work that the store holds")
    func publishedAccountResumes() throws {
        let store = MachineTestStore(machine, initial: .loading(CryptoStart(jitterSeed: Self.seed)))
        let topUp = KeyUploadPlan(newOneTimeKeys: 40)
        try store.send(
            .accountLoaded(
                .success(
                    CryptoAccountStatus(
                        deviceKeysPublished: true, serverOneTimeKeyCount: 10, outdatedUsers: [carol, bob],
                        hasPendingToDevice: true))),
            expecting: .ready(
                work(count: 10, upload: topUp, uploading: true, querying: [bob, carol], processing: true)),
            effects: [.uploadKeys(topUp), .queryKeys([bob, carol]), .processToDevice])
    }

    @Test("An account the store cannot read fails; a new start loads again")
    func loadFails() throws {
        let store = MachineTestStore(machine, initial: .loading(CryptoStart(jitterSeed: Self.seed)))
        try store.send(.accountLoaded(.failure(.accountUnreadable)), expecting: .failed(.accountUnreadable))
        try store.send(
            .started(CryptoStart(jitterSeed: 3)), expecting: .loading(CryptoStart(jitterSeed: 3)),
            effects: [.loadAccount])
    }

    // MARK: One-time keys and the fallback key

    @Test("Below half the capacity on the server, one-time keys are topped up to half; at half, nothing")
    func topUp() throws {
        let store = MachineTestStore(machine, initial: .ready(work(count: 50)))
        try store.send(.syncCommitted(CryptoSyncSummary(oneTimeKeyCount: 50)), stayingWith: [])
        let plan = KeyUploadPlan(newOneTimeKeys: 1)
        try store.send(
            .syncCommitted(CryptoSyncSummary(oneTimeKeyCount: 49)),
            expecting: .ready(work(count: 49, upload: plan, uploading: true)), effects: [.uploadKeys(plan)])
        // A stale low count while the upload runs starts no second upload.
        try store.send(
            .syncCommitted(CryptoSyncSummary(oneTimeKeyCount: 3)),
            expecting: .ready(work(count: 3, upload: plan, uploading: true)))
        try store.send(.keysUploaded(.success(50)), expecting: .ready(work(count: 50)))
    }

    @Test("A used fallback key (gone from the unused types) is replaced; an unused one is kept")
    func fallbackRotation() throws {
        let store = MachineTestStore(machine, initial: .ready(work(count: 50)))
        try store.send(
            .syncCommitted(CryptoSyncSummary(oneTimeKeyCount: 50, unusedFallbackKeyTypes: ["signed_curve25519"])),
            stayingWith: [])
        let plan = KeyUploadPlan(newOneTimeKeys: 50, rotateFallbackKey: true)
        // The one-time keys ran out: the server handed out the fallback key.
        try store.send(
            .syncCommitted(CryptoSyncSummary(oneTimeKeyCount: 0, unusedFallbackKeyTypes: [])),
            expecting: .ready(work(count: 0, upload: plan, uploading: true)), effects: [.uploadKeys(plan)])
    }

    @Test("A refused upload fails for good; a rate-limited one waits at least the server's hint")
    func uploadFailures() throws {
        let plan = KeyUploadPlan(newOneTimeKeys: 10)
        let refused = MachineTestStore(machine, initial: .ready(work(count: 40, upload: plan, uploading: true)))
        try refused.send(
            .keysUploaded(.failure(.rejected(status: 400, errorCode: "M_INVALID_PARAM"))),
            expecting: .failed(.keysRejected(status: 400, errorCode: "M_INVALID_PARAM")),
            effects: CryptoMachineTests.stopEffects)

        let limited = MachineTestStore(machine, initial: .ready(work(count: 40, upload: plan, uploading: true)))
        let (jitter, delay) = backoff(attempt: 1, retryAfter: .seconds(30))
        #expect(delay == .seconds(30))
        try limited.send(
            .keysUploaded(.failure(.rateLimited(retryAfter: .seconds(30)))),
            expecting: .backingOff(work(count: 40, upload: plan, failures: 1, jitter: jitter)),
            effects: [.scheduleRetry(after: delay)])
        try limited.send(
            .timerFired(.retry),
            expecting: .ready(work(count: 40, upload: plan, uploading: true, failures: 1, jitter: jitter)),
            effects: [.uploadKeys(plan)])
        try limited.send(.keysUploaded(.success(50)), expecting: .ready(work(count: 50, jitter: jitter)))
    }

    // MARK: Device tracking

    @Test("Changed and newly tracked users are queried together; users changed meanwhile wait for the running query")
    func queries() throws {
        let store = MachineTestStore(machine, initial: .ready(work()))
        try store.send(
            .syncCommitted(CryptoSyncSummary(changedUsers: [carol, bob])),
            expecting: .ready(work(querying: [bob, carol])), effects: [.queryKeys([bob, carol])])
        try store.send(.usersTracked([alice]), expecting: .ready(work(querying: [bob, carol], outdated: [alice])))
        try store.send(
            .keysQueried(.success(KeyQueryReport(users: [bob, carol], refusedDevices: 1))),
            expecting: .ready(work(querying: [alice])), effects: [.queryKeys([alice])])
        try store.send(.keysQueried(.success(KeyQueryReport(users: [alice]))), expecting: .ready(work()))
        // A stale answer changes nothing.
        try store.send(.keysQueried(.success(KeyQueryReport(users: [alice]))), stayingWith: [])
        try store.assertState(.ready(work()))
    }

    @Test("A query that fails transiently is retried with the users changed meanwhile; one refused for good is not")
    func queryFailures() throws {
        let store = MachineTestStore(machine, initial: .ready(work(querying: [bob], outdated: [carol])))
        let (jitter, delay) = backoff(attempt: 1)
        try store.send(
            .keysQueried(.failure(.server(status: 502))),
            expecting: .backingOff(work(outdated: [bob, carol], failures: 1, jitter: jitter)),
            effects: [.scheduleRetry(after: delay)])
        try store.send(
            .timerFired(.retry), expecting: .ready(work(querying: [bob, carol], failures: 1, jitter: jitter)),
            effects: [.queryKeys([bob, carol])])
        try store.send(
            .keysQueried(.failure(.rejected(status: 400, errorCode: "M_BAD_JSON"))),
            expecting: .ready(work(failures: 1, jitter: jitter)))
    }

    // MARK: To-device messages

    @Test("To-device messages are processed one batch at a time; more arriving meanwhile are processed next")
    func toDevice() throws {
        let store = MachineTestStore(machine, initial: .ready(work()))
        try store.send(
            .syncCommitted(CryptoSyncSummary(toDeviceEvents: 3)), expecting: .ready(work(processing: true)),
            effects: [.processToDevice])
        try store.send(
            .syncCommitted(CryptoSyncSummary(toDeviceEvents: 1)),
            expecting: .ready(work(processing: true, toDevicePending: true)))
        try store.send(
            .toDeviceProcessed(.success(ToDeviceReport(processed: 3))), expecting: .ready(work(processing: true)),
            effects: [.processToDevice])
        try store.send(.toDeviceProcessed(.success(ToDeviceReport(processed: 1))), expecting: .ready(work()))
    }

    @Test("Room keys held for unknown devices make their senders queried")
    func heldRoomKeysQueryTheirSenders() throws {
        let store = MachineTestStore(machine, initial: .ready(work(processing: true)))
        let bob: UserID = "@bob:example.org"
        try store.send(
            .toDeviceProcessed(.success(ToDeviceReport(processed: 1, heldForUsers: [bob]))),
            expecting: .ready(work(querying: [bob])), effects: [.queryKeys([bob])])
    }

    @Test(
        "A wedged session found by to-device processing is unwedged; a retryable failure backs off, a stale answer changes nothing"
    )
    func unwedging() throws {
        let store = MachineTestStore(machine, initial: .ready(work(processing: true)))
        var unwedging = work()
        unwedging.isUnwedging = true
        try store.send(
            .toDeviceProcessed(.success(ToDeviceReport(processed: 1, sessionsWedged: true))),
            expecting: .ready(unwedging), effects: [.unwedgeSessions])
        try store.send(.sessionsUnwedged(.success(1)), expecting: .ready(work()))
        try store.send(.sessionsUnwedged(.success(1)), stayingWith: [])

        store.reset(to: .ready(unwedging))
        let (jitter, delay) = backoff(attempt: 1)
        var again = work(failures: 1, jitter: jitter)
        again.unwedgePending = true
        try store.send(
            .sessionsUnwedged(.failure(.network)), expecting: .backingOff(again),
            effects: [.scheduleRetry(after: delay)])
    }

    @Test("Devices found wedged before a restart are unwedged once the account is loaded")
    func unwedgingResumes() throws {
        let store = MachineTestStore(machine, initial: .loading(CryptoStart(jitterSeed: Self.seed)))
        var unwedging = work()
        unwedging.isUnwedging = true
        try store.send(
            .accountLoaded(
                .success(
                    CryptoAccountStatus(deviceKeysPublished: true, serverOneTimeKeyCount: 50, hasWedgedSessions: true))
            ), expecting: .ready(unwedging), effects: [.unwedgeSessions])
    }

    @Test("Processing that meets a full store backs off and runs again; a broken store fails")
    func toDeviceFailures() throws {
        let store = MachineTestStore(machine, initial: .ready(work(processing: true)))
        let (jitter, delay) = backoff(attempt: 1)
        try store.send(
            .toDeviceProcessed(.failure(.store(.full))),
            expecting: .backingOff(work(toDevicePending: true, failures: 1, jitter: jitter)),
            effects: [.scheduleRetry(after: delay)])
        try store.send(
            .timerFired(.retry), expecting: .ready(work(processing: true, failures: 1, jitter: jitter)),
            effects: [.processToDevice])
        try store.send(
            .toDeviceProcessed(.failure(.store(.corrupt))), expecting: .failed(.store(.corrupt)),
            effects: CryptoMachineTests.stopEffects)
    }

    // MARK: Backing off

    @Test("Results of requests still in flight while backing off are applied without re-arming the timer")
    func resultsWhileBackingOff() throws {
        let plan = KeyUploadPlan(newOneTimeKeys: 10)
        let store = MachineTestStore(
            machine, initial: .backingOff(work(count: 40, upload: plan, querying: [bob], processing: true, failures: 1))
        )
        try store.send(
            .keysQueried(.failure(.network)),
            expecting: .backingOff(work(count: 40, upload: plan, outdated: [bob], processing: true, failures: 1)))
        try store.send(
            .toDeviceProcessed(.success(ToDeviceReport(processed: 2))),
            expecting: .backingOff(work(count: 40, upload: plan, outdated: [bob], failures: 1)))
        try store.send(
            .syncCommitted(CryptoSyncSummary(oneTimeKeyCount: 30, changedUsers: [carol], toDeviceEvents: 1)),
            expecting: .backingOff(
                work(
                    count: 30, upload: KeyUploadPlan(newOneTimeKeys: 20), outdated: [bob, carol], toDevicePending: true,
                    failures: 1)))
        try store.send(
            .timerFired(.retry),
            expecting: .ready(
                work(
                    count: 30, upload: KeyUploadPlan(newOneTimeKeys: 20), uploading: true, querying: [bob, carol],
                    processing: true, failures: 1)),
            effects: [.uploadKeys(KeyUploadPlan(newOneTimeKeys: 20)), .queryKeys([bob, carol]), .processToDevice])
    }

    @Test("Stopping cancels every request and the retry timer")
    func stop() throws {
        for state in [
            CryptoMachine.State.ready(work()), .backingOff(work(failures: 1)), .publishing(work(uploading: true)),
        ] {
            let store = MachineTestStore(machine, initial: state)
            try store.send(.stopped, expecting: .idle, effects: Self.stopEffects)
        }
    }

    static let stopEffects: [CryptoMachine.Effect] = [
        .cancel(CryptoMachine.uploadKey), .cancel(CryptoMachine.queryKey), .cancel(CryptoMachine.toDeviceKey),
        .cancel(CryptoMachine.keyRequestsKey), .cancel(CryptoMachine.keyAnswersKey), .cancel(CryptoMachine.unwedgeKey),
        .cancel(CryptoMachine.backupKey), .cancel(CryptoMachine.retryKey),
    ]

    // MARK: Effects and the chart

    @Test("Effects are scheduled under their keys; the retry timer has a key of its own")
    func directives() {
        #expect(CryptoMachine.Effect.loadAccount.directive == .perform)
        #expect(CryptoMachine.Effect.uploadKeys(Self.firstUpload).directive == .keyed(CryptoMachine.uploadKey))
        #expect(CryptoMachine.Effect.queryKeys([bob]).directive == .keyed(CryptoMachine.queryKey))
        #expect(CryptoMachine.Effect.processToDevice.directive == .keyed(CryptoMachine.toDeviceKey))
        #expect(CryptoMachine.Effect.sendKeyRequests.directive == .keyed(CryptoMachine.keyRequestsKey))
        #expect(CryptoMachine.Effect.answerKeyRequests.directive == .keyed(CryptoMachine.keyAnswersKey))
        #expect(CryptoMachine.Effect.unwedgeSessions.directive == .keyed(CryptoMachine.unwedgeKey))
        #expect(
            CryptoMachine.Effect.scheduleRetry(after: .seconds(2)).directive
                == .timer(CryptoMachine.retryKey, .after(.seconds(2))))
        #expect(CryptoMachine.Effect.cancel("k").directive == .cancel("k"))
        #expect(machine.event(firing: .scheduleRetry(after: .seconds(2))) == .timerFired(.retry))
        #expect(machine.event(firing: .loadAccount) == nil)
    }

    @Test("Every (state, event) pair matches StateCharts/Crypto.scxml")
    func chart() throws {
        var unwedgingWork = work()
        unwedgingWork.isUnwedging = true
        var unwedgingBackingOff = work(failures: 1)
        unwedgingBackingOff.isUnwedging = true
        let topUp = KeyUploadPlan(newOneTimeKeys: 10)
        var states: [CryptoMachine.State] = [
            .idle, .loading(CryptoStart(jitterSeed: 1)),
            .publishing(work(count: nil, upload: Self.firstUpload, uploading: true)),
            .ready(work()), .ready(work(count: 40, upload: topUp, uploading: true)),
            .ready(work(querying: [bob])), .ready(work(processing: true)),
            .backingOff(work(count: nil, upload: Self.firstUpload, failures: 1)),
            .backingOff(work(count: 40, upload: topUp, failures: 1)),
            .backingOff(
                work(count: 40, upload: topUp, uploading: true, querying: [bob], processing: true, failures: 1)),
            .ready(work(sendingRequests: true, answering: true)),
            .backingOff(work(failures: 1, sendingRequests: true, answering: true)),
            .ready(unwedgingWork), .backingOff(unwedgingBackingOff),
            .ready(backupWork(uploading: true)), .backingOff(backupWork(pending: true, uploading: true, failures: 1)),
            .failed(.accountUnreadable),
        ]
        let room = EncryptedRoom(roomID: RoomID("!r:x"), joined: [alice, bob])
        let bobDevice = ShareDevice(userID: bob, deviceID: "B", curve25519: "bk")
        let steps: [RoomKeyShare.Step] = [
            .loadingFacts, .awaitingQuery([bob]),
            .claiming(session: .new, recipients: [bobDevice], claiming: [bobDevice]),
            .sending(session: .current("S"), remaining: [[bobDevice]]),
        ]
        for step in steps {
            for failures in [0, 1] {
                var sharing = work(querying: step == .awaitingQuery([bob]) ? [bob] : nil, failures: failures)
                sharing.sharing[room.roomID] = RoomKeyShare(room: room, round: 1, step: step, tickets: [ShareTicket(1)])
                sharing.shareOutcomes[ShareTicket(9)] = .shared(sessionID: "S")
                states.append(failures == 0 ? .ready(sharing) : .backingOff(sharing))
            }
        }
        let events: [CryptoMachine.Event] = [
            .started(CryptoStart(jitterSeed: 2)),
            .accountLoaded(.success(CryptoAccountStatus(deviceKeysPublished: false))),
            .accountLoaded(.success(CryptoAccountStatus(deviceKeysPublished: true, serverOneTimeKeyCount: 50))),
            .accountLoaded(.failure(.store(.corrupt))),
            .syncCommitted(CryptoSyncSummary()),
            .syncCommitted(
                CryptoSyncSummary(
                    oneTimeKeyCount: 20, unusedFallbackKeyTypes: [], changedUsers: [carol], toDeviceEvents: 1)),
            .usersTracked([carol]),
            .keysUploaded(.success(50)), .keysUploaded(.failure(.network)),
            .keysUploaded(.failure(.rejected(status: 400, errorCode: "M_INVALID_PARAM"))),
            .keysQueried(.success(KeyQueryReport(users: [bob]))), .keysQueried(.failure(.network)),
            .keysQueried(.failure(.rejected(status: 400, errorCode: "M_BAD_JSON"))),
            .toDeviceProcessed(.success(ToDeviceReport(processed: 1))), .toDeviceProcessed(.failure(.store(.busy))),
            .toDeviceProcessed(.failure(.driver("x"))),
            .toDeviceProcessed(
                .success(ToDeviceReport(processed: 2, keyRequestsReceived: true, requestedKeysArrived: true))),
            .roomKeysMissing,
            .keyRequestsSent(.success(1)), .keyRequestsSent(.failure(.network)),
            .keyRequestsSent(.failure(.rejected(status: 400, errorCode: "M_UNKNOWN"))),
            .keyRequestsAnswered(.success(KeyRequestAnswers(answered: 1, waitingForDevices: 1))),
            .keyRequestsAnswered(.failure(.server(status: 502))),
            .keyRequestsAnswered(.failure(.rejected(status: 403, errorCode: "M_FORBIDDEN"))),
            .toDeviceProcessed(.success(ToDeviceReport(processed: 1, heldForUsers: [carol], sessionsWedged: true))),
            .sessionsUnwedged(.success(1)), .sessionsUnwedged(.failure(.network)),
            .sessionsUnwedged(.failure(.rejected(status: 400, errorCode: "M_INVALID_PARAM"))),
            .roomKeyNeeded(room, ShareTicket(2)),
            .roomKeyFactsLoaded(
                room.roomID, round: 1, .success(RoomKeyFacts(devices: [bobDevice], nowMilliseconds: 0))),
            .roomKeyFactsLoaded(
                room.roomID, round: 1, .success(RoomKeyFacts(devices: [], outdatedUsers: [bob], nowMilliseconds: 0))),
            .roomKeyFactsLoaded(room.roomID, round: 1, .failure(.store(.busy))),
            .roomKeyFactsLoaded(room.roomID, round: 5, .failure(.store(.busy))),
            .oneTimeKeysClaimed(room.roomID, round: 1, .success([bobDevice])),
            .oneTimeKeysClaimed(room.roomID, round: 1, .failure(.network)),
            .roomKeySent(room.roomID, round: 1, .success(RoomKeySent(sessionID: "S", devices: [bobDevice]))),
            .roomKeySent(room.roomID, round: 1, .failure(.network)),
            .roomKeySent(
                room.roomID, round: 1,
                .success(RoomKeySent(sessionID: "S", devices: [bobDevice], newSessionStored: true))),
            .shareOutcomeTaken(ShareTicket(9)), .shareOutcomeTaken(ShareTicket(3)),
            .toDeviceProcessed(.success(ToDeviceReport(processed: 1, roomKeysStored: true))),
            .keysQueried(.success(KeyQueryReport(users: [bob], roomKeysReleased: true))),
            .backupKeysWaiting, .backupUploaded(.success(BackupUploadReport(uploaded: 3, remaining: 2))),
            .backupUploaded(.success(BackupUploadReport(uploaded: 0, remaining: 2, stopped: true))),
            .backupUploaded(.failure(.network)),
            .backupUploaded(.failure(.rejected(status: 403, errorCode: "M_FORBIDDEN"))),
            .timerFired(.retry), .stopped,
        ]
        try ChartChecker(machine: machine).assertConforms(states: states, events: events, initial: .idle)
    }
}
