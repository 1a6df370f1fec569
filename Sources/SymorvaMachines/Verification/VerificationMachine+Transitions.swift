import SymorvaRuntime

extension VerificationMachine {
    package typealias Outcome = Transition<State, Effect>

    package func transition(from state: State, on event: Event) -> Outcome {
        if state.isFinished { return .ignored }  // verified and cancelled are final
        switch event {
        case .verifyAsked(let flow): return verifyAsked(flow, in: state)
        case .requestReceived(let flow, let age): return requestReceived(flow, age: age, in: state)
        case .acceptAsked: return acceptAsked(in: state)
        case .readyReceived(let ready): return readyReceived(ready, in: state)
        case .sasAsked:
            guard case .ready(let flow) = state else { return .ignored }
            return startSAS(flow)
        case .startReceived(let flow, let start): return startReceived(start, opening: flow, in: state)
        case .acceptReceived(let accept): return acceptReceived(accept, in: state)
        case .keyReceived(let facts): return keyReceived(facts, in: state)
        case .codeCompared(let matches): return codeCompared(matches, in: state)
        case .macReceived(let verdict): return macReceived(verdict, in: state)
        case .doneReceived:
            switch state {
            case .idle: return .ignored
            case .awaitingDone(let progress, let keys):
                return .move(to: .verified(progress.flow, keys), effects: Self.stopTimers)
            case .scanConfirmed(let flow, let keys):
                return .move(to: .verified(flow, keys), effects: Self.stopTimers)
            case .reciprocating(let flow, let keys):
                // The shower confirmed our scan: sign what the code proved, and answer with done.
                return .move(
                    to: .verified(flow, keys), effects: [.crossSign(flow, keys), .sendDone(flow)] + Self.stopTimers)
            default: return unexpected(in: state)
            }
        case .qrScanned(let outcome):
            guard case .ready(let flow) = state else { return .ignored }
            switch outcome {
            case .proven(let keys): return .move(to: .reciprocating(flow, keys), effects: [.sendReciprocate(flow)])
            case .mismatch(let code): return cancel(flow, code)
            }
        case .reciprocateReceived(let outcome):
            switch state {
            case .idle: return .ignored
            case .ready(let flow):
                switch outcome {
                case .proven(let keys): return .move(to: .scanned(flow, keys))
                case .mismatch(let code): return cancel(flow, code)
                }
            default: return unexpected(in: state)
            }
        case .invalidMessageReceived:
            guard let flow = state.flow else { return .ignored }
            return cancel(flow, .invalidMessage)
        case .cancelReceived(let code):
            guard let flow = state.flow else { return .ignored }
            return .move(to: .cancelled(flow, code, byUs: false), effects: Self.stopTimers)
        case .cancelAsked:
            guard let flow = state.flow else { return .ignored }
            return cancel(flow, .user)
        case .timedOut(let timeout): return timedOut(timeout, in: state)
        }
    }

    // MARK: - Request and ready

    private func verifyAsked(_ flow: VerificationFlow, in state: State) -> Outcome {
        guard case .idle = state else { return .ignored }
        let overall = Effect.scheduleTimeout(.overall, after: Self.overallTimeout)
        if !flow.usesRequest, flow.peerDeviceID != nil {
            let start = SASStart(fromDevice: flow.ourselves.deviceID, method: KeyVerificationMethod.sas, offer: .ours)
            return .move(
                to: .started(SASProgress(flow: flow, weStarted: true, start: start)),
                effects: [overall, .sendStart(flow, .ours)])
        }
        var requestFlow = flow
        requestFlow.usesRequest = true
        return .move(
            to: .requested(requestFlow),
            effects: [
                overall, .scheduleTimeout(.request, after: Self.requestTimeout),
                .sendRequest(requestFlow, methods: KeyVerificationMethod.ours),
            ])
    }

    private func requestReceived(_ flow: VerificationFlow, age: Duration, in state: State) -> Outcome {
        guard case .idle = state else { return .ignored }  // the flow is under way: a repeat changes nothing
        guard Self.requestAgeLimit.contains(age) else { return .stay }  // too old (or from the future): not shown
        return .move(
            to: .requestReceived(flow),
            effects: [
                .scheduleTimeout(.overall, after: Self.overallTimeout),
                .scheduleTimeout(.request, after: Self.requestTimeout),
            ])
    }

