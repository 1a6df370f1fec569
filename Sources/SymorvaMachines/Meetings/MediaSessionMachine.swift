import SymorvaRuntime

/// A stage member's real-time media session with the community's media server (Janus
/// AudioBridge), from `connect()` to its close.
///
/// ```
/// idle → connecting → negotiating → connected
///            ↑  │          │            │ ICE failed, hangup, session lost, audio stalled
///            │  └──────────┴→ reconnecting ←┘
///            └── retry ────────────┘
///  not on stage any more, or kicked → closed(revoked);  disconnect, the account's end → closed(requested);
///  an engine failure or too many attempts → failed
/// ```
///
/// - **connecting**: the community services join the member to the meeting's room on a new
///   media-server session, with the participant ID, display and token they assigned (the token
///   never reaches the member), and hand over that session and its AudioBridge handle.
/// - **negotiating**: the server's event stream is read and the session kept alive; the
///   platform's peer starts (its audio source and receiver) and creates an offer that goes to the
///   room (`configure` with the JSEP offer); the room's answer, which arrives on the event stream
///   as an event of the machine, is applied, and local ICE candidates trickle as they are found.
///   ICE connected → connected.
/// - **reconnecting**: the media path dropped (ICE failure, the server hung up or lost the
///   session, the event stream or a keep-alive failed, the audio stalled); everything of the old
///   connection is torn down and a new one starts after a backoff: the services join the member
///   again (no new admission).
/// - The services refusing (the member is off stage) or the room kicking the member closes the
///   session (`revoked`).
///
/// Every effect that belongs to a connection runs under a key and is cancelled when the
/// connection ends; the media server's events and replies arrive through the mailbox like every
/// other answer. Events and effects describe themselves by case name only.
package struct MediaSessionMachine: StateMachine {
    package static let name = "MediaSession"

    /// What the machine needs to know about its environment.
    package struct Configuration: Sendable, Hashable {
        /// Waits before a new connection after a failed one; no jitter is drawn.
        package var reconnectBackoff: RetryBackoff
        /// Failed attempts in a row after which the session fails.
        package var maximumAttempts: Int
        /// How long connecting and negotiating may take before the attempt counts as failed (also
        /// the bound on the room's answer to the offer).
        package var attemptTimeout: Duration
        /// How often the media-server session is kept alive (Janus times sessions out after 60 s);
        /// a keep-alive is also how a session the server lost (a restart) is noticed soonest.
        package var keepaliveInterval: Duration
        /// How long the room's audio may stay away while connected before the media path counts
        /// as lost. The room sends its mix all the time (silence included), and ICE does not
        /// notice a path that stopped carrying packets, so audio that stops arriving is how a cut
        /// path is found. Also how long, with the microphone on, the media server may say the
        /// member's audio does not reach it (the other direction of the path).
        package var stallTimeout: Duration
        /// While the room's audio arrives, how often the machine asks whether any arrived since
        /// the last look (none: it stopped). While it does not arrive, nothing is asked: the peer's
        /// first new samples answer.
        package var audioCheckInterval: Duration

        /// Creates a configuration.
        package init(
            reconnectBackoff: RetryBackoff = .mediaReconnect, maximumAttempts: Int = 8,
            attemptTimeout: Duration = .seconds(20), keepaliveInterval: Duration = .seconds(10),
            stallTimeout: Duration = .seconds(3), audioCheckInterval: Duration = .seconds(1)
        ) {
            self.reconnectBackoff = reconnectBackoff
            self.maximumAttempts = maximumAttempts
            self.attemptTimeout = attemptTimeout
            self.keepaliveInterval = keepaliveInterval
            self.stallTimeout = stallTimeout
            self.audioCheckInterval = audioCheckInterval
        }
    }

    /// The machine's configuration.
    package let configuration: Configuration

    /// Creates the machine.
    package init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Keys of the machine's cancellable effects and timers.
    package enum Keys {
        /// The request in flight of the connection steps (the services' join, offer, answer).
        package static let request = EffectKey("media.request")
        /// The media server's event stream (long poll).
        package static let events = EffectKey("media.events")
        /// The keep-alive timer.
        package static let keepalive = EffectKey("media.keepalive")
        /// The platform peer (pipeline, ICE agent): running while the key is.
        package static let peer = EffectKey("media.peer")
        /// The wait before the next connection attempt.
        package static let retry = EffectKey("media.retry")
        /// The deadline of the connection attempt in progress.
        package static let attempt = EffectKey("media.attempt")
        /// The wait, while the room's audio is not arriving, before the media path counts as lost.
        package static let stall = EffectKey("media.stall")
        /// The wait, while the microphone is on but the media server says the member's audio is
        /// not reaching it, before the media path counts as lost.
        package static let upstream = EffectKey("media.upstream")
        /// The next look at whether the room's audio still arrives.
        package static let audioCheck = EffectKey("media.audioCheck")
        /// The wait for the room's audio to arrive (again).
        package static let audioWait = EffectKey("media.audioWait")
    }

    // MARK: - State

    /// A step of the state: ``MediaNegotiationStep`` (package: an app observes it).
    package typealias NegotiationStep = MediaNegotiationStep

    /// The machine state: ``MediaSessionState`` (package: an app observes it).
    package typealias State = MediaSessionState

    // MARK: - Event

    /// What happened.
    package enum Event: Sendable, Equatable, CaseNamed, CustomStringConvertible {
        /// The member asked to connect.
        case connectRequested
        /// The member (or the meeting, or the end of the account's scope) asked to disconnect.
        case disconnectRequested
        /// The member turned their microphone on or off.
        case microphoneRequested(enabled: Bool)
        /// The services answered the join: the media-server session and handle they joined to the
        /// room as the member's participant.
        case roomJoined(Result<MediaServerLink, MediaSessionError>)
        /// The platform peer started (or could not).
        case peerStarted(MediaSessionError?)
        /// The peer created its offer.
        case offerCreated(Result<SessionDescription, MediaSessionError>)
        /// The media server replied to the request of this transaction (read on the event stream,
        /// or the request failed on its way).
        case serverReplied(transaction: String, MediaServerReply)
        /// The peer applied the answer (or refused it).
        case answerApplied(MediaSessionError?)
        /// The peer found a local ICE candidate.
        case localCandidate(IceCandidate)
        /// The peer finished gathering candidates.
        case localCandidatesGathered
        /// The peer's ICE connection state changed.
        case iceStateChanged(IceConnectionState)
        /// Whether any of the room's audio reached the peer since the last look (or, waited for,
        /// that it arrives again).
        case incomingAudioChecked(arrived: Bool)
        /// The peer's pipeline stopped with an error.
        case peerFailed(MediaSessionError)
        /// The media server said something about the handle or session.
        case serverEvent(MediaServerEvent)
        /// The media server's event stream failed.
        case eventsFailed(MediaSessionError)
        /// A keep-alive answered (nil: fine).
        case keepaliveAnswered(MediaSessionError?)
        /// A timer set by the machine fired.
        case timerFired(MediaSessionTimer)

        /// Every event case name, in declaration order: the chart's event names.
        package static let caseNames = [
            "connectRequested", "disconnectRequested", "microphoneRequested", "roomJoined", "peerStarted",
            "offerCreated", "serverReplied", "answerApplied", "localCandidate", "localCandidatesGathered",
            "iceStateChanged", "incomingAudioChecked", "peerFailed", "serverEvent", "eventsFailed",
            "keepaliveAnswered", "timerFired",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .connectRequested: "connectRequested"
            case .disconnectRequested: "disconnectRequested"
            case .microphoneRequested: "microphoneRequested"
            case .roomJoined: "roomJoined"
            case .peerStarted: "peerStarted"
            case .offerCreated: "offerCreated"
            case .serverReplied: "serverReplied"
            case .answerApplied: "answerApplied"
            case .localCandidate: "localCandidate"
            case .localCandidatesGathered: "localCandidatesGathered"
            case .iceStateChanged: "iceStateChanged"
            case .incomingAudioChecked: "incomingAudioChecked"
            case .peerFailed: "peerFailed"
            case .serverEvent: "serverEvent"
            case .eventsFailed: "eventsFailed"
            case .keepaliveAnswered: "keepaliveAnswered"
            case .timerFired: "timerFired"
            }
        }

        /// The case name only.
        package var description: String { caseName }
    }

    /// The machine's timers.
    package enum MediaSessionTimer: Sendable, Hashable {
        /// Start the next connection attempt.
        case retry
        /// Keep the media-server session alive.
        case keepalive
        /// The attempt (connecting and negotiating) took too long.
        case attempt
        /// The room's audio stayed away too long while connected.
        case stall
        /// The member's audio did not reach the media server for too long, microphone on.
        case upstream
        /// Look whether the room's audio still arrives.
        case audioCheck
    }

    // MARK: - Effect

    /// What the interpreter must do.
    package enum Effect: MachineEffect, Equatable, CustomStringConvertible {
        /// Ask the services to join the member to the room on a new media-server session;
        /// answers ``Event/roomJoined(_:)``.
        case requestJoin
        /// Read the session's event stream until cancelled: emits ``Event/serverEvent(_:)`` and
        /// ``Event/serverReplied(transaction:_:)``, ends with ``Event/eventsFailed(_:)``.
        case readEvents(MediaServerLink)
        /// Fire ``Event/timerFired(_:)`` with ``MediaSessionTimer/keepalive`` after this delay.
        case scheduleKeepalive(after: Duration)
        /// Keep the session alive; answers ``Event/keepaliveAnswered(_:)``.
        case sendKeepalive(MediaServerLink)
        /// Start the platform peer, sending when `sending`; answers ``Event/peerStarted(_:)``,
        /// then emits its candidates, ICE states and failures until cancelled (which closes it).
        case startPeer(sending: Bool)
        /// Have the peer create its offer; answers ``Event/offerCreated(_:)``.
        case createOffer
        /// Send the offer to the room (`configure` with the JSEP offer) under `transaction`; the
        /// room's answer comes from the event stream, a failed send as
        /// ``Event/serverReplied(transaction:_:)`` at once.
        case sendOffer(MediaServerLink, SessionDescription, muted: Bool, transaction: String)
        /// Apply the room's answer to the peer; answers ``Event/answerApplied(_:)``.
        case applyAnswer(SessionDescription)
        /// Trickle a local candidate to the media server.
        case trickle(MediaServerLink, IceCandidate)
        /// Tell the media server that gathering is complete.
        case trickleComplete(MediaServerLink)
        /// Start or stop sending the peer's audio.
        case setSending(Bool)
        /// Tell the room the member is (un)muted (its reply is not waited for).
        case configureMuted(MediaServerLink, muted: Bool)
        /// Leave the room, hang the handle up and destroy the session (best effort, no answer).
        case hangUp(MediaServerLink)
        /// Fire ``Event/timerFired(_:)`` with ``MediaSessionTimer/retry`` after this delay.
        case scheduleRetry(after: Duration)
        /// Fire ``Event/timerFired(_:)`` with ``MediaSessionTimer/attempt`` after this delay,
        /// unless the attempt ends first (connected, torn down).
        case startAttemptTimeout(after: Duration)
        /// Fire ``Event/timerFired(_:)`` with ``MediaSessionTimer/stall`` after this delay, unless
        /// the room's audio comes back first.
        case startStallTimeout(after: Duration)
        /// Fire ``Event/timerFired(_:)`` with ``MediaSessionTimer/upstream`` after this delay,
        /// unless the media server says the member's audio reaches it first (or the microphone
        /// goes off).
        case startUpstreamTimeout(after: Duration)
        /// Fire ``Event/timerFired(_:)`` with ``MediaSessionTimer/audioCheck`` after this delay.
        case scheduleAudioCheck(after: Duration)
        /// Say whether any of the room's audio arrived since the last look; answers
        /// ``Event/incomingAudioChecked(arrived:)``.
        case checkIncomingAudio
        /// Wait until the room's audio arrives; answers ``Event/incomingAudioChecked(arrived:)``
        /// (`true`).
        case awaitIncomingAudio
        /// Cancel the effect or timer running under this key.
        case cancel(EffectKey)

        package var directive: EffectDirective {
            switch self {
            case .requestJoin, .createOffer, .sendOffer, .applyAnswer: .keyed(Keys.request)
            case .readEvents: .keyed(Keys.events)
            case .scheduleKeepalive(let delay): .timer(Keys.keepalive, .after(delay))
            case .startPeer: .keyed(Keys.peer)
            case .scheduleRetry(let delay): .timer(Keys.retry, .after(delay))
            case .startAttemptTimeout(let delay): .timer(Keys.attempt, .after(delay))
            case .startStallTimeout(let delay): .timer(Keys.stall, .after(delay))
            case .startUpstreamTimeout(let delay): .timer(Keys.upstream, .after(delay))
            case .scheduleAudioCheck(let delay): .timer(Keys.audioCheck, .after(delay))
            case .awaitIncomingAudio: .keyed(Keys.audioWait)
            case .sendKeepalive, .trickle, .trickleComplete, .setSending, .configureMuted, .hangUp,
                .checkIncomingAudio:
                .perform
            case .cancel(let key): .cancel(key)
            }
        }

        /// Every effect case name, in declaration order.
        package static let caseNames = [
            "requestJoin", "readEvents", "scheduleKeepalive", "sendKeepalive", "startPeer", "createOffer",
            "sendOffer", "applyAnswer", "trickle", "trickleComplete", "setSending", "configureMuted", "hangUp",
            "scheduleRetry", "startAttemptTimeout", "startStallTimeout", "startUpstreamTimeout",
            "scheduleAudioCheck", "checkIncomingAudio", "awaitIncomingAudio", "cancel",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .requestJoin: "requestJoin"
            case .readEvents: "readEvents"
            case .scheduleKeepalive: "scheduleKeepalive"
            case .sendKeepalive: "sendKeepalive"
            case .startPeer: "startPeer"
            case .createOffer: "createOffer"
            case .sendOffer: "sendOffer"
            case .applyAnswer: "applyAnswer"
            case .trickle: "trickle"
            case .trickleComplete: "trickleComplete"
            case .setSending: "setSending"
            case .configureMuted: "configureMuted"
            case .hangUp: "hangUp"
            case .scheduleRetry: "scheduleRetry"
            case .startAttemptTimeout: "startAttemptTimeout"
            case .startStallTimeout: "startStallTimeout"
            case .startUpstreamTimeout: "startUpstreamTimeout"
            case .scheduleAudioCheck: "scheduleAudioCheck"
            case .checkIncomingAudio: "checkIncomingAudio"
            case .awaitIncomingAudio: "awaitIncomingAudio"
            case .cancel: "cancel"
            }
        }

        /// The case name only.
        package var description: String { caseName }
    }
}

