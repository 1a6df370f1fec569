import SymorvaChatStore
import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore

/// What one committed `/sync` batch changed, room by room: what the conversation list, the
/// observed timelines and the send queues need to hear about. Derived from the decoded
/// response after the store has committed it; holds IDs only, never content.
struct SyncChanges: Sendable {
    /// One room's changes.
    struct Room: Sendable {
        var roomID: RoomID
        var membership: RoomMembership
        /// New timeline events that are items of the main timeline (not edits, reactions,
        /// redactions or thread replies), oldest first.
        var itemEventIDs: [EventID] = []
        /// New thread replies with their roots, oldest first.
        var threadReplies: [(root: EventID, reply: EventID)] = []
        /// `prev_batch` of a `limited` timeline: a gap now precedes ``itemEventIDs``.
        var gapToken: PaginationToken?
        /// Our own events, by the transaction ID the server echoed.
        var remoteEchoes: [(TransactionID, EventID)] = []
        /// `m.room.encryption` arrived.
        var encryptionEnabled = false
        /// Anything that changes how stored items look (relations, receipts, state).
        var touchesTimeline = false
    }

    var rooms: [Room] = []
    /// Whether a timeline carried an `m.room.encrypted` event (something new to decrypt).
    var hasEncryptedEvents = false
    /// What the response says about devices and keys, for the crypto module.
    var devices = SyncDeviceChanges()

    /// Every room update of `body`; `continued` (the ingest's
    /// ``SyncIngestReport/continuedTimelines``) names the limited timelines that continued the
    /// stored live timeline: they open no gap, and their leading events, stored already, are
    /// not new.
    init(_ body: SyncResponseBody, continued: [String: Int] = [:]) {
        let head = body.head
        devices = SyncDeviceChanges(
            oneTimeKeyCount: head.oneTimeKeyCounts["signed_curve25519"].map { Int($0) },
            unusedFallbackKeyTypes: head.unusedFallbackKeyTypes,
            hasDeviceListChanges: !head.deviceListsChanged.isEmpty || !head.deviceListsLeft.isEmpty,
            toDeviceEvents: head.toDevice.count,
            roomsChanged: body.rooms.contains { !$0.state.isEmpty || $0.timeline.contains { $0.stateKey != nil } })
        for update in body.rooms {
            var room = Room(roomID: RoomID(update.roomID), membership: update.membership)
            let repeated = continued[update.roomID]
            for event in update.timeline.dropFirst(repeated ?? 0) {
                guard let id = event.eventID else { continue }
                let eventID = EventID(id)
                if let transactionID = event.transactionID {
                    room.remoteEchoes.append((TransactionID(transactionID), eventID))
                }
                if event.type == "m.room.encryption" { room.encryptionEnabled = true }
                if event.type == "m.room.encrypted" { hasEncryptedEvents = true }
                if event.isThreadReply, let root = event.relation?.eventID {
                    room.threadReplies.append((EventID(root), eventID))
                } else if !event.isRelation {
                    room.itemEventIDs.append(eventID)
                }
            }
            if update.state.contains(where: { $0.type == "m.room.encryption" }) { room.encryptionEnabled = true }
            if update.isLimited, repeated == nil, let token = update.previousBatch {
                room.gapToken = PaginationToken(token)
            }
            room.touchesTimeline = !update.timeline.isEmpty || !update.ephemeral.isEmpty || !update.state.isEmpty
            rooms.append(room)
        }
    }
}

/// Where the sync interpreter reports what it cannot handle itself.
protocol SyncInterpreterDelegate: Sendable {
    /// A batch and its since-token are committed.
    func syncCommitted(_ changes: SyncChanges) async
    /// The homeserver rejected the access token: the session must refresh it.
    func syncTokenRejected()
    /// A batch is committed: its timelines' events, for the room event tap (before
    /// ``syncCommitted(_:)``).
    func timelineCommitted(_ body: SyncResponseBody) async
}

extension SyncInterpreterDelegate {
    func timelineCommitted(_ body: SyncResponseBody) async {}
}

