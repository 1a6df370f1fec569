import SymorvaRuntime

/// One wallet transfer, from the member's request to a known outcome.
///
/// ```
/// idle → preparing → drafted → verifying → persisting → confirming → settled | failed | expired
///                       ↑            │            │              │  (wrong PIN, rate limited → drafted)
///                       └────────────┴────────────┘              └→ unknown ⇄ querying → settled | failed
/// ```
///
/// The rules that make money safe live here and nowhere else:
/// - The confirm request for a command leaves at most once. A command ID is written to the
///   account's store (``Effect/persistPendingCommand(_:)``) before ``Effect/sendConfirm(commandID:draftID:verification:)``
///   is emitted, and nothing can lead back from ``State/unknown(_:attempt:)`` or
///   ``State/querying(_:attempt:)`` to sending a confirmation: only queries.
/// - Every ambiguous confirm outcome (timeout, reset, 5xx, dropped answer, "accepted") is
///   ``State/unknown(_:attempt:)``, resolved by querying the command ID with capped
///   exponential backoff. After a restart, each stored pending command is ``Event/restored(_:)``
///   and queried at once.
/// - The PIN exists only in ``Event/confirmRequested(_:commandID:)`` and
///   ``Effect/sealVerification(_:context:)``; states hold the sealed bytes at most, and only
///   until the confirm request is built.
public struct TransferMachine: StateMachine {
    public static let name = "Transfer"

    /// What the machine needs to know about its environment.
    public struct Configuration: Sendable, Hashable {
        /// Whether a `BiometricVerifier` adapter is present on this platform (never on Linux).
        public var biometricVerifierPresent: Bool
        /// How long to wait between queries of an unknown command. The machine draws no jitter:
        /// give it a backoff without (``/SymorvaMachines/SymorvaRuntime/RetryBackoff/transferQuery``'s `jitterRatio` is 0); with
        /// one, it waits the shortest delay.
        public var queryBackoff: RetryBackoff

        /// Creates a configuration.
        public init(biometricVerifierPresent: Bool = false, queryBackoff: RetryBackoff = .transferQuery) {
            self.biometricVerifierPresent = biometricVerifierPresent
            self.queryBackoff = queryBackoff
        }
    }

    /// The machine's configuration.
    public let configuration: Configuration

    /// Creates the machine.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The verification methods the member may be offered for `draft`: those the service
    /// advertises, minus biometrics when no verifier adapter is present.
    public func offeredMethods(for draft: TransferDraft) -> Set<VerificationMethod> {
        var methods = draft.verificationMethods
        if !configuration.biometricVerifierPresent { methods.remove(.biometric) }
        return methods
    }

    /// Keys of the machine's cancellable effects.
    public enum Keys {
        /// The prepare request, cancelled when the member cancels.
        public static let prepare = EffectKey("wallet.request.prepare")
        /// The sealing or biometric prompt, cancelled when the member cancels.
        public static let verification = EffectKey("wallet.verification")
        /// The query in flight; a new query replaces it.
        public static let query = EffectKey("wallet.request.query")
    }

    // MARK: - State

    /// Where the transfer is.
    public enum State: Sendable, Equatable, CaseNamed {
        /// A fresh transfer host: nothing asked yet. A new transfer gets
        /// ``Event/prepareRequested(_:)``; a host rebuilt after a restart gets ``Event/restored(_:)``.
        case idle
        /// The service is pricing the request.
        case preparing(TransferRequest)
        /// The member sees the draft and may confirm it. Carries why the last confirmation did
        /// not go through, if one did not, and the command IDs already spent on this draft.
        case drafted(DraftedTransfer)
        /// The device is sealing the PIN or asking the biometric verifier. Nothing is stored or
        /// sent yet.
        case verifying(ConfirmAttempt)
        /// The command ID is being written to the account's store; the sealed confirmation waits
        /// here and is dropped as soon as the request is built.
        case persisting(ConfirmAttempt, SealedVerification)
        /// The confirm request has left (or is leaving). Only its answer moves on from here.
        case confirming(ConfirmAttempt)
        /// The command's outcome is not known; a query is scheduled. `attempt` counts the
        /// queries already answered without a resolution.
        case unknown(PendingCommand, attempt: Int)
        /// A query for the command is in flight; `attempt` is its number, from 1.
        case querying(PendingCommand, attempt: Int)
        /// The money moved.
        case settled(Transfer)
        /// The transfer did not happen; the summary is there when the figures are known.
        case failed(TransferFailure, TransferSummary?)
        /// The draft expired before a confirmation was sent.
        case expired(TransferDraft)
        /// The member abandoned the transfer before anything was sent.
        case cancelled

        /// Every state case name, in declaration order: the chart's state ids.
        public static let caseNames = [
            "idle", "preparing", "drafted", "verifying", "persisting", "confirming", "unknown", "querying",
            "settled", "failed", "expired", "cancelled",
        ]

