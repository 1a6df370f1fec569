import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// A thread of a conversation as the list and the root's row show it.
///
/// The reply count and latest reply are the server's (its bundled `m.thread` aggregation,
/// read when ``Conversation/loadThreads(limit:)`` fetches the list) plus the replies synced
/// since; the unread counts are the ones the device computes from the account's push rules
/// and threaded read receipts (`docs/push.md`).
public struct ThreadSummary: Sendable, Hashable, CustomStringConvertible {
    /// The thread's root message.
    public var rootEventID: EventID
    /// How many replies the thread has.
    public var replyCount: Int
    /// The newest reply, when known.
    public var latestReplyEventID: EventID?
    /// Who sent it.
    public var latestReplySender: UserID?
    /// When the newest reply arrived (`nil` when unknown).
    public var latestActivity: MatrixTimestamp?
    /// Whether the signed-in member replied in the thread.
    public var hasParticipated: Bool
    /// Unread messages in the thread that notify.
    public var unreadCount: Int
    /// Those that also highlight (mentions, keywords).
    public var highlightCount: Int

    /// The IDs and counts only.
    public var description: String { "ThreadSummary(\(rootEventID), replies: \(replyCount), unread: \(unreadCount))" }

    init(_ stored: StoredThread) {
        rootEventID = EventID(stored.rootEventID)
        replyCount = stored.replyCount
        latestReplyEventID = stored.latestEventID.map(EventID.init(rawValue:))
        latestReplySender = stored.latestSender.map(UserID.init(stored:))
        latestActivity = stored.latestTS > 0 ? MatrixTimestamp(milliseconds: stored.latestTS) : nil
        hasParticipated = stored.participated
        unreadCount = stored.unread.notifications
        highlightCount = stored.unread.highlights
    }
}

/// A conversation's threads that are open and where its thread list's pagination stands.
struct ThreadRegistry: Sendable {
    var timelines: [EventID: ThreadTimeline] = [:]
    /// `next_batch` of the last thread-list page; `nil` before the first page or after the last.
    var listToken: String?
}

/// One thread of a conversation: its root, then its replies, with edits, reactions,
/// redactions and our replies on their way, like the main timeline.
///
/// It runs the same `TimelineMachine` as the conversation, with its own interpreter: a
/// "store page" is the thread's stored replies ordered by time, and a "server page" is
/// `GET /v1/rooms/{roomId}/relations/{root}/m.thread`, stored before it is reported. Work
/// follows observers: observing ``timeline`` loads the newest replies and applies the synced
/// ones; replies stay out of the conversation's main timeline, whose root row carries the
/// thread's summary (``TimelineItem/thread``).
public final class ThreadTimeline: Sendable {
    /// The thread's root message.
    public let rootEventID: EventID
    /// The root (when stored), then the loaded replies oldest first, then our replies on
    /// their way. Observing it is what makes the thread live.
    public var timeline: ObservableValue<[TimelineItem]> { timelinePublisher.observable }
    /// Paging state: loading, reached the root, last error.
    public var pagination: ObservableValue<TimelinePagination> { paginationPublisher.observable }

    let conversation: Conversation
    let host: MachineHost<TimelineMachine>
    private let timelinePublisher: ObservableValue<[TimelineItem]>.Publisher
    private let paginationPublisher = ObservableValue<TimelinePagination>.Publisher(TimelinePagination(.idle))
    private let subscriptions = Lock<[@Sendable () -> Void]>([])
    private let rebuilder: Lock<SerialRunner?> = Lock(nil)

    init(root: EventID, conversation: Conversation) {
        self.rootEventID = root
        self.conversation = conversation
        let client = conversation.client
        let host = MachineHost(
            machine: TimelineMachine(initialPageSize: client.options.initialPageSize), initial: .idle,
            interpreter: ThreadTimelineInterpreter(roomID: conversation.id, root: root, client: client),
            instance: "\(conversation.id.rawValue)|\(root.rawValue)", scope: client.scope, clock: client.clock,
            tracer: client.tracer)
        self.host = host
        self.timelinePublisher = ObservableValue<[TimelineItem]>.Publisher(
            [], hooks: .init(firstObserver: { host.post(.observed) }, lastObserverGone: { host.post(.unobserved) }))
        let runner = SerialRunner { [weak self] in await self?.rebuild() }
        rebuilder.withLock { $0 = runner }
        let pagination = paginationPublisher
        let onTimeline = host.states.subscribe { state in
            let next = TimelinePagination(state)
            if pagination.value != next { pagination.publish(next) }
            runner.request()
        }
        let onQueue = conversation.sendQueue.states.subscribe { _ in runner.request() }
        subscriptions.withLock { $0 = [onTimeline, onQueue] }
    }

