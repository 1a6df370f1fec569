import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

/// The confirm request's answer, unknown outcomes, queries and restarts. Each test is one
/// scenario: state, event, whole next state, whole effect list.
@Suite("Transfer machine: answers, unknown outcomes and queries")
struct TransferResolutionTests {
    let machine = Fixture.machine
    let confirming = TransferMachine.State.confirming(Fixture.attempt())
    let clear = TransferMachine.Effect.clearPendingCommand(Fixture.command(1))

    // MARK: Confirming

    @Test("A settled answer settles and clears the pending command")
    func settled() throws {
        let store = MachineTestStore(machine, initial: confirming)
        try store.send(
            .confirmResponse(.settled(Fixture.transfer())), expecting: .settled(Fixture.transfer()), effects: [clear])
    }

    @Test("Wrong PIN returns to drafted with attempts left and the command spent")
    func wrongPIN() throws {
        let expected = DraftedTransfer(
            draft: Fixture.draft(), rejection: .wrongPIN(attemptsLeft: 2), spentCommandIDs: [Fixture.command(1)])
        let store = MachineTestStore(machine, initial: confirming)
        try store.send(
            .confirmResponse(.failed(.wrongPIN(attemptsLeft: 2))), expecting: .drafted(expected),
            effects: [clear, .scheduleDraftExpiry(at: Fixture.expiry)])
    }

    @Test("Wrong PIN keeps the IDs spent before")
    func wrongPINAgain() throws {
        let state = TransferMachine.State.confirming(Fixture.attempt(2, spent: [Fixture.command(1)]))
        let expected = DraftedTransfer(
            draft: Fixture.draft(), rejection: .wrongPIN(attemptsLeft: 1),
            spentCommandIDs: [Fixture.command(1), Fixture.command(2)])
        let store = MachineTestStore(machine, initial: state)
        try store.send(
            .confirmResponse(.failed(.wrongPIN(attemptsLeft: 1))), expecting: .drafted(expected),
            effects: [.clearPendingCommand(Fixture.command(2)), .scheduleDraftExpiry(at: Fixture.expiry)])
    }

    @Test("A rate-limited confirm returns to drafted, not unknown: nothing executed, the ID spent, the record cleared")
    func rateLimited() throws {
        let expected = DraftedTransfer(
            draft: Fixture.draft(), rejection: .rateLimited(retryAfter: .milliseconds(1_500)),
            spentCommandIDs: [Fixture.command(1)])
        let store = MachineTestStore(machine, initial: confirming)
        try store.send(
            .confirmResponse(.failed(.rateLimited(retryAfter: .milliseconds(1_500)))), expecting: .drafted(expected),
            effects: [clear, .scheduleDraftExpiry(at: Fixture.expiry)])
    }

    @Test("After a rate limit the draft confirms again under a new command ID")
    func confirmAfterRateLimit() throws {
        let state = DraftedTransfer(
            draft: Fixture.draft(), rejection: .rateLimited(retryAfter: nil), spentCommandIDs: [Fixture.command(1)])
        let store = MachineTestStore(machine, initial: .drafted(state))
        try store.send(
            .confirmRequested(.pin(Fixture.pin), commandID: Fixture.command(2)),
            expecting: .verifying(Fixture.attempt(2, spent: [Fixture.command(1)])),
            effects: [.sealVerification(.pin(Fixture.pin), context: Fixture.context(2))])
    }

    @Test("Locked out is final")
    func lockedOut() throws {
        let store = MachineTestStore(machine, initial: confirming)
        try store.send(
            .confirmResponse(.failed(.lockedOut)), expecting: .failed(.lockedOut, Fixture.summary), effects: [clear])
    }

    @Test("Insufficient funds fails with the transfer's figures")
    func insufficientFunds() throws {
        let store = MachineTestStore(machine, initial: confirming)
        try store.send(
            .confirmResponse(.failed(.insufficientFunds)), expecting: .failed(.insufficientFunds, Fixture.summary),
            effects: [clear])
    }

    @Test("A draft the service calls expired ends in expired")
    func expiredAtService() throws {
        let store = MachineTestStore(machine, initial: confirming)
        try store.send(.confirmResponse(.failed(.draftExpired)), expecting: .expired(Fixture.draft()), effects: [clear])
    }

    @Test(
        "Every ambiguous confirm outcome is unknown and schedules a query",
        arguments: [
            ConfirmResult.pending, .transportError(.timeout), .transportError(.connectionReset),
            .transportError(.serverError(status: 500)), .transportError(.serverError(status: 503)),
            .transportError(.responseDropped), .transportError(.unreachable),
        ])
    func ambiguous(result: ConfirmResult) throws {
        let store = MachineTestStore(machine, initial: confirming)
        try store.send(
            .confirmResponse(result), expecting: .unknown(Fixture.pending(), attempt: 0),
            effects: [.scheduleQuery(after: .seconds(1))])
    }

