import SymorvaRuntime

/// What processing the stored to-device messages brought, beyond room keys.
package struct ToDeviceReport: Sendable, Equatable {
    /// How many events were processed (and removed).
    package var processed: Int
    /// Another device of the account asked for room keys (stored): answer.
    package var keyRequestsReceived: Bool
    /// A room key this device had asked for arrived: cancel the request at the other devices.
    package var requestedKeysArrived: Bool
    /// Users from whose unknown devices room keys arrived: the keys are held (not used) until a
    /// `keys/query` shows the device as theirs, so these users are queried.
    package var heldForUsers: [UserID]
    /// A device's Olm message could not be decrypted (its session with this device is wedged):
    /// a new session is due (recorded in the store).
    package var sessionsWedged: Bool
    /// Room keys were stored (and entered the backup outbox if a backup is in use).
    package var roomKeysStored: Bool

    /// A report.
    package init(
        processed: Int, keyRequestsReceived: Bool = false, requestedKeysArrived: Bool = false,
        heldForUsers: [UserID] = [], sessionsWedged: Bool = false, roomKeysStored: Bool = false
    ) {
        self.roomKeysStored = roomKeysStored
        self.processed = processed
        self.keyRequestsReceived = keyRequestsReceived
        self.requestedKeysArrived = requestedKeysArrived
        self.heldForUsers = heldForUsers
        self.sessionsWedged = sessionsWedged
    }
}

/// What answering other own devices' room key requests did.
package struct KeyRequestAnswers: Sendable, Equatable {
    /// Requests answered with a forwarded key.
    package var answered: Int
    /// Requests kept because their device is not known yet (or has no one-time key to reach it).
    package var waitingForDevices: Int

    /// Answers.
    package init(answered: Int, waitingForDevices: Int = 0) {
        self.answered = answered
        self.waitingForDevices = waitingForDevices
    }
}

extension CryptoMachine {
    /// Takes in what to-device processing reported about key requests.
    func absorb(_ report: ToDeviceReport, into work: inout CryptoWork) {
        if report.keyRequestsReceived { work.keyAnswersPending = true }
        if report.requestedKeysArrived { work.keyRequestsPending = true }
        work.outdated.formUnion(report.heldForUsers)
        if report.sessionsWedged { work.unwedgePending = true }
        if report.roomKeysStored { work.backupPending = true }
    }

    /// An upload to the key backup answered (`work` has it in flight): whether to back off. A
    /// refusal for good leaves the keys in the outbox until the next start or the next key.
    func applyBackupUploaded(_ result: Result<BackupUploadReport, CryptoRequestError>, to work: inout CryptoWork)
        -> CryptoRequestError?
    {
        work.isUploadingBackup = false
        switch result {
        case .success(let report):
            if report.remaining > 0, !report.stopped { work.backupPending = true }
            return nil
        case .failure(let error):
            guard error.isRetryable else { return nil }
            work.backupPending = true
            return error
        }
    }

    /// An unwedging answered (`work` has it in flight): whether to back off. A refusal for good
    /// leaves the devices in the store until the next start.
    func applyUnwedged(_ result: Result<Int, CryptoRequestError>, to work: inout CryptoWork) -> CryptoRequestError? {
        work.isUnwedging = false
        guard case .failure(let error) = result, error.isRetryable else { return nil }
        work.unwedgePending = true
        return error
    }

    /// A sending of key requests answered (`work` has it in flight): whether to back off.
    /// A refusal for good leaves the requests in the store until the next start.
    func applySent(_ result: Result<Int, CryptoRequestError>, to work: inout CryptoWork) -> CryptoRequestError? {
        work.isSendingKeyRequests = false
        guard case .failure(let error) = result else { return nil }
        guard error.isRetryable else { return nil }
        work.keyRequestsPending = true
        return error
    }

    /// An answering of key requests answered (`work` has it in flight): whether to back off.
    func applyAnswered(_ result: Result<KeyRequestAnswers, CryptoRequestError>, to work: inout CryptoWork)
        -> CryptoRequestError?
    {
        work.isAnsweringKeyRequests = false
        switch result {
        case .success(let answers):
            if answers.waitingForDevices > 0 { work.answersAwaitDevices = true }
            return nil
        case .failure(let error):
            guard error.isRetryable else { return nil }
            work.keyAnswersPending = true
            return error
        }
    }

    /// A `keys/query` succeeded: requests that waited for their device are tried again.
    func devicesUpdated(_ work: inout CryptoWork) {
        guard work.answersAwaitDevices else { return }
        work.answersAwaitDevices = false
        work.keyAnswersPending = true
    }
}

/// What one upload to the key backup did.
package struct BackupUploadReport: Sendable, Equatable {
    /// Keys uploaded by this batch.
    package var uploaded: Int
    /// Keys still waiting in the outbox.
    package var remaining: Int
    /// The backup version is no longer in use (deleted or replaced on the server, or none is
    /// enabled): nothing more is uploaded.
    package var stopped: Bool

    /// A report.
    package init(uploaded: Int, remaining: Int, stopped: Bool = false) {
        self.uploaded = uploaded
        self.remaining = remaining
        self.stopped = stopped
    }
}