    func shutDown() async {
        for unsubscribe in subscriptions.withLock({ $0 }) { unsubscribe() }
        await host.stop()
    }

    func requestRebuild() { rebuilder.withLock { $0 }?.request() }

    /// A committed sync batch touched the room: its new replies in this thread go to the
    /// machine (which ignores them while nobody observes the thread).
    func apply(_ change: SyncChanges.Room) async {
        let replies = change.threadReplies.filter { $0.root == rootEventID }.map(\.reply)
        if !replies.isEmpty { await host.send(.liveEventsArrived(replies)) }
        if change.touchesTimeline { requestRebuild() }
    }

    /// Rebuilds the rows: the root, the window's replies in time order, our replies on their way.
    private func rebuild() async {
        let state = await host.currentState
        guard let window = state.window else { return }
        let client = conversation.client
        let queue = await conversation.sendQueue.currentState.items.filter {
            $0.content.threadRootID == rootEventID.rawValue
        }
        let reactionEventIDs = conversation.pendingReactions.withLock { $0.reactionEventIDs }
        var snapshot: WindowSnapshot
        do {
            snapshot = try await client.store.windowSnapshot(
                roomID: conversation.id, eventIDs: [rootEventID] + window.eventIDs, reactionEventIDs: reactionEventIDs,
                ownUserID: client.userID.rawValue)
        } catch {
            client.logger.error("thread read failed: \(error)")
            return
        }
        client.openDecrypted(&snapshot.items)
        let ignored = client.ignored.withLock { $0 }
        if !ignored.isEmpty { snapshot.items.removeAll { ignored.contains($0.sender) } }
        // The root first, then the replies by time: they come from sync, `/messages` and
        // `/relations`, and the window keeps the order in which they arrived.
        let root = snapshot.items.filter { $0.eventID == rootEventID.rawValue }
        let replies = snapshot.items.filter { $0.eventID != rootEventID.rawValue }.enumerated().sorted {
            ($0.element.originServerTS, $0.offset) < ($1.element.originServerTS, $1.offset)
        }.map(\.element)
        snapshot.items = root + replies
        let pending = conversation.pendingReactions.withLock { $0.changes }
        let rows = TimelineAssembler.items(snapshot: snapshot, queue: queue, pending: pending, ownUserID: client.userID)
        if timelinePublisher.value != rows { timelinePublisher.publish(rows) }
    }

    /// Loads `count` older replies: from the store first, then from the server. Returns when
    /// the page has landed (or failed). Does nothing while nobody observes ``timeline``.
    @discardableResult
    public func paginateBackwards(_ count: Int) async -> TimelinePagination {
        let settled = await host.send(.paginateRequested(count: max(0, count))) { state -> TimelineMachine.State? in
            if case .paginatingBackwards = state { return nil }
            return state
        }
        return TimelinePagination(settled ?? .idle)
    }

    /// Sends a reply in the thread (see ``Conversation/send(_:inThread:replyingTo:mentioning:)``).
    public func send(_ message: OutgoingMessage, replyingTo: EventID? = nil, mentioning: Mentions? = nil)
        async throws(ChatError) -> SendReceipt
    {
        try await conversation.send(message, inThread: rootEventID, replyingTo: replyingTo, mentioning: mentioning)
    }

    /// Sends a threaded read receipt (`thread_id` the root) at `eventID`, or at the newest
    /// reply shown: the thread's unread counts drop to what follows it; the main timeline and
    /// other threads are unchanged. Private (`m.read.private`) when
    /// ``ChatOptions/sendsPrivateReceipts`` is set.
    public func markRead(upTo eventID: EventID? = nil) async throws(ChatError) {
        let client = conversation.client
        try client.ensureCurrent()
        var target = eventID
        if target == nil { target = timeline.value.last(where: { $0.eventID != nil })?.eventID }
        guard let target else { return }
        _ = try await client.perform(
            ThreadsAPI.receipt(
                roomID: conversation.id, eventID: target, threadID: rootEventID.rawValue,
                privately: client.options.sendsPrivateReceipts))
    }

    /// The thread's summary from the store (`nil` while the store knows no reply).
    public func summary() async throws(ChatError) -> ThreadSummary? {
        let client = conversation.client
        do {
            let threads = try await client.store.threads(roomID: conversation.id, ownUserID: client.userID.rawValue)
            return threads.first { $0.rootEventID == rootEventID.rawValue }.map(ThreadSummary.init)
        } catch {
            throw .store(error)
        }
    }
}

