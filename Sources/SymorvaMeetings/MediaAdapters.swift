import SymorvaMachines
import SymorvaRuntime

/// A stage member's real-time media session: the SDK page's media provider adapter.
///
/// The SDK hands each stage member one, a child of their meeting in the account's scope: it
/// ends with the meeting's media (demotion, leaving) and with the account (sign-out, switch).
/// To connect, it has the community services join the member to the meeting's media room
/// (``MediaSessionContext/connector``) and continues on the media-server session they hand over;
/// it never holds a token. Apple platforms plug their WebRTC engine in through ``MediaEngine``;
/// on Linux the SDK's is GStreamer's `webrtcbin` signalling with Janus (`SymorvaMediaGStreamer`).
/// A platform without an engine gets ``UnavailableMediaSession``, whose ``connect()`` throws
/// ``/SymorvaMachines/MeetingError/mediaUnavailable``: never a silent no-op.
public protocol MediaSession: AnyObject, Sendable {
    /// Where the connection is (connecting, negotiating, connected, reconnecting, closed, failed).
    var state: ObservableValue<MediaSessionState> { get }
    /// The audio levels and speaking indications of both directions.
    var audioLevels: ObservableValue<MediaAudioLevels> { get }
    /// Connects to the meeting's media room (the services join the member, microphone off) and
    /// returns once audio flows; throws ``/SymorvaMachines/MeetingError/media(_:)`` with the
    /// reason when it cannot (``/SymorvaMachines/MediaSessionError/unauthorized``: the member is
    /// not on stage any more).
    func connect() async throws(MeetingError)
    /// Turns the member's microphone on or off: off stops sending audio and tells the room the
    /// member is muted. Remembered for a connection still being made.
    func setMicrophoneEnabled(_ enabled: Bool) async throws(MeetingError)
    /// Leaves the media server. Idempotent.
    func disconnect() async
}

/// How a media session gets into the meeting's media room: the community services join the
/// member (with the participant, display and token they assigned) on a new media-server session
/// and hand over that session and its joined handle.
public protocol MediaRoomConnector: Sendable {
    /// Has the services join the member on a new media-server session; the link to continue on.
    ///
    /// - Throws: ``/SymorvaMachines/MediaSessionError/unauthorized`` when the member is not on
    ///   stage (any more); ``/SymorvaMachines/MediaSessionError/roomUnavailable`` when the media
    ///   room is not there for now; transport failures.
    func joinMediaRoom() async throws(MediaSessionError) -> MediaServerLink
}

/// What a media engine gets to make one stage member's session.
public struct MediaSessionContext: Sendable {
    /// The meeting the session belongs to (names it in traces).
    public let meetingID: MeetingID
    /// Joins the member to the meeting's media room (the services do it).
    public let connector: any MediaRoomConnector
    /// The account's scope: its end ends the session (the media session machine disconnects).
    public let scope: AccountScope?

    /// A context.
    public init(meetingID: MeetingID, connector: any MediaRoomConnector, scope: AccountScope?) {
        self.meetingID = meetingID
        self.connector = connector
        self.scope = scope
    }
}

/// Makes the stage members' media sessions: the platform's real-time media engine.
public protocol MediaEngine: Sendable {
    /// A session for one stage member of one meeting, not connected yet.
    func makeSession(_ context: MediaSessionContext) -> any MediaSession
}

/// The media engine of a platform that has none: its sessions refuse to connect with
/// ``/SymorvaMachines/MeetingError/mediaUnavailable``.
public struct UnavailableMediaEngine: MediaEngine {
    /// The engine.
    public init() {}

    public func makeSession(_ context: MediaSessionContext) -> any MediaSession {
        UnavailableMediaSession()
    }
}

/// A stage session without a media engine: connecting fails.
public final class UnavailableMediaSession: MediaSession {
    private let idle = ObservableValue<MediaSessionMachine.State>.Publisher(.idle(MediaCall()))
    private let silence = ObservableValue<MediaAudioLevels>.Publisher(MediaAudioLevels())

    /// A session.
    public init() {}

    /// Always idle: it never connects.
    public var state: ObservableValue<MediaSessionState> { idle.observable }

    /// Always silence.
    public var audioLevels: ObservableValue<MediaAudioLevels> { silence.observable }

    /// Always throws ``/SymorvaMachines/MeetingError/mediaUnavailable``: this platform has no real-time media engine.
    public func connect() async throws(MeetingError) { throw .mediaUnavailable }

    /// Always throws ``/SymorvaMachines/MeetingError/mediaUnavailable``.
    public func setMicrophoneEnabled(_ enabled: Bool) async throws(MeetingError) { throw .mediaUnavailable }

    public func disconnect() async {}
}

/// Where a playback stream is.
public enum PlaybackState: Sendable, Hashable {
    /// Not started.
    case idle
    /// Playing was asked for; waiting for the first segments.
    case buffering
    /// Following the live playlist and fetching its segments.
    case playing
    /// Paused by the member: nothing is fetched, the buffer is kept.
    case paused
    /// The last fetch failed; fetching again after a pause.
    case stalled(MeetingError)
    /// Stopped for good (left the meeting, promoted to stage, account ended).
    case stopped
}

/// A listener's playback stream (large-room mode): the SDK page's media provider adapter.
///
/// The SDK's own (``HLSPlaybackStream``) follows the meeting's live HLS playlist over the SDK's
/// transport and fetches its segments; decoding them to a speaker is the platform's job (take
/// them with ``nextSegment()``).
public protocol PlaybackStream: AnyObject, Sendable {
    /// Where the stream is.
    var state: ObservableValue<PlaybackState> { get }
    /// How much audio is fetched and not yet taken by the player.
    var bufferedDuration: ObservableValue<Duration> { get }
    /// The age of the newest segment when it was fetched (how far behind live the listener is),
    /// once one was fetched.
    var liveLatency: ObservableValue<Duration?> { get }
    /// Starts (or resumes) following the live stream.
    func play()
    /// Stops fetching; the buffer is kept.
    func pause()
    /// Stops for good.
    func stop()
    /// The oldest fetched segment not taken yet, if any.
    func nextSegment() -> PlaybackSegment?
}

/// One fetched segment of a playback stream (MPEG-TS with AAC audio from the reference services).
public struct PlaybackSegment: Sendable, Hashable {
    /// Its media sequence number in the playlist.
    public let sequence: Int
    /// How much audio it holds.
    public let duration: Duration
    /// Its bytes.
    public let data: [UInt8]

    /// A segment.
    public init(sequence: Int, duration: Duration, data: [UInt8]) {
        self.sequence = sequence
        self.duration = duration
        self.data = data
    }
}