    @Test("Neither expiry nor cancel touches a sent confirmation")
    func confirmingIgnoresExpiryAndCancel() throws {
        try MachineTestStore(machine, initial: confirming).assertIgnored(.draftExpired)
        try MachineTestStore(machine, initial: confirming).assertIgnored(.cancelled)
    }

    // MARK: Unknown

    @Test("The query timer sends the query")
    func timerQueries() throws {
        let store = MachineTestStore(machine, initial: .unknown(Fixture.pending(), attempt: 0))
        try store.send(
            .timerFired(.query), expecting: .querying(Fixture.pending(), attempt: 1),
            effects: [.sendQuery(Fixture.command(1))])
    }

    @Test("Asking to query an unknown command queries at once")
    func queryNow() throws {
        let store = MachineTestStore(machine, initial: .unknown(Fixture.pending(), attempt: 3))
        try store.send(
            .queryRequested, expecting: .querying(Fixture.pending(), attempt: 4),
            effects: [.sendQuery(Fixture.command(1))])
    }

    @Test("An unknown command is never confirmed again, whatever the member does")
    func unknownNeverResends() throws {
        let state = TransferMachine.State.unknown(Fixture.pending(), attempt: 0)
        for event in [
            TransferMachine.Event.confirmRequested(.pin(Fixture.pin), commandID: Fixture.command(1)),
            .confirmRequested(.pin(Fixture.pin), commandID: Fixture.command(2)), .commandPersisted,
            .verificationSealed(.success(Fixture.sealed)), .cancelled, .draftExpired,
        ] {
            try MachineTestStore(machine, initial: state).assertIgnored(event)
        }
    }

    // MARK: Querying

    @Test("A query that finds the transfer settled settles")
    func querySettled() throws {
        let store = MachineTestStore(machine, initial: .querying(Fixture.pending(), attempt: 2))
        try store.send(
            .queryResponse(.settled(Fixture.transfer())), expecting: .settled(Fixture.transfer()), effects: [clear])
    }

    @Test("A query that finds the command refused fails")
    func queryFailed() throws {
        let store = MachineTestStore(machine, initial: .querying(Fixture.pending(), attempt: 1))
        try store.send(
            .queryResponse(.failed(.wrongPIN(attemptsLeft: 2))),
            expecting: .failed(.wrongPIN(attemptsLeft: 2), Fixture.summary), effects: [clear])
    }

    @Test("A command the service never received fails as not received")
    func queryUnknownCommand() throws {
        let store = MachineTestStore(machine, initial: .querying(Fixture.pending(), attempt: 1))
        try store.send(
            .queryResponse(.unknownCommand), expecting: .failed(.notReceived, Fixture.summary), effects: [clear])
    }

    @Test("A pending answer backs off and stays unknown")
    func queryPending() throws {
        let store = MachineTestStore(machine, initial: .querying(Fixture.pending(), attempt: 1))
        try store.send(
            .queryResponse(.pending), expecting: .unknown(Fixture.pending(), attempt: 1),
            effects: [.scheduleQuery(after: .seconds(2))])
    }

    @Test("A query lost in transport backs off up to the cap")
    func queryTransportError() throws {
        let store = MachineTestStore(machine, initial: .querying(Fixture.pending(), attempt: 9))
        try store.send(
            .queryResponse(.transportError(.timeout)), expecting: .unknown(Fixture.pending(), attempt: 9),
            effects: [.scheduleQuery(after: .seconds(60))])
    }

    @Test(
        "A rate-limited query stays unknown and waits the backoff, or the service's hint when longer",
        arguments: [
            (Duration?.none, 1, Duration.seconds(2)), (.milliseconds(500), 1, .seconds(2)),
            (.seconds(90), 1, .seconds(90)), (.seconds(30), 9, .seconds(60)),
            (.milliseconds(999_999_999), 1, .seconds(300)), (.milliseconds(-5), 1, .seconds(2)),
        ])
    func queryRateLimited(retryAfter: Duration?, attempt: Int, delay: Duration) throws {
        let store = MachineTestStore(machine, initial: .querying(Fixture.pending(), attempt: attempt))
        try store.send(
            .queryResponse(.rateLimited(retryAfter: retryAfter)),
            expecting: .unknown(Fixture.pending(), attempt: attempt), effects: [.scheduleQuery(after: delay)])
    }

