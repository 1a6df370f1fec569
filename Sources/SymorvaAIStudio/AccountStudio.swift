import SymorvaFeatureKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices
import SymorvaStore

/// The AI studio of one signed-in member: grants over parts of conversations, summaries under
/// them, and revocation.
///
/// Apps use ``StudioClient`` (`community.aiStudio`), which follows whichever account is active
/// and delegates here.
///
/// ```swift
/// let grant = try await studio.requestGrant(for: roomID, scope: .selectedMessages(ids))  // consent first
/// let summary = try await studio.summarize(using: grant)
/// try await studio.revoke(grant)
/// ```
///
/// Each grant runs in its own ``/SymorvaRuntime/MachineHost`` of
/// `StudioGrantMachine` in the account's scope. Conversation content is read
/// on the device (``ConversationContentSource``) only to be handed to the grant's machine, which
/// alone turns it into the `GrantedContent` a summary request is made of.
/// Expiry is the machine's timer on the runtime clock. Ending the scope (sign-out, switch) stops
/// every grant host; the grants and this client then throw ``StudioError/accountEnded``.
public final class AccountStudio: Sendable {
    /// The signed-in member.
    public let member: UserID
    /// The community's studio settings.
    public let configuration: StudioConfiguration

    /// The member's grants of this run, oldest first, with their status.
    public var grants: ObservableValue<[GrantInfo]> { grantsPublisher.observable }

    private struct Registry {
        typealias Unsubscribe = ObservableValue<[GrantInfo]>.Unsubscribe
        var grants: [ConversationGrant] = []
        var unsubscribes: [@Sendable () -> Void] = []
        var closed = false
        var nextRequest = 0
    }

    let service: StudioService
    let store: StudioStore
    private let interpreter: StudioGrantInterpreter
    private let content: any ConversationContentSource
    private let revocations = RevocationList()
    private let presenterSlot: ConsentPresenterSlot
    private let registry = Lock(Registry())
    private let grantsPublisher = ObservableValue<[GrantInfo]>.Publisher([])
    private let scope: AccountScope
    private let clock: any RuntimeClock
    private let wallClock: any WallClock
    private let tracer: Tracer
    private let machine = StudioGrantMachine()

    /// Creates the studio of the member signed in to `scope`, migrating the studio's table in
    /// the account's database.
    ///
    /// - Parameters:
    ///   - member: the signed-in member's Matrix user ID.
    ///   - services: the account's authenticated community services client.
    ///   - content: where the messages of a grant's scope are read on the device.
    ///   - database: the account's database; the studio keeps its live grants there (no content).
    ///   - scope: the account's scope; every grant host runs in it.
    ///   - presenter: the consent sheet adapter.
    ///   - configuration: grant lifetime, the assistant's name, limits.
    ///   - clock: the clock of the expiry timers.
    ///   - wallClock: the clock that relates stored expiries to the runtime clock after a restart.
    ///   - tracer: where grant transitions are traced.
    /// - Throws: ``StudioError/store(_:)`` when the database cannot be migrated.
    public init(
        member: UserID, services: CommunityServicesClient, content: any ConversationContentSource,
        database: SQLiteDatabase, scope: AccountScope, presenter: any ConsentPresenter,
        configuration: StudioConfiguration = StudioConfiguration(), clock: any RuntimeClock = SystemClock(),
        wallClock: any WallClock = SystemWallClock(), tracer: Tracer = .shared
    ) async throws(StudioError) {
        do throws(StoreError) {
            store = try await StudioStore.open(on: database, member: member)
        } catch {
            throw .store(error.storeFailure)
        }
        self.member = member
        self.configuration = configuration
        self.content = content
        self.scope = scope
        self.clock = clock
        self.wallClock = wallClock
        self.tracer = tracer
        presenterSlot = ConsentPresenterSlot(presenter)
        service = StudioService(services: services, requestTimeout: configuration.requestTimeout)
        interpreter = StudioGrantInterpreter(
            service: service, presenter: presenterSlot, store: store, revocations: revocations)
        let registry = self.registry
        scope.onAdvance { _ in
            let unsubscribes = registry.withLock { registry in
                registry.closed = true
                return registry.unsubscribes
            }
            for unsubscribe in unsubscribes { unsubscribe() }
        }
    }

