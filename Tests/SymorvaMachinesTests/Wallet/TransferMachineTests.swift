import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

/// Preparing, the draft, and everything that happens on the device before the confirm request
/// leaves. Each test is one scenario: state, event, whole next state, whole effect list.
@Suite("Transfer machine: preparing and confirming on the device")
struct TransferMachineTests {
    let machine = Fixture.machine
    let drafted = TransferMachine.State.drafted(DraftedTransfer(draft: Fixture.draft()))

    // MARK: Preparing

    @Test("A prepare request sends it to the service")
    func prepareRequested() throws {
        let store = MachineTestStore(machine, initial: .idle)
        try store.send(
            .prepareRequested(Fixture.request), expecting: .preparing(Fixture.request),
            effects: [.sendPrepare(Fixture.request)])
    }

    @Test("A consistent draft is shown and its expiry armed")
    func draftShown() throws {
        let store = MachineTestStore(machine, initial: .preparing(Fixture.request))
        try store.send(
            .prepareResponse(.drafted(Fixture.draft())), expecting: drafted,
            effects: [.scheduleDraftExpiry(at: Fixture.expiry)])
    }

    @Test("A draft whose total is not amount plus fee is refused, never shown")
    func draftThatDoesNotAddUp() throws {
        let store = MachineTestStore(machine, initial: .preparing(Fixture.request))
        try store.send(
            .prepareResponse(.drafted(Fixture.draft(total: "25.00"))), expecting: .failed(.invalidDraft, nil))
    }

    @Test("A draft for another recipient is refused")
    func draftForSomeoneElse() throws {
        let other = TransferRequest(
            recipient: UserID("@eve:example.org"), asset: Fixture.euro, amount: Fixture.amount("25"))
        let store = MachineTestStore(machine, initial: .preparing(other))
        try store.send(.prepareResponse(.drafted(Fixture.draft())), expecting: .failed(.invalidDraft, nil))
    }

    @Test("A draft with a malformed sealing key is refused")
    func draftWithBadKey() throws {
        let draft = Fixture.draft()
        let badKey = TransferDraft(
            id: draft.id, recipient: draft.recipient, asset: draft.asset, amount: draft.amount, fee: draft.fee,
            total: draft.total, expiresAt: draft.expiresAt, verificationMethods: [.pin], sealingPublicKey: [1, 2])
        let store = MachineTestStore(machine, initial: .preparing(Fixture.request))
        try store.send(.prepareResponse(.drafted(badKey)), expecting: .failed(.invalidDraft, nil))
    }

    @Test("A refused prepare fails with the service's reason")
    func prepareRefused() throws {
        let store = MachineTestStore(machine, initial: .preparing(Fixture.request))
        try store.send(.prepareResponse(.failed(.recipientUnknown)), expecting: .failed(.recipientUnknown, nil))
    }

    @Test("A prepare lost in transport fails as unreachable")
    func prepareUnreachable() throws {
        let store = MachineTestStore(machine, initial: .preparing(Fixture.request))
        try store.send(
            .prepareResponse(.transportError(.connectionReset)),
            expecting: .failed(.serviceUnreachable(.connectionReset), nil))
    }

    @Test("Cancelling while preparing cancels the request")
    func cancelPreparing() throws {
        let store = MachineTestStore(machine, initial: .preparing(Fixture.request))
        try store.send(.cancelled, expecting: .cancelled, effects: [.cancel(TransferMachine.Keys.prepare)])
    }

    @Test("Cancelling a fresh transfer ends it")
    func cancelIdle() throws {
        try MachineTestStore(machine, initial: .idle).send(.cancelled, expecting: .cancelled)
    }

    // MARK: Drafted

    @Test("Confirming with a PIN seals it before anything else")
    func confirmWithPIN() throws {
        let store = MachineTestStore(machine, initial: drafted)
        try store.send(
            .confirmRequested(.pin(Fixture.pin), commandID: Fixture.command(1)),
            expecting: .verifying(Fixture.attempt()),
            effects: [.sealVerification(.pin(Fixture.pin), context: Fixture.context())])
    }

