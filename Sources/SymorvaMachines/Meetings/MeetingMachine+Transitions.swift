import SymorvaRuntime

extension MeetingMachine {
    /// The events of the feed-retry and media-request timers, which the host performs.
    package func event(firing timer: Effect) -> Event? {
        switch timer {
        case .scheduleFeedRetry: .timerFired(.feedRetry)
        case .scheduleMediaRenewal, .scheduleMediaRetry: .timerFired(.mediaRequest)
        case .sendJoin, .pollFeed, .requestMediaSession, .closeMediaSession, .sendLeave, .cancel: nil
        }
    }

    package func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch state {
        case .idle: inIdle(on: event)
        case .joining(let roomID, _): inJoining(roomID, on: event)
        case .stage(let joined, let descriptor): onStage(joined, descriptor, on: event)
        case .listener(let joined), .handRaised(let joined): listening(joined, in: state, on: event)
        case .promoting(let joined): inPromoting(joined, on: event)
        case .demoting(let joined): inDemoting(joined, on: event)
        case .leaving: inLeaving(on: event)
        case .left, .ended, .failed: .ignored
        }
    }

    // MARK: - Before the meeting

    private func inIdle(on event: Event) -> Transition<State, Effect> {
        switch event {
        case .joinRequested(let roomID, let broadcast):
            return .move(
                to: .joining(roomID: roomID, broadcast: broadcast), effects: [.sendJoin(roomID, broadcast: broadcast)])
        case .leaveRequested:
            return .move(to: .left(.requested))
        case .joinResponse, .feedResponse, .snapshotReceived, .mediaSessionResponse, .mediaSessionClosed, .timerFired,
            .leaveResponse:
            return .ignored
        }
    }

    private func inJoining(_ roomID: RoomID, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .joinResponse(.success(let answer)):
            if answer.snapshot.ended { return .move(to: .ended(answer.snapshot)) }
            let joined = JoinedMeeting(userID: answer.userID, snapshot: answer.snapshot, playback: answer.playback)
            let poll = Effect.pollFeed(joined.meetingID, since: joined.snapshot.cursor)
            switch answer.admission {
            case .stage(let descriptor):
                return .move(to: .stage(joined, descriptor), effects: [poll, renewal(of: descriptor)])
            case .listener:
                return .move(to: listening(joined), effects: [poll])
            }
        case .joinResponse(.failure(let error)):
            return .move(to: .failed(error))
        case .leaveRequested:
            return .move(to: .left(.requested), effects: [.cancel(Keys.join)])
        case .joinRequested, .feedResponse, .snapshotReceived, .mediaSessionResponse, .mediaSessionClosed, .timerFired,
            .leaveResponse:
            return .ignored
        }
    }

    // MARK: - In the meeting

    private func onStage(
        _ joined: JoinedMeeting, _ descriptor: MediaSessionDescriptor, on event: Event
    ) -> Transition<State, Effect> {
        let state = State.stage(joined, descriptor)
        switch event {
        case .feedResponse(let result): return feedAnswered(result, joined, in: state)
        case .snapshotReceived(let snapshot): return apply(snapshot, to: joined, in: state)
        case .mediaSessionResponse(.success(let fresh)):
            return .move(to: .stage(joined, fresh), effects: [renewal(of: fresh)])
        case .mediaSessionResponse(.failure(let error)):
            // The token in hand works until it expires; a lost role shows in the feed.
            return .stay(
                effects: error.isTransient
                    ? [.scheduleMediaRetry(after: configuration.retryDelay(afterFailures: 1))] : [])
        case .timerFired(.mediaRequest):
            return .stay(effects: [.requestMediaSession(joined.meetingID)])
        case .timerFired(.feedRetry):
            return .stay(effects: [.pollFeed(joined.meetingID, since: joined.snapshot.cursor)])
        case .leaveRequested:
            return leave(joined, effects: [.closeMediaSession])
        case .joinRequested, .joinResponse, .mediaSessionClosed, .leaveResponse:
            return .ignored
        }
    }

    private func listening(_ joined: JoinedMeeting, in state: State, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .feedResponse(let result): return feedAnswered(result, joined, in: state)
        case .snapshotReceived(let snapshot): return apply(snapshot, to: joined, in: state)
        case .timerFired(.feedRetry):
            return .stay(effects: [.pollFeed(joined.meetingID, since: joined.snapshot.cursor)])
        case .timerFired(.mediaRequest):
            return .stay(effects: [])  // a late renewal of a session already closed
        case .leaveRequested:
            return leave(joined, effects: [])
        case .joinRequested, .joinResponse, .mediaSessionResponse, .mediaSessionClosed, .leaveResponse:
            return .ignored
        }
    }

    private func inPromoting(_ joined: JoinedMeeting, on event: Event) -> Transition<State, Effect> {
        let state = State.promoting(joined)
        switch event {
        case .feedResponse(let result): return feedAnswered(result, joined, in: state)
        case .snapshotReceived(let snapshot): return apply(snapshot, to: joined, in: state)
        case .mediaSessionResponse(.success(let descriptor)):
            return .move(to: .stage(joined, descriptor), effects: [renewal(of: descriptor)])
        case .mediaSessionResponse(.failure(let error)) where error.isTransient:
            return .stay(effects: [.scheduleMediaRetry(after: configuration.retryDelay(afterFailures: 1))])
        case .mediaSessionResponse(.failure):
            // The services say the member is not (or no longer) on stage: listen.
            return .move(to: listening(joined))
        case .timerFired(.mediaRequest):
            return .stay(effects: [.requestMediaSession(joined.meetingID)])
        case .timerFired(.feedRetry):
            return .stay(effects: [.pollFeed(joined.meetingID, since: joined.snapshot.cursor)])
        case .leaveRequested:
            return leave(joined, effects: [])
        case .joinRequested, .joinResponse, .mediaSessionClosed, .leaveResponse:
            return .ignored
        }
    }

    private func inDemoting(_ joined: JoinedMeeting, on event: Event) -> Transition<State, Effect> {
        let state = State.demoting(joined)
        switch event {
        case .mediaSessionClosed:
            guard joined.me?.role == .stage else { return .move(to: listening(joined)) }
            // Promoted again while the old session was closing: a fresh descriptor.
            return .move(to: .promoting(joined), effects: [.requestMediaSession(joined.meetingID)])
        case .feedResponse(let result): return feedAnswered(result, joined, in: state)
        case .snapshotReceived(let snapshot): return apply(snapshot, to: joined, in: state)
        case .timerFired(.feedRetry):
            return .stay(effects: [.pollFeed(joined.meetingID, since: joined.snapshot.cursor)])
        case .timerFired(.mediaRequest):
            return .stay(effects: [])  // a late renewal of the session being closed
        case .leaveRequested:
            return leave(joined, effects: [])
        case .joinRequested, .joinResponse, .mediaSessionResponse, .leaveResponse:
            return .ignored
        }
    }

    private func inLeaving(on event: Event) -> Transition<State, Effect> {
        switch event {
        case .leaveResponse(.left):
            return .move(to: .left(.requested))
        case .leaveResponse(.failed(let error)):
            // A refusal says the services do not have the member any more; a lost request may not have.
            return .move(to: error.isTransient ? .failed(error) : .left(.requested))
        case .joinRequested, .joinResponse, .feedResponse, .snapshotReceived, .mediaSessionResponse,
            .mediaSessionClosed, .timerFired, .leaveRequested:
            return .ignored
        }
    }

    // MARK: - Helpers

    private static let stopAll: [Effect] = [
        .cancel(Keys.feed), .cancel(Keys.feedRetry), .cancel(Keys.media), .cancel(Keys.mediaTimer),
    ]

    private func renewal(of descriptor: MediaSessionDescriptor) -> Effect {
        .scheduleMediaRenewal(at: descriptor.expiresAt.advanced(by: .zero - configuration.renewalMargin))
    }

    private func listening(_ joined: JoinedMeeting) -> State {
        joined.me?.handRaised == true ? .handRaised(joined) : .listener(joined)
    }

    private func leave(_ joined: JoinedMeeting, effects: [Effect]) -> Transition<State, Effect> {
        .move(to: .leaving(joined), effects: Self.stopAll + effects + [.sendLeave(joined.meetingID)])
    }

    /// Effects that end the member's media, if `state` has any running.
    private func closingMedia(in state: State) -> [Effect] {
        if case .stage = state { return [.closeMediaSession] }
        return []
    }

    private func feedAnswered(
        _ result: Result<FeedBatch, MeetingError>, _ joined: JoinedMeeting, in state: State
    ) -> Transition<State, Effect> {
        switch result {
        case .success(let batch):
            var next = joined
            next.feed = .live
            if batch.cursor >= joined.snapshot.cursor {
                next.snapshot = MeetingSnapshot(
                    meetingID: joined.meetingID, roomID: joined.snapshot.roomID, mode: joined.snapshot.mode,
                    ended: batch.ended, participants: batch.participants, cursor: batch.cursor)
            }
            if next.snapshot.ended {
                return .move(to: .ended(next.snapshot), effects: Self.stopAll + closingMedia(in: state))
            }
            return settle(next, in: state, effects: [.pollFeed(next.meetingID, since: next.snapshot.cursor)])
        case .failure(.meetingEnded):
            let snapshot = MeetingSnapshot(
                meetingID: joined.meetingID, roomID: joined.snapshot.roomID, mode: joined.snapshot.mode, ended: true,
                participants: [], cursor: joined.snapshot.cursor)
            return .move(to: .ended(snapshot), effects: Self.stopAll + closingMedia(in: state))
        case .failure(.notRoomMember), .failure(.notParticipant), .failure(.meetingUnknown),
            .failure(.accountEnded), .failure(.notSignedIn):
            return .move(to: .left(.removed), effects: Self.stopAll + closingMedia(in: state))
        case .failure:
            var next = joined
            let failures: Int
            if case .reconnecting(let attempt) = joined.feed { failures = attempt + 1 } else { failures = 1 }
            next.feed = .reconnecting(attempt: failures)
            return .move(
                to: state.replacing(next),
                effects: [.scheduleFeedRetry(after: configuration.retryDelay(afterFailures: failures))])
        }
    }

    private func apply(
        _ snapshot: MeetingSnapshot, to joined: JoinedMeeting, in state: State
    ) -> Transition<State, Effect> {
        guard snapshot.meetingID == joined.meetingID, snapshot.cursor >= joined.snapshot.cursor else {
            return .stay(effects: [])  // older than what the member already knows
        }
        var next = joined
        next.snapshot = snapshot
        if snapshot.ended {
            return .move(to: .ended(snapshot), effects: Self.stopAll + closingMedia(in: state))
        }
        return settle(next, in: state, effects: [])
    }

    /// The state the member's own entry in `next` calls for, coming from `state`.
    private func settle(_ next: JoinedMeeting, in state: State, effects: [Effect]) -> Transition<State, Effect> {
        guard let me = next.me else {
            return .move(to: .left(.removed), effects: Self.stopAll + closingMedia(in: state))
        }
        switch state {
        case .stage(_, let descriptor):
            if me.role == .stage { return .move(to: .stage(next, descriptor), effects: effects) }
            return .move(
                to: .demoting(next),
                effects: effects + [.cancel(Keys.media), .cancel(Keys.mediaTimer), .closeMediaSession])
        case .listener, .handRaised:
            if me.role == .stage {
                return .move(to: .promoting(next), effects: effects + [.requestMediaSession(next.meetingID)])
            }
            return .move(to: listening(next), effects: effects)
        case .promoting:
            if me.role == .stage { return .move(to: .promoting(next), effects: effects) }
            return .move(to: listening(next), effects: effects + [.cancel(Keys.media), .cancel(Keys.mediaTimer)])
        case .demoting:
            return .move(to: .demoting(next), effects: effects)
        case .idle, .joining, .leaving, .left, .ended, .failed:
            preconditionFailure("Meeting: settle(_:in:) from \(state.caseName), which has no meeting to settle")
        }
    }
}

extension MeetingState {
    /// The same state with `joined` in place of its meeting.
    func replacing(_ joined: JoinedMeeting) -> Self {
        switch self {
        case .stage(_, let descriptor): .stage(joined, descriptor)
        case .listener: .listener(joined)
        case .handRaised: .handRaised(joined)
        case .promoting: .promoting(joined)
        case .demoting: .demoting(joined)
        case .leaving: .leaving(joined)
        case .idle, .joining, .left, .ended, .failed: self
        }
    }
}