        public var caseNameLiteral: StaticString? {
            switch self {
            case .idle: "idle"
            case .preparing: "preparing"
            case .drafted: "drafted"
            case .verifying: "verifying"
            case .persisting: "persisting"
            case .confirming: "confirming"
            case .unknown: "unknown"
            case .querying: "querying"
            case .settled: "settled"
            case .failed: "failed"
            case .expired: "expired"
            case .cancelled: "cancelled"
            }
        }

        /// The command whose outcome is being found out, in ``unknown(_:attempt:)`` and
        /// ``querying(_:attempt:)``: what the product layer shows as an unknown outcome.
        public var pendingCommand: PendingCommand? {
            switch self {
            case .unknown(let pending, _), .querying(let pending, _): pending
            default: nil
            }
        }

        /// Whether the transfer has reached an outcome that no event changes.
        public var isFinal: Bool {
            switch self {
            case .settled, .failed, .expired, .cancelled: true
            default: false
            }
        }
    }

    // MARK: - Event

    /// What happened.
    public enum Event: Sendable, Equatable, CaseNamed, CustomStringConvertible {
        /// The member asked to send money.
        case prepareRequested(TransferRequest)
        /// The service answered the prepare request.
        case prepareResponse(PrepareResult)
        /// The member confirmed the draft. `commandID` is fresh, generated by the product layer.
        case confirmRequested(Verification, commandID: CommandID)
        /// The sealing effect finished: sealed bytes, or why there are none.
        case verificationSealed(Result<SealedVerification, VerificationError>)
        /// The command ID is durably in the account's store.
        case commandPersisted
        /// The command ID could not be written; nothing was sent.
        case persistenceFailed
        /// The confirm request's answer, or what the transport made of it.
        case confirmResponse(ConfirmResult)
        /// The member (or the product layer) asked to query an unknown command now.
        case queryRequested
        /// The query's answer, or what the transport made of it.
        case queryResponse(QueryResult)
        /// A timer set by the machine fired.
        case timerFired(TransferTimer)
        /// The draft's expiry instant passed.
        case draftExpired
        /// After a restart: this command was in the store, its outcome unknown.
        case restored(PendingCommand)
        /// The member abandoned the transfer.
        case cancelled

        /// Every event case name, in declaration order: the chart's event names.
        public static let caseNames = [
            "prepareRequested", "prepareResponse", "confirmRequested", "verificationSealed", "commandPersisted",
            "persistenceFailed", "confirmResponse", "queryRequested", "queryResponse", "timerFired", "draftExpired",
            "restored", "cancelled",
        ]

        public var caseNameLiteral: StaticString? {
            switch self {
            case .prepareRequested: "prepareRequested"
            case .prepareResponse: "prepareResponse"
            case .confirmRequested: "confirmRequested"
            case .verificationSealed: "verificationSealed"
            case .commandPersisted: "commandPersisted"
            case .persistenceFailed: "persistenceFailed"
            case .confirmResponse: "confirmResponse"
            case .queryRequested: "queryRequested"
            case .queryResponse: "queryResponse"
            case .timerFired: "timerFired"
            case .draftExpired: "draftExpired"
            case .restored: "restored"
            case .cancelled: "cancelled"
            }
        }

        /// The case name only: events may carry a PIN (in a ``/SymorvaRuntime/Secret``) and money figures.
        public var description: String { caseName }
    }

    /// The machine's named timers.
    public enum TransferTimer: Sendable, Hashable {
        /// Time to query an unknown command again.
        case query
    }

    // MARK: - Effect

    /// What the interpreter must do.
    public enum Effect: MachineEffect, Equatable, CustomStringConvertible {
        /// Ask the service to price the request; answers ``Event/prepareResponse(_:)``.
        case sendPrepare(TransferRequest)
        /// Fire ``Event/draftExpired`` at this runtime-clock instant (at once if it has passed).
        /// The state timeout of ``State/drafted(_:)``: leaving the state cancels it.
        case scheduleDraftExpiry(at: Duration)
        /// Seal the PIN (or run the biometric verifier and seal its assertion) for `context`;
        /// answers ``Event/verificationSealed(_:)``. The only place a PIN travels.
        case sealVerification(Verification, context: SealingContext)
        /// Write the pending command to the account's store; answers ``Event/commandPersisted``
        /// or ``Event/persistenceFailed``. Always before the confirm request.
        case persistPendingCommand(PendingCommand)
        /// Send the confirm request; answers ``Event/confirmResponse(_:)``. Never cancelled,
        /// never retried by the interpreter.
        case sendConfirm(commandID: CommandID, draftID: DraftID, verification: SealedVerification)
        /// Query the command's outcome; answers ``Event/queryResponse(_:)``.
        case sendQuery(CommandID)
        /// Fire ``Event/timerFired(_:)`` with ``TransferTimer/query`` after this delay.
        /// The state timeout of ``State/unknown(_:attempt:)``.
        case scheduleQuery(after: Duration)
        /// Remove the command from the account's store: it has a definitive answer.
        case clearPendingCommand(CommandID)
        /// Cancel the effect running under this key.
        case cancel(EffectKey)