    private func acceptAsked(in state: State) -> Outcome {
        switch state {
        case .requestReceived(let flow):
            return .move(
                to: .ready(flow),
                effects: [.cancel(Keys.request), .sendReady(flow, methods: KeyVerificationMethod.ours)])
        case .startReceived(let progress):
            guard let agreement = progress.agreement else { return cancel(progress.flow, .unknownMethod) }
            return .move(to: .accepted(progress), effects: [.sendAccept(progress.flow, agreement)])
        default: return .ignored
        }
    }

    private func readyReceived(_ ready: VerificationReady, in state: State) -> Outcome {
        switch state {
        case .idle: return .ignored
        case .requested(var flow):
            if let device = flow.peerDeviceID, device != ready.fromDevice { return .stay }  // not the device asked
            let toEveryDevice = flow.peerDeviceID == nil
            flow.peerDeviceID = ready.fromDevice
            guard KeyVerificationMethod.haveOneInCommon(ready.methods) else { return cancel(flow, .unknownMethod) }
            // A request to every device: the others learn that this one answered (m.accepted).
            let dismiss: [Effect] = toEveryDevice ? [.sendAcceptedToOtherDevices(flow)] : []
            return .move(to: .ready(flow), effects: [.cancel(Keys.request)] + dismiss)
        default:
            if isFromAnotherDevice(ready.fromDevice, in: state) { return .stay }
            return unexpected(in: state)
        }
    }

    /// Whether a message naming `device` (`from_device`) comes from another device than the one
    /// the flow is with: it is ignored (another device of the peer answered too late, or a
    /// device of the peer that the flow is not with).
    private func isFromAnotherDevice(_ device: DeviceID, in state: State) -> Bool {
        guard let peerDevice = state.flow?.peerDeviceID else { return false }
        return peerDevice != device
    }

    // MARK: - Start and accept

    private func startSAS(_ flow: VerificationFlow) -> Outcome {
        let start = SASStart(fromDevice: flow.ourselves.deviceID, method: KeyVerificationMethod.sas, offer: .ours)
        return .move(
            to: .started(SASProgress(flow: flow, weStarted: true, start: start)), effects: [.sendStart(flow, .ours)])
    }

    private func startReceived(_ start: SASStart, opening opened: VerificationFlow, in state: State) -> Outcome {
        switch state {
        case .idle:
            var flow = opened
            flow.peerDeviceID = start.fromDevice
            flow.usesRequest = false
            let overall = Effect.scheduleTimeout(.overall, after: Self.overallTimeout)
            guard let agreement = usableAgreement(start) else {
                return .move(
                    to: .cancelled(flow, .unknownMethod, byUs: true),
                    effects: [.sendCancel(flow, .unknownMethod)])
            }
            let progress = SASProgress(flow: flow, weStarted: false, start: start, agreement: agreement)
            return .move(to: .startReceived(progress), effects: [overall])
        case _ where isFromAnotherDevice(start.fromDevice, in: state):
            return .stay
        case .ready(let flow):
            return acceptStart(start, flow: flow)
        case .started(let ours):
            // Both sent a start: the smaller party's start stands (the spec's tie-break).
            guard let peer = ours.flow.peer, peer < ours.flow.ourselves else { return .stay }
            return acceptStart(start, flow: ours.flow)
        default: return unexpected(in: state)
        }
    }

    private func acceptStart(_ start: SASStart, flow: VerificationFlow) -> Outcome {
        guard let agreement = usableAgreement(start) else { return cancel(flow, .unknownMethod) }
        let progress = SASProgress(flow: flow, weStarted: false, start: start, agreement: agreement)
        return .move(to: .accepted(progress), effects: [.sendAccept(flow, agreement)])
    }

    private func usableAgreement(_ start: SASStart) -> SASAgreement? {
        guard start.method == KeyVerificationMethod.sas else { return nil }
        return SASAgreement.negotiate(start.offer)
    }

