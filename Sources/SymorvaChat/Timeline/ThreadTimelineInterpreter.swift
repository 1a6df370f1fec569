import SymorvaChatStore
import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Performs a thread's ``TimelineMachine`` effects (``ThreadTimeline``).
///
/// The machine is the room timeline's, unchanged; what its effects mean for a thread:
/// - a store page is the thread's stored replies ordered by time. Its cursor
///   (``StoreCursor``) carries a reply's `origin_server_ts` as `chunkID` and its `event_nid`
///   as `index` (``ThreadPosition``): replies come from sync, `/messages` and `/relations`,
///   so no chunk orders them. Before the oldest stored reply lies the server (a ``PageBoundary/gap(_:)``
///   whose token is the thread's stored `next_batch`, empty when the thread was never
///   paginated: then the server is asked from its newest reply), or the root
///   (``PageBoundary/roomStart``) once the server has no older reply.
/// - a server page is `GET /v1/rooms/{roomId}/relations/{root}/m.thread?dir=b`, stored
///   before it is reported, so the window and the store never disagree.
///
/// Concurrent loads of the same page join one request.
struct ThreadTimelineInterpreter: EffectInterpreter {
    typealias Machine = TimelineMachine

    let roomID: RoomID
    let root: EventID
    let client: AccountChat

    func perform(_ effect: TimelineMachine.Effect, context: EffectContext<TimelineMachine.Event>) async
        -> TimelineMachine.Event?
    {
        switch effect {
        case .loadFromStore(let before, let count):
            return .storePageLoaded(await loadFromStore(before: before, count: count))
        case .fetchMessages(let token, let count):
            let (roomID, root, client) = (self.roomID, self.root, self.client)
            do {
                let page = try await client.loads.value(
                    for: "relations|\(roomID.rawValue)|\(root.rawValue)|\(token.rawValue)"
                ) { () async throws(TimelineError) -> TimelinePage in
                    try await Self.fetch(roomID: roomID, root: root, token: token, count: count, client: client)
                }
                return .serverPageLoaded(.success(page))
            } catch {
                if Task.isCancelled { return nil }
                return .serverPageLoaded(.failure(error))
            }
        case .cancel:
            return nil
        }
    }

    private func loadFromStore(before: StoreCursor?, count: Int) async -> Result<TimelinePage, TimelineError> {
        let position = before.map { ThreadPosition(timestamp: $0.chunkID, eventNID: Int64($0.index)) }
        do {
            let page = try await client.store.loadThreadPage(roomID: roomID, root: root, before: position, limit: count)
            let boundary: PageBoundary
            switch page.boundary {
            case .stored(let position):
                boundary = .stored(StoreCursor(chunkID: position.timestamp, index: Int(position.eventNID)))
            case .server(let token):
                boundary = .gap(PaginationToken(token ?? ""))
            case .root:
                boundary = .roomStart
            }
            return .success(TimelinePage(eventIDs: page.eventIDs.map(EventID.init(rawValue:)), before: boundary))
        } catch {
            client.logger.error("thread page read failed: \(error)")
            return .failure(.storeFailed)
        }
    }

    /// `GET /relations/{root}/m.thread`, then the page is stored, then reported.
    static func fetch(roomID: RoomID, root: EventID, token: PaginationToken, count: Int, client: AccountChat)
        async throws(TimelineError) -> TimelinePage
    {
        let (response, page) = try await TimelineInterpreter.requestPage(
            ThreadsAPI.replies(
                roomID: roomID, root: root, from: token.rawValue.isEmpty ? nil : token.rawValue, limit: count),
            named: "relations", client: client)
        let nextBatch = RawJSON.string("next_batch", in: response.body)
        let eventIDs: [EventID]
        do {
            eventIDs = try await client.store.storeThreadPage(
                roomID: roomID, root: root, page: page, nextBatch: nextBatch)
        } catch {
            client.logger.error("relations page write failed: \(error)")
            throw .storeFailed
        }
        if page.chunk.contains(where: { $0.type == "m.room.encrypted" }) { client.encryptedEventsStored() }
        var related = eventIDs
        if nextBatch == nil, await storeRoot(roomID: roomID, root: root, client: client) { related.append(root) }
        await storeRelations(of: related, roomID: roomID, client: client)
        return TimelinePage(eventIDs: eventIDs, before: nextBatch.map { .gap(PaginationToken($0)) } ?? .roomStart)
    }

    /// The thread reached its root: a root the store lacks (older than anything synced or
    /// paged) is fetched (`GET /event`) and stored, so that the thread shows it first. Best
    /// effort: without it the thread shows its replies only. Returns whether it was fetched.
    static func storeRoot(roomID: RoomID, root: EventID, client: AccountChat) async -> Bool {
        do {
            if try await client.store.sender(of: root) != nil { return false }
            let response = try await client.requester.send(ChatAPI.event(roomID: roomID, eventID: root))
            guard response.isSuccess else { return false }
            var document = Array(#"{"chunk":["#.utf8)
            document += response.body
            document += Array("]}".utf8)
            let page = try SyncResponseDecoder.decodeMessages(document)
            try await client.store.storeDetached(roomID: roomID, page: page)
            if page.chunk.contains(where: { $0.type == "m.room.encrypted" }) { client.encryptedEventsStored() }
            return true
        } catch {
            client.logger.info("thread root not fetched: \(LogLabel(String(describing: type(of: error))))")
            return false
        }
    }

    /// The newest edits and reactions of `eventIDs` (at most ``relationsLimit`` each): replies a
    /// `/relations` page brought, and a root fetched on its own. Their edits and reactions are
    /// main-timeline events that neither sync nor the thread's pages bring once they are older
    /// than the synced window, so each event's `GET /v1/rooms/{roomId}/relations/{eventId}` is
    /// asked (four at a time) and stored in the detached chunk before the page is reported, as
    /// `/messages` brings them with the main timeline's old events. Best effort: a failure
    /// leaves the replies as they are.
    static func storeRelations(of eventIDs: [EventID], roomID: RoomID, client: AccountChat) async {
        for start in stride(from: 0, to: eventIDs.count, by: 4) {
            let batch = eventIDs[start..<min(start + 4, eventIDs.count)]
            let pages = await withTaskGroup(of: MessagesPage?.self) { group -> [MessagesPage] in
                for eventID in batch {
                    group.addTask { await fetchRelations(of: eventID, roomID: roomID, client: client) }
                }
                var pages: [MessagesPage] = []
                for await page in group { if let page, !page.chunk.isEmpty { pages.append(page) } }
                return pages
            }
            for page in pages {
                do {
                    try await client.store.storeDetached(roomID: roomID, page: page)
                } catch {
                    client.logger.error("relations write failed: \(error)")
                    return
                }
                if page.chunk.contains(where: { $0.type == "m.room.encrypted" }) { client.encryptedEventsStored() }
            }
        }
    }

    /// How many relations of one event a thread page asks for.
    static let relationsLimit = 100

    private static func fetchRelations(of eventID: EventID, roomID: RoomID, client: AccountChat) async
        -> MessagesPage?
    {
        do {
            let response = try await client.requester.send(
                ThreadsAPI.relations(roomID: roomID, eventID: eventID, limit: relationsLimit))
            guard response.isSuccess else { return nil }
            return try SyncResponseDecoder.decodeMessages(response.body)
        } catch {
            client.logger.info("relations not fetched: \(LogLabel(String(describing: type(of: error))))")
            return nil
        }
    }
}