    @Test("A malformed PIN stays drafted without spending the command ID")
    func malformedPIN() throws {
        let expected = DraftedTransfer(draft: Fixture.draft(), rejection: .verification(.malformedPIN))
        let store = MachineTestStore(machine, initial: drafted)
        try store.send(
            .confirmRequested(.pin(Secret("12a")), commandID: Fixture.command(1)), expecting: .drafted(expected),
            effects: [.scheduleDraftExpiry(at: Fixture.expiry)])
    }

    @Test("Biometrics are refused when no verifier is present, even if the service offers them")
    func biometricWithoutVerifier() throws {
        let state = TransferMachine.State.drafted(DraftedTransfer(draft: Fixture.draft(methods: [.pin, .biometric])))
        let expected = DraftedTransfer(
            draft: Fixture.draft(methods: [.pin, .biometric]), rejection: .verification(.methodNotOffered))
        let store = MachineTestStore(machine, initial: state)
        try store.send(
            .confirmRequested(.biometric, commandID: Fixture.command(1)), expecting: .drafted(expected),
            effects: [.scheduleDraftExpiry(at: Fixture.expiry)])
    }

    @Test("Biometrics are refused when the service does not advertise them")
    func biometricNotAdvertised() throws {
        let expected = DraftedTransfer(draft: Fixture.draft(), rejection: .verification(.methodNotOffered))
        let store = MachineTestStore(Fixture.biometricMachine, initial: drafted)
        try store.send(
            .confirmRequested(.biometric, commandID: Fixture.command(1)), expecting: .drafted(expected),
            effects: [.scheduleDraftExpiry(at: Fixture.expiry)])
    }

    @Test("Biometrics are used when advertised and a verifier is present")
    func biometricOffered() throws {
        let draft = Fixture.draft(methods: [.pin, .biometric])
        let attempt = ConfirmAttempt(draft: draft, commandID: Fixture.command(1))
        let store = MachineTestStore(Fixture.biometricMachine, initial: .drafted(DraftedTransfer(draft: draft)))
        try store.send(
            .confirmRequested(.biometric, commandID: Fixture.command(1)), expecting: .verifying(attempt),
            effects: [.sealVerification(.biometric, context: attempt.sealingContext)])
        #expect(Fixture.biometricMachine.offeredMethods(for: draft) == [.pin, .biometric])
        #expect(machine.offeredMethods(for: draft) == [.pin])
    }

    @Test("A PIN is refused when the service only accepts biometrics")
    func pinNotAccepted() throws {
        let draft = Fixture.draft(methods: [.biometric])
        let expected = DraftedTransfer(draft: draft, rejection: .verification(.methodNotOffered))
        let store = MachineTestStore(Fixture.biometricMachine, initial: .drafted(DraftedTransfer(draft: draft)))
        try store.send(
            .confirmRequested(.pin(Fixture.pin), commandID: Fixture.command(1)), expecting: .drafted(expected),
            effects: [.scheduleDraftExpiry(at: Fixture.expiry)])
    }

    @Test("A spent command ID is refused, so no command is ever confirmed twice")
    func spentCommandID() throws {
        let state = DraftedTransfer(
            draft: Fixture.draft(), rejection: .wrongPIN(attemptsLeft: 2), spentCommandIDs: [Fixture.command(1)])
        let expected = DraftedTransfer(
            draft: Fixture.draft(), rejection: .commandIDReused, spentCommandIDs: [Fixture.command(1)])
        let store = MachineTestStore(machine, initial: .drafted(state))
        try store.send(
            .confirmRequested(.pin(Fixture.pin), commandID: Fixture.command(1)), expecting: .drafted(expected),
            effects: [.scheduleDraftExpiry(at: Fixture.expiry)])
    }

