import SymorvaRuntime

/// One member's place in one meeting, from the join to leaving it.
///
/// ```
/// idle → joining → stage ⇄ demoting → listener ⇄ handRaised
///                    ↑                    │  ↑        │
///                    └──── promoting ←────┴──┼────────┘
///                                            │
///  any joined state → leaving → left;  the feed → ended | left(removed);  joining → failed
/// ```
///
/// The services decide roles; the machine follows what they answer (the join, the change
/// feed, the answers to the member's own hand and host requests) and never grants itself the
/// stage:
/// - A listener whose entry turns `stage` is **promoting**: it asks for its own media-session
///   descriptor (``Effect/requestMediaSession(_:)``) and is on stage only with it.
/// - A stage member whose entry turns `listener` is **demoting**: its media session is closed
///   (``Effect/closeMediaSession``) before it listens; the services already revoked its token.
/// - The change feed is a long poll from a cursor. A failed poll keeps the role and polls again
///   from the same cursor after a backoff (``FeedStatus/reconnecting(attempt:)``), so nothing
///   is missed; a feed that says the meeting ended, or no longer lists the member, ends the
///   member's part.
/// - A stage member's token is renewed before it expires (``MeetingTimer/mediaRequest``).
package struct MeetingMachine: StateMachine {
    package static let name = "Meeting"

    /// What the machine needs to know about its environment.
    package struct Configuration: Sendable, Hashable {
        /// Waits between failed feed polls (and media-session requests); no jitter is drawn.
        package var feedBackoff: RetryBackoff
        /// How long before a stage token's expiry a fresh descriptor is asked for.
        package var renewalMargin: Duration

        /// Creates a configuration.
        package init(feedBackoff: RetryBackoff = .meetingFeed, renewalMargin: Duration = .seconds(60)) {
            self.feedBackoff = feedBackoff
            self.renewalMargin = renewalMargin
        }

        func retryDelay(afterFailures failures: Int) -> Duration {
            feedBackoff.delay(attempt: max(1, failures), jitter: 0)
        }
    }

    /// The machine's configuration.
    package let configuration: Configuration

    /// Creates the machine.
    package init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Keys of the machine's cancellable effects and named timers.
    package enum Keys {
        /// The join request.
        package static let join = EffectKey("meeting.request.join")
        /// The change feed's poll in flight.
        package static let feed = EffectKey("meeting.feed")
        /// The timer before the next poll after a failed one.
        package static let feedRetry = EffectKey("meeting.feed.retry")
        /// The media-session request in flight.
        package static let media = EffectKey("meeting.request.media")
        /// The timer of the media-session request: the stage token's renewal, or a retry.
        package static let mediaTimer = EffectKey("meeting.media.timer")
    }

    // MARK: - State

    /// The machine state: ``MeetingState`` (public: an app observes it).
    package typealias State = MeetingState

    // MARK: - Event

    /// What happened.
    package enum Event: Sendable, Equatable, CaseNamed, CustomStringConvertible {
        /// The member asked to join the meeting of a room (opening it as a broadcast if asked).
        case joinRequested(RoomID, broadcast: Bool)
        /// The services answered the join.
        case joinResponse(Result<JoinAnswer, MeetingError>)
        /// A poll of the change feed answered.
        case feedResponse(Result<FeedBatch, MeetingError>)
        /// The services answered one of the member's own requests (hand, promote, demote) with
        /// the meeting as it now is.
        case snapshotReceived(MeetingSnapshot)
        /// The member's media-session request answered.
        case mediaSessionResponse(Result<MediaSessionDescriptor, MeetingError>)
        /// The media session adapter was disconnected.
        case mediaSessionClosed
        /// A timer set by the machine fired.
        case timerFired(MeetingTimer)
        /// The member (their room, sign-out or switch) asked to leave.
        case leaveRequested
        /// The leave request answered.
        case leaveResponse(LeaveOutcome)

        /// Every event case name, in declaration order: the chart's event names.
        package static let caseNames = [
            "joinRequested", "joinResponse", "feedResponse", "snapshotReceived", "mediaSessionResponse",
            "mediaSessionClosed", "timerFired", "leaveRequested", "leaveResponse",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .joinRequested: "joinRequested"
            case .joinResponse: "joinResponse"
            case .feedResponse: "feedResponse"
            case .snapshotReceived: "snapshotReceived"
            case .mediaSessionResponse: "mediaSessionResponse"
            case .mediaSessionClosed: "mediaSessionClosed"
            case .timerFired: "timerFired"
            case .leaveRequested: "leaveRequested"
            case .leaveResponse: "leaveResponse"
            }
        }

        /// The case name only: events may carry media tokens.
        package var description: String { caseName }
    }

    /// The machine's named timers.
    package enum MeetingTimer: Sendable, Hashable {
        /// Poll the feed again after a failed poll.
        case feedRetry
        /// Ask for a media-session descriptor again: the stage token's renewal, or a retry.
        case mediaRequest
    }

    // MARK: - Effect

    /// What the interpreter must do.
    package enum Effect: MachineEffect, Equatable, CustomStringConvertible {
        /// Ask the services to join; answers ``Event/joinResponse(_:)``.
        case sendJoin(RoomID, broadcast: Bool)
        /// Long-poll the change feed after `since`; answers ``Event/feedResponse(_:)``.
        case pollFeed(MeetingID, since: Int)
        /// Fire ``Event/timerFired(_:)`` with ``MeetingTimer/feedRetry`` after this delay.
        case scheduleFeedRetry(after: Duration)
        /// Ask for the member's own media-session descriptor; answers ``Event/mediaSessionResponse(_:)``.
        case requestMediaSession(MeetingID)
        /// Fire ``Event/timerFired(_:)`` with ``MeetingTimer/mediaRequest`` at this wall-clock instant.
        case scheduleMediaRenewal(at: Timestamp)
        /// Fire ``Event/timerFired(_:)`` with ``MeetingTimer/mediaRequest`` after this delay.
        case scheduleMediaRetry(after: Duration)
        /// Disconnect the stage media session adapter; answers ``Event/mediaSessionClosed``.
        case closeMediaSession
        /// Tell the services the member leaves; answers ``Event/leaveResponse(_:)``.
        case sendLeave(MeetingID)
        /// Cancel the effect or timer running under this key.
        case cancel(EffectKey)

        package var directive: EffectDirective {
            switch self {
            case .sendJoin: .keyed(Keys.join)
            case .pollFeed: .keyed(Keys.feed)
            case .scheduleFeedRetry(let delay): .timer(Keys.feedRetry, .after(delay))
            case .requestMediaSession: .keyed(Keys.media)
            case .scheduleMediaRenewal(let instant): .timer(Keys.mediaTimer, .atWallTime(instant))
            case .scheduleMediaRetry(let delay): .timer(Keys.mediaTimer, .after(delay))
            case .closeMediaSession, .sendLeave: .perform
            case .cancel(let key): .cancel(key)
            }
        }

        /// Every effect case name, in declaration order.
        package static let caseNames = [
            "sendJoin", "pollFeed", "scheduleFeedRetry", "requestMediaSession", "scheduleMediaRenewal",
            "scheduleMediaRetry", "closeMediaSession", "sendLeave", "cancel",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .sendJoin: "sendJoin"
            case .pollFeed: "pollFeed"
            case .scheduleFeedRetry: "scheduleFeedRetry"
            case .requestMediaSession: "requestMediaSession"
            case .scheduleMediaRenewal: "scheduleMediaRenewal"
            case .scheduleMediaRetry: "scheduleMediaRetry"
            case .closeMediaSession: "closeMediaSession"
            case .sendLeave: "sendLeave"
            case .cancel: "cancel"
            }
        }

        /// The case name only.
        package var description: String { caseName }
    }

    /// Every state case name: the chart checker compares these with its samples and the chart.
    package static var stateCaseNames: [String] { State.caseNames }
    /// Every event case name: the chart checker compares these with its samples and the chart.
    package static var eventCaseNames: [String] { Event.caseNames }
}