extension MediaSessionMachine: ChartedMachine {}

extension MediaSessionMachine.State: CaseNameListing {
    public static var allCaseNames: [String] { caseNames }
}

extension MediaSessionMachine.Event: CaseNameListing {
    package static var allCaseNames: [String] { caseNames }
}

extension RetryBackoff {
    /// New media connections after a dropped one: 1 s doubling to 10 s, no jitter.
    package static let mediaReconnect = RetryBackoff(
        initialDelay: .seconds(1), maximumDelay: .seconds(10), jitterRatio: 0)
}

/// Where the WebRTC negotiation is.
public enum MediaNegotiationStep: Sendable, Hashable {
    /// The peer (audio source, encoder, ICE agent) is starting.
    case startingPeer
    /// The peer is creating its offer.
    case creatingOffer
    /// The offer is with the room; waiting for its answer (``MediaCall/offerTransaction``).
    case awaitingAnswer
    /// The answer is being applied to the peer.
    case applyingAnswer
    /// The answer is applied; waiting for ICE to connect.
    case connectingMedia
}

/// Where the session is.
public enum MediaSessionState: Sendable, Equatable, CaseNamed {
    /// Not connected yet.
    case idle(MediaCall)
    /// The services are joining the member to the room on a new media-server session.
    case connecting(MediaCall)
    /// Joined: the peer negotiates the audio path with the room.
    case negotiating(MediaCall, MediaServerLink, MediaNegotiationStep)
    /// Audio flows both ways (while the microphone is on).
    case connected(MediaCall, MediaServerLink)
    /// The media path dropped: waiting before a new connection.
    case reconnecting(MediaCall, MediaSessionError)
    /// Closed for good: disconnected, or the member is off stage.
    case closed(MediaCloseReason)
    /// The session cannot work (an engine failure, a refusal, too many failed attempts).
    case failed(MediaSessionError)

    /// Every state case name, in declaration order: the chart's state ids.
    public static let caseNames = [
        "idle", "connecting", "negotiating", "connected", "reconnecting", "closed", "failed",
    ]

    public var caseNameLiteral: StaticString? {
        switch self {
        case .idle: "idle"
        case .connecting: "connecting"
        case .negotiating: "negotiating"
        case .connected: "connected"
        case .reconnecting: "reconnecting"
        case .closed: "closed"
        case .failed: "failed"
        }
    }

    /// The call, in every state that has one.
    public var call: MediaCall? {
        switch self {
        case .idle(let call), .connecting(let call), .negotiating(let call, _, _), .connected(let call, _),
            .reconnecting(let call, _):
            call
        case .closed, .failed: nil
        }
    }

    /// The connection's place on the media server, while there is one.
    public var link: MediaServerLink? {
        switch self {
        case .negotiating(_, let link, _), .connected(_, let link): link
        case .idle, .connecting, .reconnecting, .closed, .failed: nil
        }
    }

    /// Whether no event changes the state any more.
    public var isFinal: Bool {
        switch self {
        case .closed, .failed: true
        case .idle, .connecting, .negotiating, .connected, .reconnecting: false
        }
    }
}
