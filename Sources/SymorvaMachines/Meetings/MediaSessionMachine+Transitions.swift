import SymorvaRuntime

extension MediaSessionMachine {
    /// The events of the machine's timers, which the host performs.
    package func event(firing timer: Effect) -> Event? {
        switch timer {
        case .scheduleRetry: .timerFired(.retry)
        case .scheduleKeepalive: .timerFired(.keepalive)
        case .startAttemptTimeout: .timerFired(.attempt)
        case .startStallTimeout: .timerFired(.stall)
        case .startUpstreamTimeout: .timerFired(.upstream)
        case .scheduleAudioCheck: .timerFired(.audioCheck)
        case .requestJoin, .readEvents, .sendKeepalive, .startPeer, .createOffer, .sendOffer, .applyAnswer, .trickle,
            .trickleComplete, .setSending, .configureMuted, .hangUp, .checkIncomingAudio, .awaitIncomingAudio, .cancel:
            nil
        }
    }

    /// The account's scope moving on (sign-out, switch, cache clear) ends the session as a
    /// disconnect does: the session is a child of the meeting in that scope.
    package func event(scopeMovedOn reason: AccountScope.Reason) -> Event? { .disconnectRequested }

    package func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch state {
        case .idle(let call): inIdle(call, on: event)
        case .connecting(let call): inConnecting(call, on: event)
        case .negotiating(let call, let link, let step): inNegotiating(call, link, step, on: event)
        case .connected(let call, let link): inConnected(call, link, on: event)
        case .reconnecting(let call, let error): inReconnecting(call, error, on: event)
        case .closed, .failed: .ignored
        }
    }

    // MARK: - States

    private func inIdle(_ call: MediaCall, on event: Event) -> Transition<State, Effect> {
        switch event {
        case .connectRequested:
            return startAttempt(call)
        case .disconnectRequested:
            return .move(to: .closed(.requested))
        case .microphoneRequested(let enabled):
            return .move(to: .idle(call.with(microphone: enabled)))
        case .roomJoined, .peerStarted, .offerCreated, .serverReplied, .answerApplied, .localCandidate,
            .localCandidatesGathered, .iceStateChanged, .incomingAudioChecked, .peerFailed, .serverEvent, .eventsFailed,
            .keepaliveAnswered, .timerFired:
            return .ignored
        }
    }

    private func inConnecting(_ call: MediaCall, on event: Event) -> Transition<State, Effect> {
        // The services' join in flight and the attempt's deadline; a session they made after a
        // cancel is never handed over, and Janus times it out (or the next join destroys it).
        let teardown: [Effect] = [.cancel(Keys.request), .cancel(Keys.attempt)]
        switch event {
        case .connectRequested:
            return .stay
        case .disconnectRequested:
            return .move(to: .closed(.requested), effects: teardown)
        case .microphoneRequested(let enabled):
            return .move(to: .connecting(call.with(microphone: enabled)))
        case .roomJoined(.success(let link)):
            return .move(
                to: .negotiating(call, link, .startingPeer),
                effects: [
                    .readEvents(link), .scheduleKeepalive(after: configuration.keepaliveInterval),
                    .startPeer(sending: call.microphoneEnabled),
                ])
        case .roomJoined(.failure(let error)):
            return retryOrFail(call, error, teardown: teardown)
        case .timerFired(.attempt):
            return retryOrFail(call, .timedOut, teardown: teardown)
        case .timerFired:
            return .stay  // a late timer of an earlier connection
        case .peerStarted, .offerCreated, .serverReplied, .answerApplied, .localCandidate, .localCandidatesGathered,
            .iceStateChanged, .incomingAudioChecked, .peerFailed, .serverEvent, .eventsFailed, .keepaliveAnswered:
            return .ignored
        }
    }

    private func inNegotiating(
        _ call: MediaCall, _ link: MediaServerLink, _ step: NegotiationStep, on event: Event
    ) -> Transition<State, Effect> {
        let teardown = tearDown(link)
        switch event {
        case .connectRequested:
            return .stay
        case .disconnectRequested:
            return .move(to: .closed(.requested), effects: teardown)
        case .microphoneRequested(let enabled):
            return .move(
                to: .negotiating(call.with(microphone: enabled), link, step),
                effects: [.setSending(enabled), .configureMuted(link, muted: !enabled)])
        case .peerStarted(let error):
            guard step == .startingPeer else { return .stay }
            if let error { return retryOrFail(call, error, teardown: teardown) }
            return .move(to: .negotiating(call, link, .creatingOffer), effects: [.createOffer])
        case .offerCreated(let result):
            guard step == .creatingOffer else { return .stay }
            switch result {
            case .success(let offer):
                return .move(
                    to: .negotiating(call, link, .awaitingAnswer),
                    effects: [
                        .sendOffer(link, offer, muted: !call.microphoneEnabled, transaction: call.offerTransaction)
                    ])
            case .failure(let error):
                return retryOrFail(call, error, teardown: teardown)
            }
        case .serverReplied(let transaction, let reply):
            // Replies to anything but this connection's offer (mute changes) need nothing.
            guard step == .awaitingAnswer, transaction == call.offerTransaction else { return .stay }
            switch reply {
            case .description(let answer):
                return .move(to: .negotiating(call, link, .applyingAnswer), effects: [.applyAnswer(answer)])
            case .accepted:
                return retryOrFail(call, .invalidResponse, teardown: teardown)  // an offer's reply carries the answer
            case .failed(let error):
                return retryOrFail(call, error, teardown: teardown)
            }
        case .answerApplied(let error):
            guard step == .applyingAnswer else { return .stay }
            if let error { return retryOrFail(call, error, teardown: teardown) }
            return .move(to: .negotiating(call, link, .connectingMedia))
        case .localCandidate, .localCandidatesGathered, .peerFailed, .eventsFailed, .keepaliveAnswered:
            return whileJoined(event, call, link, teardown: teardown)
        case .iceStateChanged(let ice):
            switch ice {
            case .connected, .completed:
                guard step == .connectingMedia else { return .stay }
                var fresh = call
                fresh.failures = 0
                // Sending from the start: the server is to confirm that the audio reaches it.
                let expectAudio = call.microphoneEnabled && !call.serverReceivesAudio
                return .move(
                    to: .connected(fresh, link),
                    effects: [.cancel(Keys.attempt), .scheduleAudioCheck(after: configuration.audioCheckInterval)]
                        + (expectAudio ? [.startUpstreamTimeout(after: configuration.stallTimeout)] : []))
            case .failed:
                return retryOrFail(call, .iceFailed, teardown: teardown)
            case .new, .checking, .disconnected, .closed:
                return .stay
            }
        case .incomingAudioChecked:
            return .ignored  // watched once connected
        case .serverEvent(.audioReceiving(let receiving)):
            return .move(to: .negotiating(call.with(serverReceivesAudio: receiving), link, step))
        case .serverEvent(let serverEvent):
            return serverSaid(serverEvent, call, teardown: teardown)
        case .timerFired(let timer):
            return timerFired(timer, call, link, teardown: teardown)
        case .roomJoined:
            return .ignored
        }
    }

    private func inConnected(_ call: MediaCall, _ link: MediaServerLink, on event: Event) -> Transition<State, Effect> {
        let teardown = tearDown(link)
        switch event {
        case .connectRequested, .serverReplied:
            return .stay
        case .disconnectRequested:
            return .move(to: .closed(.requested), effects: teardown)
        case .microphoneRequested(let enabled):
            return .move(
                to: .connected(call.with(microphone: enabled), link),
                effects: [.setSending(enabled), .configureMuted(link, muted: !enabled)]
                    + upstreamWatch(microphoneTurned: enabled, call))
        case .localCandidate, .localCandidatesGathered, .peerFailed, .eventsFailed, .keepaliveAnswered:
            return whileJoined(event, call, link, teardown: teardown)
        case .iceStateChanged(let ice):
            if ice == .failed { return retryOrFail(call, .iceFailed, teardown: teardown) }
            return .stay
        case .incomingAudioChecked(let arrived):
            return incomingAudio(arrived: arrived, call, link)
        case .timerFired(.stall), .timerFired(.upstream):
            return retryOrFail(call, .mediaStalled, teardown: teardown)
        case .timerFired(.audioCheck):
            return .stay(effects: [.checkIncomingAudio])
        case .serverEvent(.audioReceiving(let receiving)):
            return .move(
                to: .connected(call.with(serverReceivesAudio: receiving), link),
                effects: upstreamWatch(serverReceives: receiving, call))
        case .serverEvent(let serverEvent):
            return serverSaid(serverEvent, call, teardown: teardown)
        case .timerFired(.attempt):
            return .stay  // a late deadline of the attempt that connected
        case .timerFired(let timer):
            return timerFired(timer, call, link, teardown: teardown)
        case .roomJoined, .peerStarted, .offerCreated, .answerApplied:
            return .ignored
        }
    }

    private func inReconnecting(
        _ call: MediaCall, _ error: MediaSessionError, on event: Event
    ) -> Transition<State, Effect> {
        switch event {
        case .connectRequested:
            return .stay
        case .disconnectRequested:
            return .move(to: .closed(.requested), effects: [.cancel(Keys.retry)])
        case .microphoneRequested(let enabled):
            return .move(to: .reconnecting(call.with(microphone: enabled), error))
        case .timerFired(.retry):
            return startAttempt(call)
        case .timerFired(.keepalive), .timerFired(.attempt), .timerFired(.stall), .timerFired(.upstream),
            .timerFired(.audioCheck):
            return .stay  // a late timer of the connection that dropped
        case .roomJoined, .peerStarted, .offerCreated, .serverReplied, .answerApplied, .localCandidate,
            .localCandidatesGathered, .iceStateChanged, .incomingAudioChecked, .peerFailed, .serverEvent, .eventsFailed,
            .keepaliveAnswered:
            return .ignored
        }
    }

    // MARK: - Shared steps

    /// What a joined connection (negotiating or connected) does alike: it trickles its
    /// candidates, and a failed peer, event stream or keep-alive drops it. Only those events
    /// are routed here.
    private func whileJoined(
        _ event: Event, _ call: MediaCall, _ link: MediaServerLink, teardown: [Effect]
    ) -> Transition<State, Effect> {
        switch event {
        case .localCandidate(let candidate): .stay(effects: [.trickle(link, candidate)])
        case .localCandidatesGathered: .stay(effects: [.trickleComplete(link)])
        case .peerFailed(let error), .eventsFailed(let error): retryOrFail(call, error, teardown: teardown)
        case .keepaliveAnswered(let error): error.map { retryOrFail(call, $0, teardown: teardown) } ?? .stay
        default: .ignored
        }
    }

    /// The room's audio while connected: it arriving (again) cancels the stall timer and looks
    /// again after an interval; none since the last look starts the stall timer, and the next
    /// samples are waited for rather than looked for. The room sends its mix all the time, so
    /// audio that stays away means a cut path; audio that never came starts no timer.
    private func incomingAudio(arrived: Bool, _ call: MediaCall, _ link: MediaServerLink) -> Transition<
        State, Effect
    > {
        let next = call.with(incomingAudio: arrived)
        let look: Effect = arrived ? .scheduleAudioCheck(after: configuration.audioCheckInterval) : .awaitIncomingAudio
        switch (call.incomingAudio, arrived) {
        case (false, true): return .move(to: .connected(next, link), effects: [.cancel(Keys.stall), look])
        case (true, false):
            return .move(
                to: .connected(next, link), effects: [.startStallTimeout(after: configuration.stallTimeout), look])
        case (true, true), (false, false): return .stay(effects: [look])
        }
    }

    /// The watch on the member's audio at the server once the microphone changed: off, nothing
    /// is expected; on while the server hears nothing from the member, it is to say it does.
    private func upstreamWatch(microphoneTurned enabled: Bool, _ call: MediaCall) -> [Effect] {
        guard enabled else { return [.cancel(Keys.upstream)] }
        guard !call.microphoneEnabled, !call.serverReceivesAudio else { return [] }
        return [.startUpstreamTimeout(after: configuration.stallTimeout)]
    }

    /// The watch once the server said whether the member's audio reaches it: not reaching it
    /// with the microphone on is the other direction of a cut path.
    private func upstreamWatch(serverReceives receiving: Bool, _ call: MediaCall) -> [Effect] {
        if receiving { return [.cancel(Keys.upstream)] }
        return call.microphoneEnabled ? [.startUpstreamTimeout(after: configuration.stallTimeout)] : []
    }

    private func startAttempt(_ call: MediaCall) -> Transition<State, Effect> {
        var next = call
        next.connection += 1
        return .move(
            to: .connecting(next),
            effects: [.requestJoin, .startAttemptTimeout(after: configuration.attemptTimeout)])
    }

    /// A failure of the connection: the member off stage closes, a permanent failure or one too
    /// many fails, anything else reconnects after a backoff. The connection is torn down in every case.
    private func retryOrFail(
        _ call: MediaCall, _ error: MediaSessionError, teardown: [Effect]
    ) -> Transition<State, Effect> {
        if error == .unauthorized { return .move(to: .closed(.revoked), effects: teardown) }
        let failures = call.failures + 1
        guard error.isTransient, failures < configuration.maximumAttempts else {
            return .move(to: .failed(error), effects: teardown)
        }
        var next = call
        next.failures = failures
        next.serverReceivesAudio = false  // a new connection: the server has heard nothing yet
        next.incomingAudio = false
        let delay = configuration.reconnectBackoff.delay(attempt: failures, jitter: 0)
        return .move(to: .reconnecting(next, error), effects: teardown + [.scheduleRetry(after: delay)])
    }

    private func serverSaid(
        _ event: MediaServerEvent, _ call: MediaCall, teardown: [Effect]
    ) -> Transition<State, Effect> {
        switch event {
        case .webrtcUp: .stay
        case .hangup, .sessionLost: retryOrFail(call, .sessionLost, teardown: teardown)
        case .removed: .move(to: .closed(.revoked), effects: teardown)
        case .audioReceiving: .stay  // no media before the negotiation
        }
    }

    private func timerFired(
        _ timer: MediaSessionTimer, _ call: MediaCall, _ link: MediaServerLink, teardown: [Effect]
    ) -> Transition<State, Effect> {
        switch timer {
        case .keepalive:
            return .stay(effects: [.sendKeepalive(link), .scheduleKeepalive(after: configuration.keepaliveInterval)])
        case .attempt:
            return retryOrFail(call, .timedOut, teardown: teardown)
        case .retry, .stall, .upstream, .audioCheck:
            return .stay  // a late retry timer; the audio timers only run while connected
        }
    }

    /// Everything of a joined connection: its requests, stream, keep-alive, deadline, peer and
    /// audio watches, then the hang-up.
    private func tearDown(_ link: MediaServerLink) -> [Effect] {
        [
            .cancel(Keys.request), .cancel(Keys.events), .cancel(Keys.keepalive), .cancel(Keys.peer),
            .cancel(Keys.attempt), .cancel(Keys.stall), .cancel(Keys.upstream), .cancel(Keys.audioCheck),
            .cancel(Keys.audioWait), .hangUp(link),
        ]
    }
}

extension MediaCall {
    func with(microphone enabled: Bool) -> MediaCall {
        var call = self
        call.microphoneEnabled = enabled
        return call
    }

    func with(serverReceivesAudio receiving: Bool) -> MediaCall {
        var call = self
        call.serverReceivesAudio = receiving
        return call
    }

    func with(incomingAudio arrived: Bool) -> MediaCall {
        var call = self
        call.incomingAudio = arrived
        return call
    }
}
