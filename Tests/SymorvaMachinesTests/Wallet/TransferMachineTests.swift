import SymorvaMachines
import SymorvaRuntime
import Testing

/// Preparing, the draft, and everything that happens on the device before the confirm request
/// leaves. Each test is one scenario: state, event, whole next state, whole effect list.
@Suite("Transfer machine: preparing and confirming on the device")
struct TransferMachineTests {
    let machine = Fixture.machine
    let drafted = TransferMachine.State.drafted(DraftedTransfer(draft: Fixture.draft()))

    // MARK: Preparing

    @Test("A prepare request sends it to the service")
    func prepareRequested() {
        let step = machine.step(.idle, .prepareRequested(Fixture.request))
        #expect(step == Step(state: .preparing(Fixture.request), effects: [.sendPrepare(Fixture.request)]))
    }

    @Test("A consistent draft is shown and its expiry armed")
    func draftShown() {
        let step = machine.step(.preparing(Fixture.request), .prepareResponse(.drafted(Fixture.draft())))
        #expect(step == Step(state: drafted, effects: [.scheduleDraftExpiry(at: Fixture.expiry)]))
    }

    @Test("A draft whose total is not amount plus fee is refused, never shown")
    func draftThatDoesNotAddUp() {
        let step = machine.step(.preparing(Fixture.request), .prepareResponse(.drafted(Fixture.draft(total: "25.00"))))
        #expect(step == Step(state: .failed(.invalidDraft, nil), effects: []))
    }

    @Test("A draft for another recipient is refused")
    func draftForSomeoneElse() {
        let other = TransferRequest(
            recipient: UserID("@eve:example.org"), asset: Fixture.euro, amount: Fixture.amount("25"))
        let step = machine.step(.preparing(other), .prepareResponse(.drafted(Fixture.draft())))
        #expect(step == Step(state: .failed(.invalidDraft, nil), effects: []))
    }

    @Test("A draft with a malformed sealing key is refused")
    func draftWithBadKey() {
        let draft = Fixture.draft()
        let badKey = TransferDraft(
            id: draft.id, recipient: draft.recipient, asset: draft.asset, amount: draft.amount, fee: draft.fee,
            total: draft.total, expiresAt: draft.expiresAt, verificationMethods: [.pin], sealingPublicKey: [1, 2])
        let step = machine.step(.preparing(Fixture.request), .prepareResponse(.drafted(badKey)))
        #expect(step == Step(state: .failed(.invalidDraft, nil), effects: []))
    }

    @Test("A refused prepare fails with the service's reason")
    func prepareRefused() {
        let step = machine.step(.preparing(Fixture.request), .prepareResponse(.failed(.recipientUnknown)))
        #expect(step == Step(state: .failed(.recipientUnknown, nil), effects: []))
    }

    @Test("A prepare lost in transport fails as unreachable")
    func prepareUnreachable() {
        let step = machine.step(.preparing(Fixture.request), .prepareResponse(.transportError(.connectionReset)))
        #expect(step == Step(state: .failed(.serviceUnreachable(.connectionReset), nil), effects: []))
    }

    @Test("Cancelling while preparing cancels the request")
    func cancelPreparing() {
        let step = machine.step(.preparing(Fixture.request), .cancelled)
        #expect(step == Step(state: .cancelled, effects: [.cancel(TransferMachine.Keys.prepare)]))
    }

    @Test("Cancelling a fresh transfer ends it")
    func cancelIdle() {
        #expect(machine.step(.idle, .cancelled) == Step(state: .cancelled, effects: []))
    }

    // MARK: Drafted