    @Test("A second query request while one is in flight is ignored")
    func queryJoinsInFlight() throws {
        let state = TransferMachine.State.querying(Fixture.pending(), attempt: 1)
        try MachineTestStore(machine, initial: state).assertIgnored(.queryRequested)
        try MachineTestStore(machine, initial: state).assertIgnored(.timerFired(.query))
    }

    @Test("Backoff doubles from the initial delay and stops at the cap")
    func backoff() {
        // The delay after `n` unresolved queries is the backoff's delay before retry `n + 1`.
        let delays = (0...8).map { Fixture.backoff.delay(attempt: $0 + 1, jitter: 0.9) }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60, 60].map { Duration.seconds($0) })
        #expect(Fixture.backoff.delay(attempt: Int.max, jitter: 0.9) == .seconds(60))
        #expect(
            RetryBackoff(initialDelay: .zero, maximumDelay: .seconds(5), jitterRatio: 0).delay(
                attempt: Int.max, jitter: 0)
                == .zero)
        #expect(Fixture.backoff == .transferQuery)
    }

    // MARK: Restart

    @Test("A command restored after a restart is queried at once")
    func restored() throws {
        let store = MachineTestStore(machine, initial: .idle)
        try store.send(
            .restored(Fixture.pending()), expecting: .querying(Fixture.pending(), attempt: 1),
            effects: [.sendQuery(Fixture.command(1))])
        #expect(store.state.pendingCommand == Fixture.pending())
    }

    @Test("A restore is ignored once the host runs a transfer")
    func restoredLate() throws {
        let state = TransferMachine.State.drafted(DraftedTransfer(draft: Fixture.draft()))
        try MachineTestStore(machine, initial: state).assertIgnored(.restored(Fixture.pending()))
    }

    // MARK: Whole machine

    @Test("Final states ignore every event")
    func finalStates() throws {
        for state in Fixture.sampleStates where state.isFinal {
            for event in Fixture.sampleEvents {
                try MachineTestStore(machine, initial: state).assertIgnored(event)
            }
        }
    }

    @Test("Case name lists match the samples and are unique")
    func caseNames() {
        #expect(Set(Fixture.sampleStates.map(\.caseName)) == Set(TransferMachine.stateCaseNames))
        #expect(Set(Fixture.sampleEvents.map(\.caseName)) == Set(TransferMachine.eventCaseNames))
        #expect(Set(TransferMachine.stateCaseNames).count == TransferMachine.stateCaseNames.count)
        #expect(Set(TransferMachine.eventCaseNames).count == TransferMachine.eventCaseNames.count)
        for state in Fixture.sampleStates where state.caseName != "idle" && state.caseName != "cancelled" {
            #expect(caseLabel(of: state) == state.caseName)
        }
    }

    @Test("A planted PIN never reaches a description, a trace name or a dump")
    func pinRedacted() {
        let canary = "90210731"
        let pin = Secret(canary)
        let event = TransferMachine.Event.confirmRequested(.pin(pin), commandID: Fixture.command(1))
        let effect = TransferMachine.Effect.sealVerification(.pin(pin), context: Fixture.context())
        let sealed = SealedVerification(method: .pin, sealedBytes: Fixture.context().pinPayload(pin))
        let state = TransferMachine.State.persisting(Fixture.attempt(), sealed)
        var dumped = ""
        dump(event, to: &dumped)
        dump(effect, to: &dumped)
        dump(state, to: &dumped)
        let texts = [
            String(describing: event), String(reflecting: event), "\(effect)", String(reflecting: effect),
            String(describing: state), String(reflecting: state), event.caseName, effect.caseName, dumped,
        ]
        for text in texts { #expect(!text.contains(canary)) }
    }

    @Test("The sealed payload binds the PIN to the command and the draft")
    func pinPayload() {
        let payload = Fixture.context().pinPayload(Fixture.pin).exposedValue
        let expected = "symorva-wallet-confirm/1\n00000000-0000-4000-8000-000000000001\ndraft-1\n4321"
        #expect(payload == Array(expected.utf8))
    }

    @Test("Command IDs accept canonical UUIDs only, lowercased")
    func commandIDs() {
        #expect(
            CommandID(uuidString: "8D0F1C52-2F7A-4C1E-9A43-5B6C7D8E9F01")?.rawValue
                == "8d0f1c52-2f7a-4c1e-9a43-5b6c7d8e9f01")
        #expect(CommandID(uuidString: "8d0f1c522f7a4c1e9a435b6c7d8e9f01") == nil)
        #expect(CommandID(uuidString: "8d0f1c52-2f7a-4c1e-9a43-5b6c7d8e9f0g") == nil)
        #expect(CommandID(uuidString: "") == nil)
    }
}
