import SymorvaRuntime

/// Where a stage member's connection continues on the media server: the Janus session and the
/// AudioBridge handle that the community services made and joined to the meeting's room with the
/// member's assigned participant (Janus's `session_id` and `handle_id`). Safe to log: the member
/// holds no token, and the handle is joined as that participant only.
public struct MediaServerLink: Sendable, Hashable {
    /// The media server's HTTP API (Janus), e.g. `http://127.0.0.1:8088/janus`.
    public let serverURL: String
    /// The media server's session.
    public let session: UInt64
    /// The AudioBridge plugin handle in that session, joined to the room.
    public let handle: UInt64
    /// The participant the services joined the handle as.
    public let participantID: UInt64

    /// A link.
    public init(serverURL: String, session: UInt64, handle: UInt64, participantID: UInt64) {
        self.serverURL = serverURL
        self.session = session
        self.handle = handle
        self.participantID = participantID
    }
}

/// What a stage session knows across its connections: whether the member wants their microphone
/// on, how many attempts failed in a row, and what it learnt about the connection in use.
public struct MediaCall: Sendable, Hashable {
    /// Whether the member's microphone should send (and the room show them unmuted).
    public var microphoneEnabled: Bool
    /// Connection attempts that failed since the session was last connected.
    public var failures: Int
    /// Whether the media server last said the member's audio reaches it, on this connection
    /// (Janus's `media` events; false until it says so, and again on every new connection).
    public var serverReceivesAudio: Bool
    /// Connections started so far: names this connection's requests (their Janus transactions),
    /// so that a reply is matched to the request it answers.
    public var connection: Int
    /// Whether the room's audio reaches the peer on this connection (false until it does, and
    /// again after a check found none).
    public var incomingAudio: Bool

    /// A call, microphone off, no failures.
    public init(
        microphoneEnabled: Bool = false, failures: Int = 0, serverReceivesAudio: Bool = false, connection: Int = 0,
        incomingAudio: Bool = false
    ) {
        self.microphoneEnabled = microphoneEnabled
        self.failures = failures
        self.serverReceivesAudio = serverReceivesAudio
        self.connection = connection
        self.incomingAudio = incomingAudio
    }

    /// The transaction of this connection's offer.
    public var offerTransaction: String { "offer-\(connection)" }
}

/// The media server's reply to one of the member's requests, read on the session's event stream
/// (Janus answers a plugin message with `ack`, then an `event` with the same transaction).
package enum MediaServerReply: Sendable, Hashable {
    /// A session description: the room's answer to the member's offer.
    case description(SessionDescription)
    /// Done, nothing to hand over.
    case accepted
    /// The request failed (the room refused it, or it never reached the server).
    case failed(MediaSessionError)
}

/// A session description (SDP) of the WebRTC negotiation. Not a secret, but long: it prints
/// its length only.
package struct SessionDescription: Sendable, Hashable, CustomStringConvertible {
    /// The SDP text.
    package let sdp: String
    /// Wraps SDP text.
    package init(sdp: String) { self.sdp = sdp }
    /// `sdp(<n> bytes)`.
    package var description: String { "sdp(\(sdp.utf8.count) bytes)" }
}

/// One ICE candidate of the local peer, to trickle to the media server (or of the server's).
package struct IceCandidate: Sendable, Hashable {
    /// The media line index it belongs to.
    package let mlineIndex: UInt32
    /// The `candidate:` attribute.
    package let candidate: String

    /// A candidate.
    package init(mlineIndex: UInt32, candidate: String) {
        self.mlineIndex = mlineIndex
        self.candidate = candidate
    }
}

/// The WebRTC ICE connection state the peer reports (the W3C `RTCIceConnectionState`).
package enum IceConnectionState: String, Sendable, Hashable, CaseIterable {
    /// Not started.
    case new
    /// Checking candidate pairs.
    case checking
    /// A working pair was found.
    case connected
    /// Checking finished with a working pair.
    case completed
    /// No pair works: the media path is gone.
    case failed
    /// Connectivity was lost for now; it may come back by itself.
    case disconnected
    /// The agent was shut down.
    case closed
}

