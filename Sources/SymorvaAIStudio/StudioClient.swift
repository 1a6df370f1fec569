import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime

/// The community's AI studio: `community.aiStudio`, present exactly when the manifest enables
/// the studio module, and then one instance for the community's whole life.
///
/// It always acts for the **active** account: ``grants`` switches to the new account's grants
/// when the member switches and is empty while nobody is signed in. Operations act for the
/// account active when they are called (``StudioError/notSignedIn`` without one); a grant
/// belongs to the account that asked for it, for good, and throws ``StudioError/accountEnded``
/// once that account is switched away from or signed out.
///
/// ```swift
/// guard let studio = community.aiStudio else { return }      // disabled in the manifest
/// studio.consentPresenter = MyConsentSheet()
/// let grant = try await studio.requestGrant(for: roomID, scope: .selectedMessages(ids))
/// let summary = try await studio.summarize(using: grant)
/// try await studio.revoke(grant)
/// ```
public final class StudioClient: Sendable {
    /// The community's studio settings.
    public let configuration: StudioConfiguration

    private let active = ActiveAccount<AccountStudio>()
    private let presenter = Lock<any ConsentPresenter>(UnavailableConsentPresenter())
    private let grantsValue: ObservableValue<[GrantInfo]>

    /// A studio that shows nobody until the community tells it which account is active.
    package init(configuration: StudioConfiguration = StudioConfiguration()) {
        self.configuration = configuration
        grantsValue = active.value(placeholder: []) { $0.grants }
    }

    /// A studio that always acts for `studio`: for tools and tests that manage one account's
    /// ``AccountStudio`` themselves. Apps use `community.aiStudio`.
    public convenience init(following studio: AccountStudio) {
        self.init(configuration: studio.configuration)
        presenter.withLock { $0 = studio.consentPresenter }
        follow(studio, isSignedIn: true)
    }

    /// The adapter that shows the consent sheet for every grant request. Until one is set, no
    /// sheet can be shown and every request throws ``StudioError/consentUnavailable``.
    public var consentPresenter: any ConsentPresenter {
        get { presenter.withLock { $0 } }
        set {
            // Under the presenter's lock, so that a studio followed meanwhile gets this one too.
            presenter.withLock { presenter in
                presenter = newValue
                active.current?.consentPresenter = newValue
            }
        }
    }

    /// Makes `studio` (the new active account's) the one this client acts for.
    package func follow(_ studio: AccountStudio?, isSignedIn: Bool) {
        // The presenter is handed over before the studio becomes active, and again after in case
        // the app set another one meanwhile.
        presenter.withLock { presenter in studio?.consentPresenter = presenter }
        active.follow(studio, isSignedIn: isSignedIn)
        presenter.withLock { presenter in studio?.consentPresenter = presenter }
    }

    /// The active member, or `nil` while nobody is signed in.
    public var member: UserID? { active.current?.member }

    /// The active member's grants of this run, oldest first, with their status.
    public var grants: ObservableValue<[GrantInfo]> { grantsValue }

    /// Asks for a grant for the active member; see ``AccountStudio/requestGrant(for:scope:)``.
    ///
    /// - Throws: ``StudioError/notSignedIn``; ``StudioError/accountEnded`` when the account was
    ///   switched away from before the grant was issued; what ``AccountStudio`` throws.
    public func requestGrant(for roomID: RoomID, scope: GrantScope) async throws(StudioError) -> ConversationGrant {
        try await active.withActive { studio async throws(StudioError) -> ConversationGrant in
            try await studio.requestGrant(for: roomID, scope: scope)
        }
    }

    /// Summarizes the grant's scope; see ``AccountStudio/summarize(using:)``. The grant's own
    /// account must still be the active one.
    public func summarize(using grant: ConversationGrant) async throws(StudioError) -> Summary {
        let studio = try owner(of: grant)
        let summary = try await studio.summarize(using: grant)
        try active.ensureActive(studio, orThrow: StudioError.self)
        return summary
    }

    /// Revokes the grant; see ``AccountStudio/revoke(_:)``.
    public func revoke(_ grant: ConversationGrant) async throws(StudioError) {
        try await owner(of: grant).revoke(grant)
    }

    /// The active member's grant of this run with this ID.
    public func grant(_ id: GrantID) -> ConversationGrant? { current?.grant(id) }

    /// The service's audit of the active member (counts and event IDs, never content).
    public func audit() async throws(StudioError) -> [StudioAuditEntry] {
        try await activeStudio().audit()
    }

    private var current: AccountStudio? { active.current }

    private func activeStudio() throws(StudioError) -> AccountStudio { try active.module(orThrow: StudioError.self) }

    private func owner(of grant: ConversationGrant) throws(StudioError) -> AccountStudio {
        let studio = try activeStudio()
        guard studio.member == grant.member, studio.grant(grant.id) === grant else { throw .accountEnded }
        return studio
    }
}

extension AccountStudio: AccountBound {
    /// The studio's tables (feature `studio`), as its module factory declares them.
    package static var schema: AccountMigrations.Feature { StudioStore.schema }
}

extension StudioError: ActiveAccountError {
    /// Signed in, but the account's studio could not be opened (its store failed).
    package static var moduleUnavailable: StudioError { .store(.database) }
}
