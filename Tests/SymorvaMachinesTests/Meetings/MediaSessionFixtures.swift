import SymorvaMachines
import SymorvaRuntime

/// Values shared by the media-session tests: a media-server link, calls, and sample states and
/// events that cover every case (and every payload that changes the outcome).
enum MediaFixture {
    static let backoff = RetryBackoff(initialDelay: .seconds(1), maximumDelay: .seconds(10), jitterRatio: 0)
    static let configuration = MediaSessionMachine.Configuration(
        reconnectBackoff: backoff, maximumAttempts: 4, attemptTimeout: .seconds(20), keepaliveInterval: .seconds(25),
        stallTimeout: .seconds(3), audioCheckInterval: .seconds(1))
    static let machine = MediaSessionMachine(configuration: configuration)
    static let session: UInt64 = 1001
    static let handle: UInt64 = 2002
    static let link = MediaServerLink(
        serverURL: "http://127.0.0.1:8088/janus", session: session, handle: handle, participantID: 7)
    static let offer = SessionDescription(sdp: "v=0 offer")
    static let answer = SessionDescription(sdp: "v=0 answer")
    static let candidate = IceCandidate(
        mlineIndex: 0, candidate: "candidate:1 1 UDP 2015363327 192.0.2.2 40000 typ host")

    /// A call on its first connection (``MediaCall/offerTransaction`` `offer-1`).
    static func call(
        microphone: Bool = false, failures: Int = 0, serverHears: Bool = false, connection: Int = 1,
        audio: Bool = false
    ) -> MediaCall {
        MediaCall(
            microphoneEnabled: microphone, failures: failures, serverReceivesAudio: serverHears,
            connection: connection, incomingAudio: audio)
    }

    /// A call whose next failure is one too many (maximumAttempts is 4).
    static let exhausted = call(failures: 3)

    /// Everything of a joined connection, torn down.
    static let teardown: [MediaSessionMachine.Effect] = [
        .cancel(MediaSessionMachine.Keys.request), .cancel(MediaSessionMachine.Keys.events),
        .cancel(MediaSessionMachine.Keys.keepalive), .cancel(MediaSessionMachine.Keys.peer),
        .cancel(MediaSessionMachine.Keys.attempt), .cancel(MediaSessionMachine.Keys.stall),
        .cancel(MediaSessionMachine.Keys.upstream), .cancel(MediaSessionMachine.Keys.audioCheck),
        .cancel(MediaSessionMachine.Keys.audioWait), .hangUp(link),
    ]

    /// The services' join in flight, torn down.
    static let joinTeardown: [MediaSessionMachine.Effect] = [
        .cancel(MediaSessionMachine.Keys.request), .cancel(MediaSessionMachine.Keys.attempt),
    ]

    // MARK: - Samples for the chart

    static let sampleStates: [MediaSessionMachine.State] = [
        .idle(call(connection: 0)),
        .connecting(call()),
        .connecting(exhausted),
        .negotiating(call(), link, .startingPeer),
        .negotiating(call(), link, .creatingOffer),
        .negotiating(call(), link, .awaitingAnswer),
        .negotiating(call(), link, .applyingAnswer),
        .negotiating(call(), link, .connectingMedia),
        .negotiating(exhausted, link, .connectingMedia),
        .connected(call(microphone: true), link),
        .connected(call(microphone: true, serverHears: true), link),
        .connected(call(), link),
        .connected(call(audio: true), link),
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
        .roomJoined(.success(link)),
        .roomJoined(.failure(.unauthorized)),
        .roomJoined(.failure(.roomUnavailable)),
        .roomJoined(.failure(.refused(code: 480))),
        .peerStarted(nil),
        .peerStarted(.engine(.missingComponent(.element("webrtcbin")))),
        .offerCreated(.success(offer)),
        .offerCreated(.failure(.engine(.offerFailed))),
        .serverReplied(transaction: "offer-1", .description(answer)),
        .serverReplied(transaction: "offer-1", .failed(.unauthorized)),
        .serverReplied(transaction: "offer-1", .failed(.transport(.timeout))),
        .serverReplied(transaction: "offer-1", .accepted),
        .serverReplied(transaction: "other", .accepted),
        .answerApplied(nil),
        .answerApplied(.engine(.answerRejected)),
        .localCandidate(candidate),
        .localCandidatesGathered,
        .iceStateChanged(.checking),
        .iceStateChanged(.connected),
        .iceStateChanged(.failed),
        .iceStateChanged(.disconnected),
        .incomingAudioChecked(arrived: false),
        .incomingAudioChecked(arrived: true),
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
        .timerFired(.retry),
        .timerFired(.keepalive),
        .timerFired(.attempt),
        .timerFired(.stall),
        .timerFired(.upstream),
        .timerFired(.audioCheck),
    ]
}
