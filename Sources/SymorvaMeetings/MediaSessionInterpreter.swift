import SymorvaMachines
import SymorvaRuntime

/// The peer of the connection in progress, shared by the effects that act on it.
final class PeerSlot: Sendable {
    private let peer = Lock<(any MediaPeer)?>(nil)

    var current: (any MediaPeer)? { peer.withLock { $0 } }

    func set(_ new: any MediaPeer) { peer.withLock { $0 = new } }

    /// Empties the slot if it still holds `old`.
    func clear(_ old: any MediaPeer) {
        peer.withLock { slot in
            if let held = slot, held === old { slot = nil }
        }
    }
}

/// Performs a media session machine's effects: the services' join (through the connector), Janus
/// over the SDK's HTTP transport, and the platform's peer. It never waits for a machine: the
/// media server's replies and events, the peer's events and the room's audio arriving come back
/// as events, and the machine's timers decide when to look again.
struct MediaSessionInterpreter: EffectInterpreter {
    typealias Machine = MediaSessionMachine

    let janus: JanusClient
    let connector: any MediaRoomConnector
    let factory: any MediaPeerFactory
    let meter: AudioMeter
    let peers = PeerSlot()

    func perform(_ effect: MediaSessionMachine.Effect, context: EffectContext<MediaSessionMachine.Event>) async
        -> MediaSessionMachine.Event?
    {
        switch effect {
        case .requestJoin:
            do throws(MediaSessionError) {
                return .roomJoined(.success(try await connector.joinMediaRoom()))
            } catch {
                return .roomJoined(.failure(error))
            }
        case .readEvents(let link):
            return await readEvents(link, context: context)
        case .sendKeepalive(let link):
            do throws(MediaSessionError) {
                try await janus.keepalive(link)
                return .keepaliveAnswered(nil)
            } catch {
                return .keepaliveAnswered(error)
            }
        case .startPeer(let sending):
            return await runPeer(sending: sending, context: context)
        case .createOffer:
            guard let peer = peers.current else { return .offerCreated(.failure(.engine(.offerFailed))) }
            do throws(MediaSessionError) {
                return .offerCreated(.success(try await peer.createOffer()))
            } catch {
                return .offerCreated(.failure(error))
            }
        case .sendOffer(let link, let offer, let muted, let transaction):
            do throws(MediaSessionError) {
                // Acknowledged: the room's answer comes on the event stream.
                let reply = try await janus.offer(link, offer, muted: muted, transaction: transaction)
                return reply.map { .serverReplied(transaction: transaction, $0) }
            } catch {
                return .serverReplied(transaction: transaction, .failed(error))
            }
        case .applyAnswer(let answer):
            guard let peer = peers.current else { return .answerApplied(.engine(.answerRejected)) }
            do throws(MediaSessionError) {
                try await peer.applyAnswer(answer)
                return .answerApplied(nil)
            } catch {
                return .answerApplied(error)
            }
        case .trickle(let link, let candidate):
            try? await janus.trickle(link, candidate)
            return nil
        case .trickleComplete(let link):
            try? await janus.trickle(link, nil)
            return nil
        case .setSending(let enabled):
            await peers.current?.setSending(enabled)
            if !enabled { meter.reset(.outgoing) }
            return nil
        case .configureMuted(let link, let muted):
            try? await janus.configure(link, muted: muted)
            return nil
        case .hangUp(let link):
            await janus.hangUp(link)
            return nil
        case .checkIncomingAudio:
            return .incomingAudioChecked(arrived: meter.takeIncomingArrival())
        case .awaitIncomingAudio:
            await meter.incomingArrival()
            return Task.isCancelled ? nil : .incomingAudioChecked(arrived: true)
        case .scheduleKeepalive, .scheduleRetry, .startAttemptTimeout, .startStallTimeout, .startUpstreamTimeout,
            .scheduleAudioCheck, .cancel:
            return nil  // the host performs timers and cancellations itself
        }
    }

    /// Reads the event stream until it fails or the effect is cancelled; every message that means
    /// something to the session goes to its mailbox.
    private func readEvents(
        _ link: MediaServerLink, context: EffectContext<MediaSessionMachine.Event>
    ) async -> MediaSessionMachine.Event? {
        while !Task.isCancelled {
            do throws(MediaSessionError) {
                for message in try await janus.poll(link) {
                    if let event = message.event(participantID: link.participantID) { context.emit(event) }
                }
            } catch {
                return Task.isCancelled ? nil : .eventsFailed(error)
            }
        }
        return nil
    }

    /// Starts a peer, reports it started, forwards its events until the effect is cancelled, then
    /// closes it.
    private func runPeer(
        sending: Bool, context: EffectContext<MediaSessionMachine.Event>
    ) async -> MediaSessionMachine.Event? {
        let peer = factory.makePeer(meter: meter)
        peers.set(peer)
        do throws(MediaSessionError) {
            try await peer.start(sending: sending) { event in
                switch event {
                case .localCandidate(let candidate): context.emit(.localCandidate(candidate))
                case .candidatesGathered: context.emit(.localCandidatesGathered)
                case .iceState(let state): context.emit(.iceStateChanged(state))
                case .failed(let failure): context.emit(.peerFailed(.engine(failure)))
                }
            }
        } catch {
            await peer.close()
            peers.clear(peer)
            return .peerStarted(error)
        }
        _ = meter.takeIncomingArrival()  // samples of an earlier peer don't count
        context.emit(.peerStarted(nil))
        await Task.cancellation()
        await peer.close()
        peers.clear(peer)
        meter.reset(.incoming)
        meter.reset(.outgoing)
        return nil
    }
}

extension Task where Success == Never, Failure == Never {
    /// Returns once the current task is cancelled (at once if it is already): a wait on an event,
    /// not a sleep.
    static func cancellation() async {
        let (stream, continuation) = AsyncStream<Never>.makeStream()
        await withTaskCancellationHandler {
            for await _ in stream {}
        } onCancel: {
            continuation.finish()
        }
    }
}
