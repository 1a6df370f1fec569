import SymorvaRuntime

extension StudioGrantMachine {
    /// The event of the expiry timer, which the host performs.
    package func event(firing timer: Effect) -> Event? {
        switch timer {
        case .scheduleExpiry: .expiryReached
        case .presentConsent, .sendGrantRequest, .sendSummarize, .sendRevoke, .persistGrant, .forgetGrant, .cancel:
            nil
        }
    }

    package func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch state {
        case .idle: inIdle(on: event)
        case .awaitingConsent(let request): inAwaitingConsent(request, on: event)
        case .requestingGrant(let request): inRequestingGrant(request, on: event)
        case .granted(let active): inGranted(active, on: event)
        case .summarizing(let active, let content): inSummarizing(active, content, on: event)
        case .revoking(let grant): inRevoking(grant, on: event)
        case .revoked(let grant, let confirmed): inRevoked(grant, confirmed: confirmed, on: event)
        case .declined, .expired, .failed: .ignored
        }
    }

    // MARK: - Before the grant exists

    private func inIdle(on event: Event) -> Transition<State, Effect> {
        switch event {
        case .grantRequested(let request):
            // The consent sheet always comes first; nothing is asked of the service yet.
            return .move(to: .awaitingConsent(request), effects: [.presentConsent(request.consentSheet)])
        case .restored(let grant):
            return .move(to: .granted(ActiveGrant(grant: grant)), effects: [.scheduleExpiry(at: grant.expiryDeadline)])
        case .consentAnswered, .grantResponse, .summarizeRequested, .summaryResponse, .revokeRequested,
            .revokeResponse, .expiryReached:
            return .ignored
        }
    }

    private func inAwaitingConsent(_ request: GrantRequest, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .consentAnswered(.approved):
            return .move(to: .requestingGrant(request), effects: [.sendGrantRequest(request)])
        case .consentAnswered(let answer):
            return .move(to: .declined(request, answer))
        case .grantRequested, .grantResponse, .summarizeRequested, .summaryResponse, .revokeRequested,
            .revokeResponse, .expiryReached, .restored:
            return .ignored
        }
    }

    private func inRequestingGrant(_ request: GrantRequest, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .grantResponse(.success(let grant)):
            guard grant.matches(request) else {
                return .move(to: .failed(request, .rejected(code: "SY_GRANT_MISMATCH")))
            }
            return .move(
                to: .granted(ActiveGrant(grant: grant)),
                effects: [.persistGrant(grant), .scheduleExpiry(at: grant.expiryDeadline)])
        case .grantResponse(.failure(let failure)):
            return .move(to: .failed(request, failure))
        case .grantRequested, .consentAnswered, .summarizeRequested, .summaryResponse, .revokeRequested,
            .revokeResponse, .expiryReached, .restored:
            return .ignored
        }
    }

    // MARK: - While the grant lives

    private func inGranted(_ active: ActiveGrant, on event: Event) -> Transition<State, Effect> {
        let grant = active.grant
        switch event {
        case .summarizeRequested(let requestID, let items):
            if let mismatch = grant.firstMismatch(in: items) {
                let refused = ActiveGrant(grant: grant, last: .refused(requestID, .outOfScope(mismatch)))
                return .move(to: .granted(refused))
            }
            let content = GrantedContent(grant: grant, requestID: requestID, items: items)
            return .move(to: .summarizing(active, content), effects: [.sendSummarize(content)])
        case .revokeRequested:
            return revoke(grant, cancelling: [Keys.expiry])
        case .expiryReached:
            return .move(to: .expired(grant), effects: [.forgetGrant(grant.id)])
        case .grantRequested, .consentAnswered, .grantResponse, .summaryResponse, .revokeResponse, .restored:
            return .ignored
        }
    }

    private func inSummarizing(
        _ active: ActiveGrant, _ content: GrantedContent, on event: Event
    ) -> Transition<State, Effect> {
        let grant = active.grant
        switch event {
        case .summaryResponse(let requestID, .success(let summary)):
            let outcome: SummaryOutcome =
                summary.isCitation(of: content)
                ? .summarized(requestID, summary) : .refused(requestID, .rejected(code: "SY_BAD_CITATION"))
            return .move(to: .granted(ActiveGrant(grant: grant, last: outcome)))
        case .summaryResponse(_, .failure(.grantRevoked)):
            return .move(
                to: .revoked(grant, confirmed: true), effects: [.cancel(Keys.expiry), .forgetGrant(grant.id)])
        case .summaryResponse(_, .failure(.grantExpired)):
            return .move(to: .expired(grant), effects: [.cancel(Keys.expiry), .forgetGrant(grant.id)])
        case .summaryResponse(let requestID, .failure(let failure)):
            return .move(to: .granted(ActiveGrant(grant: grant, last: .refused(requestID, failure))))
        case .revokeRequested:
            // A summary request that has not left yet never leaves.
            return revoke(grant, cancelling: [Keys.summarize, Keys.expiry])
        case .expiryReached:
            return .move(to: .expired(grant), effects: [.cancel(Keys.summarize), .forgetGrant(grant.id)])
        case .grantRequested, .consentAnswered, .grantResponse, .summarizeRequested, .revokeResponse, .restored:
            // One summary at a time.
            return .ignored
        }
    }

    // MARK: - Revoking

    private func inRevoking(_ grant: StudioGrant, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .revokeResponse(.success), .revokeResponse(.failure(.grantRevoked)),
            .revokeResponse(.failure(.grantExpired)), .revokeResponse(.failure(.grantUnknown)):
            return .move(to: .revoked(grant, confirmed: true))
        case .revokeResponse(.failure):
            // Never live again on this device; the member may send the revoke again.
            return .move(to: .revoked(grant, confirmed: false))
        case .grantRequested, .consentAnswered, .grantResponse, .summarizeRequested, .summaryResponse,
            .revokeRequested, .expiryReached, .restored:
            return .ignored
        }
    }

    private func inRevoked(_ grant: StudioGrant, confirmed: Bool, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .revokeRequested:
            return confirmed ? .stay(effects: []) : .move(to: .revoking(grant), effects: [.sendRevoke(grant.id)])
        case .grantRequested, .consentAnswered, .grantResponse, .summarizeRequested, .summaryResponse,
            .revokeResponse, .expiryReached, .restored:
            return .ignored
        }
    }

    /// Moves to revoking: the store forgets the grant first (a restart never brings a revoked
    /// grant back), then the service is told.
    private func revoke(_ grant: StudioGrant, cancelling keys: [EffectKey]) -> Transition<State, Effect> {
        .move(
            to: .revoking(grant),
            effects: keys.map(Effect.cancel) + [.forgetGrant(grant.id), .sendRevoke(grant.id)])
    }
}

extension StudioGrant {
    /// Whether the service issued what was asked: same member, conversation, scope and purpose.
    func matches(_ request: GrantRequest) -> Bool {
        member == request.member && roomID == request.roomID && scope == request.scope && purpose == request.purpose
    }
}

extension Summary {
    /// Whether the summary is of this content: same grant, citing only its messages.
    func isCitation(of content: GrantedContent) -> Bool {
        let ids = Set(content.items.map(\.eventID))
        return grantID == content.grant.id && citedEventIDs.allSatisfy(ids.contains)
            && points.allSatisfy { $0.eventIDs.allSatisfy(ids.contains) }
    }
}
