import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime

/// A stage member's media session with the community's Janus AudioBridge, over WebRTC.
///
/// A ``/SymorvaMachines/MediaSessionMachine`` host in the account's scope drives it (the scope's
/// end disconnects it): the community services join the member to the room and hand over the
/// Janus session, whose HTTP signalling runs over the SDK's transport, the audio over the
/// platform's peer (GStreamer's `webrtcbin` on Linux). It reconnects by itself when the media
/// path drops; the services taking the member off stage closes it.
package final class JanusMediaSession: MediaSession {
    private let host: MachineHost<MediaSessionMachine>
    private let meter: AudioMeter

    /// A session of `context`'s member, not connected.
    package init(
        context: MediaSessionContext, transport: any HTTPTransport, peers: any MediaPeerFactory,
        machine: MediaSessionMachine = MediaSessionMachine(), clock: any RuntimeClock = SystemClock(),
        tracer: Tracer = .shared
    ) {
        let meter = AudioMeter()
        self.meter = meter
        let interpreter = MediaSessionInterpreter(
            janus: JanusClient(transport: transport), connector: context.connector, factory: peers, meter: meter)
        host = MachineHost(
            machine: machine, initial: .idle(MediaCall()), interpreter: interpreter,
            instance: context.meetingID.rawValue, scope: context.scope, clock: clock, tracer: tracer)
    }

    package var state: ObservableValue<MediaSessionMachine.State> { host.states }

    package var audioLevels: ObservableValue<MediaAudioLevels> { meter.levels }

    /// The received samples, for tests and benchmarks (see ``AudioMeter/listenToIncomingSamples(_:)``).
    package var audioMeter: AudioMeter { meter }

    package func connect() async throws(MeetingError) {
        let outcome = await host.send(
            .connectRequested, ignored: { $0 },
            until: { state -> MediaSessionMachine.State? in
                switch state {
                case .connected, .closed, .failed: state
                case .idle, .connecting, .negotiating, .reconnecting: nil
                }
            })
        switch outcome {
        case .connected?: return
        case .closed(.revoked)?: throw .media(.unauthorized)
        case .failed(let error)?: throw .media(error)
        case .closed(.requested)?, nil: throw .media(.sessionLost)
        case .idle?, .connecting?, .negotiating?, .reconnecting?: throw .media(.sessionLost)
        }
    }

    package func setMicrophoneEnabled(_ enabled: Bool) async throws(MeetingError) {
        let outcome = await host.send(.microphoneRequested(enabled: enabled), ignored: { $0 }, until: { $0 })
        switch outcome {
        case .closed(.revoked)?: throw .media(.unauthorized)
        case .closed?, nil: throw .media(.sessionLost)
        case .failed(let error)?: throw .media(error)
        case .idle?, .connecting?, .negotiating?, .connected?, .reconnecting?: return
        }
    }

    package func disconnect() async {
        _ = await host.send(.disconnectRequested, ignored: { $0 }, until: { $0.isFinal ? $0 : nil })
        await host.stop()
    }
}

/// The media engine that signals with Janus over the SDK's transport and connects each
/// session's audio with `peers`, the platform's WebRTC engine.
package struct JanusMediaEngine: MediaEngine {
    let transport: any HTTPTransport
    let peers: any MediaPeerFactory
    let machine: MediaSessionMachine
    let tracer: Tracer

    /// An engine.
    package init(
        transport: any HTTPTransport, peers: any MediaPeerFactory, machine: MediaSessionMachine = MediaSessionMachine(),
        tracer: Tracer = .shared
    ) {
        self.transport = transport
        self.peers = peers
        self.machine = machine
        self.tracer = tracer
    }

    package func makeSession(_ context: MediaSessionContext) -> any MediaSession {
        JanusMediaSession(context: context, transport: transport, peers: peers, machine: machine, tracer: tracer)
    }
}

/// The services' join of one meeting's stage member: `POST …/media/connect`.
struct ServicesMediaConnector: MediaRoomConnector {
    let service: MeetingsService
    let meetingID: MeetingID

    func joinMediaRoom() async throws(MediaSessionError) -> MediaServerLink {
        do throws(MeetingError) {
            return try await service.connectMedia(meetingID)
        } catch {
            throw Self.mediaError(error)
        }
    }

    /// A services refusal in the media session's terms: off stage (or out of the meeting) closes
    /// it, a media room not there for now is retried, anything else fails or retries as its kind.
    static func mediaError(_ error: MeetingError) -> MediaSessionError {
        switch error {
        case .wrongRole, .notParticipant, .notRoomMember, .meetingEnded, .meetingUnknown, .accountEnded,
            .notSignedIn:
            .unauthorized
        case .mediaUnavailable, .homeserverUnavailable, .rateLimited: .roomUnavailable
        case .transport(let problem): .transport(problem)
        case .media(let media): media
        case .invalidResponse: .invalidResponse
        case .refused(_, let status): .refused(code: status)
        case .notHost, .roomUnknown, .stageFull, .moduleDisabled: .refused(code: 0)
        }
    }
}