    /// The adapter that shows the consent sheet. ``StudioClient`` installs its own presenter
    /// in the account it follows.
    public var consentPresenter: any ConsentPresenter {
        get { presenterSlot.current }
        set { presenterSlot.current = newValue }
    }

    // MARK: Grants

    /// Asks for a grant over `scope` of the conversation `roomID`, for summaries.
    ///
    /// The consent sheet is always shown first, through the ``ConsentPresenter``: what will be
    /// shared, with whom, for how long. Only when the member approves is the service asked.
    ///
    /// - Throws: ``StudioError/declined`` when the member says no and
    ///   ``StudioError/consentUnavailable`` when no sheet could be shown (nothing was asked of the
    ///   service in both cases); ``StudioError/failure(_:)`` when the service refuses (the member is
    ///   not in the conversation, …) or cannot be reached; ``StudioError/contentUnavailable(_:)``
    ///   when the first message of a conversation scope cannot be read; ``StudioError/accountEnded``.
    public func requestGrant(for roomID: RoomID, scope grantScope: GrantScope) async throws(StudioError)
        -> ConversationGrant
    {
        try ensureCurrent()
        var since: MatrixTimestamp?
        if case .conversation(let first) = grantScope {
            since = try await content.timestamp(of: first, in: roomID)
        }
        if case .selectedMessages(let ids) = grantScope, ids.isEmpty || Set(ids).count != ids.count {
            throw .failure(.outOfScope(.empty))
        }
        let request = GrantRequest(
            member: member, roomID: roomID, scope: grantScope, sinceTimestamp: since,
            lifetime: configuration.grantLifetime, recipient: configuration.assistantName)
        let host = try makeHost()
        let state = await host.send(.grantRequested(request)) { state -> StudioGrantMachine.State? in
            switch state {
            case .idle, .awaitingConsent, .requestingGrant: nil
            default: state
            }
        }
        switch state {
        case .granted(let active):
            return try adopt(ConversationGrant(grant: active.grant, host: host))
        case .declined(_, .unavailable):
            await host.stop()
            throw .consentUnavailable
        case .declined:
            await host.stop()
            throw .declined
        case .failed(_, let failure):
            await host.stop()
            throw .failure(failure)
        default:
            await host.stop()
            throw isEnded ? .accountEnded : .cancelled
        }
    }

    /// Rebuilds the grants an earlier run left live (from the account's store), each checked
    /// with the service first. Call it once the account is signed in; a grant already known is
    /// left alone.
    ///
    /// - A revoke the service did not confirm (the member revoked while it could not be reached)
    ///   is sent again first.
    /// - Each stored grant is asked of the service: one it says was revoked (by another device, or
    ///   by the service) or expired is forgotten; a live one is restored with its expiry counted
    ///   from what it has left **on the service's clock**, never from this device's wall clock;
    ///   one the service could not be asked about is not restored this time (it stays stored, and
    ///   a later call tries again).
    @discardableResult
    public func restoreGrants() async throws(StudioError) -> [ConversationGrant] {
        try ensureCurrent()
        await retryUnconfirmedRevokes()
        let stored: [StudioGrant]
        do throws(StoreError) {
            stored = try await store.grants(wallNow: wallClock.now, now: clock.now)
        } catch {
            throw .store(error.storeFailure)
        }
        let known = Set(registry.withLock { $0.grants.map(\.id) })
        var restored: [ConversationGrant] = []
        for stale in stored where !known.contains(stale.id) {
            let grant: StudioGrant
            switch await service.check(stale.id) {
            case .success(.active(let remaining)):
                grant = StudioGrant(
                    id: stale.id, member: stale.member, roomID: stale.roomID, scope: stale.scope,
                    sinceTimestamp: stale.sinceTimestamp, purpose: stale.purpose, expiresAt: stale.expiresAt,
                    expiryDeadline: clock.now + remaining)
            case .success(.ended), .failure(.grantUnknown), .failure(.grantForbidden), .failure(.grantRevoked),
                .failure(.grantExpired):
                _ = await Self.remove(stale.id, from: store)
                continue
            case .failure:
                continue  // not checked: not restored this time
            }
            try ensureCurrent()
            let host = try makeHost()
            await host.send(.restored(grant))
            restored.append(try adopt(ConversationGrant(grant: grant, host: host)))
        }
        return restored
    }

