import SymorvaRuntime

extension TransferMachine {
    /// The events of the draft-expiry and query timers, which the host performs.
    package func event(firing timer: Effect) -> Event? {
        switch timer {
        case .scheduleDraftExpiry: .draftExpired
        case .scheduleQuery: .timerFired(.query)
        case .sendPrepare, .sealVerification, .persistPendingCommand, .sendConfirm, .sendQuery, .clearPendingCommand,
            .cancel:
            nil
        }
    }

    package func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch state {
        case .idle: inIdle(on: event)
        case .preparing(let request): inPreparing(request, on: event)
        case .drafted(let drafted): inDrafted(drafted, on: event)
        case .verifying(let attempt): inVerifying(attempt, on: event)
        case .persisting(let attempt, let sealed): inPersisting(attempt, sealed, on: event)
        case .confirming(let attempt): inConfirming(attempt, on: event)
        case .unknown(let pending, let attempt): inUnknown(pending, attempt: attempt, on: event)
        case .querying(let pending, let attempt): inQuerying(pending, attempt: attempt, on: event)
        case .settled, .failed, .expired, .cancelled: .ignored
        }
    }

    // MARK: - Before anything is sent

    private func inIdle(on event: Event) -> Transition<State, Effect> {
        switch event {
        case .prepareRequested(let request):
            return .move(to: .preparing(request), effects: [.sendPrepare(request)])
        case .restored(let pending):
            // After a restart the outcome is unknown; the first query goes out at once.
            return .move(to: .querying(pending, attempt: 1), effects: [.sendQuery(pending.commandID)])
        case .cancelled:
            return .move(to: .cancelled)
        case .prepareResponse, .confirmRequested, .verificationSealed, .commandPersisted, .persistenceFailed,
            .confirmResponse, .queryRequested, .queryResponse, .timerFired, .draftExpired:
            return .ignored
        }
    }

    private func inPreparing(_ request: TransferRequest, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .prepareResponse(.drafted(let draft)):
            guard draft.isConsistent(with: request) else {
                return .move(to: .failed(.invalidDraft, nil))
            }
            return enterDrafted(DraftedTransfer(draft: draft))
        case .prepareResponse(.failed(let failure)):
            return .move(to: .failed(failure, nil))
        case .prepareResponse(.transportError(let problem)):
            return .move(to: .failed(.serviceUnreachable(problem), nil))
        case .cancelled:
            return .move(to: .cancelled, effects: [.cancel(Keys.prepare)])
        case .prepareRequested, .confirmRequested, .verificationSealed, .commandPersisted, .persistenceFailed,
            .confirmResponse, .queryRequested, .queryResponse, .timerFired, .draftExpired, .restored:
            return .ignored
        }
    }

    private func inDrafted(_ drafted: DraftedTransfer, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .confirmRequested(let verification, let commandID):
            return confirm(drafted, with: verification, commandID: commandID)
        case .draftExpired:
            return .move(to: .expired(drafted.draft))
        case .cancelled:
            return .move(to: .cancelled)
        case .prepareRequested, .prepareResponse, .verificationSealed, .commandPersisted, .persistenceFailed,
            .confirmResponse, .queryRequested, .queryResponse, .timerFired, .restored:
            return .ignored
        }
    }

    /// Starts a confirmation, or refuses it on the device before anything is spent.
    private func confirm(
        _ drafted: DraftedTransfer, with verification: Verification, commandID: CommandID
    ) -> Transition<State, Effect> {
        let draft = drafted.draft
        if drafted.spentCommandIDs.contains(commandID) {
            return enterDrafted(drafted.rejecting(.commandIDReused))
        }
        guard offeredMethods(for: draft).contains(verification.method) else {
            return enterDrafted(drafted.rejecting(.verification(.methodNotOffered)))
        }
        if case .pin(let pin) = verification, !SealingContext.isWellFormed(pin: pin) {
            return enterDrafted(drafted.rejecting(.verification(.malformedPIN)))
        }
        let attempt = ConfirmAttempt(draft: draft, commandID: commandID, spentCommandIDs: drafted.spentCommandIDs)
        return .move(
            to: .verifying(attempt),
            effects: [.sealVerification(verification, context: attempt.sealingContext)])
    }

    private func inVerifying(_ attempt: ConfirmAttempt, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .verificationSealed(.success(let sealed)):
            return .move(
                to: .persisting(attempt, sealed), effects: [.persistPendingCommand(attempt.pendingCommand)])
        case .verificationSealed(.failure(let error)):
            // Nothing was stored or sent: the command ID is not spent.
            let drafted = DraftedTransfer(
                draft: attempt.draft, rejection: .verification(error), spentCommandIDs: attempt.spentCommandIDs)
            return enterDrafted(drafted)
        case .cancelled:
            return .move(to: .cancelled, effects: [.cancel(Keys.verification)])
        case .prepareRequested, .prepareResponse, .confirmRequested, .commandPersisted, .persistenceFailed,
            .confirmResponse, .queryRequested, .queryResponse, .timerFired, .draftExpired, .restored:
            return .ignored
        }
    }

    private func inPersisting(
        _ attempt: ConfirmAttempt, _ sealed: SealedVerification, on event: Event
    ) -> Transition<State, Effect> {
        switch event {
        case .commandPersisted:
            let send = Effect.sendConfirm(commandID: attempt.commandID, draftID: attempt.draft.id, verification: sealed)
            return .move(to: .confirming(attempt), effects: [send])
        case .persistenceFailed:
            // The write may have half-happened; clear it and never use the ID again.
            let drafted = DraftedTransfer(
                draft: attempt.draft, rejection: .storeUnavailable,
                spentCommandIDs: attempt.spentCommandIDs + [attempt.commandID])
            return enterDrafted(drafted, before: [.clearPendingCommand(attempt.commandID)])
        case .prepareRequested, .prepareResponse, .confirmRequested, .verificationSealed, .confirmResponse,
            .queryRequested, .queryResponse, .timerFired, .draftExpired, .restored, .cancelled:
            // Cancelling is too late: the command is being recorded and will be sent.
            return .ignored
        }
    }

    // MARK: - After the confirm request left

    private func inConfirming(_ attempt: ConfirmAttempt, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .confirmResponse(.settled(let transfer)):
            return .move(to: .settled(transfer), effects: [.clearPendingCommand(attempt.commandID)])
        case .confirmResponse(.failed(let failure)):
            return refused(attempt, failure)
        case .confirmResponse(.pending), .confirmResponse(.transportError):
            let backoff = configuration.queryDelay(afterAttempt: 0)
            return .move(to: .unknown(attempt.pendingCommand, attempt: 0), effects: [.scheduleQuery(after: backoff)])
        case .prepareRequested, .prepareResponse, .confirmRequested, .verificationSealed, .commandPersisted,
            .persistenceFailed, .queryRequested, .queryResponse, .timerFired, .draftExpired, .restored, .cancelled:
            // Expiry is the service's call now, and a sent confirmation cannot be taken back.
            return .ignored
        }
    }

    /// A definitive refusal of the confirm request: the command is spent. After a wrong PIN or a
    /// rate limit (refused before anything was recorded) the draft stays confirmable.
    private func refused(_ attempt: ConfirmAttempt, _ failure: TransferFailure) -> Transition<State, Effect> {
        let clear = Effect.clearPendingCommand(attempt.commandID)
        switch failure {
        case .wrongPIN, .rateLimited:
            let drafted = DraftedTransfer(
                draft: attempt.draft, rejection: failure, spentCommandIDs: attempt.spentCommandIDs + [attempt.commandID]
            )
            return enterDrafted(drafted, before: [clear])
        case .draftExpired:
            return .move(to: .expired(attempt.draft), effects: [clear])
        default:
            return .move(to: .failed(failure, attempt.draft.summary), effects: [clear])
        }
    }

    private func inUnknown(_ pending: PendingCommand, attempt: Int, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .timerFired(.query), .queryRequested:
            return .move(to: .querying(pending, attempt: attempt + 1), effects: [.sendQuery(pending.commandID)])
        case .prepareRequested, .prepareResponse, .confirmRequested, .verificationSealed, .commandPersisted,
            .persistenceFailed, .confirmResponse, .queryResponse, .draftExpired, .restored, .cancelled:
            // Never a new confirmation from here: the command may have executed.
            return .ignored
        }
    }

    private func inQuerying(_ pending: PendingCommand, attempt: Int, on event: Event) -> Transition<State, Effect> {
        let clear = Effect.clearPendingCommand(pending.commandID)
        switch event {
        case .queryResponse(.settled(let transfer)):
            return .move(to: .settled(transfer), effects: [clear])
        case .queryResponse(.failed(let failure)):
            return .move(to: .failed(failure, pending.summary), effects: [clear])
        case .queryResponse(.unknownCommand):
            return .move(to: .failed(.notReceived, pending.summary), effects: [clear])
        case .queryResponse(.pending), .queryResponse(.transportError):
            let backoff = configuration.queryDelay(afterAttempt: attempt)
            return .move(to: .unknown(pending, attempt: attempt), effects: [.scheduleQuery(after: backoff)])
        case .queryResponse(.rateLimited(let retryAfter)):
            // Still unknown; the next query waits for the backoff and at least the service's hint
            // (clamped by `ServerWait`: a huge hint must not freeze the query).
            let backoff = max(configuration.queryDelay(afterAttempt: attempt), ServerWait.clamp(retryAfter) ?? .zero)
            return .move(to: .unknown(pending, attempt: attempt), effects: [.scheduleQuery(after: backoff)])
        case .prepareRequested, .prepareResponse, .confirmRequested, .verificationSealed, .commandPersisted,
            .persistenceFailed, .confirmResponse, .queryRequested, .timerFired, .draftExpired, .restored, .cancelled:
            return .ignored
        }
    }

    // MARK: - Helpers

    /// Moves to `drafted`, re-arming the draft's expiry (moving cancelled the previous one).
    private func enterDrafted(_ drafted: DraftedTransfer, before effects: [Effect] = []) -> Transition<State, Effect> {
        .move(to: .drafted(drafted), effects: effects + [.scheduleDraftExpiry(at: drafted.draft.expiresAt)])
    }
}

extension DraftedTransfer {
    /// The same draft with a device-side refusal noted; no command ID is spent.
    fileprivate func rejecting(_ failure: TransferFailure) -> DraftedTransfer {
        DraftedTransfer(draft: draft, rejection: failure, spentCommandIDs: spentCommandIDs)
    }
}
