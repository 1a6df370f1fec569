import SymorvaRuntime

extension CryptoMachine {
    /// The fallback key algorithm of `device_unused_fallback_key_types`.
    static let fallbackAlgorithm = "signed_curve25519"

    /// Every key the machine's effects run under.
    static let effectKeys = [
        uploadKey, queryKey, toDeviceKey, keyRequestsKey, keyAnswersKey, unwedgeKey, backupKey, retryKey,
    ]

    // MARK: idle, failed

    func idle(on event: Event) -> Transition<State, Effect> {
        switch event {
        case .started(let start):
            return .move(to: .loading(start), effects: [.loadAccount])
        case .stopped:
            return .move(to: .idle)
        case .accountLoaded, .syncCommitted, .usersTracked, .keysUploaded, .keysQueried, .toDeviceProcessed,
            .roomKeysMissing, .keyRequestsSent, .keyRequestsAnswered, .sessionsUnwedged, .roomKeyNeeded,
            .roomKeyFactsLoaded, .oneTimeKeysClaimed, .roomKeySent, .shareOutcomeTaken, .backupKeysWaiting,
            .backupUploaded, .timerFired:
            return .ignored
        }
    }

    // MARK: loading

    func loading(_ start: CryptoStart, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .accountLoaded(.success(let status)):
            var work = CryptoWork(
                maxOneTimeKeys: status.maxOneTimeKeys, serverOneTimeKeyCount: status.serverOneTimeKeyCount,
                outdated: Set(status.outdatedUsers), toDevicePending: status.hasPendingToDevice,
                jitter: JitterSource(seed: start.jitterSeed))
            work.keyRequestsPending = status.hasKeyRequestsToSend
            work.keyAnswersPending = status.hasKeyRequestsToAnswer
            work.unwedgePending = status.hasWedgedSessions
            work.backupPending = status.hasBackupKeysWaiting
            guard status.deviceKeysPublished else {
                // A new account, or one whose first upload never got an answer: (re)send the
                // device keys with the keys stored for them. Nothing else leaves first.
                let plan = KeyUploadPlan(
                    deviceKeys: true, newOneTimeKeys: status.maxOneTimeKeys / 2, rotateFallbackKey: true)
                work.upload = plan
                work.isUploading = true
                return .move(to: .publishing(work), effects: [.uploadKeys(plan)])
            }
            let topUp = work.oneTimeKeysToTopUp
            if topUp > 0 { work.upload = KeyUploadPlan(newOneTimeKeys: topUp) }
            let effects = startPending(&work)
            return .move(to: .ready(work), effects: effects)
        case .accountLoaded(.failure(let error)):
            return .move(to: .failed(error))
        case .stopped:
            return .move(to: .idle)
        case .started, .syncCommitted, .usersTracked, .keysUploaded, .keysQueried, .toDeviceProcessed,
            .roomKeysMissing, .keyRequestsSent, .keyRequestsAnswered, .sessionsUnwedged, .roomKeyNeeded,
            .roomKeyFactsLoaded, .oneTimeKeysClaimed, .roomKeySent, .shareOutcomeTaken, .backupKeysWaiting,
            .backupUploaded, .timerFired:
            // What a sync, a membership change or a decryption brought is in the store: the
            // load reads it.
            return .ignored
        }
    }

    // MARK: publishing

    func publishing(_ work: CryptoWork, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .syncCommitted(let summary):
            var next = work
            absorb(summary, into: &next, startingUploads: false)
            return next == work ? .stay : .move(to: .publishing(next))
        case .usersTracked(let users):
            var next = work
            next.outdated.formUnion(users)
            return next == work ? .stay : .move(to: .publishing(next))
        case .roomKeysMissing:
            var next = work
            next.keyRequestsPending = true
            return next == work ? .stay : .move(to: .publishing(next))
        case .backupKeysWaiting:
            var next = work
            next.backupPending = true
            return next == work ? .stay : .move(to: .publishing(next))
        case .keysUploaded(.success(let count)):
            var next = work
            next.upload = nil
            next.isUploading = false
            next.serverOneTimeKeyCount = count
            next.failures = 0
            let effects = startPending(&next)
            return .move(to: .ready(next), effects: effects)
        case .keysUploaded(.failure(let error)):
            var next = work
            next.isUploading = false
            return failed(next, error)
        case .stopped:
            return stop(work)
        case .started, .accountLoaded, .keysQueried, .toDeviceProcessed, .keyRequestsSent, .keyRequestsAnswered,
            .sessionsUnwedged, .roomKeyNeeded, .roomKeyFactsLoaded, .oneTimeKeysClaimed, .roomKeySent,
            .shareOutcomeTaken, .backupUploaded, .timerFired:
            // Nothing but the first upload is in flight while publishing (no key is shared
            // before the device's keys are published).
            return .ignored
        }
    }

    // MARK: ready

    func ready(_ work: CryptoWork, on event: Event) -> Transition<State, Effect> {
        var next = work
        // A round that sent a key may have stored a new session of ours: it waits for the backup.
        if case .roomKeySent(_, _, .success(let sent)) = event, sent.newSessionStored { next.backupPending = true }
        if let effects = share(event, work: &next, accepting: true) {
            let pending = startPending(&next)
            return next == work ? .stay : .move(to: .ready(next), effects: effects + pending)
        }
        var sharing: [Effect] = []
        switch event {
        case .syncCommitted(let summary):
            absorb(summary, into: &next, startingUploads: true)
        case .usersTracked(let users):
            next.outdated.formUnion(users)
        case .keysUploaded(let result):
            guard work.isUploading else { return .stay }  // stale
            next.isUploading = false
            if case .failure(let error) = result { return failed(next, error) }
            if case .success(let count) = result { next.serverOneTimeKeyCount = count }
            next.upload = nil
            next.failures = 0
        case .keysQueried(let result):
            guard let querying = work.querying else { return .stay }  // stale
            next.querying = nil
            if case .failure(let error) = result {
                guard error.isRetryable else {
                    // Refused for good: these users stay outdated in the store (queried again at
                    // the next start), not in a loop now.
                    next.outdated.subtract(querying)
                    sharing = queryAnswered(result, queried: querying, work: &next)
                    return .move(to: .ready(next), effects: sharing + startPending(&next))
                }
                next.outdated.formUnion(querying)
                sharing = queryAnswered(result, queried: querying, work: &next)
                return failed(next, error, alongside: sharing)
            }
            next.failures = 0
            devicesUpdated(&next)
            if case .success(let report) = result, report.roomKeysReleased { next.backupPending = true }
            sharing = queryAnswered(result, queried: querying, work: &next)
        case .toDeviceProcessed(let result):
            guard work.isProcessingToDevice else { return .stay }  // stale
            next.isProcessingToDevice = false
            switch result {
            case .failure(let error):
                next.toDevicePending = true
                return failedProcessing(next, error)
            case .success(let report):
                absorb(report, into: &next)
            }
        case .roomKeysMissing:
            next.keyRequestsPending = true
        case .keyRequestsSent(let result):
            guard work.isSendingKeyRequests else { return .stay }  // stale
            if let error = applySent(result, to: &next) { return backOff(next, retryAfter: error.retryAfter) }
            if case .success = result { next.failures = 0 }
        case .keyRequestsAnswered(let result):
            guard work.isAnsweringKeyRequests else { return .stay }  // stale
            if let error = applyAnswered(result, to: &next) { return backOff(next, retryAfter: error.retryAfter) }
            if case .success = result { next.failures = 0 }
        case .sessionsUnwedged(let result):
            guard work.isUnwedging else { return .stay }  // stale
            if let error = applyUnwedged(result, to: &next) { return backOff(next, retryAfter: error.retryAfter) }
            if case .success = result { next.failures = 0 }
        case .backupKeysWaiting:
            next.backupPending = true
        case .backupUploaded(let result):
            guard work.isUploadingBackup else { return .stay }  // stale
            if let error = applyBackupUploaded(result, to: &next) {
                return backOff(next, retryAfter: error.retryAfter)
            }
            if case .success = result { next.failures = 0 }
        case .stopped:
            return stop(work)
        case .started, .accountLoaded, .timerFired, .roomKeyNeeded, .roomKeyFactsLoaded, .oneTimeKeysClaimed,
            .roomKeySent, .shareOutcomeTaken:
            return .ignored
        }
        let effects = sharing + startPending(&next)
        // An effect that answered and starts again (another batch) leaves the state as it was.
        return next == work ? .stay(effects: effects) : .move(to: .ready(next), effects: effects)
    }

    // MARK: backingOff

    func backingOff(_ work: CryptoWork, on event: Event) -> Transition<State, Effect> {
        var next = work
        if case .roomKeySent(_, _, .success(let sent)) = event, sent.newSessionStored { next.backupPending = true }
        if let effects = share(event, work: &next, accepting: false) {
            return next == work ? .stay : .move(to: .backingOff(next), effects: effects)
        }
        var sharing: [Effect] = []
        switch event {
        case .timerFired(.retry):
            if next.upload?.deviceKeys == true {
                next.isUploading = true
                return .move(to: .publishing(next), effects: [.uploadKeys(next.upload!)])
            }
            let effects = startPending(&next)
            return .move(to: .ready(next), effects: effects)
        case .syncCommitted(let summary):
            absorb(summary, into: &next, startingUploads: !work.isUploading && work.upload?.deviceKeys != true)
        case .usersTracked(let users):
            next.outdated.formUnion(users)
        case .keysUploaded(let result):
            guard work.isUploading else { return .stay }  // stale
            next.isUploading = false
            if case .success(let count) = result {
                next.serverOneTimeKeyCount = count
                next.upload = nil
            }
        case .keysQueried(let result):
            guard let querying = work.querying else { return .stay }  // stale
            next.querying = nil
            switch result {
            case .failure(let error):
                if error.isRetryable { next.outdated.formUnion(querying) } else { next.outdated.subtract(querying) }
            case .success(let report):
                devicesUpdated(&next)
                if report.roomKeysReleased { next.backupPending = true }
            }
            sharing = queryAnswered(result, queried: querying, work: &next)
        case .toDeviceProcessed(let result):
            guard work.isProcessingToDevice else { return .stay }  // stale
            next.isProcessingToDevice = false
            switch result {
            case .failure(let error):
                guard Self.isTransient(error) else { return .move(to: .failed(error), effects: stopEffects(work)) }
                next.toDevicePending = true
            case .success(let report):
                absorb(report, into: &next)
            }
        case .roomKeysMissing:
            next.keyRequestsPending = true
        case .keyRequestsSent(let result):
            guard work.isSendingKeyRequests else { return .stay }  // stale
            _ = applySent(result, to: &next)
        case .keyRequestsAnswered(let result):
            guard work.isAnsweringKeyRequests else { return .stay }  // stale
            _ = applyAnswered(result, to: &next)
        case .sessionsUnwedged(let result):
            guard work.isUnwedging else { return .stay }  // stale
            _ = applyUnwedged(result, to: &next)
        case .backupKeysWaiting:
            next.backupPending = true
        case .backupUploaded(let result):
            guard work.isUploadingBackup else { return .stay }  // stale
            _ = applyBackupUploaded(result, to: &next)
        case .stopped:
            return stop(work)
        case .started, .accountLoaded, .roomKeyNeeded, .roomKeyFactsLoaded, .oneTimeKeysClaimed, .roomKeySent,
            .shareOutcomeTaken:
            // A send while backing off is refused (the send queue retries): only `ready` shares.
            return .ignored
        }
        // The retry timer runs under its own key: moving within backingOff keeps it.
        return next == work ? .stay : .move(to: .backingOff(next), effects: sharing)
    }

    // MARK: Helpers

    /// Takes in what a committed sync says: the server's key counts (a top-up or a new fallback
    /// key when needed), changed users, waiting to-device messages.
    private func absorb(_ summary: CryptoSyncSummary, into work: inout CryptoWork, startingUploads: Bool) {
        if let count = summary.oneTimeKeyCount { work.serverOneTimeKeyCount = count }
        work.outdated.formUnion(summary.changedUsers)
        if summary.toDeviceEvents > 0 { work.toDevicePending = true }
        guard startingUploads, !work.isUploading else { return }
        let fallbackUsed = summary.unusedFallbackKeyTypes.map { !$0.contains(Self.fallbackAlgorithm) } ?? false
        let plan = KeyUploadPlan(newOneTimeKeys: work.oneTimeKeysToTopUp, rotateFallbackKey: fallbackUsed)
        guard !plan.isEmpty else { return }
        work.upload = work.upload.map { $0.merged(with: plan) } ?? plan
    }

    /// Starts what waits and can run now: the upload, a query of the outdated users, the
    /// to-device processing. One of each at a time.
    private func startPending(_ work: inout CryptoWork) -> [Effect] {
        var effects: [Effect] = []
        if let plan = work.upload, !work.isUploading {
            work.isUploading = true
            effects.append(.uploadKeys(plan))
        }
        if work.querying == nil, !work.outdated.isEmpty {
            let users = work.outdated.sorted()
            work.querying = users
            work.outdated = []
            effects.append(.queryKeys(users))
        }
        if work.toDevicePending, !work.isProcessingToDevice {
            work.toDevicePending = false
            work.isProcessingToDevice = true
            effects.append(.processToDevice)
        }
        if work.keyRequestsPending, !work.isSendingKeyRequests {
            work.keyRequestsPending = false
            work.isSendingKeyRequests = true
            effects.append(.sendKeyRequests)
        }
        if work.keyAnswersPending, !work.isAnsweringKeyRequests {
            work.keyAnswersPending = false
            work.isAnsweringKeyRequests = true
            effects.append(.answerKeyRequests)
        }
        if work.unwedgePending, !work.isUnwedging {
            work.unwedgePending = false
            work.isUnwedging = true
            effects.append(.unwedgeSessions)
        }
        if work.backupPending, !work.isUploadingBackup {
            work.backupPending = false
            work.isUploadingBackup = true
            effects.append(.uploadBackup)
        }
        return effects
    }

    /// A request failed: back off when it can pass, else fail for good.
    private func failed(_ work: CryptoWork, _ error: CryptoRequestError, alongside effects: [Effect] = [])
        -> Transition<State, Effect>
    {
        guard error.isRetryable else {
            let failure: CryptoError =
                switch error {
                case .rejected(let status, let errorCode): .keysRejected(status: status, errorCode: errorCode)
                case .local(let error): error
                default: .driver("unexpected")
                }
            return .move(to: .failed(failure), effects: stopEffects(work))
        }
        return backOff(work, retryAfter: error.retryAfter, alongside: effects)
    }

    /// To-device processing failed: a full or busy store passes, anything else does not.
    private func failedProcessing(_ work: CryptoWork, _ error: CryptoError) -> Transition<State, Effect> {
        guard Self.isTransient(error) else { return .move(to: .failed(error), effects: stopEffects(work)) }
        return backOff(work, retryAfter: nil)
    }

    func backOff(_ work: CryptoWork, retryAfter: Duration?, alongside effects: [Effect] = [])
        -> Transition<State, Effect>
    {
        var next = work
        next.failures += 1
        let delay = next.jitter.delay(attempt: next.failures, backoff: backoff, retryAfter: retryAfter)
        return .move(to: .backingOff(next), effects: effects + [.scheduleRetry(after: delay)])
    }

    static func isTransient(_ error: CryptoError) -> Bool {
        if case .store(let failure) = error { return failure == .full || failure == .busy }
        return false
    }

    /// Cancels every effect, the rounds of sharing in progress included.
    private func stopEffects(_ work: CryptoWork?) -> [Effect] {
        (Self.effectKeys + shareKeys(work)).map { .cancel($0) }
    }

    private func stop(_ work: CryptoWork? = nil) -> Transition<State, Effect> {
        .move(to: .idle, effects: stopEffects(work))
    }
}