    @Test("A new command ID after a wrong PIN starts a new confirmation")
    func freshCommandAfterWrongPIN() throws {
        let state = DraftedTransfer(
            draft: Fixture.draft(), rejection: .wrongPIN(attemptsLeft: 2), spentCommandIDs: [Fixture.command(1)])
        let attempt = Fixture.attempt(2, spent: [Fixture.command(1)])
        let store = MachineTestStore(machine, initial: .drafted(state))
        try store.send(
            .confirmRequested(.pin(Fixture.pin), commandID: Fixture.command(2)), expecting: .verifying(attempt),
            effects: [.sealVerification(.pin(Fixture.pin), context: Fixture.context(2))])
    }

    @Test("An expired draft can no longer be confirmed")
    func draftExpires() throws {
        try MachineTestStore(machine, initial: drafted).send(.draftExpired, expecting: .expired(Fixture.draft()))
    }

    @Test("Cancelling a draft ends the transfer")
    func cancelDraft() throws {
        try MachineTestStore(machine, initial: drafted).send(.cancelled, expecting: .cancelled)
    }

    // MARK: Verifying and persisting

    @Test("A sealed confirmation is stored as pending before anything is sent")
    func sealedThenPersisted() throws {
        let store = MachineTestStore(machine, initial: .verifying(Fixture.attempt()))
        try store.send(
            .verificationSealed(.success(Fixture.sealed)), expecting: .persisting(Fixture.attempt(), Fixture.sealed),
            effects: [.persistPendingCommand(Fixture.pending())])
    }

    @Test("A failed seal returns to drafted and leaves the command ID unspent")
    func sealingFails() throws {
        let expected = DraftedTransfer(draft: Fixture.draft(), rejection: .verification(.biometricCancelled))
        let store = MachineTestStore(machine, initial: .verifying(Fixture.attempt()))
        try store.send(
            .verificationSealed(.failure(.biometricCancelled)), expecting: .drafted(expected),
            effects: [.scheduleDraftExpiry(at: Fixture.expiry)])
    }

    @Test("Cancelling while verifying cancels the prompt")
    func cancelVerifying() throws {
        let store = MachineTestStore(machine, initial: .verifying(Fixture.attempt()))
        try store.send(.cancelled, expecting: .cancelled, effects: [.cancel(TransferMachine.Keys.verification)])
    }

    @Test("A second confirm while verifying is ignored")
    func doubleTap() throws {
        let state = TransferMachine.State.verifying(Fixture.attempt())
        let store = MachineTestStore(machine, initial: state)
        try store.assertIgnored(.confirmRequested(.pin(Fixture.pin), commandID: Fixture.command(2)))
    }

    @Test("Once the command is stored, the confirm request leaves exactly once")
    func persistedThenSent() throws {
        let state = TransferMachine.State.persisting(Fixture.attempt(), Fixture.sealed)
        let send = TransferMachine.Effect.sendConfirm(
            commandID: Fixture.command(1), draftID: Fixture.draftID, verification: Fixture.sealed)
        let store = MachineTestStore(machine, initial: state)
        try store.send(.commandPersisted, expecting: .confirming(Fixture.attempt()), effects: [send])
        try MachineTestStore(machine, initial: .confirming(Fixture.attempt())).assertIgnored(.commandPersisted)
    }

    @Test("A store failure returns to drafted, clears the record and spends the ID")
    func persistenceFails() throws {
        let expected = DraftedTransfer(
            draft: Fixture.draft(), rejection: .storeUnavailable, spentCommandIDs: [Fixture.command(1)])
        let store = MachineTestStore(machine, initial: .persisting(Fixture.attempt(), Fixture.sealed))
        try store.send(
            .persistenceFailed, expecting: .drafted(expected),
            effects: [.clearPendingCommand(Fixture.command(1)), .scheduleDraftExpiry(at: Fixture.expiry)])
    }

    @Test("Cancelling while the command is being stored is too late and ignored")
    func cancelPersisting() throws {
        let state = TransferMachine.State.persisting(Fixture.attempt(), Fixture.sealed)
        try MachineTestStore(machine, initial: state).assertIgnored(.cancelled)
    }
}
