import SymorvaRuntime

/// One interactive verification (SAS, `m.sas.v1`), from the request to verified or cancelled.
///
/// ```
/// idle ─verifyAsked→ requested ─readyReceived→ ready ─sasAsked→ started ─acceptReceived→ keySent ─keyReceived┐
///  │ requestReceived→ requestReceived ─acceptAsked→ ready ─startReceived→ accepted ─keyReceived→ comparing ←┘
///  └ startReceived (no request) → startReceived ─acceptAsked→ accepted
/// comparing ─codeCompared(match) + macReceived(valid)→ [awaitingDone ─doneReceived→] verified
/// ready ─qrScanned(proven)→ reciprocating ─doneReceived→ verified                      (QR, the scanner)
/// ready ─reciprocateReceived(proven)→ scanned ─codeCompared(match)→ scanConfirmed ─doneReceived→ verified (the shower)
/// any live state ─cancelAsked / cancelReceived / timedOut / an unexpected message→ cancelled
/// ```
///
/// The rules that make a verification mean something live here and nowhere else:
/// - **Only a complete, in-order exchange ends verified.** A message the current state does
///   not expect (a duplicate, a late or an out-of-order one) cancels with
///   `m.unexpected_message`; once verified or cancelled every message is ignored.
/// - **The starter checks the commitment** (the accepter's key must hash to what its
///   `accept` committed to, else `m.mismatched_commitment`), and the person's "no"
///   cancels with `m.mismatched_sas`, a MAC that does not match with `m.key_mismatch`.
/// - **Keys are signed only after both MACs**: ``Effect/crossSign(_:_:)`` comes with the
///   peer's MAC checked *and* the person's "they match", never before.
/// - **Timeouts**: 10 minutes for the whole flow and 2 minutes for a request to be answered
///   (named timers on the runtime's clock), each cancels with `m.timeout`.
///
/// The machine does no cryptography: the crypto layer computes the short code, the key's
/// commitment and the MAC check, and the machine compares and decides. The crypto layer also
/// delivers only the messages of this flow's transaction, from the peer user; a `ready` or
/// `start` naming another device than the one the flow is with is ignored here.
package struct VerificationMachine: StateMachine {
    package static let name = "Verification"

    /// How long a whole flow may take.
    package static let overallTimeout: Duration = .seconds(600)
    /// How long a request may wait for its answer.
    package static let requestTimeout: Duration = .seconds(120)
    /// How old an incoming request may be (and how far in the future, clocks differ) to be shown.
    package static let requestAgeLimit: ClosedRange<Duration> = .seconds(-300) ... .seconds(600)

    /// Creates the machine.
    package init() {}

    /// Keys of the machine's timers.
    package enum Keys {
        /// The whole flow's timer.
        package static let overall = EffectKey("verification.timeout.overall")
        /// The request's timer (until ready, or until the person accepts an incoming one).
        package static let request = EffectKey("verification.timeout.request")

        /// The key of `timeout`'s timer.
        package static func key(_ timeout: VerificationTimeout) -> EffectKey {
            switch timeout {
            case .overall: overall
            case .request: request
            }
        }
    }

    // MARK: - State

    /// Where the flow is.
    package enum State: Sendable, Hashable, CaseNamed {
        /// No flow yet.
        case idle
        /// We sent a request; waiting for a device to be ready.
        case requested(VerificationFlow)
        /// The peer asked; waiting for the person to accept (``Event/acceptAsked``).
        case requestReceived(VerificationFlow)
        /// Both are ready; either side may start the SAS.
        case ready(VerificationFlow)
        /// The peer started a SAS without a request; waiting for the person to accept.
        case startReceived(SASProgress)
        /// We sent the start; waiting for the accept.
        case started(SASProgress)
        /// We accepted the peer's start; waiting for its key.
        case accepted(SASProgress)
        /// We (the starter) sent our key after the accept; waiting for the peer's.
        case keySent(SASProgress)
        /// Both keys known: the short code is shown; waiting for the person (and the peer's MAC).
        case comparing(SASProgress)
        /// The person confirmed and our MAC left; waiting for the peer's MAC.
        case macSent(SASProgress)
        /// Both MACs checked, our `done` left; waiting for the peer's `done`.
        case awaitingDone(SASProgress, VerifiedKeys)
        /// The peer's keys are proven and signed.
        case verified(VerificationFlow, VerifiedKeys)
        /// The flow ended without success (`byUs`: this side sent the cancel).
        case cancelled(VerificationFlow, VerificationCancelCode, byUs: Bool)
        /// We scanned the peer's QR code, its keys matched and our `m.reciprocate.v1` start left;
        /// waiting for the shower's `done` (then the proven keys are signed).
        case reciprocating(VerificationFlow, VerifiedKeys)
        /// The peer scanned our QR code (its secret is the code's): waiting for the person to
        /// confirm the other device did scan (``Event/codeCompared(matches:)``).
        case scanned(VerificationFlow, VerifiedKeys)
        /// The person confirmed the scan, the keys are signed and our `done` left; waiting for
        /// the scanner's `done`.
        case scanConfirmed(VerificationFlow, VerifiedKeys)

        /// Every state case name, in declaration order: the chart's state ids.
        package static let caseNames = [
            "idle", "requested", "requestReceived", "ready", "startReceived", "started", "accepted", "keySent",
            "comparing", "macSent", "awaitingDone", "verified", "cancelled", "reciprocating", "scanned",
            "scanConfirmed",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .idle: "idle"
            case .requested: "requested"
            case .requestReceived: "requestReceived"
            case .ready: "ready"
            case .startReceived: "startReceived"
            case .started: "started"
            case .accepted: "accepted"
            case .keySent: "keySent"
            case .comparing: "comparing"
            case .macSent: "macSent"
            case .awaitingDone: "awaitingDone"
            case .verified: "verified"
            case .cancelled: "cancelled"
            case .reciprocating: "reciprocating"
            case .scanned: "scanned"
            case .scanConfirmed: "scanConfirmed"
            }
        }

        /// The flow, `nil` while idle.
        package var flow: VerificationFlow? {
            switch self {
            case .idle: nil
            case .requested(let flow), .requestReceived(let flow), .ready(let flow), .verified(let flow, _),
                .cancelled(let flow, _, _), .reciprocating(let flow, _), .scanned(let flow, _),
                .scanConfirmed(let flow, _):
                flow
            case .startReceived(let progress), .started(let progress), .accepted(let progress),
                .keySent(let progress), .comparing(let progress), .macSent(let progress),
                .awaitingDone(let progress, _):
                progress.flow
            }
        }

        /// Whether the flow is over (verified or cancelled).
        package var isFinished: Bool {
            switch self {
            case .verified, .cancelled: true
            default: false
            }
        }
    }

    // MARK: - Event

    /// What happened.
    package enum Event: Sendable, Hashable, CaseNamed, CustomStringConvertible {
        /// The person asked to verify: a request (``VerificationFlow/usesRequest``) or, for a
        /// peer that only knows `start` (matrix-nio), a SAS started at once.
        case verifyAsked(VerificationFlow)
        /// An `m.key.verification.request` arrived, `age` after its `timestamp`.
        case requestReceived(VerificationFlow, age: Duration)
        /// The person accepted the incoming request or start.
        case acceptAsked
        /// An `m.key.verification.ready` arrived.
        case readyReceived(VerificationReady)
        /// The person asked for the emoji comparison on a ready flow.
        case sasAsked
        /// An `m.key.verification.start` arrived; `flow` is the flow it opens when it comes
        /// without a request (ignored otherwise: the state's flow stands).
        case startReceived(VerificationFlow, SASStart)
        /// An `m.key.verification.accept` arrived.
        case acceptReceived(SASAccept)
        /// An `m.key.verification.key` arrived (with its commitment and the short code computed).
        case keyReceived(SASKeyFacts)
        /// The person compared the codes: the same (`true`) or not.
        case codeCompared(matches: Bool)
        /// An `m.key.verification.mac` arrived, checked by the crypto layer.
        case macReceived(MACVerdict)
        /// An `m.key.verification.done` arrived.
        case doneReceived
        /// A message of the flow could not be used (malformed, or a key libolm refuses).
        case invalidMessageReceived
        /// An `m.key.verification.cancel` arrived.
        case cancelReceived(VerificationCancelCode)
        /// The person cancelled.
        case cancelAsked
        /// A timer of the flow fired.
        case timedOut(VerificationTimeout)
        /// The person scanned the peer's QR code; the crypto layer compared its keys.
        case qrScanned(QRCheckOutcome)
        /// An `m.key.verification.start` with `m.reciprocate.v1` arrived (the peer scanned our
        /// code); the crypto layer checked its secret.
        case reciprocateReceived(QRCheckOutcome)

        /// Every event case name, in declaration order: the chart's event names.
        package static let caseNames = [
            "verifyAsked", "requestReceived", "acceptAsked", "readyReceived", "sasAsked", "startReceived",
            "acceptReceived", "keyReceived", "codeCompared", "macReceived", "doneReceived", "invalidMessageReceived",
            "cancelReceived",
            "cancelAsked", "timedOut", "qrScanned", "reciprocateReceived",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .verifyAsked: "verifyAsked"
            case .requestReceived: "requestReceived"
            case .acceptAsked: "acceptAsked"
            case .readyReceived: "readyReceived"
            case .sasAsked: "sasAsked"
            case .startReceived: "startReceived"
            case .acceptReceived: "acceptReceived"
            case .keyReceived: "keyReceived"
            case .codeCompared: "codeCompared"
            case .macReceived: "macReceived"
            case .doneReceived: "doneReceived"
            case .invalidMessageReceived: "invalidMessageReceived"
            case .cancelReceived: "cancelReceived"
            case .cancelAsked: "cancelAsked"
            case .timedOut: "timedOut"
            case .qrScanned: "qrScanned"
            case .reciprocateReceived: "reciprocateReceived"
            }
        }

        /// The case name only: keys, commitments and codes stay out of traces.
        package var description: String { caseName }
    }

    // MARK: - Effect

    /// What the crypto layer must do.
    package enum Effect: MachineEffect, Hashable, CustomStringConvertible {
        /// Send `m.key.verification.request` offering `methods`.
        case sendRequest(VerificationFlow, methods: [String])
        /// Send `m.key.verification.ready` with `methods`.
        case sendReady(VerificationFlow, methods: [String])
        /// Make a SAS key pair and send `m.key.verification.start` (`m.sas.v1`) with `offer`.
        case sendStart(VerificationFlow, SASOffer)
        /// Make a SAS key pair and send `m.key.verification.accept` with the agreed methods and
        /// the commitment to our key and the peer's start.
        case sendAccept(VerificationFlow, SASAgreement)
        /// Send `m.key.verification.key` with our SAS public key.
        case sendKey(VerificationFlow)
        /// Send `m.key.verification.mac` over our device key and master key with `method`.
        case sendMAC(VerificationFlow, SASMACMethod)
        /// Send `m.key.verification.done`.
        case sendDone(VerificationFlow)
        /// Send `m.key.verification.cancel` with `code`.
        case sendCancel(VerificationFlow, VerificationCancelCode)
        /// Send `m.key.verification.cancel` with `m.accepted` to the peer's devices other than the
        /// flow's: a request to every device was answered by this one.
        case sendAcceptedToOtherDevices(VerificationFlow)
        /// Send `m.key.verification.start` with `m.reciprocate.v1` and the scanned code's secret.
        case sendReciprocate(VerificationFlow)
        /// Sign the proven keys (the device with our self-signing key, or the user's master key
        /// with our user-signing key), upload the signatures and update the trust levels.
        case crossSign(VerificationFlow, VerifiedKeys)
        /// Fire ``Event/timedOut(_:)`` after `after` (a named timer on the runtime's clock).
        case scheduleTimeout(VerificationTimeout, after: Duration)
        /// Cancel the timer under this key.
        case cancel(EffectKey)

        package var directive: EffectDirective {
            switch self {
            case .scheduleTimeout(let timeout, let delay): .timer(Keys.key(timeout), .after(delay))
            case .cancel(let key): .cancel(key)
            case .sendRequest, .sendReady, .sendStart, .sendAccept, .sendKey, .sendMAC, .sendDone, .sendCancel,
                .sendAcceptedToOtherDevices, .sendReciprocate, .crossSign:
                .perform
            }
        }

        /// Every effect case name, in declaration order.
        package static let caseNames = [
            "sendRequest", "sendReady", "sendStart", "sendAccept", "sendKey", "sendMAC", "sendDone", "sendCancel",
            "sendAcceptedToOtherDevices", "sendReciprocate", "crossSign", "scheduleTimeout", "cancel",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .sendRequest: "sendRequest"
            case .sendReady: "sendReady"
            case .sendStart: "sendStart"
            case .sendAccept: "sendAccept"
            case .sendKey: "sendKey"
            case .sendMAC: "sendMAC"
            case .sendDone: "sendDone"
            case .sendCancel: "sendCancel"
            case .sendAcceptedToOtherDevices: "sendAcceptedToOtherDevices"
            case .sendReciprocate: "sendReciprocate"
            case .crossSign: "crossSign"
            case .scheduleTimeout: "scheduleTimeout"
            case .cancel: "cancel"
            }
        }

        /// The case name only: keys stay out of traces.
        package var description: String { caseName }
    }

    package func event(firing timer: Effect) -> Event? {
        if case .scheduleTimeout(let timeout, _) = timer { return .timedOut(timeout) }
        return nil
    }
}

extension VerificationMachine: ChartedMachine {}

extension VerificationMachine.State: CaseNameListing {
    package static var allCaseNames: [String] { caseNames }
}

extension VerificationMachine.Event: CaseNameListing {
    package static var allCaseNames: [String] { caseNames }
}
