import SymorvaMachines
import SymorvaRuntime

/// Values shared by the media-session tests: a descriptor, a media-server link, calls, and
/// sample states and events that cover every case (and every payload that changes the outcome).
enum MediaFixture {
    static let backoff = RetryBackoff(initialDelay: .seconds(1), maximumDelay: .seconds(10), jitterRatio: 0)
    static let configuration = MediaSessionMachine.Configuration(
        reconnectBackoff: backoff, maximumAttempts: 4, attemptTimeout: .seconds(20), keepaliveInterval: .seconds(25),
        stallTimeout: .seconds(3))
    static let machine = MediaSessionMachine(configuration: configuration)
    static let session: UInt64 = 1001
    static let handle: UInt64 = 2002
    static let link = MediaServerLink(session: session, handle: handle)
    static let offer = SessionDescription(sdp: "v=0 offer")
    static let answer = SessionDescription(sdp: "v=0 answer")
    static let candidate = IceCandidate(
        mlineIndex: 0, candidate: "candidate:1 1 UDP 2015363327 192.0.2.2 40000 typ host")

    static func descriptor(_ token: String = "media-token-1") -> MediaSessionDescriptor {
        MediaSessionDescriptor(
            serverURL: "http://127.0.0.1:8088/janus", plugin: "janus.plugin.audiobridge", room: 42,
            token: Secret(token), participantID: 7, display: "@me:example.org",
            expiresAt: Timestamp(millisecondsSince1970: 1_800_000_000_000))
    }

    static func call(
        microphone: Bool = false, failures: Int = 0, token: String = "media-token-1", serverHears: Bool = false
    ) -> MediaCall {
        MediaCall(
            descriptor: descriptor(token), microphoneEnabled: microphone, failures: failures,
            serverReceivesAudio: serverHears)
    }

    /// A call whose next failure is one too many (maximumAttempts is 4).
    static let exhausted = call(failures: 3)

    /// Everything of a joined connection, torn down.
    static let teardown: [MediaSessionMachine.Effect] = [
        .cancel(MediaSessionMachine.Keys.request), .cancel(MediaSessionMachine.Keys.events),
        .cancel(MediaSessionMachine.Keys.keepalive), .cancel(MediaSessionMachine.Keys.peer),
        .cancel(MediaSessionMachine.Keys.attempt), .cancel(MediaSessionMachine.Keys.stall),
        .cancel(MediaSessionMachine.Keys.upstream), .hangUp(link),
    ]

    // MARK: - Samples for the chart

    static let sampleStates: [MediaSessionMachine.State] = [
        .idle(call()),
        .connecting(call(), .creatingSession),
        .connecting(call(), .attaching(session: session)),
        .connecting(call(), .joining(link)),
        .connecting(exhausted, .attaching(session: session)),
        .connecting(exhausted, .joining(link)),
        .negotiating(call(), link, .startingPeer),
        .negotiating(call(), link, .creatingOffer),
        .negotiating(call(), link, .awaitingAnswer),
        .negotiating(call(), link, .applyingAnswer),
        .negotiating(call(), link, .connectingMedia),
        .negotiating(exhausted, link, .connectingMedia),
        .connected(call(microphone: true), link),
        .connected(call(microphone: true, serverHears: true), link),
        .connected(call(), link),
        .reconnecting(call(failures: 1), .iceFailed),
        .closed(.requested),
        .closed(.revoked),
        .failed(.iceFailed),
    ]

    static let sampleEvents: [MediaSessionMachine.Event] = [
        .connectRequested,
        .disconnectRequested,
        .microphoneRequested(enabled: true),
        .microphoneRequested(enabled: false),
        .descriptorUpdated(descriptor("media-token-2")),
        .sessionCreated(.success(session)),
        .sessionCreated(.failure(.transport(.unreachable))),
        .sessionCreated(.failure(.invalidResponse)),
        .pluginAttached(.success(handle)),
        .pluginAttached(.failure(.sessionLost)),
        .roomJoined(.success(7)),
        .roomJoined(.failure(.unauthorized)),
        .roomJoined(.failure(.roomUnavailable)),
        .roomJoined(.failure(.refused(code: 480))),
        .peerStarted(nil),
        .peerStarted(.engine(.missingComponent(.element("webrtcbin")))),
        .offerCreated(.success(offer)),
        .offerCreated(.failure(.engine(.offerFailed))),
        .answerReceived(.success(answer)),
        .answerReceived(.failure(.unauthorized)),
        .answerReceived(.failure(.transport(.timeout))),
        .answerApplied(nil),
        .answerApplied(.engine(.answerRejected)),
        .localCandidate(candidate),
        .localCandidatesGathered,
        .iceStateChanged(.checking),
        .iceStateChanged(.connected),
        .iceStateChanged(.failed),
        .iceStateChanged(.disconnected),
        .incomingAudioChanged(flowing: false),
        .incomingAudioChanged(flowing: true),
        .peerFailed(.engine(.streamFailed)),
        .serverEvent(.webrtcUp),
        .serverEvent(.hangup),
        .serverEvent(.removed),
        .serverEvent(.sessionLost),
        .serverEvent(.audioReceiving(true)),
        .serverEvent(.audioReceiving(false)),
        .eventsFailed(.transport(.connectionReset)),
        .keepaliveAnswered(nil),
        .keepaliveAnswered(.sessionLost),
        .configureAnswered(nil),
        .timerFired(.retry),
        .timerFired(.keepalive),
        .timerFired(.attempt),
        .timerFired(.stall),
        .timerFired(.upstream),
    ]
}