/// Performs the ``SyncMachine``'s effects: `/sync` over a ``MatrixRequester``, decoding with
/// ``SyncResponseDecoder``, committing with ``SyncIngestor``.
///
/// - The filter (lazy-loaded members) is uploaded once and its ID kept in the account's
///   database with the definition it was made from; a changed definition is uploaded again.
/// - A response is decoded when it arrives, so that the machine gets a real
///   ``SyncBatchSummary``; the decoded body waits here, keyed by `next_batch`, until the machine
///   asks to store it. A document that cannot be decoded is treated like no answer at all
///   (`.network`): the loop backs off and asks again, and never stops for it. Single bad events
///   are skipped by the decoder and kept in `malformed_events`.
/// - After each committed response (and the conversation list it updates) the account
///   database's WAL is checkpointed: the account database does not checkpoint by itself.
/// - `M_UNKNOWN_TOKEN` (after the requester's own refresh) becomes ``SyncMachine/Event/tokenRejected``:
///   the session's problem, reported through the delegate.
final class SyncInterpreter: EffectInterpreter {
    typealias Machine = SyncMachine

    let requester: any MatrixRequester
    let store: ChatStore
    let timelineLimit: Int
    let longPollTimeout: Duration
    /// Reads `Retry-After` dates.
    let wallClock: any WallClock
    let logger: Logger
    private let pending = Lock<[String: SyncResponseBody]>([:])
    private let filter: FilterCache
    private let delegate = Lock<(any SyncInterpreterDelegate)?>(nil)
    /// The crypto module's inbox, once connected.
    private let inbox = Lock<SyncInboxWriter?>(nil)

    init(
        requester: any MatrixRequester, store: ChatStore, timelineLimit: Int, longPollTimeout: Duration,
        wallClock: any WallClock, logger: Logger
    ) {
        self.requester = requester
        self.wallClock = wallClock
        self.store = store
        self.timelineLimit = timelineLimit
        self.longPollTimeout = longPollTimeout
        self.logger = logger
        self.filter = FilterCache(
            requester: requester, store: store,
            definition: ChatAPI.syncFilterDefinition(timelineLimit: timelineLimit))
    }

    /// Sets the delegate (held weakly by the caller's design: the client owns the interpreter).
    func setDelegate(_ newDelegate: any SyncInterpreterDelegate) { delegate.withLock { $0 = newDelegate } }

    /// Sets where each sync's share for end-to-end encryption goes (in the sync's transaction).
    func setInbox(_ writer: @escaping SyncInboxWriter) { inbox.withLock { $0 = writer } }

    func perform(_ effect: SyncMachine.Effect, context: EffectContext<SyncMachine.Event>) async -> SyncMachine.Event? {
        switch effect {
        case .sendSync(let since, let timeout, let filterID):
            return await sync(since: since, timeout: timeout, filterID: filterID)
        case .storeSyncResponse(let nextBatch):
            return await commit(nextBatch)
        case .requestTokenRefresh:
            delegate.withLock { $0 }?.syncTokenRejected()
            return nil
        case .scheduleRetry, .cancel:
            // The retry timer and cancellations are performed by the host (their directives).
            return nil
        }
    }

    private func sync(since: SyncToken?, timeout: Duration, filterID: FilterID?) async -> SyncMachine.Event? {
        pending.withLock { $0.removeAll() }
        let resolvedFilter: FilterID
        do {
            resolvedFilter = try await self.filter.resolve(given: filterID)
        } catch {
            if Task.isCancelled { return nil }
            return failure(error)
        }
        let response: HTTPResponse
        do {
            // The client waits longer than the server holds the request open, and a computed
            // response (the initial sync, a catch-up) as long as a large account needs.
            response = try await requester.send(
                ChatAPI.sync(since: since, timeout: timeout, filterID: resolvedFilter),
                timeout: SyncRequestDeadline.clientTimeout(serverTimeout: timeout))
        } catch {
            if Task.isCancelled { return nil }
            return failure(error)
        }
        let body: SyncResponseBody
        do {
            body = try SyncResponseDecoder.decode(response.body)
        } catch {
            logger.warning("sync response unreadable: \(LogLabel(error.description)); retrying")
            return .syncResponse(.failure(.network))
        }
        pending.withLock { $0[body.nextBatch] = body }
        var summary = SyncBatchSummary(nextBatch: SyncToken(body.nextBatch))
        for room in body.rooms {
            switch room.membership {
            case .joined: summary.joinedRoomCount += 1
            case .invited, .knocked: summary.invitedRoomCount += 1
            case .left: summary.leftRoomCount += 1
            }
            summary.timelineEventCount += room.timeline.count
            if room.isLimited { summary.limitedRoomCount += 1 }
        }
        return .syncResponse(.success(summary))
    }

