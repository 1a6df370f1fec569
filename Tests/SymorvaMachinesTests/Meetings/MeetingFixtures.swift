import SymorvaMachines
import SymorvaRuntime

/// Values shared by the meeting tests: one room, one meeting, the member and a host, and sample
/// states and events that cover every case (and every payload that changes the outcome).
enum MeetingFixture {
    static let me: UserID = "@me:example.org"
    static let host: UserID = "@host:example.org"
    static let room = RoomID("!room:example.org")
    static let meetingID = MeetingID("mt_0001")
    static let backoff = RetryBackoff(initialDelay: .seconds(1), maximumDelay: .seconds(30), jitterRatio: 0)
    static let machine = MeetingMachine(configuration: .init(feedBackoff: backoff, renewalMargin: .seconds(60)))
    static let playback = PlaybackDescriptor(
        playlistPath: "/_symorva/v1/meetings/mt_0001/playback/live.m3u8", segmentDuration: .seconds(1))
    static let expiry = Timestamp(millisecondsSince1970: 1_800_000_000_000)

    /// The member's descriptor; `participant` tells renewed ones apart in tests.
    static func descriptor(participant: UInt64 = 7, expiresAt: Timestamp = expiry) -> MediaSessionDescriptor {
        MediaSessionDescriptor(
            serverURL: "http://127.0.0.1:8088/janus", plugin: "janus.plugin.audiobridge", room: 42,
            participantID: participant, display: me.rawValue, expiresAt: expiresAt)
    }

    static func people(_ myRole: ParticipantRole?, hand: Bool = false) -> [MeetingParticipant] {
        var list = [MeetingParticipant(userID: host, role: .stage)]
        if let myRole { list.append(MeetingParticipant(userID: me, role: myRole, handRaised: hand)) }
        return list
    }

    static func snapshot(
        _ myRole: ParticipantRole?, hand: Bool = false, cursor: Int = 5, ended: Bool = false
    ) -> MeetingSnapshot {
        MeetingSnapshot(
            meetingID: meetingID, roomID: room, mode: .open, ended: ended, participants: people(myRole, hand: hand),
            cursor: cursor)
    }

    static func joined(
        _ myRole: ParticipantRole?, hand: Bool = false, cursor: Int = 5, feed: FeedStatus = .live
    ) -> JoinedMeeting {
        JoinedMeeting(
            userID: me, snapshot: snapshot(myRole, hand: hand, cursor: cursor), playback: playback, feed: feed)
    }

    static func batch(_ myRole: ParticipantRole?, hand: Bool = false, cursor: Int = 6, ended: Bool = false) -> FeedBatch
    {
        FeedBatch(cursor: cursor, ended: ended, participants: ended ? [] : people(myRole, hand: hand))
    }

    static func answer(_ admission: JoinAnswer.Admission, hand: Bool = false, ended: Bool = false) -> JoinAnswer {
        let role: ParticipantRole
        switch admission {
        case .stage: role = .stage
        case .listener: role = .listener
        }
        return JoinAnswer(
            userID: me, snapshot: snapshot(role, hand: hand, ended: ended), admission: admission, playback: playback)
    }

    static let renewalAt = expiry.advanced(by: .seconds(-60))

    // MARK: - Samples for the chart

    static let sampleStates: [MeetingMachine.State] = [
        .idle,
        .joining(roomID: room, broadcast: false),
        .stage(joined(.stage), descriptor()),
        .stage(joined(.stage, feed: .reconnecting(attempt: 3)), descriptor()),
        .listener(joined(.listener)),
        .handRaised(joined(.listener, hand: true)),
        .promoting(joined(.stage)),
        .promoting(joined(.stage, hand: true)),
        .demoting(joined(.listener)),
        .demoting(joined(.listener, hand: true)),
        .demoting(joined(.stage)),
        .leaving(joined(.listener)),
        .left(.requested),
        .left(.removed),
        .ended(snapshot(nil, ended: true)),
        .failed(.notRoomMember),
    ]

    static let sampleEvents: [MeetingMachine.Event] = [
        .joinRequested(room, broadcast: false),
        .joinRequested(room, broadcast: true),
        .joinResponse(.success(answer(.stage(descriptor())))),
        .joinResponse(.success(answer(.listener(playback)))),
        .joinResponse(.success(answer(.listener(playback), hand: true))),
        .joinResponse(.success(answer(.listener(playback), ended: true))),
        .joinResponse(.failure(.notRoomMember)),
        .feedResponse(.success(batch(.stage))),
        .feedResponse(.success(batch(.listener))),
        .feedResponse(.success(batch(.listener, hand: true))),
        .feedResponse(.success(batch(nil))),
        .feedResponse(.success(batch(nil, ended: true))),
        .feedResponse(.failure(.transport(.connectionReset))),
        .feedResponse(.failure(.meetingEnded)),
        .feedResponse(.failure(.notRoomMember)),
        .snapshotReceived(snapshot(.stage, cursor: 7)),
        .snapshotReceived(snapshot(.listener, cursor: 7)),
        .snapshotReceived(snapshot(.listener, hand: true, cursor: 7)),
        .snapshotReceived(snapshot(nil, cursor: 7)),
        .snapshotReceived(snapshot(nil, cursor: 7, ended: true)),
        .snapshotReceived(snapshot(.listener, cursor: 1)),
        .mediaSessionResponse(.success(descriptor(participant: 8))),
        .mediaSessionResponse(.failure(.transport(.timeout))),
        .mediaSessionResponse(.failure(.wrongRole)),
        .mediaSessionClosed,
        .timerFired(.feedRetry),
        .timerFired(.mediaRequest),
        .leaveRequested,
        .leaveResponse(.left),
        .leaveResponse(.failed(.notParticipant)),
        .leaveResponse(.failed(.transport(.unreachable))),
    ]
}
