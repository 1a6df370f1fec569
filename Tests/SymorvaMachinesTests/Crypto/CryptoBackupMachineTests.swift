import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

/// The key backup's outbox: room keys stored (received, or a new session of ours) are
/// uploaded in batches, one upload at a time, until none wait or the backup is no longer in use.
extension CryptoMachineTests {
    func backupWork(pending: Bool = false, uploading: Bool = false, failures: Int = 0, jitter: JitterSource? = nil)
        -> CryptoWork
    {
        var work = work(failures: failures, jitter: jitter ?? JitterSource(seed: Self.seed))
        work.backupPending = pending
        work.isUploadingBackup = uploading
        return work
    }

    @Test(
        "Stored room keys are uploaded; keys stored meanwhile wait for the running upload; batches go on while keys remain"
    )
    func backupUploadsInBatches() throws {
        let store = MachineTestStore(machine, initial: .ready(work(processing: true)))
        try store.send(
            .toDeviceProcessed(.success(ToDeviceReport(processed: 1, roomKeysStored: true))),
            expecting: .ready(backupWork(uploading: true)), effects: [.uploadBackup])
        try store.send(.backupKeysWaiting, expecting: .ready(backupWork(pending: true, uploading: true)))
        try store.send(
            .backupUploaded(.success(BackupUploadReport(uploaded: 100, remaining: 0))),
            expecting: .ready(backupWork(uploading: true)), effects: [.uploadBackup])
        try store.send(
            .backupUploaded(.success(BackupUploadReport(uploaded: 100, remaining: 30))), stayingWith: [.uploadBackup])
        try store.send(
            .backupUploaded(.success(BackupUploadReport(uploaded: 30, remaining: 0))), expecting: .ready(work()))
        // A stale answer changes nothing.
        try store.send(.backupUploaded(.success(BackupUploadReport(uploaded: 1, remaining: 5))), stayingWith: [])
    }

    @Test(
        "Room keys a keys/query released (held for devices not known then) wait for the backup; while backing off they are recorded"
    )
    func releasedKeysAreBackedUp() throws {
        let store = MachineTestStore(machine, initial: .ready(work(querying: [bob])))
        try store.send(
            .keysQueried(.success(KeyQueryReport(users: [bob], roomKeysReleased: true))),
            expecting: .ready(backupWork(uploading: true)), effects: [.uploadBackup])
        store.reset(to: .backingOff(work(querying: [bob], failures: 1)))
        try store.send(
            .keysQueried(.success(KeyQueryReport(users: [bob], roomKeysReleased: true))),
            expecting: .backingOff(backupWork(pending: true, failures: 1)))
    }

    @Test("A backup deleted or replaced on the server stops the uploads even with keys left")
    func backupStopped() throws {
        let store = MachineTestStore(machine, initial: .ready(backupWork(uploading: true)))
        try store.send(
            .backupUploaded(.success(BackupUploadReport(uploaded: 0, remaining: 12, stopped: true))),
            expecting: .ready(work()))
    }

    @Test("A new session of ours waits for the backup; a current one does not")
    func ownNewSessionIsBackedUp() throws {
        let room = EncryptedRoom(roomID: RoomID("!r:x"), joined: [alice, bob])
        let bobDevice = ShareDevice(userID: bob, deviceID: "B", curve25519: "bk")
        var sharing = work()
        sharing.sharing[room.roomID] = RoomKeyShare(
            room: room, round: 1, step: .sending(session: .new, remaining: []), tickets: [ShareTicket(1)])
        let store = MachineTestStore(machine, initial: .ready(sharing))
        var after = backupWork(uploading: true)
        after.shareOutcomes[ShareTicket(1)] = .shared(sessionID: "S")
        try store.send(
            .roomKeySent(
                room.roomID, round: 1,
                .success(RoomKeySent(sessionID: "S", devices: [bobDevice], newSessionStored: true))),
            expecting: .ready(after), effects: [.uploadBackup])
    }

    @Test("An upload that fails transiently backs off and is redone; one refused for good leaves the keys waiting")
    func backupFailures() throws {
        let store = MachineTestStore(machine, initial: .ready(backupWork(uploading: true)))
        let (jitter, delay) = backoff(attempt: 1)
        try store.send(
            .backupUploaded(.failure(.server(status: 502))),
            expecting: .backingOff(backupWork(pending: true, failures: 1, jitter: jitter)),
            effects: [.scheduleRetry(after: delay)])
        try store.send(.backupKeysWaiting, stayingWith: [])
        try store.send(
            .timerFired(.retry), expecting: .ready(backupWork(uploading: true, failures: 1, jitter: jitter)),
            effects: [.uploadBackup])
        try store.send(
            .backupUploaded(.failure(.rejected(status: 400, errorCode: "M_BAD_JSON"))),
            expecting: .ready(work(failures: 1, jitter: jitter)))
    }

    @Test("Keys waiting before a restart are uploaded once the account is loaded; while publishing they wait")
    func backupResumes() throws {
        let store = MachineTestStore(machine, initial: .loading(CryptoStart(jitterSeed: Self.seed)))
        try store.send(
            .accountLoaded(
                .success(
                    CryptoAccountStatus(
                        deviceKeysPublished: true, serverOneTimeKeyCount: 50, hasBackupKeysWaiting: true))),
            expecting: .ready(backupWork(uploading: true)), effects: [.uploadBackup])

        var publishing = work(count: nil, upload: Self.firstUpload, uploading: true)
        store.reset(to: .publishing(publishing))
        publishing.backupPending = true
        try store.send(.backupKeysWaiting, expecting: .publishing(publishing))
        try store.assertIgnored(.backupUploaded(.success(BackupUploadReport(uploaded: 0, remaining: 0))))
    }

    @Test("While backing off, an upload in flight is applied and new keys are recorded, without starting anything")
    func backupWhileBackingOff() throws {
        let store = MachineTestStore(machine, initial: .backingOff(backupWork(uploading: true, failures: 1)))
        try store.send(
            .backupUploaded(.success(BackupUploadReport(uploaded: 5, remaining: 5))),
            expecting: .backingOff(backupWork(pending: true, failures: 1)))
        #expect(CryptoMachine.Effect.uploadBackup.directive == .keyed(CryptoMachine.backupKey))
    }
}
