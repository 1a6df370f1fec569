import SymorvaRuntime

/// A meeting's ID on the community services (`mt_…`). Safe to log.
public struct MeetingID: RawRepresentable, Hashable, Sendable, CustomStringConvertible, LogSafe {
    /// The ID as the services spell it.
    public let rawValue: String
    /// Wraps an ID received from the services.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Wraps an ID received from the services.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public var logDescription: String { rawValue }
}

/// The role the meeting service admitted a member with.
public enum ParticipantRole: String, Sendable, Hashable, CaseIterable {
    /// On stage: real-time media (a ``MediaSessionDescriptor``).
    case stage
    /// Listening to the playback stream (large-room mode).
    case listener
}

/// How a meeting admits members to its stage.
public enum MeetingMode: String, Sendable, Hashable {
    /// Anyone joins on stage while it has room.
    case open
    /// Only hosts start on stage; others listen until a host promotes them.
    case broadcast
}

/// One member of a meeting as every member sees it.
public struct MeetingParticipant: Sendable, Hashable {
    /// Who.
    public let userID: UserID
    /// Stage or listener.
    public let role: ParticipantRole
    /// Whether their hand is raised (a signal to hosts only).
    public let handRaised: Bool

    /// Creates a participant.
    public init(userID: UserID, role: ParticipantRole, handRaised: Bool = false) {
        self.userID = userID
        self.role = role
        self.handRaised = handRaised
    }
}

/// What a stage member knows of their place in the meeting's media room: the media server, the
/// AudioBridge room, the participant ID and display the services assigned them, and when the
/// services' admission (their token, which never leaves the services) expires unless renewed.
///
/// It grants nothing: the services join the member to the room themselves and hand over only the
/// media-server session to continue on (``MediaServerLink``), so no client can join as anyone else.
public struct MediaSessionDescriptor: Sendable, Hashable {
    /// The media server's HTTP API (Janus), e.g. `http://127.0.0.1:8088/janus`.
    public let serverURL: String
    /// The media server plugin (`janus.plugin.audiobridge`).
    public let plugin: String
    /// The AudioBridge room.
    public let room: UInt64
    /// The participant ID the services join the member as.
    public let participantID: UInt64
    /// The display name the services join the member with (the member's user ID).
    public let display: String
    /// When the admission expires unless renewed (the meeting machine renews it before).
    public let expiresAt: Timestamp

    /// Creates a descriptor.
    public init(
        serverURL: String, plugin: String, room: UInt64, participantID: UInt64, display: String,
        expiresAt: Timestamp
    ) {
        self.serverURL = serverURL
        self.plugin = plugin
        self.room = room
        self.participantID = participantID
        self.display = display
        self.expiresAt = expiresAt
    }
}

/// Where a listener's playback stream is: the live HLS playlist on the community services.
public struct PlaybackDescriptor: Sendable, Hashable {
    /// The playlist's path on the services (`/_symorva/v1/meetings/<id>/playback/live.m3u8`).
    public let playlistPath: String
    /// The packager's target segment duration.
    public let segmentDuration: Duration

    /// Creates a descriptor.
    public init(playlistPath: String, segmentDuration: Duration) {
        self.playlistPath = playlistPath
        self.segmentDuration = segmentDuration
    }
}

/// The meeting and its participants as the services answered, with the feed position it includes.
public struct MeetingSnapshot: Sendable, Hashable {
    /// The meeting.
    public let meetingID: MeetingID
    /// The Matrix room it belongs to.
    public let roomID: RoomID
    /// How it admits members.
    public let mode: MeetingMode
    /// Whether it has ended.
    public let ended: Bool
    /// Everyone in it.
    public let participants: [MeetingParticipant]
    /// The change feed's position this snapshot includes.
    public let cursor: Int

    /// Creates a snapshot.
    public init(
        meetingID: MeetingID, roomID: RoomID, mode: MeetingMode, ended: Bool = false,
        participants: [MeetingParticipant], cursor: Int
    ) {
        self.meetingID = meetingID
        self.roomID = roomID
        self.mode = mode
        self.ended = ended
        self.participants = participants
        self.cursor = cursor
    }
}

/// The services' answer to a join: the meeting and the admitted role with what it needs.
package struct JoinAnswer: Sendable, Hashable {
    /// The admitted role's media.
    package enum Admission: Sendable, Hashable {
        /// On stage, with the media-session descriptor.
        case stage(MediaSessionDescriptor)
        /// A listener, with the playback stream.
        case listener(PlaybackDescriptor)
    }

    /// The member the services admitted (the caller).
    package let userID: UserID
    /// The meeting as the join left it.
    package let snapshot: MeetingSnapshot
    /// The admitted role.
    package let admission: Admission
    /// The playback stream of the meeting (also for stage members, for after a demotion).
    package let playback: PlaybackDescriptor

    /// Creates an answer.
    package init(userID: UserID, snapshot: MeetingSnapshot, admission: Admission, playback: PlaybackDescriptor) {
        self.userID = userID
        self.snapshot = snapshot
        self.admission = admission
        self.playback = playback
    }
}