    @Test("Confirming with a PIN seals it before anything else")
    func confirmWithPIN() {
        let step = machine.step(drafted, .confirmRequested(.pin(Fixture.pin), commandID: Fixture.command(1)))
        #expect(
            step
                == Step(
                    state: .verifying(Fixture.attempt()),
                    effects: [.sealVerification(.pin(Fixture.pin), context: Fixture.context())]))
    }

    @Test("A malformed PIN stays drafted without spending the command ID")
    func malformedPIN() {
        let step = machine.step(drafted, .confirmRequested(.pin(Secret("12a")), commandID: Fixture.command(1)))
        let expected = DraftedTransfer(draft: Fixture.draft(), rejection: .verification(.malformedPIN))
        #expect(step == Step(state: .drafted(expected), effects: [.scheduleDraftExpiry(at: Fixture.expiry)]))
    }

    @Test("Biometrics are refused when no verifier is present, even if the service offers them")
    func biometricWithoutVerifier() {
        let state = TransferMachine.State.drafted(DraftedTransfer(draft: Fixture.draft(methods: [.pin, .biometric])))
        let step = machine.step(state, .confirmRequested(.biometric, commandID: Fixture.command(1)))
        let expected = DraftedTransfer(
            draft: Fixture.draft(methods: [.pin, .biometric]), rejection: .verification(.methodNotOffered))
        #expect(step == Step(state: .drafted(expected), effects: [.scheduleDraftExpiry(at: Fixture.expiry)]))
    }

    @Test("Biometrics are refused when the service does not advertise them")
    func biometricNotAdvertised() {
        let step = Fixture.biometricMachine.step(drafted, .confirmRequested(.biometric, commandID: Fixture.command(1)))
        let expected = DraftedTransfer(draft: Fixture.draft(), rejection: .verification(.methodNotOffered))
        #expect(step == Step(state: .drafted(expected), effects: [.scheduleDraftExpiry(at: Fixture.expiry)]))
    }

    @Test("Biometrics are used when advertised and a verifier is present")
    func biometricOffered() {
        let draft = Fixture.draft(methods: [.pin, .biometric])
        let step = Fixture.biometricMachine.step(
            .drafted(DraftedTransfer(draft: draft)), .confirmRequested(.biometric, commandID: Fixture.command(1)))
        let attempt = ConfirmAttempt(draft: draft, commandID: Fixture.command(1))
        #expect(
            step
                == Step(
                    state: .verifying(attempt),
                    effects: [.sealVerification(.biometric, context: attempt.sealingContext)]))
        #expect(Fixture.biometricMachine.offeredMethods(for: draft) == [.pin, .biometric])
        #expect(machine.offeredMethods(for: draft) == [.pin])
    }

    @Test("A PIN is refused when the service only accepts biometrics")
    func pinNotAccepted() {
        let draft = Fixture.draft(methods: [.biometric])
        let step = Fixture.biometricMachine.step(
            .drafted(DraftedTransfer(draft: draft)), .confirmRequested(.pin(Fixture.pin), commandID: Fixture.command(1))
        )
        let expected = DraftedTransfer(draft: draft, rejection: .verification(.methodNotOffered))
        #expect(step == Step(state: .drafted(expected), effects: [.scheduleDraftExpiry(at: Fixture.expiry)]))
    }

    @Test("A spent command ID is refused, so no command is ever confirmed twice")
    func spentCommandID() {
        let state = DraftedTransfer(
            draft: Fixture.draft(), rejection: .wrongPIN(attemptsLeft: 2), spentCommandIDs: [Fixture.command(1)])
        let step = machine.step(.drafted(state), .confirmRequested(.pin(Fixture.pin), commandID: Fixture.command(1)))
        let expected = DraftedTransfer(
            draft: Fixture.draft(), rejection: .commandIDReused, spentCommandIDs: [Fixture.command(1)])
        #expect(step == Step(state: .drafted(expected), effects: [.scheduleDraftExpiry(at: Fixture.expiry)]))
    }

    @Test("A new command ID after a wrong PIN starts a new confirmation")
    func freshCommandAfterWrongPIN() {
        let state = DraftedTransfer(
            draft: Fixture.draft(), rejection: .wrongPIN(attemptsLeft: 2), spentCommandIDs: [Fixture.command(1)])
        let step = machine.step(.drafted(state), .confirmRequested(.pin(Fixture.pin), commandID: Fixture.command(2)))
        let attempt = Fixture.attempt(2, spent: [Fixture.command(1)])
        #expect(
            step
                == Step(
                    state: .verifying(attempt),
                    effects: [.sealVerification(.pin(Fixture.pin), context: Fixture.context(2))]))
    }

    @Test("An expired draft can no longer be confirmed")
    func draftExpires() {
        #expect(machine.step(drafted, .draftExpired) == Step(state: .expired(Fixture.draft()), effects: []))
    }

    @Test("Cancelling a draft ends the transfer")
    func cancelDraft() {
        #expect(machine.step(drafted, .cancelled) == Step(state: .cancelled, effects: []))
    }

    // MARK: Verifying and persisting

    @Test("A sealed confirmation is stored as pending before anything is sent")
    func sealedThenPersisted() {
        let step = machine.step(.verifying(Fixture.attempt()), .verificationSealed(.success(Fixture.sealed)))
        #expect(
            step
                == Step(
                    state: .persisting(Fixture.attempt(), Fixture.sealed),
                    effects: [.persistPendingCommand(Fixture.pending())]))
    }

    @Test("A failed seal returns to drafted and leaves the command ID unspent")
    func sealingFails() {
        let step = machine.step(.verifying(Fixture.attempt()), .verificationSealed(.failure(.biometricCancelled)))
        let expected = DraftedTransfer(draft: Fixture.draft(), rejection: .verification(.biometricCancelled))
        #expect(step == Step(state: .drafted(expected), effects: [.scheduleDraftExpiry(at: Fixture.expiry)]))
    }

    @Test("Cancelling while verifying cancels the prompt")
    func cancelVerifying() {
        let step = machine.step(.verifying(Fixture.attempt()), .cancelled)
        #expect(step == Step(state: .cancelled, effects: [.cancel(TransferMachine.Keys.verification)]))
    }

    @Test("A second confirm while verifying is ignored")
    func doubleTap() {
        let state = TransferMachine.State.verifying(Fixture.attempt())
        let step = machine.step(state, .confirmRequested(.pin(Fixture.pin), commandID: Fixture.command(2)))
        #expect(step == .ignored(state))
    }

    @Test("Once the command is stored, the confirm request leaves exactly once")
    func persistedThenSent() {
        let state = TransferMachine.State.persisting(Fixture.attempt(), Fixture.sealed)
        let step = machine.step(state, .commandPersisted)
        let send = TransferMachine.Effect.sendConfirm(
            commandID: Fixture.command(1), draftID: Fixture.draftID, verification: Fixture.sealed)
        #expect(step == Step(state: .confirming(Fixture.attempt()), effects: [send]))
        #expect(
            machine.step(.confirming(Fixture.attempt()), .commandPersisted) == .ignored(.confirming(Fixture.attempt())))
    }

    @Test("A store failure returns to drafted, clears the record and spends the ID")
    func persistenceFails() {
        let step = machine.step(.persisting(Fixture.attempt(), Fixture.sealed), .persistenceFailed)
        let expected = DraftedTransfer(
            draft: Fixture.draft(), rejection: .storeUnavailable, spentCommandIDs: [Fixture.command(1)])
        #expect(
            step
                == Step(
                    state: .drafted(expected),
                    effects: [.clearPendingCommand(Fixture.command(1)), .scheduleDraftExpiry(at: Fixture.expiry)]))
    }

    @Test("Cancelling while the command is being stored is too late and ignored")
    func cancelPersisting() {
        let state = TransferMachine.State.persisting(Fixture.attempt(), Fixture.sealed)
        #expect(machine.step(state, .cancelled) == .ignored(state))
    }
}