extension Conversation {
    /// The thread rooted at `root` (one object per root; observe its ``ThreadTimeline/timeline``
    /// to load it).
    public func thread(_ root: EventID) -> ThreadTimeline {
        if let open = threadRegistry.withLock({ $0.timelines[root] }) { return open }
        let created = ThreadTimeline(root: root, conversation: self)
        let kept = threadRegistry.withLock { registry -> ThreadTimeline in
            if let raced = registry.timelines[root] { return raced }
            registry.timelines[root] = created
            return created
        }
        if kept !== created { Task { await created.shutDown() } }
        return kept
    }

    /// The room's threads the store knows, most recently active first, with their counts.
    public func threads(limit: Int = 1_000) async throws(ChatError) -> [ThreadSummary] {
        try client.ensureCurrent()
        do {
            return try await client.store.threads(roomID: id, ownUserID: client.userID.rawValue, limit: limit).map(
                ThreadSummary.init)
        } catch {
            throw .store(error)
        }
    }

    /// Fetches the first page of the room's thread list from the server
    /// (`GET /v1/rooms/{roomId}/threads`), stores it, and returns the stored list.
    public func loadThreads(limit: Int = 50) async throws(ChatError) -> [ThreadSummary] {
        threadRegistry.withLock { $0.listToken = nil }
        try await fetchThreadPage(from: nil, limit: limit)
        return try await threads()
    }

    /// Fetches the next page of the thread list after ``loadThreads(limit:)``; returns `false`
    /// when there was none (the list is complete).
    @discardableResult
    public func loadMoreThreads(limit: Int = 50) async throws(ChatError) -> Bool {
        guard let token = threadRegistry.withLock({ $0.listToken }) else { return false }
        try await fetchThreadPage(from: token, limit: limit)
        return true
    }

    private func fetchThreadPage(from token: String?, limit: Int) async throws(ChatError) {
        let response = try await client.perform(ThreadsAPI.threads(roomID: id, from: token, limit: limit))
        let list: ThreadListPage
        do {
            list = try ThreadListPage(response.body)
        } catch {
            client.logger.warning("thread list unreadable: \(LogLabel(error.description))")
            throw .unexpectedResponse
        }
        do {
            try await client.store.storeThreadList(
                roomID: id, roots: list.roots, latest: list.latest, threads: list.threads)
        } catch {
            throw .store(error)
        }
        if list.roots.chunk.contains(where: { $0.type == "m.room.encrypted" })
            || list.latest.chunk.contains(where: { $0.type == "m.room.encrypted" })
        {
            client.encryptedEventsStored()
        }
        threadRegistry.withLock { $0.listToken = list.nextBatch }
        requestRebuild()
    }

    /// Sends a message in the thread rooted at `root`, through the room's send queue (and
    /// encrypted in an encrypted room; the relation stays in the clear, as the spec requires).
    ///
    /// Every part carries `m.relates_to` with `rel_type` `m.thread`. Replying to `replyingTo`
    /// makes it a real reply in the thread (`is_falling_back` false); without it the message
    /// carries the spec's fallback: `is_falling_back` true and `m.in_reply_to` the thread's
    /// latest known reply (the root when none), so that clients without threads show it as a
    /// reply.
    ///
    /// With `mentioning`, every part carries `m.mentions` (a real reply mentions the replied-to
    /// sender too; the fallback does not).
    ///
    /// - Throws: `.invalidArgument(name: "root")` when `root` is itself a reply in a thread
    ///   (threads do not nest), `.invalidArgument(name: "message")` for an empty message,
    ///   `.insufficientPowerLevel` for `@room` below the room's level, `.store`, `.accountEnded`.
    public func send(
        _ message: OutgoingMessage, inThread root: EventID, replyingTo: EventID? = nil, mentioning: Mentions? = nil
    ) async throws(ChatError) -> SendReceipt {
        try client.ensureCurrent()
        var mentions = mentioning
        if mentions?.room == true { try await client.checkRoomMention(roomID: id) }
        if mentions != nil, let replyingTo {
            let sender = try await sender(of: replyingTo)
            if sender != client.userID.rawValue, let user = UserID(sender), mentions?.userIDs.contains(user) == false {
                mentions?.userIDs.append(user)
            }
        }
        let isReply: Bool
        let latest: String?
        do throws(ChatStoreError) {
            isReply = try await client.store.threadRoot(of: root) != nil
            latest = try await client.store.thread(roomID: id, root: root)?.latestEventID
        } catch {
            throw .store(error)
        }
        if isReply { throw .invalidArgument(name: "root") }
        // Our own reply the server accepted but sync has not delivered yet is newer than any
        // stored one: the fallback replies to it.
        let ownSent = await sendQueue.currentState.items.reversed().lazy.compactMap { item -> EventID? in
            guard item.content.threadRootID == root.rawValue, case .sent(let eventID) = item.status else { return nil }
            return eventID
        }.first
        var fallback = latest.map(EventID.init(rawValue:)) ?? root
        if let ownSent, ownSent.rawValue != latest {
            let stored: [EventID]
            do throws(ChatStoreError) {
                stored = try await client.store.threadReplies(roomID: id, root: root, among: [ownSent])
            } catch {
                throw .store(error)
            }
            if stored.isEmpty { fallback = ownSent }
        }
        var contents = message.contents(
            inThread: root, replyingTo: replyingTo ?? fallback, isFallingBack: replyingTo == nil)
        guard !contents.isEmpty else { throw .invalidArgument(name: "message") }
        if let mentions {
            for index in contents.indices where contents[index].json.hasSuffix("}") {
                contents[index].json.removeLast()
                contents[index].json += ",\"m.mentions\":" + mentions.json + "}"
            }
        }
        return try await enqueue(contents)
    }