    /// Sends again the revokes the service did not confirm in an earlier run; a grant the service
    /// no longer knows as live counts as revoked.
    private func retryUnconfirmedRevokes() async {
        guard let pending = try? await store.unconfirmedRevokes() else { return }
        for id in pending {
            switch await service.revoke(id) {
            case .success, .failure(.grantUnknown), .failure(.grantForbidden), .failure(.grantRevoked),
                .failure(.grantExpired):
                try? await store.confirmRevoke(id)
            case .failure:
                continue  // still not confirmed: the next restore sends it again
            }
        }
    }

    /// The grant of this run with this ID.
    public func grant(_ id: GrantID) -> ConversationGrant? {
        registry.withLock { $0.grants.first { $0.id == id } }
    }

    // MARK: Summaries

    /// Summarizes exactly the grant's scope: the messages are read on the device, handed to the
    /// grant's machine, checked against the scope, and sent only under the live grant.
    ///
    /// - Throws: ``StudioError/grantNotLive(_:)`` when the grant is revoked, expired (also when
    ///   either happens while the summary is made) or not issued; ``StudioError/busy`` while
    ///   another summary of it is made; ``StudioError/contentUnavailable(_:)`` when a message
    ///   cannot be read here; ``StudioError/failure(_:)`` with the reason otherwise;
    ///   ``StudioError/accountEnded`` when the grant's account has ended.
    public func summarize(using grant: ConversationGrant) async throws(StudioError) -> Summary {
        try check(grant)
        let status = grant.status
        guard status == .active else { throw status == .summarizing ? .busy : .grantNotLive(status) }
        let items = try await content.items(
            in: grant.roomID, scope: grant.scope, since: grant.grant.sinceTimestamp, limit: configuration.maximumItems)
        try check(grant)
        let requestID = SummaryRequestID(
            registry.withLock { registry in
                registry.nextRequest += 1
                return registry.nextRequest
            })
        let outcome = await grant.host.send(
            .summarizeRequested(requestID, items),
            ignored: { state -> Result<Summary, StudioError>? in
                if case .summarizing = state { return .failure(.busy) }
                return .failure(.grantNotLive(GrantStatus(state)))
            },
            until: { state -> Result<Summary, StudioError>? in
                switch state {
                case .granted(let active):
                    switch active.last {
                    case .summarized(requestID, let summary): return .success(summary)
                    case .refused(requestID, let failure): return .failure(.failure(failure))
                    default: return nil
                    }
                case .summarizing: return nil
                default: return .failure(.grantNotLive(GrantStatus(state)))
                }
            })
        try check(grant)
        switch outcome {
        case .success(let summary): return summary
        case .failure(let error): throw error
        case nil: throw isEnded ? .accountEnded : .cancelled
        }
    }

    // MARK: Revoke

