import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime

/// The community's meetings: `community.meetings`, a foundation module, always present.
///
/// It acts for the **active** account: ``join(roomID:broadcast:mediaEngine:)`` joins as the member active
/// when it is called (``/SymorvaMachines/MeetingError/notSignedIn`` without one,
/// ``/SymorvaMachines/MeetingError/moduleDisabled`` when the manifest turns meetings off). The
/// ``MeetingRoom`` it returns belongs to that account for good: after a switch or sign-out it
/// throws ``/SymorvaMachines/MeetingError/accountEnded``, and the meeting is left.
///
/// ```swift
/// let room = try await community.meetings.join(roomID: roomID)
/// switch room.role.value {
/// case .stage(let media): try await media.setMicrophoneEnabled(true)
/// case .listener(let playback): playback.play()
/// }
/// try await room.raiseHand()   // signals the host; never grants publishing by itself
/// try await room.leave()
/// ```
public final class MeetingsClient: Sendable {
    /// Whether the manifest enables meetings.
    public let isEnabled: Bool

    private let active = ActiveAccount<AccountMeetings>()

    /// A client that acts for nobody until the community tells it which account is active.
    package init(isEnabled: Bool) {
        self.isEnabled = isEnabled
    }

    /// A client that always acts for `meetings`: for tools and tests that manage one account
    /// themselves. Apps use `community.meetings`.
    public convenience init(following meetings: AccountMeetings) {
        self.init(isEnabled: true)
        follow(meetings)
    }

    /// Makes `meetings` (the new active account's) the one this client acts for.
    package func follow(_ meetings: AccountMeetings?) {
        active.follow(meetings, isSignedIn: meetings != nil)
    }

    /// The active member, or `nil` while nobody is signed in.
    public var member: UserID? { current?.member }

    /// The meetings the active member is in now.
    public var joined: [MeetingRoom] { current?.joined ?? [] }

    private var current: AccountMeetings? { active.current }

    /// Joins the meeting of `roomID` as the active member. See
    /// ``AccountMeetings/join(roomID:broadcast:mediaEngine:)``; `mediaEngine` replaces the
    /// platform's engine for this meeting (a test tone instead of a microphone).
    ///
    /// - Throws: ``/SymorvaMachines/MeetingError/moduleDisabled`` when the manifest disables
    ///   meetings; ``/SymorvaMachines/MeetingError/notSignedIn`` when nobody is signed in;
    ///   ``/SymorvaMachines/MeetingError/accountEnded`` when the account was switched away from
    ///   before the answer; the services' refusals.
    public func join(
        roomID: RoomID, broadcast: Bool = false, mediaEngine: (any MediaEngine)? = nil
    ) async throws(MeetingError) -> MeetingRoom {
        guard isEnabled else { throw .moduleDisabled }
        return try await active.withActive { meetings async throws(MeetingError) -> MeetingRoom in
            try await meetings.join(roomID: roomID, broadcast: broadcast, mediaEngine: mediaEngine)
        } discarding: { room in
            try? await room.leave()
        }
    }
}

extension MeetingError: ActiveAccountError {}
