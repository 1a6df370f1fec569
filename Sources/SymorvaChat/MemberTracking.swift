import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Why the members of a room this account joined did not reach the crypto module's tracking.
enum MemberTrackingError: Error, Sendable, LogSafe {
    /// The room's member list could not be made complete (`/members` failed, was unreadable,
    /// or the store failed).
    case members(MemberListError)
    /// The crypto module did not store them.
    case notTracked
    /// The store failed.
    case store(ChatStoreError)

    /// The case (and, for a request, its cause's case): nothing a server said.
    var logDescription: String {
        switch self {
        case .members(.request(let error)): "members.request(\(error.logDescription))"
        case .members(.unreadable): "members.unreadable"
        case .members(.store(let error)): "members.store(\(error.logDescription))"
        case .notTracked: "notTracked"
        case .store(let error): "store(\(error.logDescription))"
        }
    }
}

/// Which rooms waiting for member tracking start now: the rule, without I/O.
///
/// One hand-over per room at a time (a room whose hand-over runs is not started again; its
/// `/members` is in any case the one request a send of the room would join), and after a
/// failure the room waits ``retryInterval`` before the next commit (or start) tries again: a
/// `/members` that keeps failing is not asked for with every sync.
struct MemberTrackingPlan: Sendable, Equatable {
    /// The wait after a failed hand-over.
    static let retryInterval: Duration = .seconds(30)

    /// The rooms whose hand-over runs.
    private(set) var running: Set<RoomID> = []
    /// When each room's last hand-over failed.
    private(set) var failedAt: [RoomID: Timestamp] = [:]

    /// The rooms of `waiting` (read from the store) to start at `now`; they count as running.
    mutating func start(_ waiting: [RoomID], now: Timestamp) -> [RoomID] {
        var started: [RoomID] = []
        for room in waiting where !running.contains(room) {
            if let failed = failedAt[room], now.duration(since: failed) < Self.retryInterval { continue }
            running.insert(room)
            started.append(room)
        }
        // A room no longer waiting (handed over elsewhere, left) forgets its failure.
        let stillWaiting = Set(waiting)
        failedAt = failedAt.filter { stillWaiting.contains($0.key) || running.contains($0.key) }
        return started
    }

    /// `room`'s hand-over ended: done, or failed at `failedAt`.
    mutating func finished(_ room: RoomID, failedAt time: Timestamp?) {
        running.remove(room)
        failedAt[room] = time
    }

    /// Whether a failed room waits for a retry (the next commit must look again).
    var hasFailures: Bool { !failedAt.isEmpty }
}

extension AccountChat {
    /// Hands the crypto module the joined and invited members of every encrypted room this
    /// account joined (or that turned encrypted while joined) and whose members it has not
    /// been given yet (``ChatStore/roomsAwaitingMemberTracking()``, schema 18): lazy-loaded
    /// members (v2's filter, sliding sync's `$LAZY`) leave most of them out of the sync that
    /// brings the join, so without this the joiner would learn of the other members' devices
    /// only when sending its first message.
    ///
    /// Each room's list is made complete through ``roomForEncryption(_:)`` (one `/members`
    /// request per room at a time, shared with the sends of the room), then handed to the
    /// crypto module, and only then is the room's flag cleared: a failure anywhere keeps it,
    /// and the next commit (after ``MemberTrackingPlan/retryInterval``) or the next start tries
    /// again. The work runs off the sync's path, in the account's scope; a result that arrives
    /// after the scope moved on is dropped. Without a crypto module nothing runs. Returns the
    /// hand-overs it started (tests wait for them).
    @discardableResult
    func trackMembersOfJoinedRooms() async -> [Task<Void, Never>] {
        guard let tracker = memberTracker.withLock({ $0 }), !scope.isEnded else { return [] }
        let waiting: [(RoomID, Int64)]
        do { waiting = try await store.roomsAwaitingMemberTracking() } catch {
            logger.error("rooms awaiting member tracking not read error=\(error)")
            return []
        }
        let tickets = Dictionary(waiting, uniquingKeysWith: { _, last in last })
        let now = wallClock.now
        let started = memberTracking.withLock { $0.start(waiting.map(\.0), now: now) }
        let epoch = scope.epoch
        var tasks: [Task<Void, Never>] = []
        for roomID in started {
            let ticket = tickets[roomID] ?? 0
            let unregister = Lock<(@Sendable () -> Void)?>(nil)
            let task = Task {
                let failure = await self.handOverMembers(of: roomID, ticket: ticket, epoch: epoch, to: tracker)
                self.memberTracking.withLock { plan in
                    plan.finished(roomID, failedAt: failure == nil ? nil : self.wallClock.now)
                }
                if let failure { self.logger.notice("members not tracked room=\(roomID) error=\(failure)") }
                unregister.withLock { $0 }?()
            }
            let cancel = scope.onAdvance { _ in task.cancel() }
            unregister.withLock { $0 = cancel }
            tasks.append(task)
        }
        return tasks
    }

    /// This device joined `roomID` (``join(roomIDOrAlias:)``, once the room is listed): its
    /// members are handed over as for a join the ingest saw. The ingest raises the flag for a
    /// room it knew as invited, knocked or left, and on v2 for one it first sees joined; with
    /// sliding sync a room joined without an invite first appears like one the window reached
    /// late, so the join itself raises it here (not when the sync loop is not running and the
    /// room is not stored yet).
    func joinedHere(_ roomID: RoomID) async {
        guard memberTracker.withLock({ $0 }) != nil else { return }
        do throws(ChatStoreError) { try await store.requestMemberTracking(roomID) } catch {
            logger.error("member tracking not requested room=\(roomID) error=\(error)")
            return
        }
        await trackMembersOfJoinedRooms()
    }

    /// One room's hand-over; the error when it failed (`nil` when done or dropped as stale).
    private func handOverMembers(
        of roomID: RoomID, ticket: Int64, epoch: Epoch, to tracker: @Sendable ([UserID]) async -> Bool
    ) async -> MemberTrackingError? {
        let room: EncryptedRoom?
        do throws(MemberListError) { room = try await roomForEncryption(roomID) } catch { return .members(error) }
        guard scope.isCurrent(epoch) else {
            logger.debug("member list of an ended scope dropped room=\(roomID)")
            return nil
        }
        guard let room else { return nil }  // no longer stored
        guard await tracker(room.joined + room.invited) else { return .notTracked }
        do throws(ChatStoreError) { try await store.memberTrackingHandedOver(roomID, ticket: ticket) } catch {
            return .store(error)
        }
        return nil
    }
}
