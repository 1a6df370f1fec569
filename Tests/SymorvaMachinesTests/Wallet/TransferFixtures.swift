import SymorvaMachines
import SymorvaRuntime

/// Values shared by the wallet tests: one asset, one request, one draft, and sample states and
/// events that cover every case (and every payload that changes the outcome).
enum Fixture {
    static let euro = Asset(code: "EUR", precision: 2)
    static let bob = UserID("@bob:example.org")
    static let serverKey = [UInt8](repeating: 7, count: 32)
    static let draftID = DraftID("draft-1")
    static let expiry = Duration.seconds(300)
    static let backoff = RetryBackoff(initialDelay: .seconds(1), maximumDelay: .seconds(60), jitterRatio: 0)

    static let machine = TransferMachine(configuration: .init(biometricVerifierPresent: false, queryBackoff: backoff))
    static let biometricMachine = TransferMachine(
        configuration: .init(biometricVerifierPresent: true, queryBackoff: backoff))

    static func amount(_ text: String) -> Amount { try! euro.amount(text) }

    static let request = TransferRequest(recipient: bob, asset: euro, amount: amount("25.00"))

    static func draft(
        methods: Set<VerificationMethod> = [.pin], total: String = "25.10", id: DraftID = draftID
    ) -> TransferDraft {
        TransferDraft(
            id: id, recipient: bob, asset: euro, amount: amount("25.00"), fee: amount("0.10"), total: amount(total),
            expiresAt: expiry, verificationMethods: methods, sealingPublicKey: serverKey)
    }

    static let summary = draft().summary

    /// A distinct, valid command ID per number.
    static func command(_ number: Int) -> CommandID {
        let hex = String(number, radix: 16)
        let padded = String(repeating: "0", count: 12 - hex.count) + hex
        return CommandID(uuidString: "00000000-0000-4000-8000-\(padded)")!
    }

    static let pin = Secret("4321")
    static let sealed = SealedVerification(method: .pin, sealedBytes: Secret([1, 2, 3]))

    static func attempt(_ number: Int = 1, spent: [CommandID] = []) -> ConfirmAttempt {
        ConfirmAttempt(draft: draft(), commandID: command(number), spentCommandIDs: spent)
    }

    static func pending(_ number: Int = 1) -> PendingCommand {
        PendingCommand(commandID: command(number), summary: summary)
    }

    static func transfer(_ number: Int = 1) -> Transfer {
        Transfer(id: TransferID("tx-\(number)"), commandID: command(number), summary: summary)
    }

    static func context(_ number: Int = 1) -> SealingContext {
        SealingContext(commandID: command(number), draftID: draftID, serverPublicKey: serverKey)
    }

    // MARK: - Samples for the chart and the random walks

    /// At least one value of every state case, with the payloads the transitions look at.
    static let sampleStates: [TransferMachine.State] = [
        .idle,
        .preparing(request),
        .drafted(DraftedTransfer(draft: draft())),
        .drafted(DraftedTransfer(draft: draft(), rejection: .wrongPIN(attemptsLeft: 2), spentCommandIDs: [command(9)])),
        .drafted(
            DraftedTransfer(
                draft: draft(), rejection: .rateLimited(retryAfter: .seconds(3)), spentCommandIDs: [command(8)])),
        .verifying(attempt()),
        .persisting(attempt(), sealed),
        .confirming(attempt()),
        .unknown(pending(), attempt: 0),
        .unknown(pending(), attempt: 7),
        .querying(pending(), attempt: 1),
        .settled(transfer()),
        .failed(.insufficientFunds, summary),
        .failed(.invalidDraft, nil),
        .expired(draft()),
        .cancelled,
    ]

    /// At least one value of every event case, with every payload that changes the outcome.
    static let sampleEvents: [TransferMachine.Event] = [
        .prepareRequested(request),
        .prepareResponse(.drafted(draft())),
        .prepareResponse(.drafted(draft(total: "25.00"))),
        .prepareResponse(.failed(.recipientUnknown)),
        .prepareResponse(.transportError(.timeout)),
        .confirmRequested(.pin(pin), commandID: command(1)),
        .confirmRequested(.pin(pin), commandID: command(9)),
        .confirmRequested(.pin(Secret("12")), commandID: command(2)),
        .confirmRequested(.biometric, commandID: command(3)),
        .verificationSealed(.success(sealed)),
        .verificationSealed(.failure(.biometricCancelled)),
        .commandPersisted,
        .persistenceFailed,
        .confirmResponse(.settled(transfer())),
        .confirmResponse(.failed(.wrongPIN(attemptsLeft: 2))),
        .confirmResponse(.failed(.insufficientFunds)),
        .confirmResponse(.failed(.draftExpired)),
        .confirmResponse(.failed(.rateLimited(retryAfter: .seconds(3)))),
        .confirmResponse(.failed(.rateLimited(retryAfter: nil))),
        .confirmResponse(.pending),
        .confirmResponse(.transportError(.timeout)),
        .confirmResponse(.transportError(.connectionReset)),
        .confirmResponse(.transportError(.serverError(status: 503))),
        .confirmResponse(.transportError(.responseDropped)),
        .queryRequested,
        .queryResponse(.settled(transfer())),
        .queryResponse(.failed(.insufficientFunds)),
        .queryResponse(.pending),
        .queryResponse(.unknownCommand),
        .queryResponse(.transportError(.serverError(status: 500))),
        .queryResponse(.rateLimited(retryAfter: .seconds(90))),
        .queryResponse(.rateLimited(retryAfter: nil)),
        .timerFired(.query),
        .draftExpired,
        .restored(pending()),
        .cancelled,
    ]
}