/// Where the member is in a meeting: what an app observes on a meeting room
/// (`MeetingRoom.state`).
///
/// The state of the SDK's meeting machine; the machine, its events and its effects are
/// internal to the SDK (`package`).
public enum MeetingState: Sendable, Equatable, CaseNamed {
    /// Nothing asked yet.
    case idle
    /// The join request is with the services.
    case joining(roomID: RoomID, broadcast: Bool)
    /// On stage with a media-session descriptor.
    case stage(JoinedMeeting, MediaSessionDescriptor)
    /// Listening to the playback stream.
    case listener(JoinedMeeting)
    /// Listening, with the hand raised (a signal to hosts; never the stage by itself).
    case handRaised(JoinedMeeting)
    /// Promoted by a host: asking for the member's own media-session descriptor.
    case promoting(JoinedMeeting)
    /// Demoted by a host: the media session is being closed before the member listens.
    case demoting(JoinedMeeting)
    /// The leave request is with the services; media and feed are stopped.
    case leaving(JoinedMeeting)
    /// The member is out of the meeting.
    case left(LeaveReason)
    /// The meeting ended (a host ended it, or it emptied).
    case ended(MeetingSnapshot)
    /// The join was refused or could not be made.
    case failed(MeetingError)

    /// Every state case name, in declaration order: the chart's state ids.
    public static let caseNames = [
        "idle", "joining", "stage", "listener", "handRaised", "promoting", "demoting", "leaving", "left",
        "ended", "failed",
    ]

    public var caseNameLiteral: StaticString? {
        switch self {
        case .idle: "idle"
        case .joining: "joining"
        case .stage: "stage"
        case .listener: "listener"
        case .handRaised: "handRaised"
        case .promoting: "promoting"
        case .demoting: "demoting"
        case .leaving: "leaving"
        case .left: "left"
        case .ended: "ended"
        case .failed: "failed"
        }
    }

    /// The meeting, in every state that is in one.
    public var joined: JoinedMeeting? {
        switch self {
        case .stage(let joined, _), .listener(let joined), .handRaised(let joined), .promoting(let joined),
            .demoting(let joined), .leaving(let joined):
            joined
        case .idle, .joining, .left, .ended, .failed: nil
        }
    }

    /// Whether no event changes the state any more.
    public var isFinal: Bool {
        switch self {
        case .left, .ended, .failed: true
        default: false
        }
    }
}

extension MeetingMachine: ChartedMachine {}

extension MeetingState: CaseNameListing {
    public static var allCaseNames: [String] { caseNames }
}

extension MeetingMachine.Event: CaseNameListing {
    package static var allCaseNames: [String] { caseNames }
}

extension RetryBackoff {
    /// Feed polls and media-session requests after a failure: 1 s doubling to 30 s, no jitter.
    package static let meetingFeed = RetryBackoff(initialDelay: .seconds(1), maximumDelay: .seconds(30), jitterRatio: 0)
}