        public var directive: EffectDirective {
            switch self {
            case .sendPrepare: .keyed(Keys.prepare)
            case .sealVerification: .keyed(Keys.verification)
            case .sendQuery: .keyed(Keys.query)
            case .scheduleDraftExpiry(let deadline): .timer(.stateTimeout, .at(deadline))
            case .scheduleQuery(let delay): .timer(.stateTimeout, .after(delay))
            case .persistPendingCommand, .sendConfirm, .clearPendingCommand: .perform
            case .cancel(let key): .cancel(key)
            }
        }

        /// Every effect case name, in declaration order.
        public static let caseNames = [
            "sendPrepare", "scheduleDraftExpiry", "sealVerification", "persistPendingCommand", "sendConfirm",
            "sendQuery", "scheduleQuery", "clearPendingCommand", "cancel",
        ]

        public var caseNameLiteral: StaticString? {
            switch self {
            case .sendPrepare: "sendPrepare"
            case .scheduleDraftExpiry: "scheduleDraftExpiry"
            case .sealVerification: "sealVerification"
            case .persistPendingCommand: "persistPendingCommand"
            case .sendConfirm: "sendConfirm"
            case .sendQuery: "sendQuery"
            case .scheduleQuery: "scheduleQuery"
            case .clearPendingCommand: "clearPendingCommand"
            case .cancel: "cancel"
            }
        }

        /// The case name only: effects may carry a PIN (in a ``/SymorvaRuntime/Secret``) and money figures.
        public var description: String { caseName }
    }

    /// Every state case name: the chart checker compares these with its samples and the chart.
    public static var stateCaseNames: [String] { State.caseNames }
    /// Every event case name: the chart checker compares these with its samples and the chart.
    public static var eventCaseNames: [String] { Event.caseNames }
}

extension TransferMachine: ChartedMachine {}

extension TransferMachine.State: CaseNameListing {
    public static var allCaseNames: [String] { caseNames }
}

extension TransferMachine.Event: CaseNameListing {
    public static var allCaseNames: [String] { caseNames }
}

/// A draft the member may confirm, with what happened to earlier confirmations of it.
public struct DraftedTransfer: Sendable, Equatable {
    /// The draft.
    public let draft: TransferDraft
    /// Why the last confirmation did not go through (a wrong PIN, a refused method), if one did not.
    public let rejection: TransferFailure?
    /// Command IDs already used for this draft. Each has an answer (or may have been stored),
    /// so the machine refuses to send any of them again.
    public let spentCommandIDs: [CommandID]

    /// Creates a drafted transfer.
    public init(draft: TransferDraft, rejection: TransferFailure? = nil, spentCommandIDs: [CommandID] = []) {
        self.draft = draft
        self.rejection = rejection
        self.spentCommandIDs = spentCommandIDs
    }
}

/// One confirmation of a draft under one command ID, from the member's PIN to the answer.
public struct ConfirmAttempt: Sendable, Equatable {
    /// The draft being confirmed.
    public let draft: TransferDraft
    /// This confirmation's command ID.
    public let commandID: CommandID
    /// Command IDs spent on this draft before this one.
    public let spentCommandIDs: [CommandID]

    /// Creates an attempt.
    public init(draft: TransferDraft, commandID: CommandID, spentCommandIDs: [CommandID] = []) {
        self.draft = draft
        self.commandID = commandID
        self.spentCommandIDs = spentCommandIDs
    }

    /// The command as the store keeps it.
    public var pendingCommand: PendingCommand { PendingCommand(commandID: commandID, summary: draft.summary) }

    /// What the sealing binds to.
    public var sealingContext: SealingContext {
        SealingContext(commandID: commandID, draftID: draft.id, serverPublicKey: draft.sealingPublicKey)
    }
}

extension RetryBackoff {
    /// Queries of an unknown wallet command: 1 s doubling to 60 s, without jitter (the delays
    /// are upper bounds on how long an unknown stays unqueried).
    public static let transferQuery = RetryBackoff(
        initialDelay: .seconds(1), maximumDelay: .seconds(60), jitterRatio: 0)
}

extension TransferMachine.Configuration {
    /// The delay after `attempt` queries went unresolved: the backoff's delay before retry
    /// `attempt + 1` (`initial × 2^attempt`, capped), without jitter.
    func queryDelay(afterAttempt attempt: Int) -> Duration {
        queryBackoff.delay(attempt: attempt == .max ? .max : max(0, attempt) + 1, jitter: 0)
    }
}