    /// Routes a committed sync batch to the open threads.
    func applyToThreads(_ change: SyncChanges.Room) async {
        for thread in threadRegistry.withLock({ Array($0.timelines.values) }) { await thread.apply(change) }
    }

    func rebuildThreads() {
        for thread in threadRegistry.withLock({ Array($0.timelines.values) }) { thread.requestRebuild() }
    }

    /// Stops the open threads and lets them go (each holds its conversation).
    func shutDownThreads() async {
        let threads = threadRegistry.withLock { registry -> [ThreadTimeline] in
            defer { registry.timelines.removeAll() }
            return Array(registry.timelines.values)
        }
        for thread in threads { await thread.shutDown() }
    }
}

extension OutgoingMessage {
    /// The contents, one per part, each in the thread rooted at `root` and replying to
    /// `inReplyTo` (as the spec's fallback when `isFallingBack`).
    func contents(inThread root: EventID, replyingTo inReplyTo: EventID, isFallingBack: Bool) -> [MessageContent] {
        MessageSplitter.split(body).map { part in
            var reply = JSONObjectWriter()
            reply.string("event_id", inReplyTo.rawValue)
            var relation = JSONObjectWriter()
            relation.string("rel_type", "m.thread")
            relation.string("event_id", root.rawValue)
            relation.bool("is_falling_back", isFallingBack)
            relation.raw("m.in_reply_to", reply.text)
            var content = JSONObjectWriter()
            content.string("msgtype", "m.\(kind.rawValue)")
            content.string("body", part)
            content.raw("m.relates_to", relation.text)
            return MessageContent(eventType: "m.room.message", json: content.text)
        }
    }
}

extension MessageContent {
    /// The thread root this content replies in (`m.relates_to` with `rel_type` `m.thread`).
    var threadRootID: String? {
        let bytes = Array(json.utf8)
        return bytes.withUnsafeBytes { buffer -> String? in
            guard let range = RawJSON.value("m.relates_to", in: buffer) else { return nil }
            let relation = UnsafeRawBufferPointer(rebasing: buffer[range])
            guard RawJSON.string("rel_type", in: relation) == "m.thread" else { return nil }
            return RawJSON.string("event_id", in: relation)
        }
    }
}

/// One page of `GET /v1/rooms/{roomId}/threads`: the roots, their latest replies and their
/// bundled aggregations.
struct ThreadListPage {
    var roots: MessagesPage
    var latest: MessagesPage
    var threads: [BundledThread]
    var nextBatch: String?

    init(_ body: [UInt8]) throws(SyncDecodingError) {
        roots = try SyncResponseDecoder.decodeMessages(body)
        nextBatch = RawJSON.string("next_batch", in: body)
        var latestEvents: [[UInt8]] = []
        var threads: [BundledThread] = []
        for root in roots.chunk {
            guard let rootID = root.eventID else { continue }
            guard let bundled = BundledThread.parse(event: Array(roots.document[root.range]), rootEventID: rootID)
            else { continue }
            threads.append(bundled.thread)
            if let latest = bundled.latest { latestEvents.append(latest) }
        }
        self.threads = threads
        // The latest replies are read by the same decoder as any page.
        var document = Array(#"{"chunk":["#.utf8)
        for (index, event) in latestEvents.enumerated() {
            if index > 0 { document.append(UInt8(ascii: ",")) }
            document += event
        }
        document += Array("]}".utf8)
        latest = try SyncResponseDecoder.decodeMessages(document)
    }
}