    private func acceptReceived(_ accept: SASAccept, in state: State) -> Outcome {
        switch state {
        case .idle: return .ignored
        case .started(var progress):
            guard let agreement = accept.agreement, agreement.fits(progress.start.offer) else {
                return cancel(progress.flow, .unknownMethod)
            }
            progress.agreement = agreement
            progress.commitment = accept.commitment
            return .move(to: .keySent(progress), effects: [.sendKey(progress.flow)])
        default: return unexpected(in: state)
        }
    }

    // MARK: - Keys, comparison, MACs

    private func keyReceived(_ facts: SASKeyFacts, in state: State) -> Outcome {
        switch state {
        case .idle: return .ignored
        case .accepted(var progress):
            progress.code = facts.code
            return .move(to: .comparing(progress), effects: [.sendKey(progress.flow)])
        case .keySent(var progress):
            guard facts.commitment == progress.commitment else { return cancel(progress.flow, .mismatchedCommitment) }
            progress.code = facts.code
            return .move(to: .comparing(progress))
        default: return unexpected(in: state)
        }
    }

    private func codeCompared(_ matches: Bool, in state: State) -> Outcome {
        if case .scanned(let flow, let keys) = state {
            // The person says whether the other device scanned our code.
            guard matches else { return cancel(flow, .user) }
            return .move(to: .scanConfirmed(flow, keys), effects: [.crossSign(flow, keys), .sendDone(flow)])
        }
        guard case .comparing(let progress) = state, let agreement = progress.agreement else { return .ignored }
        guard matches else { return cancel(progress.flow, .mismatchedSAS) }
        let mac = Effect.sendMAC(progress.flow, agreement.macMethod)
        switch progress.theirMAC {
        case nil: return .move(to: .macSent(progress), effects: [mac])
        case .valid(let keys): return finish(progress, keys, after: [mac])
        case .mismatch: return cancel(progress.flow, .keyMismatch)  // never kept: a mismatch cancels at once
        }
    }

    private func macReceived(_ verdict: MACVerdict, in state: State) -> Outcome {
        switch state {
        case .idle: return .ignored
        case .comparing(var progress) where progress.theirMAC == nil:
            guard case .valid = verdict else { return cancel(progress.flow, .keyMismatch) }
            progress.theirMAC = verdict
            return .move(to: .comparing(progress))
        case .macSent(let progress):
            guard case .valid(let keys) = verdict else { return cancel(progress.flow, .keyMismatch) }
            return finish(progress, keys, after: [])
        default: return unexpected(in: state)
        }
    }

    /// Both MACs are good and the person said the codes match: sign, then wait for `done` when
    /// the flow began with a request.
    private func finish(_ progress: SASProgress, _ keys: VerifiedKeys, after effects: [Effect]) -> Outcome {
        var effects = effects
        effects.append(.crossSign(progress.flow, keys))
        guard progress.flow.usesRequest else {
            return .move(to: .verified(progress.flow, keys), effects: effects + Self.stopTimers)
        }
        effects.append(.sendDone(progress.flow))
        return .move(to: .awaitingDone(progress, keys), effects: effects)
    }

    // MARK: - Ending

    private func timedOut(_ timeout: VerificationTimeout, in state: State) -> Outcome {
        guard let flow = state.flow else { return .ignored }
        switch (timeout, state) {
        case (.overall, _), (.request, .requested), (.request, .requestReceived):
            return cancel(flow, .timeout)
        case (.request, _):
            return .stay  // a request timer that outlived its request: the flow goes on
        }
    }

    /// A message this state does not expect: the flow cancels (`m.unexpected_message`).
    private func unexpected(in state: State) -> Outcome {
        guard let flow = state.flow else { return .ignored }
        return cancel(flow, .unexpectedMessage)
    }

    private func cancel(_ flow: VerificationFlow, _ code: VerificationCancelCode) -> Outcome {
        .move(to: .cancelled(flow, code, byUs: true), effects: [.sendCancel(flow, code)] + Self.stopTimers)
    }

    static var stopTimers: [Effect] { [.cancel(Keys.overall), .cancel(Keys.request)] }
}