    private func failure(_ error: MatrixRequestError) -> SyncMachine.Event {
        guard let syncError = RequestFailure.syncError(error, now: wallClock.now) else { return .tokenRejected }
        logger.info("sync request failed: \(error)")
        return .syncResponse(.failure(syncError))
    }

    /// A full or busy store can recover (the machine backs off and asks for the batch again);
    /// anything else is permanent.
    static func syncError(_ error: ChatStoreError) -> SyncError {
        guard case .store(let storeError) = error else { return .storeFailed }
        switch storeError.storeFailure {
        case .full: return .storeUnavailable(.full)
        case .busy: return .storeUnavailable(.busy)
        default: return .storeFailed
        }
    }

    private func commit(_ nextBatch: SyncToken) async -> SyncMachine.Event? {
        guard let body = pending.withLock({ $0.removeValue(forKey: nextBatch.rawValue) }) else {
            logger.error("sync batch to store is missing")
            return .persisted(.failure(.storeFailed))
        }
        let report: SyncIngestReport
        do {
            report = try await SyncIngestor(store: store, inbox: inbox.withLock { $0 }).ingest(body)
            if report.malformedEvents > 0 {
                logger.notice("sync skipped \(report.malformedEvents) malformed event(s)")
            }
        } catch {
            logger.error("sync commit failed: \(error)")
            return .persisted(.failure(Self.syncError(error)))
        }
        let changes = SyncChanges(body, continued: report.continuedTimelines)
        if changes.devices.toDeviceEvents > 0 { FaultPoint.toDeviceCommitted.reach() }
        await delegate.withLock { $0 }?.timelineCommitted(body)
        await delegate.withLock { $0 }?.syncCommitted(changes)
        // The account database does not checkpoint by itself (`Configuration.account`): copy the
        // WAL now that the list is published, before the next long poll, rather than inside the
        // next ingest. A failed checkpoint loses nothing (the WAL stays); the next one retries.
        do { try await store.checkpoint() } catch { logger.info("checkpoint after sync failed: \(error)") }
        return .persisted(.success(nextBatch))
    }
}

/// The sync filter's ID: uploaded once per definition, kept in the account's database.
///
/// It lives in the chat store's local data (``ChatStore/localData(type:)``), as
/// `{"filter_id": …, "definition": …}`.
final class FilterCache: Sendable {
    static let localDataType = "symorva.sync_filter"

    let requester: any MatrixRequester
    let store: ChatStore
    let definition: String
    private let coalescer = RequestCoalescer<Int, FilterID, MatrixRequestError>()
    private let cached = Lock<FilterID?>(nil)

    init(requester: any MatrixRequester, store: ChatStore, definition: String) {
        self.requester = requester
        self.store = store
        self.definition = definition
    }

    /// `given` when the machine has one, else the stored ID, else a freshly uploaded one.
    func resolve(given: FilterID?) async throws(MatrixRequestError) -> FilterID {
        if let given { return given }
        if let cached = cached.withLock({ $0 }) { return cached }
        let id = try await coalescer.value(for: 0) { () async throws(MatrixRequestError) -> FilterID in
            if let stored = await self.stored() { return stored }
            return try await self.upload()
        }
        cached.withLock { $0 = id }
        return id
    }

    private func stored() async -> FilterID? {
        let definition = self.definition
        let row = try? await store.localData(type: Self.localDataType)
        guard let row, RawJSON.string("definition", in: row) == definition,
            let id = RawJSON.string("filter_id", in: row)
        else { return nil }
        return FilterID(id)
    }

    private func upload() async throws(MatrixRequestError) -> FilterID {
        let response = try await requester.send(
            ChatAPI.uploadFilter(userID: requester.userID, definition: definition))
        guard let id = RawJSON.string("filter_id", in: response.body) else {
            throw .matrix(MatrixError(status: 502, code: .malformedBody))  // an unreadable answer is retried
        }
        var row = JSONObjectWriter()
        row.string("filter_id", id)
        row.string("definition", definition)
        let content = row.bytes
        _ = try? await store.setLocalData(type: Self.localDataType, content: content)
        return FilterID(id)
    }
}
