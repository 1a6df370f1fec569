import SymorvaMachines
import SymorvaRuntime

/// What the member does in a meeting now, with the media for it.
public enum MeetingRole: Sendable {
    /// On stage: the real-time media session (connect it to speak and hear).
    case stage(any MediaSession)
    /// Listening: the playback stream of the meeting's mix.
    case listener(any PlaybackStream)

    /// The role without its media.
    public var kind: ParticipantRole {
        switch self {
        case .stage: .stage
        case .listener: .listener
        }
    }
}

/// One meeting the member joined, bound to the account that joined for good.
///
/// ``role`` changes when a host promotes or demotes the member (observe it); ``participants``
/// shows everyone's role and hand, live from the meeting's change feed, which reconnects from its
/// cursor after a drop so nothing is missed. Hand and host actions wait for the services. After the
/// account is signed out or switched away from, every operation throws
/// ``/SymorvaMachines/MeetingError/accountEnded``; leaving the meeting's Matrix room takes the member
/// out (the services check membership with the homeserver and the feed says so).
///
/// ```swift
/// let room = try await community.meetings.join(roomID: roomID)
/// switch room.role.value {
/// case .stage(let media): try await media.setMicrophoneEnabled(true)
/// case .listener(let playback): playback.play()
/// }
/// try await room.raiseHand()   // signals the hosts; never grants the stage by itself
/// try await room.leave()
/// ```
public final class MeetingRoom: Sendable {
    /// The Matrix room the meeting belongs to.
    public let roomID: RoomID
    /// The meeting.
    public let meetingID: MeetingID
    /// The member who joined.
    public let member: UserID

    /// The member's role and its media; changes with promotion and demotion.
    public var role: ObservableValue<MeetingRole> { rolePublisher.observable }
    /// Everyone in the meeting with their role and hand, as of the last feed answer.
    public var participants: ObservableValue<[MeetingParticipant]> { participantsPublisher.observable }
    /// The member's meeting machine state (stage, listener, handRaised, promoting, …, left, ended).
    public var state: ObservableValue<MeetingState> { host.states }

    let host: MachineHost<MeetingMachine>
    private let service: MeetingsService
    private let scope: AccountScope
    private let media: MediaSlot
    private let engine: any MediaEngine
    private let rolePublisher: ObservableValue<MeetingRole>.Publisher
    private let participantsPublisher: ObservableValue<[MeetingParticipant]>.Publisher
    private let playback: HLSPlaybackStream
    private let unsubscribe = Lock<ObservableValue<MeetingMachine.State>.Unsubscribe?>(nil)

    /// A room following `host`; its role starts with the host's state (a stage member's media
    /// session is made here, and only here, when the state is stage).
    init(
        joined: JoinedMeeting, host: MachineHost<MeetingMachine>, service: MeetingsService,
        scope: AccountScope, media: MediaSlot, engine: any MediaEngine, playback: HLSPlaybackStream
    ) {
        roomID = joined.snapshot.roomID
        meetingID = joined.meetingID
        member = joined.userID
        self.host = host
        self.service = service
        self.scope = scope
        self.media = media
        self.engine = engine
        self.playback = playback
        rolePublisher = .init(.listener(playback))
        participantsPublisher = .init(joined.snapshot.participants)
        let stop = host.states.subscribe { [weak self] state in self?.follow(state) }
        unsubscribe.withLock { $0 = stop }
    }

    /// Publishes what a new machine state means for the member's role and the participant list.
    private func follow(_ state: MeetingMachine.State) {
        if let joined = state.joined {
            let list = joined.snapshot.participants
            _ = participantsPublisher.publish { $0 == list ? nil : list }
        }
        switch state {
        case .stage:
            // A renewed descriptor changes nothing for a session: the services renewed the
            // member's admission, and the participant stays.
            guard media.current == nil else { break }
            let session = engine.makeSession(
                MediaSessionContext(
                    meetingID: meetingID, connector: ServicesMediaConnector(service: service, meetingID: meetingID),
                    scope: scope))
            media.set(session)
            playback.pause()
            rolePublisher.publish(.stage(session))
        case .listener, .handRaised:
            if case .stage = rolePublisher.observable.value { rolePublisher.publish(.listener(playback)) }
        case .ended, .left, .failed:
            playback.stop()
            _ = participantsPublisher.publish { _ in [] }
            unsubscribe.withLock { stop in
                stop?()
                stop = nil
            }
        case .idle, .joining, .promoting, .demoting, .leaving:
            break
        }
    }

    /// Raises the member's hand: a signal to the hosts, never the stage by itself. Waits for the services.
    public func raiseHand() async throws(MeetingError) { try await setHand(true) }

    /// Lowers the member's hand. Waits for the services.
    public func lowerHand() async throws(MeetingError) { try await setHand(false) }

    private func setHand(_ raised: Bool) async throws(MeetingError) {
        try ensureCurrent()
        let snapshot = try await service.hand(meetingID, raised: raised)
        try ensureCurrent()
        await host.send(.snapshotReceived(snapshot))
    }

    /// Hosts: moves `member` (a listener) to the stage. Waits for the services.
    ///
    /// - Throws: ``/SymorvaMachines/MeetingError/notHost`` unless the member is a host of the room;
    ///   ``/SymorvaMachines/MeetingError/stageFull``, ``/SymorvaMachines/MeetingError/wrongRole``,
    ///   ``/SymorvaMachines/MeetingError/notParticipant``.
    public func promote(_ member: UserID) async throws(MeetingError) {
        try ensureCurrent()
        let snapshot = try await service.promote(meetingID, member)
        await host.send(.snapshotReceived(snapshot))
    }

    /// Hosts: moves `member` back to listener; the services revoke their media token and kick
    /// them from the media room. Waits for the services.
    public func demote(_ member: UserID) async throws(MeetingError) {
        try ensureCurrent()
        let snapshot = try await service.demote(meetingID, member)
        await host.send(.snapshotReceived(snapshot))
    }

    /// Hosts: ends the meeting for everyone. Waits for the services.
    public func end() async throws(MeetingError) {
        try ensureCurrent()
        let snapshot = try await service.end(meetingID)
        await host.send(.snapshotReceived(snapshot))
    }

    /// Leaves the meeting: stops the media and the feed, then tells the services.
    ///
    /// - Throws: the services' failure when they could not be told (the member may still be
    ///   listed there); ``/SymorvaMachines/MeetingError/accountEnded`` after a switch or sign-out.
    public func leave() async throws(MeetingError) {
        try ensureCurrent()
        let outcome = await host.send(
            .leaveRequested, ignored: { state in state }, until: { state in state.isFinal ? state : nil })
        switch outcome {
        case .failed(let error)?: throw error
        case nil: throw .accountEnded
        default: return
        }
    }

    /// Whether the member's part in the meeting is over (left, ended, failed).
    public var isFinished: Bool { host.states.value.isFinal }

    private func ensureCurrent() throws(MeetingError) {
        if scope.isEnded { throw .accountEnded }
    }
}
