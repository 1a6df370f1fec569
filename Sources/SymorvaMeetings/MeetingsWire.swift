import SymorvaMachines
import SymorvaRuntime

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The meetings service's JSON (the server's OpenAPI document, tag `meetings`) and its
/// conversion to the machine's values. Anything that does not convert is malformed.
enum MeetingsWire {
    /// The service's paths.
    enum Path {
        static let join = "/_symorva/v1/meetings/join"
        static func meeting(_ id: MeetingID) -> String { "/_symorva/v1/meetings/\(id.rawValue)" }
        static func changes(_ id: MeetingID) -> String { meeting(id) + "/changes" }
        static func hand(_ id: MeetingID) -> String { meeting(id) + "/hand" }
        static func promote(_ id: MeetingID) -> String { meeting(id) + "/promote" }
        static func demote(_ id: MeetingID) -> String { meeting(id) + "/demote" }
        static func media(_ id: MeetingID) -> String { meeting(id) + "/media" }
        static func mediaConnect(_ id: MeetingID) -> String { meeting(id) + "/media/connect" }
        static func leave(_ id: MeetingID) -> String { meeting(id) + "/leave" }
        static func end(_ id: MeetingID) -> String { meeting(id) + "/end" }
    }

    // MARK: Requests

    struct JoinRequest: Encodable {
        var roomID: String
        var broadcast: Bool
        enum CodingKeys: String, CodingKey {
            case roomID = "room_id"
            case broadcast
        }
    }

    struct HandRequest: Encodable { var raised: Bool }

    struct TargetRequest: Encodable {
        var userID: String
        enum CodingKeys: String, CodingKey { case userID = "user_id" }
    }

    // MARK: Answers

    struct Meeting: Decodable {
        var meetingID: String
        var roomID: String
        var mode: String
        var status: String
        enum CodingKeys: String, CodingKey {
            case meetingID = "meeting_id"
            case roomID = "room_id"
            case mode, status
        }
    }

    struct Participant: Decodable {
        var userID: String
        var role: String
        var handRaised: Bool
        enum CodingKeys: String, CodingKey {
            case userID = "user_id"
            case role
            case handRaised = "hand_raised"
        }

        var participant: MeetingParticipant? {
            guard let role = ParticipantRole(rawValue: role), let id = UserID(userID) else { return nil }
            return MeetingParticipant(userID: id, role: role, handRaised: handRaised)
        }
    }

    struct Media: Decodable {
        var serverURL: String
        var plugin: String
        var room: UInt64
        var participantID: UInt64
        var display: String
        var expiresAtMilliseconds: Int64
        enum CodingKeys: String, CodingKey {
            case serverURL = "server_url"
            case plugin, room
            case participantID = "participant_id"
            case display
            case expiresAtMilliseconds = "expires_at_ms"
        }

        var descriptor: MediaSessionDescriptor {
            MediaSessionDescriptor(
                serverURL: serverURL, plugin: plugin, room: room, participantID: participantID,
                display: display, expiresAt: Timestamp(millisecondsSince1970: expiresAtMilliseconds))
        }
    }

    /// The services' answer to `POST …/media/connect`: the media-server session and handle they
    /// joined to the room as the member's participant.
    struct MediaConnection: Decodable {
        var serverURL: String
        var session: UInt64
        var handle: UInt64
        var participantID: UInt64
        enum CodingKeys: String, CodingKey {
            case serverURL = "server_url"
            case session = "session_id"
            case handle = "handle_id"
            case participantID = "participant_id"
        }

        var link: MediaServerLink {
            MediaServerLink(serverURL: serverURL, session: session, handle: handle, participantID: participantID)
        }
    }

    struct Playback: Decodable {
        var playlistPath: String
        var segmentSeconds: Int
        enum CodingKeys: String, CodingKey {
            case playlistPath = "playlist_path"
            case segmentSeconds = "segment_seconds"
        }

        var descriptor: PlaybackDescriptor {
            PlaybackDescriptor(playlistPath: playlistPath, segmentDuration: .seconds(segmentSeconds))
        }
    }

    struct Snapshot: Decodable {
        var meeting: Meeting
        var participants: [Participant]
        var cursor: Int

        var snapshot: MeetingSnapshot? {
            guard let mode = MeetingMode(rawValue: meeting.mode) else { return nil }
            let people = participants.compactMap(\.participant)
            guard people.count == participants.count else { return nil }
            return MeetingSnapshot(
                meetingID: MeetingID(meeting.meetingID), roomID: RoomID(meeting.roomID), mode: mode,
                ended: meeting.status == "ended", participants: people, cursor: cursor)
        }
    }

    struct Join: Decodable {
        var meeting: Meeting
        var participants: [Participant]
        var cursor: Int
        var role: String
        var media: Media?
        var playback: Playback?

        func answer(for userID: UserID) -> JoinAnswer? {
            guard let snapshot = Snapshot(meeting: meeting, participants: participants, cursor: cursor).snapshot
            else { return nil }
            let playlist = PlaybackDescriptor(
                playlistPath: Path.meeting(snapshot.meetingID) + "/playback/live.m3u8", segmentDuration: .seconds(1))
            switch (role, media, playback) {
            case ("stage", let media?, _):
                return JoinAnswer(
                    userID: userID, snapshot: snapshot, admission: .stage(media.descriptor), playback: playlist)
            case ("listener", _, let playback?):
                return JoinAnswer(
                    userID: userID, snapshot: snapshot, admission: .listener(playback.descriptor),
                    playback: playback.descriptor)
            default:
                return nil
            }
        }
    }

    struct Changes: Decodable {
        var cursor: Int
        var status: String
        var participants: [Participant]

        var batch: FeedBatch? {
            let people = participants.compactMap(\.participant)
            guard people.count == participants.count else { return nil }
            return FeedBatch(cursor: cursor, ended: status == "ended", participants: people)
        }
    }
}
