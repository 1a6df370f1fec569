import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime

/// A stage member's media session with the community's Janus AudioBridge, over WebRTC.
///
/// A ``/SymorvaMachines/MediaSessionMachine`` host drives it: the Janus HTTP signalling runs
/// over the SDK's transport, the audio over the platform's peer (GStreamer's `webrtcbin` on
/// Linux). It reconnects by itself when the media path drops, with the same token; a token the
/// room refuses (a demotion revoked it) closes it.
package final class JanusMediaSession: MediaSession {
    private let host: MachineHost<MediaSessionMachine>
    private let current: Lock<MediaSessionDescriptor>
    private let meter: AudioMeter

    /// A session for `descriptor`, not connected.
    package init(
        descriptor: MediaSessionDescriptor, transport: any HTTPTransport, peers: any MediaPeerFactory,
        machine: MediaSessionMachine = MediaSessionMachine(), clock: any RuntimeClock = SystemClock(),
        tracer: Tracer = .shared
    ) {
        current = Lock(descriptor)
        let meter = AudioMeter()
        self.meter = meter
        let interpreter = MediaSessionInterpreter(
            janus: JanusClient(transport: transport), factory: peers, meter: meter, serverURL: descriptor.serverURL,
            participantID: descriptor.participantID)
        host = MachineHost(
            machine: machine, initial: .idle(MediaCall(descriptor: descriptor)), interpreter: interpreter,
            instance: String(descriptor.participantID), clock: clock, tracer: tracer)
    }

    package var descriptor: MediaSessionDescriptor { current.withLock { $0 } }

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

    package func update(_ descriptor: MediaSessionDescriptor) async {
        current.withLock { $0 = descriptor }
        await host.send(.descriptorUpdated(descriptor))
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

    package func makeSession(for descriptor: MediaSessionDescriptor) -> any MediaSession {
        JanusMediaSession(descriptor: descriptor, transport: transport, peers: peers, machine: machine, tracer: tracer)
    }
}
