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

/// Performs a media session machine's effects: Janus over the SDK's HTTP transport, and the
/// platform's peer.
struct MediaSessionInterpreter: EffectInterpreter {
    typealias Machine = MediaSessionMachine

    let janus: JanusClient
    let factory: any MediaPeerFactory
    let meter: AudioMeter
    let peers = PeerSlot()
    /// The descriptor's server and participant, fixed for the session.
    let serverURL: String
    let participantID: UInt64

    /// How often a running peer's received audio is looked at.
    static let audioCheckInterval: Duration = .milliseconds(250)
    /// How long without received audio counts as the room's audio stopping.
    static let silenceBeforeStop: Duration = .seconds(1)

    func perform(_ effect: MediaSessionMachine.Effect, context: EffectContext<MediaSessionMachine.Event>) async
        -> MediaSessionMachine.Event?
    {
        switch effect {
        case .createSession(let url):
            do throws(MediaSessionError) {
                return .sessionCreated(.success(try await janus.createSession(url)))
            } catch {
                return .sessionCreated(.failure(error))
            }
        case .attachPlugin(let session, let plugin):
            do throws(MediaSessionError) {
                return .pluginAttached(.success(try await janus.attach(serverURL, session: session, plugin: plugin)))
            } catch {
                return .pluginAttached(.failure(error))
            }
        case .readEvents(let session):
            return await readEvents(session, context: context)
        case .sendKeepalive(let session):
            do throws(MediaSessionError) {
                try await janus.keepalive(serverURL, session: session)
                return .keepaliveAnswered(nil)
            } catch {
                return .keepaliveAnswered(error)
            }
        case .joinRoom(let link, let join):
            do throws(MediaSessionError) {
                return .roomJoined(.success(try await janus.join(serverURL, link, join)))
            } catch {
                return .roomJoined(.failure(error))
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
        case .sendOffer(let link, let offer, let muted):
            do throws(MediaSessionError) {
                return .answerReceived(.success(try await janus.offer(serverURL, link, offer, muted: muted)))
            } catch {
                return .answerReceived(.failure(error))
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
            try? await janus.trickle(serverURL, link, candidate)
            return nil
        case .trickleComplete(let link):
            try? await janus.trickle(serverURL, link, nil)
            return nil
        case .setSending(let enabled):
            await peers.current?.setSending(enabled)
            if !enabled { meter.reset(.outgoing) }
            return nil
        case .configureMuted(let link, let muted):
            do throws(MediaSessionError) {
                try await janus.configure(serverURL, link, muted: muted)
                return .configureAnswered(nil)
            } catch {
                return .configureAnswered(error)
            }
        case .hangUp(let link):
            await janus.hangUp(serverURL, link)
            return nil
        case .destroySession(let session):
            await janus.destroy(serverURL, session: session)
            return nil
        case .scheduleKeepalive, .scheduleRetry, .startAttemptTimeout, .startStallTimeout, .startUpstreamTimeout,
            .cancel:
            return nil  // the host performs timers and cancellations itself
        }
    }

    /// Reads the event stream until it fails or the effect is cancelled.
    private func readEvents(
        _ session: UInt64, context: EffectContext<MediaSessionMachine.Event>
    ) async -> MediaSessionMachine.Event? {
        while !Task.isCancelled {
            do throws(MediaSessionError) {
                for message in try await janus.poll(serverURL, session: session) {
                    if let event = message.serverEvent(participantID: participantID) {
                        context.emit(.serverEvent(event))
                    }
                }
            } catch {
                return Task.isCancelled ? nil : .eventsFailed(error)
            }
        }
        return nil
    }

    /// Starts a peer, reports it started, forwards its events, and closes it when the effect is cancelled.
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
        context.emit(.peerStarted(nil))
        // While the peer runs: whether the room's audio reaches it (nothing for a second is a
        // stop; the machine decides when that is a cut path).
        var watch = IncomingAudioWatch(
            startingAt: meter.incomingSampleCount, silentChecks: Int(Self.silenceBeforeStop / Self.audioCheckInterval))
        while !Task.isCancelled {
            try? await Task.sleep(for: Self.audioCheckInterval)
            if Task.isCancelled { break }
            if let flowing = watch.check(count: meter.incomingSampleCount) {
                context.emit(.incomingAudioChanged(flowing: flowing))
            }
        }
        await peer.close()
        peers.clear(peer)
        meter.reset(.incoming)
        meter.reset(.outgoing)
        return nil
    }
}
