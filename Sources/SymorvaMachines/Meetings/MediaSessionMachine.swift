import SymorvaRuntime

/// A stage member's real-time media session with the community's media server (Janus
/// AudioBridge), from `connect()` to its close.
///
/// ```
/// idle → connecting → negotiating → connected
///            ↑  │          │            │ ICE failed, hangup, session lost
///            │  └──────────┴→ reconnecting ←┘
///            └── retry ────────────┘
///  unauthorized (token revoked) → closed(revoked);  disconnect → closed(requested);
///  an engine failure or too many attempts → failed
/// ```
///
/// - **connecting**: a media-server session is created, the AudioBridge plugin attached, and
///   the room joined with the member's own token (muted unless the microphone is on). The
///   server's event stream is polled and the session kept alive from the moment it exists.
/// - **negotiating**: the platform's peer starts (its audio source and receiver), creates an
///   offer that goes to the room (`configure` with the JSEP offer); the server's answer is
///   applied and local ICE candidates trickle as they are found. ICE connected → connected.
/// - **reconnecting**: the media path dropped (ICE failure, the server hung up or lost the
///   session, the event stream or a keep-alive failed); everything of the old connection is torn
///   down and a new one starts after a backoff, with the same token and no new admission.
/// - A token the room refuses (revoked by a demotion, or expired) closes the session (`revoked`).
///
/// Every effect that belongs to a connection runs under a key and is cancelled when the
/// connection ends; events and effects describe themselves by case name only (the join
/// carries the token).
package struct MediaSessionMachine: StateMachine {
    package static let name = "MediaSession"

    /// What the machine needs to know about its environment.
    package struct Configuration: Sendable, Hashable {
        /// Waits before a new connection after a failed one; no jitter is drawn.
        package var reconnectBackoff: RetryBackoff
        /// Failed attempts in a row after which the session fails.
        package var maximumAttempts: Int
        /// How long connecting and negotiating may take before the attempt counts as failed.
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

        /// Creates a configuration.
        package init(
            reconnectBackoff: RetryBackoff = .mediaReconnect, maximumAttempts: Int = 8,
            attemptTimeout: Duration = .seconds(20), keepaliveInterval: Duration = .seconds(10),
            stallTimeout: Duration = .seconds(3)
        ) {
            self.reconnectBackoff = reconnectBackoff
            self.maximumAttempts = maximumAttempts
            self.attemptTimeout = attemptTimeout
            self.keepaliveInterval = keepaliveInterval
            self.stallTimeout = stallTimeout
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
        /// The request in flight of the connection steps (create, attach, join, offer).
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
    }

    // MARK: - State

    /// A step of the state: ``MediaConnectStep`` (public: an app observes it).
    package typealias ConnectStep = MediaConnectStep

    /// A step of the state: ``MediaNegotiationStep`` (public: an app observes it).
    package typealias NegotiationStep = MediaNegotiationStep

    /// The machine state: ``MediaSessionState`` (public: an app observes it).
    package typealias State = MediaSessionState

    // MARK: - Event

    /// What happened.
    package enum Event: Sendable, Equatable, CaseNamed, CustomStringConvertible {
        /// The member asked to connect.
        case connectRequested
        /// The member (or the meeting) asked to disconnect.
        case disconnectRequested
        /// The member turned their microphone on or off.
        case microphoneRequested(enabled: Bool)
        /// The services renewed the descriptor (a fresh token for the next join).
        case descriptorUpdated(MediaSessionDescriptor)
        /// The media server answered the session creation with its ID.
        case sessionCreated(Result<UInt64, MediaSessionError>)
        /// The media server answered the plugin attach with the handle's ID.
        case pluginAttached(Result<UInt64, MediaSessionError>)
        /// The room answered the join with the member's participant ID.
        case roomJoined(Result<UInt64, MediaSessionError>)
        /// The platform peer started (or could not).
        case peerStarted(MediaSessionError?)
        /// The peer created its offer.
        case offerCreated(Result<SessionDescription, MediaSessionError>)
        /// The room answered the offer.
        case answerReceived(Result<SessionDescription, MediaSessionError>)
        /// The peer applied the answer (or refused it).
        case answerApplied(MediaSessionError?)
        /// The peer found a local ICE candidate.
        case localCandidate(IceCandidate)
        /// The peer finished gathering candidates.
        case localCandidatesGathered
        /// The peer's ICE connection state changed.
        case iceStateChanged(IceConnectionState)
        /// The room's audio stopped reaching the peer (`false`: nothing for a second) or reaches
        /// it again (`true`).
        case incomingAudioChanged(flowing: Bool)
        /// The peer's pipeline stopped with an error.
        case peerFailed(MediaSessionError)
        /// The media server said something about the handle or session.
        case serverEvent(MediaServerEvent)
        /// The media server's event stream failed.
        case eventsFailed(MediaSessionError)
        /// A keep-alive answered (nil: fine).
        case keepaliveAnswered(MediaSessionError?)
        /// The room answered a mute change (nil: applied).
        case configureAnswered(MediaSessionError?)
        /// A timer set by the machine fired.
        case timerFired(MediaSessionTimer)

        /// Every event case name, in declaration order: the chart's event names.
        package static let caseNames = [
            "connectRequested", "disconnectRequested", "microphoneRequested", "descriptorUpdated", "sessionCreated",
            "pluginAttached", "roomJoined", "peerStarted", "offerCreated", "answerReceived", "answerApplied",
            "localCandidate", "localCandidatesGathered", "iceStateChanged", "incomingAudioChanged", "peerFailed",
            "serverEvent", "eventsFailed", "keepaliveAnswered", "configureAnswered", "timerFired",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .connectRequested: "connectRequested"
            case .disconnectRequested: "disconnectRequested"
            case .microphoneRequested: "microphoneRequested"
            case .descriptorUpdated: "descriptorUpdated"
            case .sessionCreated: "sessionCreated"
            case .pluginAttached: "pluginAttached"
            case .roomJoined: "roomJoined"
            case .peerStarted: "peerStarted"
            case .offerCreated: "offerCreated"
            case .answerReceived: "answerReceived"
            case .answerApplied: "answerApplied"
            case .localCandidate: "localCandidate"
            case .localCandidatesGathered: "localCandidatesGathered"
            case .iceStateChanged: "iceStateChanged"
            case .incomingAudioChanged: "incomingAudioChanged"
            case .peerFailed: "peerFailed"
            case .serverEvent: "serverEvent"
            case .eventsFailed: "eventsFailed"
            case .keepaliveAnswered: "keepaliveAnswered"
            case .configureAnswered: "configureAnswered"
            case .timerFired: "timerFired"
            }
        }

        /// The case name only: events may carry tokens.
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
    }

    // MARK: - Effect

    /// What the interpreter must do.
    package enum Effect: MachineEffect, Equatable, CustomStringConvertible {
        /// Create a media-server session; answers ``Event/sessionCreated(_:)``.
        case createSession(serverURL: String)
        /// Attach the plugin in the session; answers ``Event/pluginAttached(_:)``.
        case attachPlugin(session: UInt64, plugin: String)
        /// Read the session's event stream until cancelled: emits ``Event/serverEvent(_:)``,
        /// ends with ``Event/eventsFailed(_:)``; answers to requests go to their waiters.
        case readEvents(session: UInt64)
        /// Fire ``Event/timerFired(_:)`` with ``MediaSessionTimer/keepalive`` after this delay.
        case scheduleKeepalive(after: Duration)
        /// Keep the session alive; answers ``Event/keepaliveAnswered(_:)``.
        case sendKeepalive(session: UInt64)
        /// Join the room; answers ``Event/roomJoined(_:)``.
        case joinRoom(MediaServerLink, MediaRoomJoin)
        /// Start the platform peer, sending when `sending`; answers ``Event/peerStarted(_:)``,
        /// then emits its candidates, ICE states and failures until cancelled (which closes it).
        case startPeer(sending: Bool)
        /// Have the peer create its offer; answers ``Event/offerCreated(_:)``.
        case createOffer
        /// Send the offer to the room (`configure` with the JSEP offer); answers ``Event/answerReceived(_:)``.
        case sendOffer(MediaServerLink, SessionDescription, muted: Bool)
        /// Apply the room's answer to the peer; answers ``Event/answerApplied(_:)``.
        case applyAnswer(SessionDescription)
        /// Trickle a local candidate to the media server.
        case trickle(MediaServerLink, IceCandidate)
        /// Tell the media server that gathering is complete.
        case trickleComplete(MediaServerLink)
        /// Start or stop sending the peer's audio.
        case setSending(Bool)
        /// Tell the room the member is (un)muted; answers ``Event/configureAnswered(_:)``.
        case configureMuted(MediaServerLink, muted: Bool)
        /// Hang the handle up, leave the room and destroy the session (best effort, no answer).
        case hangUp(MediaServerLink)
        /// Destroy a session that has no joined handle yet (best effort, no answer).
        case destroySession(UInt64)
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
        /// Cancel the effect or timer running under this key.
        case cancel(EffectKey)

        package var directive: EffectDirective {
            switch self {
            case .createSession, .attachPlugin, .joinRoom, .createOffer, .sendOffer, .applyAnswer:
                .keyed(Keys.request)
            case .readEvents: .keyed(Keys.events)
            case .scheduleKeepalive(let delay): .timer(Keys.keepalive, .after(delay))
            case .startPeer: .keyed(Keys.peer)
            case .scheduleRetry(let delay): .timer(Keys.retry, .after(delay))
            case .startAttemptTimeout(let delay): .timer(Keys.attempt, .after(delay))
            case .startStallTimeout(let delay): .timer(Keys.stall, .after(delay))
            case .startUpstreamTimeout(let delay): .timer(Keys.upstream, .after(delay))
            case .sendKeepalive, .trickle, .trickleComplete, .setSending, .configureMuted, .hangUp, .destroySession:
                .perform
            case .cancel(let key): .cancel(key)
            }
        }

        /// Every effect case name, in declaration order.
        package static let caseNames = [
            "createSession", "attachPlugin", "readEvents", "scheduleKeepalive", "sendKeepalive", "joinRoom",
            "startPeer", "createOffer", "sendOffer", "applyAnswer", "trickle", "trickleComplete", "setSending",
            "configureMuted", "hangUp", "destroySession", "scheduleRetry", "startAttemptTimeout", "startStallTimeout",
            "startUpstreamTimeout", "cancel",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .createSession: "createSession"
            case .attachPlugin: "attachPlugin"
            case .readEvents: "readEvents"
            case .scheduleKeepalive: "scheduleKeepalive"
            case .sendKeepalive: "sendKeepalive"
            case .joinRoom: "joinRoom"
            case .startPeer: "startPeer"
            case .createOffer: "createOffer"
            case .sendOffer: "sendOffer"
            case .applyAnswer: "applyAnswer"
            case .trickle: "trickle"
            case .trickleComplete: "trickleComplete"
            case .setSending: "setSending"
            case .configureMuted: "configureMuted"
            case .hangUp: "hangUp"
            case .destroySession: "destroySession"
            case .scheduleRetry: "scheduleRetry"
            case .startAttemptTimeout: "startAttemptTimeout"
            case .startStallTimeout: "startStallTimeout"
            case .startUpstreamTimeout: "startUpstreamTimeout"
            case .cancel: "cancel"
            }
        }

        /// The case name only: the join carries the member's token.
        package var description: String { caseName }
    }
}

