import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaServices

/// The meetings of one signed-in member, bound to that account for its whole life.
///
/// Apps use ``MeetingsClient`` (`community.meetings`), which follows the active account and
/// delegates here. Each joined meeting runs a `MeetingMachine` host in the
/// account's scope. When the scope ends (sign-out, switch) every meeting is left: the services
/// are told (best effort, while the account's services session still answers; otherwise their
/// presence timeout takes the member out once the feed stops polling), the feeds and media stop,
/// and the rooms answer ``/SymorvaMachines/MeetingError/accountEnded``.
public final class AccountMeetings: Sendable {
    /// The signed-in member.
    public let member: UserID

    private let service: MeetingsService
    private let scope: AccountScope
    private let engine: any MediaEngine
    private let clock: any RuntimeClock
    private let wallClock: any WallClock
    private let tracer: Tracer
    private let machine: MeetingMachine
    private let rooms = RoomRegistry()
    private let logger = Logger(category: "meetings")

    /// Creates the meetings of the member signed in to `scope`.
    ///
    /// - Parameters:
    ///   - services: the account's authenticated community services client.
    ///   - engine: the platform's real-time media engine (the community passes GStreamer's on
    ///     Linux); ``UnavailableMediaEngine``, whose sessions throw, when none is given.
    ///   - feedWait: how long one poll of a meeting's change feed waits on the server.
    package init(
        member: UserID, services: CommunityServicesClient, scope: AccountScope,
        engine: any MediaEngine = UnavailableMediaEngine(), requestTimeout: Duration = .seconds(30),
        feedWait: Duration = .seconds(20), machine: MeetingMachine = MeetingMachine(),
        clock: any RuntimeClock = SystemClock(), wallClock: any WallClock = SystemWallClock(), tracer: Tracer = .shared
    ) {
        self.member = member
        self.service = MeetingsService(
            services: services, userID: member, requestTimeout: requestTimeout, feedWait: feedWait)
        self.scope = scope
        self.engine = engine
        self.clock = clock
        self.wallClock = wallClock
        self.tracer = tracer
        self.machine = machine
        let rooms = self.rooms
        let service = self.service
        _ = scope.onAdvance { _ in
            let open = rooms.removeAll()
            // The scope's own work is cancelled (the meetings' hosts and their media sessions,
            // children in the same scope, which disconnect); tell the services out of it.
            for room in open where !room.isFinished {
                Task.detached { try? await service.leave(room.meetingID) }
            }
        }
    }

    /// The meetings this member is in now.
    public var joined: [MeetingRoom] { rooms.all.filter { !$0.isFinished } }

    /// Joins the meeting of `roomID` (opening it when the room has none; as a broadcast, where
    /// only hosts start on stage, when `broadcast` and the member is a host) and returns it with
    /// the role the services admitted.
    ///
    /// - Throws: ``/SymorvaMachines/MeetingError/notRoomMember`` when the member is not joined to
    ///   the room; ``/SymorvaMachines/MeetingError/notHost`` for a broadcast opened by a non-host;
    ///   ``/SymorvaMachines/MeetingError/mediaUnavailable`` when the community's media server
    ///   failed; ``/SymorvaMachines/MeetingError/accountEnded`` when the account ended meanwhile;
    ///   other refusals and transport failures.
    /// - Parameter mediaEngine: the engine of this meeting's stage media (now and after a
    ///   promotion) instead of the account's: a test tone where the machine has no microphone,
    ///   say. `nil` uses the account's.
    public func join(
        roomID: RoomID, broadcast: Bool = false, mediaEngine: (any MediaEngine)? = nil
    ) async throws(MeetingError) -> MeetingRoom {
        let engine = mediaEngine ?? self.engine
        if scope.isEnded { throw .accountEnded }
        let media = MediaSlot()
        let host = MachineHost(
            machine: machine, initial: .idle, interpreter: MeetingInterpreter(service: service, media: media),
            instance: roomID.rawValue, scope: scope, clock: clock, wallClock: wallClock, tracer: tracer)
        let settled = await host.send(.joinRequested(roomID, broadcast: broadcast)) { state -> MeetingMachine.State? in
            if case .joining = state { return nil }
            return state
        }
        guard let settled else {
            await host.stop()
            throw .accountEnded
        }
        guard let joined = settled.joined else {
            await host.stop()
            if case .failed(let error) = settled { throw error }
            throw .meetingEnded
        }
        let playback = HLSPlaybackStream(
            descriptor: joined.playback, service: service, clock: clock, wallClock: wallClock)
        // The room makes the stage media session (now, or when promoted later): one place.
        let room = MeetingRoom(
            joined: joined, host: host, service: service, scope: scope, media: media, engine: engine,
            playback: playback)
        let replaced = rooms.insert(room)
        if let replaced { await replaced.host.stop() }
        if scope.isEnded { throw .accountEnded }
        logger.info("joined meeting meeting=\(joined.meetingID) role=\(LogLabel(room.role.value.kind.rawValue))")
        return room
    }
}

/// The meeting rooms of one account, by meeting.
private final class RoomRegistry: Sendable {
    private let rooms = Lock<[MeetingID: MeetingRoom]>([:])

    var all: [MeetingRoom] { rooms.withLock { Array($0.values) } }

    /// Adds `room`; returns the room it replaces (a second join of the same meeting).
    func insert(_ room: MeetingRoom) -> MeetingRoom? {
        rooms.withLock { rooms in
            defer { rooms[room.meetingID] = room }
            return rooms[room.meetingID]
        }
    }

    func removeAll() -> [MeetingRoom] {
        rooms.withLock { rooms in
            defer { rooms.removeAll() }
            return Array(rooms.values)
        }
    }
}

extension AccountMeetings: AccountBound {
    /// Whether the account's scope has ended (switched away from, signed out).
    package var isEnded: Bool { scope.isEnded }
}