    /// Revokes the grant at once: no content leaves under it from this moment (a summary being
    /// sent is stopped on the device), the account's store forgets it, and the service is told.
    ///
    /// - Throws: ``StudioError/store(_:)`` when the account's store could not forget the grant
    ///   (it is revoked here and at the service all the same);
    ///   ``StudioError/failure(_:)`` when the service could not be told (the grant stays
    ///   revoked on this device, `revoke` may be called again, and ``restoreGrants()`` sends it
    ///   again after a restart until the service confirms it);
    ///   ``StudioError/grantNotLive(_:)`` for a grant that expired or was never issued;
    ///   ``StudioError/accountEnded``.
    public func revoke(_ grant: ConversationGrant) async throws(StudioError) {
        try check(grant)
        revocations.revoke(grant.id)
        // Forgotten in the store before this returns, so that a restart that follows never
        // brings the grant back (the machine's own `forgetGrant` runs concurrently; the grant's
        // `persistGrant` may still be on its way: the store's tombstone keeps it out). The
        // removal runs beside the machine's revoke, not before it, so that a summary request in
        // flight is cancelled at once rather than after the store write.
        async let removal = Self.remove(grant.id, from: store, revokeUnconfirmed: true)
        let outcome = await grant.host.send(
            .revokeRequested,
            ignored: { state -> Result<Void, StudioError>? in
                if case .revoked(_, confirmed: true) = state { return .success(()) }
                return .failure(.grantNotLive(GrantStatus(state)))
            },
            until: { state -> Result<Void, StudioError>? in
                switch state {
                case .revoked(_, confirmed: true): .success(())
                case .revoked(_, confirmed: false): .failure(.failure(.serviceUnreachable(.unreachable)))
                case .revoking: nil
                default: .failure(.grantNotLive(GrantStatus(state)))
                }
            })
        let storeFailure = await removal
        switch outcome {
        case .success:
            if let storeFailure { throw .store(storeFailure) }
            // Confirmed: a restart has nothing to send again.
            do throws(StoreError) {
                try await store.confirmRevoke(grant.id)
            } catch {
                throw .store(error.storeFailure)
            }
        case .failure(let error): throw error
        case nil: throw .accountEnded
        }
    }

    /// Forgets `grant` in `store` (noting a revoke still to be confirmed with `revokeUnconfirmed`);
    /// the failure, if any.
    private static func remove(
        _ grant: GrantID, from store: StudioStore, revokeUnconfirmed: Bool = false
    ) async -> StoreFailure? {
        do throws(StoreError) {
            try await store.remove(grant, revokeUnconfirmed: revokeUnconfirmed)
            return nil
        } catch {
            return error.storeFailure
        }
    }

    /// What the service's audit says it processed for this member: grants, summaries and revokes
    /// with their counts and event IDs (never content).
    public func audit() async throws(StudioError) -> [StudioAuditEntry] {
        try ensureCurrent()
        return try await service.audit()
    }

    // MARK: Lifetime

    /// Stops every grant host of this client, as the end of the account's scope does.
    public func shutdown() async {
        let (grants, unsubscribes) = registry.withLock { registry in
            registry.closed = true
            return (registry.grants, registry.unsubscribes)
        }
        for unsubscribe in unsubscribes { unsubscribe() }
        for grant in grants { await grant.host.stop() }
    }

    /// Whether the account's scope has ended or the client was shut down.
    public var isEnded: Bool { scope.isEnded || registry.withLock { $0.closed } }

    func ensureCurrent() throws(StudioError) {
        if isEnded { throw .accountEnded }
    }

    private func check(_ grant: ConversationGrant) throws(StudioError) {
        try ensureCurrent()
        guard grant.member == member, self.grant(grant.id) === grant else { throw .accountEnded }
    }

    private func makeHost() throws(StudioError) -> MachineHost<StudioGrantMachine> {
        try ensureCurrent()
        return MachineHost(
            machine: machine, initial: .idle, interpreter: interpreter, instance: scope.label, scope: scope,
            clock: clock, wallClock: wallClock, tracer: tracer)
    }

    private func adopt(_ grant: ConversationGrant) throws(StudioError) -> ConversationGrant {
        let publisher = grantsPublisher
        let registry = self.registry
        let republish: @Sendable () -> Void = {
            let infos = registry.withLock { $0.grants.map(\.info) }
            _ = publisher.publish(computing: { current in current == infos ? nil : infos })
        }
        let added = registry.withLock { registry -> Bool in
            guard !registry.closed else { return false }
            registry.grants.append(grant)
            return true
        }
        guard added else { throw .accountEnded }
        let unsubscribe = grant.host.states.subscribe { _ in republish() }
        registry.withLock { $0.unsubscribes.append(unsubscribe) }
        republish()
        return grant
    }
}
