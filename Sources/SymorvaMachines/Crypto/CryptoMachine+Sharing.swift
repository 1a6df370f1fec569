import SymorvaRuntime

/// Sharing a room's key, decided here and performed by the interpreter: a round per room reads
/// the facts (recipients' devices, who lacks an Olm session, who is outdated, the room's
/// session), has outdated recipients queried once (through the machine's one `keys/query`),
/// decides whether to replace the session (``RoomKeySharing/mustRotate(_:policy:)``), claims
/// one-time keys for the devices without an Olm session in one request, and sends the key in
/// batches of whole users. Requests for a room whose round is running wait for the next round
/// (the recipients may have changed); each request's outcome stays in
/// ``CryptoWork/shareOutcomes`` until its caller takes it.
extension CryptoMachine {
    /// Applies a sharing event in `ready` or `backingOff`; `nil` when `event` is not one.
    /// `accepting` says whether new requests are taken (only when ready).
    func share(_ event: Event, work: inout CryptoWork, accepting: Bool) -> [Effect]? {
        switch event {
        case .roomKeyNeeded(let room, let ticket):
            guard accepting else { return nil }
            if var share = work.sharing[room.roomID] {
                share.room = room
                share.nextTickets.append(ticket)
                work.sharing[room.roomID] = share
                return []
            }
            return startRound(room, tickets: [ticket], work: &work)
        case .roomKeyFactsLoaded(let roomID, let round, let result):
            guard var share = work.sharing[roomID], share.round == round, share.step == .loadingFacts else {
                return []  // stale
            }
            switch result {
            case .failure(let error):
                let failure: CryptoRequestError =
                    if case .store(let store) = error, Self.isTransient(error) {
                        .storeUnavailable(store)
                    } else {
                        .local(error)
                    }
                return finish(roomID, .failed(failure), work: &work)
            case .success(let facts):
                if !facts.outdatedUsers.isEmpty, !share.queried {
                    share.queried = true
                    share.step = .awaitingQuery(facts.outdatedUsers)
                    work.sharing[roomID] = share
                    work.outdated.formUnion(facts.outdatedUsers.filter { !(work.querying ?? []).contains($0) })
                    return []
                }
                let rotate = RoomKeySharing.mustRotate(facts, policy: RotationPolicy(room: share.room))
                let session: SessionChoice =
                    if !rotate, let outbound = facts.outbound { .current(outbound.sessionID) } else { .new }
                let recipients = RoomKeySharing.recipients(facts, rotating: rotate)
                let claiming = recipients.filter { facts.withoutOlmSession.contains($0) }
                guard claiming.isEmpty else {
                    share.step = .claiming(session: session, recipients: recipients, claiming: claiming)
                    work.sharing[roomID] = share
                    return [.claimOneTimeKeys(roomID, round: round, claiming)]
                }
                return send(roomID, session: session, to: recipients, work: &work)
            }
        case .oneTimeKeysClaimed(let roomID, let round, let result):
            guard let share = work.sharing[roomID], share.round == round,
                case .claiming(let session, let recipients, let claiming) = share.step
            else { return [] }  // stale
            switch result {
            case .failure(let error):
                return finish(roomID, .failed(error), work: &work)
            case .success(let reached):
                // Devices without a usable one-time key get no key this time; the next send
                // tries them again.
                let unreached = Set(claiming).subtracting(reached)
                return send(roomID, session: session, to: recipients.filter { !unreached.contains($0) }, work: &work)
            }
        case .roomKeySent(let roomID, let round, let result):
            guard var share = work.sharing[roomID], share.round == round,
                case .sending(_, let remaining) = share.step
            else { return [] }  // stale
            switch result {
            case .failure(let error):
                return finish(roomID, .failed(error), work: &work)
            case .success(let sent):
                guard let batch = remaining.first else {
                    return finish(roomID, .shared(sessionID: sent.sessionID), work: &work)
                }
                let session = SessionChoice.current(sent.sessionID)
                share.step = .sending(session: session, remaining: Array(remaining.dropFirst()))
                work.sharing[roomID] = share
                return [.sendRoomKey(roomID, round: round, RoomKeyBatch(session: session, devices: batch))]
            }
        case .shareOutcomeTaken(let ticket):
            work.shareOutcomes[ticket] = nil
            return []
        default:
            return nil
        }
    }

    /// A `keys/query` answered: rounds waiting for it read their facts again, or fail with a
    /// retryable failure (the send queue retries; the machine backs off and queries again).
    func queryAnswered(_ result: Result<KeyQueryReport, CryptoRequestError>, queried: [UserID], work: inout CryptoWork)
        -> [Effect]
    {
        var effects: [Effect] = []
        for (roomID, share) in work.sharing.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            guard case .awaitingQuery(let users) = share.step else { continue }
            if case .failure(let error) = result, error.isRetryable {
                if !Set(users).isDisjoint(with: queried) { effects += finish(roomID, .failed(error), work: &work) }
                continue
            }
            let stillWaiting = users.contains { work.outdated.contains($0) || (work.querying ?? []).contains($0) }
            guard !stillWaiting else { continue }
            var next = share
            next.step = .loadingFacts
            work.sharing[roomID] = next
            effects.append(.loadRoomKeyFacts(share.room, round: share.round))
        }
        return effects
    }

    /// The keys of the rounds in progress (cancelled when the machine stops or fails).
    func shareKeys(_ work: CryptoWork?) -> [EffectKey] {
        (work?.sharing.values.map(\.round).sorted() ?? []).map(Self.shareKey)
    }

    private func startRound(_ room: EncryptedRoom, tickets: [ShareTicket], work: inout CryptoWork) -> [Effect] {
        let round = work.nextShareRound
        work.nextShareRound += 1
        work.sharing[room.roomID] = RoomKeyShare(room: room, round: round, step: .loadingFacts, tickets: tickets)
        return [.loadRoomKeyFacts(room, round: round)]
    }

    /// Sends the key to `recipients` in batches; with nothing to send and no new session, the
    /// round is done.
    private func send(_ roomID: RoomID, session: SessionChoice, to recipients: [ShareDevice], work: inout CryptoWork)
        -> [Effect]
    {
        var batches = RoomKeySharing.batches(recipients)
        if case .current(let sessionID) = session, batches.isEmpty {
            return finish(roomID, .shared(sessionID: sessionID), work: &work)
        }
        let first = batches.isEmpty ? [] : batches.removeFirst()
        guard var share = work.sharing[roomID] else { return [] }
        share.step = .sending(session: session, remaining: batches)
        work.sharing[roomID] = share
        return [.sendRoomKey(roomID, round: share.round, RoomKeyBatch(session: session, devices: first))]
    }

    /// Ends the room's round with `outcome` for its tickets, and starts the next round for the
    /// requests that arrived meanwhile.
    private func finish(_ roomID: RoomID, _ outcome: ShareOutcome, work: inout CryptoWork) -> [Effect] {
        guard let share = work.sharing.removeValue(forKey: roomID) else { return [] }
        for ticket in share.tickets { work.shareOutcomes[ticket] = outcome }
        guard !share.nextTickets.isEmpty else { return [] }
        return startRound(share.room, tickets: share.nextTickets, work: &work)
    }
}
