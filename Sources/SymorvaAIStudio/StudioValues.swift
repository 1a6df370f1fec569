import SymorvaMachines
import SymorvaRuntime

/// What went wrong with an AI studio operation.
public enum StudioError: Error, Sendable, Hashable {
    /// The member said no on the consent sheet: nothing was asked of the service.
    case declined
    /// No consent sheet could be shown on this device (no ``ConsentPresenter`` that can ask):
    /// nothing was asked of the service.
    case consentUnavailable
    /// The grant or summary did not happen, for this reason.
    case failure(StudioFailure)
    /// The grant is not live: revoked, expired, or never issued.
    case grantNotLive(GrantStatus)
    /// A message of the scope could not be read on this device (unknown, redacted, not a text
    /// message, or encrypted and not decrypted here). Nothing was sent.
    case contentUnavailable(EventID)
    /// A summary of this grant is already being made.
    case busy
    /// The account's store failed.
    case store(StoreFailure)
    /// The caller stopped waiting (its task was cancelled).
    case cancelled
    /// No account is signed in.
    case notSignedIn
    /// The grant belongs to an account that was switched away from or signed out: it never
    /// acts for the account that is active now.
    case accountEnded
}

/// Where a grant is, as the member sees it.
public enum GrantStatus: Sendable, Hashable, LogSafe {
    /// The consent sheet is shown.
    case awaitingConsent
    /// The member said no.
    case declined
    /// The service is asked for it.
    case requesting
    /// Live: content covering its scope may be summarized.
    case active
    /// A summary is being made.
    case summarizing
    /// Being revoked.
    case revoking
    /// Revoked.
    case revoked
    /// Its lifetime ended.
    case expired
    /// The service refused it.
    case failed

    /// The status of a machine state.
    init(_ state: StudioGrantMachine.State) {
        switch state {
        case .idle, .awaitingConsent: self = .awaitingConsent
        case .declined: self = .declined
        case .requestingGrant: self = .requesting
        case .granted: self = .active
        case .summarizing: self = .summarizing
        case .revoking: self = .revoking
        case .revoked: self = .revoked
        case .expired: self = .expired
        case .failed: self = .failed
        }
    }

    public var logDescription: String { "\(self)" }
}

/// One entry of the service's audit of this member: what it processed, never what it read.
public struct StudioAuditEntry: Sendable, Hashable {
    /// The grant, if the request named one.
    public let grantID: GrantID?
    /// `grant`, `summarize` or `revoke`.
    public let action: String
    /// `ok`, or the service's `SY_…` code.
    public let outcome: String
    /// How many items the request carried.
    public let itemCount: Int
    /// Their event IDs.
    public let itemIDs: [EventID]
}

/// The community's AI studio settings.
public struct StudioConfiguration: Sendable, Hashable {
    /// How long a grant is asked to live (the service may cap it).
    public var grantLifetime: Duration
    /// Who receives the content, as the consent sheet names it.
    public var assistantName: String
    /// The most messages a conversation grant sends in one summary (the earliest first).
    public var maximumItems: Int
    /// The time allowed for each request to the service.
    public var requestTimeout: Duration

    /// Creates settings.
    public init(
        grantLifetime: Duration = .seconds(3600), assistantName: String = "the community's assistant",
        maximumItems: Int = 500, requestTimeout: Duration = .seconds(60)
    ) {
        self.grantLifetime = grantLifetime
        self.assistantName = assistantName
        self.maximumItems = maximumItems
        self.requestTimeout = requestTimeout
    }
}