/// Where a connection is while it is being made.
public enum MediaConnectStep: Sendable, Hashable {
    /// Creating the media-server session.
    case creatingSession
    /// Attaching the AudioBridge plugin in the session.
    case attaching(session: UInt64)
    /// Joining the room with the member's token.
    case joining(MediaServerLink)
}

/// Where the WebRTC negotiation is.
public enum MediaNegotiationStep: Sendable, Hashable {
    /// The peer (audio source, encoder, ICE agent) is starting.
    case startingPeer
    /// The peer is creating its offer.
    case creatingOffer
    /// The offer is with the room; waiting for its answer.
    case awaitingAnswer
    /// The answer is being applied to the peer.
    case applyingAnswer
    /// The answer is applied; waiting for ICE to connect.
    case connectingMedia
}

/// Where a stage member's media session is: what an app observes on a media session
/// (`MediaSession.state`), and what a platform's media engine publishes.
///
/// The state of the SDK's media-session machine; the machine, its events and its effects are
/// internal to the SDK (`package`).
public enum MediaSessionState: Sendable, Equatable, CaseNamed {
    /// Not connected yet.
    case idle(MediaCall)
    /// Creating the media-server session, attaching the plugin, joining the room.
    case connecting(MediaCall, MediaConnectStep)
    /// Joined: the peer negotiates the audio path with the room.
    case negotiating(MediaCall, MediaServerLink, MediaNegotiationStep)
    /// Audio flows both ways (while the microphone is on).
    case connected(MediaCall, MediaServerLink)
    /// The media path dropped: waiting before a new connection with the same token.
    case reconnecting(MediaCall, MediaSessionError)
    /// Closed for good: disconnected, or the token was revoked.
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
        case .idle(let call), .connecting(let call, _), .negotiating(let call, _, _), .connected(let call, _),
            .reconnecting(let call, _):
            call
        case .closed, .failed: nil
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

extension MediaSessionMachine: ChartedMachine {}

extension MediaSessionState: CaseNameListing {
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
