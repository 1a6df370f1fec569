import SymorvaRuntime

extension MediaSessionMachine {
    /// The events of the retry, keep-alive and attempt timers, which the host performs.
    package func event(firing timer: Effect) -> Event? {
        switch timer {
        case .scheduleRetry: .timerFired(.retry)
        case .scheduleKeepalive: .timerFired(.keepalive)
        case .startAttemptTimeout: .timerFired(.attempt)
        case .startStallTimeout: .timerFired(.stall)
        case .startUpstreamTimeout: .timerFired(.upstream)
        case .createSession, .attachPlugin, .readEvents, .sendKeepalive, .joinRoom, .startPeer, .createOffer,
            .sendOffer, .applyAnswer, .trickle, .trickleComplete, .setSending, .configureMuted, .hangUp,
            .destroySession, .cancel:
            nil
        }
    }

    package func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch state {
        case .idle(let call): inIdle(call, on: event)
        case .connecting(let call, let step): inConnecting(call, step, on: event)
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
        case .descriptorUpdated(let descriptor):
            return .move(to: .idle(call.with(descriptor)))
        case .sessionCreated, .pluginAttached, .roomJoined, .peerStarted, .offerCreated, .answerReceived,
            .answerApplied, .localCandidate, .localCandidatesGathered, .iceStateChanged, .incomingAudioChanged,
            .peerFailed, .serverEvent, .eventsFailed, .keepaliveAnswered, .configureAnswered, .timerFired:
            return .ignored
        }
    }

    private func inConnecting(_ call: MediaCall, _ step: ConnectStep, on event: Event) -> Transition<State, Effect> {
        let teardown = tearDown(step)
        switch event {
        case .connectRequested:
            return .stay
        case .disconnectRequested:
            return .move(to: .closed(.requested), effects: teardown)
        case .microphoneRequested(let enabled):
            return .move(to: .connecting(call.with(microphone: enabled), step))
        case .descriptorUpdated(let descriptor):
            return .move(to: .connecting(call.with(descriptor), step))
        case .sessionCreated(let result):
            guard case .creatingSession = step else { return .stay }  // a late answer of another attempt
            switch result {
            case .success(let session):
                return .move(
                    to: .connecting(call, .attaching(session: session)),
                    effects: [
                        .attachPlugin(session: session, plugin: call.descriptor.plugin), .readEvents(session: session),
                        .scheduleKeepalive(after: configuration.keepaliveInterval),
                    ])
            case .failure(let error):
                return retryOrFail(call, error, teardown: teardown)
            }
        case .pluginAttached(let result):
            guard case .attaching(let session) = step else { return .stay }
            switch result {
            case .success(let handle):
                let link = MediaServerLink(session: session, handle: handle)
                return .move(
                    to: .connecting(call, .joining(link)),
                    effects: [.joinRoom(link, MediaRoomJoin(call.descriptor, muted: !call.microphoneEnabled))])
            case .failure(let error):
                return retryOrFail(call, error, teardown: teardown)
            }
        case .roomJoined(let result):
            guard case .joining(let link) = step else { return .stay }
            switch result {
            case .success:
                return .move(
                    to: .negotiating(call, link, .startingPeer),
                    effects: [.startPeer(sending: call.microphoneEnabled)])
            case .failure(let error):
                return retryOrFail(call, error, teardown: teardown)
            }
        case .serverEvent(let serverEvent):
            return serverSaid(serverEvent, call, teardown: teardown)
        case .eventsFailed(let error):
            return retryOrFail(call, error, teardown: teardown)
        case .keepaliveAnswered(let error):
            guard let error else { return .stay }
            return retryOrFail(call, error, teardown: teardown)
        case .timerFired(let timer):
            return timerFired(timer, call, session: step.session, teardown: teardown)
        case .peerStarted, .offerCreated, .answerReceived, .answerApplied, .localCandidate, .localCandidatesGathered,
            .iceStateChanged, .incomingAudioChanged, .peerFailed, .configureAnswered:
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
        case .descriptorUpdated(let descriptor):
            return .move(to: .negotiating(call.with(descriptor), link, step))
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
                    effects: [.sendOffer(link, offer, muted: !call.microphoneEnabled)])
            case .failure(let error):
                return retryOrFail(call, error, teardown: teardown)
            }
        case .answerReceived(let result):
            guard step == .awaitingAnswer else { return .stay }
            switch result {
            case .success(let answer):
                return .move(to: .negotiating(call, link, .applyingAnswer), effects: [.applyAnswer(answer)])
            case .failure(let error):
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
                    effects: [.cancel(Keys.attempt)]
                        + (expectAudio ? [.startUpstreamTimeout(after: configuration.stallTimeout)] : []))
            case .failed:
                return retryOrFail(call, .iceFailed, teardown: teardown)
            case .new, .checking, .disconnected, .closed:
                return .stay
            }
        case .incomingAudioChanged:
            return .ignored  // watched once connected
        case .serverEvent(.audioReceiving(let receiving)):
            return .move(to: .negotiating(call.with(serverReceivesAudio: receiving), link, step))
        case .serverEvent(let serverEvent):
            return serverSaid(serverEvent, call, teardown: teardown)
        case .configureAnswered:
            return .stay
        case .timerFired(let timer):
            return timerFired(timer, call, session: link.session, teardown: teardown)
        case .sessionCreated, .pluginAttached, .roomJoined:
            return .ignored
        }
    }

    private func inConnected(_ call: MediaCall, _ link: MediaServerLink, on event: Event) -> Transition<State, Effect> {
        let teardown = tearDown(link)
        switch event {
        case .connectRequested, .configureAnswered:
            return .stay
        case .disconnectRequested:
            return .move(to: .closed(.requested), effects: teardown)
        case .microphoneRequested(let enabled):
            return .move(
                to: .connected(call.with(microphone: enabled), link),
                effects: [.setSending(enabled), .configureMuted(link, muted: !enabled)]
                    + upstreamWatch(microphoneTurned: enabled, call))
        case .descriptorUpdated(let descriptor):
            return .move(to: .connected(call.with(descriptor), link))
        case .localCandidate, .localCandidatesGathered, .peerFailed, .eventsFailed, .keepaliveAnswered:
            return whileJoined(event, call, link, teardown: teardown)
        case .iceStateChanged(let ice):
            if ice == .failed { return retryOrFail(call, .iceFailed, teardown: teardown) }
            return .stay
        case .incomingAudioChanged(let flowing):
            // The room sends its mix all the time: audio that stays away means a cut path.
            return .stay(
                effects: flowing ? [.cancel(Keys.stall)] : [.startStallTimeout(after: configuration.stallTimeout)])
        case .timerFired(.stall), .timerFired(.upstream):
            return retryOrFail(call, .mediaStalled, teardown: teardown)
        case .serverEvent(.audioReceiving(let receiving)):
            return .move(
                to: .connected(call.with(serverReceivesAudio: receiving), link),
                effects: upstreamWatch(serverReceives: receiving, call))
        case .serverEvent(let serverEvent):
            return serverSaid(serverEvent, call, teardown: teardown)
        case .timerFired(.attempt):
            return .stay  // a late deadline of the attempt that connected
        case .timerFired(let timer):
            return timerFired(timer, call, session: link.session, teardown: teardown)
        case .sessionCreated, .pluginAttached, .roomJoined, .peerStarted, .offerCreated, .answerReceived,
            .answerApplied:
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
        case .descriptorUpdated(let descriptor):
            return .move(to: .reconnecting(call.with(descriptor), error))
        case .timerFired(.retry):
            return startAttempt(call)
        case .timerFired(.keepalive), .timerFired(.attempt), .timerFired(.stall), .timerFired(.upstream):
            return .stay  // a late timer of the connection that dropped
        case .sessionCreated, .pluginAttached, .roomJoined, .peerStarted, .offerCreated, .answerReceived,
            .answerApplied, .localCandidate, .localCandidatesGathered, .iceStateChanged, .incomingAudioChanged,
            .peerFailed, .serverEvent, .eventsFailed, .keepaliveAnswered, .configureAnswered:
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
        .move(
            to: .connecting(call, .creatingSession),
            effects: [
                .createSession(serverURL: call.descriptor.serverURL),
                .startAttemptTimeout(after: configuration.attemptTimeout),
            ])
    }

    /// A failure of the connection: the token refused closes, a permanent failure or one too
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
        _ timer: MediaSessionTimer, _ call: MediaCall, session: UInt64?, teardown: [Effect]
    ) -> Transition<State, Effect> {
        switch timer {
        case .keepalive:
            guard let session else { return .stay }
            return .stay(
                effects: [.sendKeepalive(session: session), .scheduleKeepalive(after: configuration.keepaliveInterval)])
        case .attempt:
            return retryOrFail(call, .timedOut, teardown: teardown)
        case .retry, .stall, .upstream:
            return .stay  // a late retry timer; the stall timer only runs while connected
        }
    }

    /// Everything of a connection still being made: its request, stream, keep-alive and deadline,
    /// and the session once it exists.
    private func tearDown(_ step: ConnectStep) -> [Effect] {
        switch step {
        case .creatingSession:
            [.cancel(Keys.request), .cancel(Keys.attempt)]
        case .attaching(let session):
            [
                .cancel(Keys.request), .cancel(Keys.events), .cancel(Keys.keepalive), .cancel(Keys.attempt),
                .destroySession(session),
            ]
        case .joining(let link):
            tearDown(link)
        }
    }

    /// Everything of a joined connection: its requests, stream, keep-alive, deadline and peer,
    /// then the hang-up.
    private func tearDown(_ link: MediaServerLink) -> [Effect] {
        [
            .cancel(Keys.request), .cancel(Keys.events), .cancel(Keys.keepalive), .cancel(Keys.peer),
            .cancel(Keys.attempt), .cancel(Keys.stall), .cancel(Keys.upstream), .hangUp(link),
        ]
    }
}

extension MediaConnectStep {
    /// The media-server session, once created.
    var session: UInt64? {
        switch self {
        case .creatingSession: nil
        case .attaching(let session): session
        case .joining(let link): link.session
        }
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

    func with(_ descriptor: MediaSessionDescriptor) -> MediaCall {
        var call = self
        call.descriptor = descriptor
        return call
    }
}
