import SymorvaRuntime

/// One AI studio grant, from the member's request to its end.
///
/// ```
/// idle → awaitingConsent → requestingGrant → granted ⇄ summarizing
///              │                  │           │  │         │
///              ↓                  ↓           │  └─→ revoking ←┘ → revoked
///           declined            failed        └─ expiry (also while summarizing) → expired
/// ```
///
/// The rules that keep conversation content on the device live here:
/// - The consent sheet comes first: the only way to ``State/requestingGrant(_:)`` is
///   ``Event/consentAnswered(_:)`` with ``ConsentAnswer/approved`` in ``State/awaitingConsent(_:)``,
///   which ``Event/grantRequested(_:)`` enters with ``Effect/presentConsent(_:)``.
/// - Content leaves only in ``Effect/sendSummarize(_:)``, whose ``GrantedContent`` only this
///   machine makes, in ``State/granted(_:)``, for its own grant and only when the items cover
///   exactly the grant's scope. The interpreter checks it once more before sending.
/// - Revoking or the expiry (a named timer on the runtime's clock that survives the moves
///   between granted and summarizing) cancels a summary request that has not left yet; nothing
///   leads from revoked or expired back to granted.
package struct StudioGrantMachine: StateMachine {
    package static let name = "StudioGrant"

    /// Creates the machine.
    package init() {}

    /// Keys of the machine's cancellable effects.
    package enum Keys {
        /// The consent sheet on screen.
        package static let consent = EffectKey("studio.consent")
        /// The grant request.
        package static let grant = EffectKey("studio.request.grant")
        /// The summary request in flight: cancelled by revoke and expiry.
        package static let summarize = EffectKey("studio.request.summarize")
        /// The grant's expiry timer (a named timer: it survives granted ⇄ summarizing).
        package static let expiry = EffectKey("studio.expiry")
    }

    // MARK: - State

    /// Where the grant is.
    package enum State: Sendable, Equatable, CaseNamed {
        /// Nothing asked yet. A new grant gets ``Event/grantRequested(_:)``; one rebuilt from the
        /// account's store gets ``Event/restored(_:)``.
        case idle
        /// The consent sheet is shown; nothing has been asked of the service.
        case awaitingConsent(GrantRequest)
        /// The member said no (or no sheet could be shown): nothing was asked of the service.
        case declined(GrantRequest, ConsentAnswer)
        /// The member said yes; the service is asked for the grant.
        case requestingGrant(GrantRequest)
        /// The grant is live; content covering its scope may be summarized. Carries the outcome
        /// of the last summary request.
        case granted(ActiveGrant)
        /// A summary request is in flight with this content.
        case summarizing(ActiveGrant, GrantedContent)
        /// The member revoked the grant; the service is told. No content leaves from here on.
        case revoking(StudioGrant)
        /// The grant is revoked (`confirmed` when the service acknowledged it).
        case revoked(StudioGrant, confirmed: Bool)
        /// The grant's lifetime ended.
        case expired(StudioGrant)
        /// The service refused the grant, or could not be reached.
        case failed(GrantRequest, StudioFailure)

        /// Every state case name, in declaration order: the chart's state ids.
        package static let caseNames = [
            "idle", "awaitingConsent", "declined", "requestingGrant", "granted", "summarizing", "revoking", "revoked",
            "expired", "failed",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .idle: "idle"
            case .awaitingConsent: "awaitingConsent"
            case .declined: "declined"
            case .requestingGrant: "requestingGrant"
            case .granted: "granted"
            case .summarizing: "summarizing"
            case .revoking: "revoking"
            case .revoked: "revoked"
            case .expired: "expired"
            case .failed: "failed"
            }
        }

        /// The grant, once the service issued it.
        package var grant: StudioGrant? {
            switch self {
            case .granted(let active), .summarizing(let active, _): active.grant
            case .revoking(let grant), .revoked(let grant, _), .expired(let grant): grant
            case .idle, .awaitingConsent, .declined, .requestingGrant, .failed: nil
            }
        }

        /// Whether content may be summarized under the grant now.
        package var isLive: Bool {
            switch self {
            case .granted, .summarizing: true
            default: false
            }
        }

        /// Whether no event changes the state any more (a revoke the service did not confirm may
        /// still be sent again).
        package var isFinal: Bool {
            switch self {
            case .declined, .expired, .failed, .revoked(_, confirmed: true): true
            default: false
            }
        }
    }

    // MARK: - Event

    /// What happened.
    package enum Event: Sendable, Equatable, CaseNamed, CustomStringConvertible {
        /// The member asked for a grant.
        case grantRequested(GrantRequest)
        /// The member answered the consent sheet.
        case consentAnswered(ConsentAnswer)
        /// The service answered the grant request.
        case grantResponse(Result<StudioGrant, StudioFailure>)
        /// The member asked for a summary of this content (read and decrypted on the device).
        case summarizeRequested(SummaryRequestID, [ConversationItem])
        /// The service answered the summary request.
        case summaryResponse(SummaryRequestID, Result<Summary, StudioFailure>)
        /// The member revoked the grant.
        case revokeRequested
        /// The service answered the revoke request.
        case revokeResponse(Result<GrantID, StudioFailure>)
        /// The grant's expiry instant passed (the runtime clock's timer).
        case expiryReached
        /// After a restart: this grant was in the account's store.
        case restored(StudioGrant)

        /// Every event case name, in declaration order: the chart's event names.
        package static let caseNames = [
            "grantRequested", "consentAnswered", "grantResponse", "summarizeRequested", "summaryResponse",
            "revokeRequested", "revokeResponse", "expiryReached", "restored",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .grantRequested: "grantRequested"
            case .consentAnswered: "consentAnswered"
            case .grantResponse: "grantResponse"
            case .summarizeRequested: "summarizeRequested"
            case .summaryResponse: "summaryResponse"
            case .revokeRequested: "revokeRequested"
            case .revokeResponse: "revokeResponse"
            case .expiryReached: "expiryReached"
            case .restored: "restored"
            }
        }

        /// The case name only: events may carry message bodies and summaries.
        package var description: String { caseName }
    }

    // MARK: - Effect

    /// What the interpreter must do.
    package enum Effect: MachineEffect, Equatable, CustomStringConvertible {
        /// Show the consent sheet; answers ``Event/consentAnswered(_:)``.
        case presentConsent(ConsentSheet)
        /// Ask the service for the grant; answers ``Event/grantResponse(_:)``. Carries no content.
        case sendGrantRequest(GrantRequest)
        /// Fire ``Event/expiryReached`` at this runtime-clock instant (at once if it has passed).
        case scheduleExpiry(at: Duration)
        /// Send the content to the service for a summary; answers ``Event/summaryResponse(_:_:)``.
        /// The only effect that carries conversation content.
        case sendSummarize(GrantedContent)
        /// Tell the service the grant is revoked; answers ``Event/revokeResponse(_:)``.
        case sendRevoke(GrantID)
        /// Record the grant in the account's store (no content), so a restart knows it.
        case persistGrant(StudioGrant)
        /// Remove the grant from the account's store: it is over.
        case forgetGrant(GrantID)
        /// Cancel the effect (or timer) running under this key.
        case cancel(EffectKey)

        package var directive: EffectDirective {
            switch self {
            case .presentConsent: .keyed(Keys.consent)
            case .sendGrantRequest: .keyed(Keys.grant)
            case .scheduleExpiry(let deadline): .timer(Keys.expiry, .at(deadline))
            case .sendSummarize: .keyed(Keys.summarize)
            case .sendRevoke, .persistGrant, .forgetGrant: .perform
            case .cancel(let key): .cancel(key)
            }
        }

        /// Every effect case name, in declaration order.
        package static let caseNames = [
            "presentConsent", "sendGrantRequest", "scheduleExpiry", "sendSummarize", "sendRevoke", "persistGrant",
            "forgetGrant", "cancel",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .presentConsent: "presentConsent"
            case .sendGrantRequest: "sendGrantRequest"
            case .scheduleExpiry: "scheduleExpiry"
            case .sendSummarize: "sendSummarize"
            case .sendRevoke: "sendRevoke"
            case .persistGrant: "persistGrant"
            case .forgetGrant: "forgetGrant"
            case .cancel: "cancel"
            }
        }

        /// The case name only: ``sendSummarize(_:)`` carries message bodies.
        package var description: String { caseName }
    }

    /// Every state case name: the chart checker compares these with its samples and the chart.
    package static var stateCaseNames: [String] { State.caseNames }
    /// Every event case name: the chart checker compares these with its samples and the chart.
    package static var eventCaseNames: [String] { Event.caseNames }
}

extension StudioGrantMachine: ChartedMachine {}

extension StudioGrantMachine.State: CaseNameListing {
    package static var allCaseNames: [String] { caseNames }
}

extension StudioGrantMachine.Event: CaseNameListing {
    package static var allCaseNames: [String] { caseNames }
}

/// A live grant and what became of its last summary request.
package struct ActiveGrant: Sendable, Equatable {
    /// The grant.
    package let grant: StudioGrant
    /// The last summary request's outcome, if one was made.
    package let last: SummaryOutcome?

    /// Creates a live grant.
    package init(grant: StudioGrant, last: SummaryOutcome? = nil) {
        self.grant = grant
        self.last = last
    }
}

/// The outcome of one summary request.
package enum SummaryOutcome: Sendable, Equatable {
    /// The service summarized the content.
    case summarized(SummaryRequestID, Summary)
    /// The request was refused (on the device or by the service); the grant stays live.
    case refused(SummaryRequestID, StudioFailure)

    /// The request it answers.
    package var requestID: SummaryRequestID {
        switch self {
        case .summarized(let id, _), .refused(let id, _): id
        }
    }
}