/// What the media server says about the member's handle outside the answers to its requests.
package enum MediaServerEvent: Sendable, Hashable {
    /// The WebRTC PeerConnection is up on the server's side.
    case webrtcUp
    /// The server hung the PeerConnection up (ICE or DTLS failure, a restart of the plugin).
    case hangup
    /// The member was taken out of the room (kicked: a host demoted them, their token went).
    case removed
    /// The server no longer knows the session (it timed out, or the server restarted).
    case sessionLost
    /// The server's audio from the member started (`true`) or stopped (`false`, nothing for
    /// about a second) arriving: Janus's `media` event.
    case audioReceiving(Bool)
}

/// Why a stage media session failed, or could not connect this time.
public enum MediaSessionError: Error, Sendable, Hashable {
    /// The member may not be in the room any more (the services no longer have them on stage,
    /// or the room refused them).
    case unauthorized
    /// The media server has no such room (the meeting's room is gone).
    case roomUnavailable
    /// The media server lost the session or the handle (timeout, restart).
    case sessionLost
    /// The media server could not be reached, or its answer was lost.
    case transport(TransportProblem)
    /// The media server or its plugin refused with this error code.
    case refused(code: Int)
    /// An answer that the media server's API does not document.
    case invalidResponse
    /// The platform's media engine could not do its part (no plugin, a pipeline that failed).
    case engine(MediaEngineFailure)
    /// ICE found no working path to the media server.
    case iceFailed
    /// The negotiation did not finish in time.
    case timedOut
    /// Audio stopped flowing while connected (the room's mix stopped arriving, or the server
    /// stopped hearing the member's microphone): the media path dropped without ICE noticing.
    case mediaStalled

    /// Whether a new attempt (a fresh media-server session) can succeed without anything else changing.
    public var isTransient: Bool {
        switch self {
        case .sessionLost, .transport, .iceFailed, .timedOut, .roomUnavailable, .mediaStalled: true
        case .unauthorized, .refused, .invalidResponse, .engine: false
        }
    }
}

/// What the platform's media engine could not do.
public enum MediaEngineFailure: Sendable, Hashable, CustomStringConvertible {
    /// Something the engine needs is not on this machine, named so that a person can install it
    /// (or join with a test tone instead of a microphone).
    case missingComponent(MissingMediaComponent)
    /// The pipeline could not be built or started.
    case pipelineFailed
    /// The engine could not create the offer.
    case offerFailed
    /// The engine refused the media server's answer.
    case answerRejected
    /// The pipeline stopped with an error while running.
    case streamFailed

    /// What failed, as a person reads it: `no audio capture device (microphone)`,
    /// `missing GStreamer element 'webrtcbin'`, `pipeline failed`.
    public var description: String {
        switch self {
        case .missingComponent(let component): component.description
        case .pipelineFailed: "pipeline failed"
        case .offerFailed: "could not create the offer"
        case .answerRejected: "rejected the media server's answer"
        case .streamFailed: "the stream failed while running"
        }
    }
}

/// What a media engine needs and did not find: the answer to "what do I install?".
public enum MissingMediaComponent: Sendable, Hashable, CustomStringConvertible {
    /// No audio capture device: no microphone, or no audio server (PulseAudio, PipeWire) to
    /// reach one. A test tone (`meeting join <room> --tone 440` in the REPL) needs none.
    case captureDevice
    /// The platform's media framework itself did not start (GStreamer on Linux).
    case framework(String)
    /// A plugin element the pipeline needs is not installed (a GStreamer element factory name
    /// such as `webrtcbin`, `nicesrc`, `opusenc` or `faad`).
    case element(String)

    /// `no audio capture device (microphone)`, `GStreamer did not start`, or
    /// `missing GStreamer element 'webrtcbin'`.
    public var description: String {
        switch self {
        case .captureDevice: "no audio capture device (microphone)"
        case .framework(let name): "\(name) did not start"
        case .element(let name): "missing GStreamer element '\(name)'"
        }
    }
}

/// Why a stage media session is closed.
public enum MediaCloseReason: String, Sendable, Hashable {
    /// The member (or the meeting: demotion, leaving) disconnected it.
    case requested
    /// The member is not on stage any more: the services took them out of the room (demotion).
    case revoked
}