/// One answer of the change feed: the participants after the changes, and the next cursor.
package struct FeedBatch: Sendable, Hashable {
    /// Pass to the next poll.
    package let cursor: Int
    /// Whether the meeting has ended.
    package let ended: Bool
    /// Everyone in the meeting after the changes.
    package let participants: [MeetingParticipant]

    /// Creates a batch.
    package init(cursor: Int, ended: Bool, participants: [MeetingParticipant]) {
        self.cursor = cursor
        self.ended = ended
        self.participants = participants
    }
}

/// Whether the change feed is connected.
public enum FeedStatus: Sendable, Hashable {
    /// Polling; the last poll answered.
    case live
    /// The last poll failed; polling again from the same cursor after a backoff. `attempt`
    /// counts the failures in a row.
    case reconnecting(attempt: Int)
}

/// A meeting the member is in: the services' view of it and the feed's state.
public struct JoinedMeeting: Sendable, Hashable {
    /// The member this machine runs for.
    public let userID: UserID
    /// The meeting and its participants, as of `snapshot.cursor`.
    public var snapshot: MeetingSnapshot
    /// The meeting's playback stream (what a listener plays).
    public let playback: PlaybackDescriptor
    /// Whether the feed is connected.
    public var feed: FeedStatus

    /// Creates a joined meeting.
    public init(userID: UserID, snapshot: MeetingSnapshot, playback: PlaybackDescriptor, feed: FeedStatus = .live) {
        self.userID = userID
        self.snapshot = snapshot
        self.playback = playback
        self.feed = feed
    }

    /// The member's own entry, if the meeting still has them.
    public var me: MeetingParticipant? { snapshot.participants.first { $0.userID == userID } }
    /// The meeting's ID.
    public var meetingID: MeetingID { snapshot.meetingID }
}

/// Why a member is no longer in a meeting.
public enum LeaveReason: Sendable, Hashable {
    /// They left (or their account, room or app did).
    case requested
    /// The services no longer have them: they left the Matrix room, or were removed.
    case removed
}

/// Why a meeting operation failed, as the member is told.
public enum MeetingError: Error, Sendable, Hashable {
    /// The member is not joined to the meeting's Matrix room (the services asked the homeserver).
    case notRoomMember
    /// Only hosts (power level at or above the community's threshold) may do this.
    case notHost
    /// The services have no such meeting.
    case meetingUnknown
    /// The homeserver has no such room.
    case roomUnknown
    /// The meeting has ended.
    case meetingEnded
    /// The member (or the one acted on) is not in the meeting.
    case notParticipant
    /// The stage is at its capacity.
    case stageFull
    /// Promote a stage member, demote a listener, or a stage-only request from a listener.
    case wrongRole
    /// The media server failed, is not configured, or (on this platform) there is no media engine.
    case mediaUnavailable
    /// The services could not ask the homeserver.
    case homeserverUnavailable
    /// The services refused for now; nothing happened.
    case rateLimited(retryAfter: Duration?)
    /// The request or its answer was lost below HTTP, or the services answered 5xx.
    case transport(TransportProblem)
    /// An answer arrived that is not what the API documents.
    case invalidResponse
    /// Another refusal of the services, by its error code.
    case refused(code: String, status: Int)
    /// Nobody is signed in.
    case notSignedIn
    /// The account this meeting belonged to was signed out or switched away from.
    case accountEnded
    /// The meetings module is off in this community's manifest.
    case moduleDisabled
    /// The stage media session could not connect or was closed (its reason).
    case media(MediaSessionError)

    /// Whether trying again later can succeed without anything else changing.
    public var isTransient: Bool {
        switch self {
        case .homeserverUnavailable, .rateLimited, .transport, .mediaUnavailable: true
        case .notRoomMember, .notHost, .meetingUnknown, .roomUnknown, .meetingEnded, .notParticipant, .stageFull,
            .wrongRole, .invalidResponse, .refused, .notSignedIn, .accountEnded, .moduleDisabled:
            false
        case .media(let error): error.isTransient
        }
    }
}

/// What the member's leave request came to.
package enum LeaveOutcome: Sendable, Hashable {
    /// The services took the member out (or no longer had them).
    case left
    /// The services could not be told: the member may still be listed there until the services'
    /// presence timeout takes them out (their client no longer polls).
    case failed(MeetingError)
}
