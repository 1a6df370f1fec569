import Foundation
import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore

/// How an ``AccountChat`` syncs, retries and pages. The defaults suit apps; tests shorten the
/// delays so that a retry after an outage does not take minutes.
public struct ChatOptions: Sendable, Hashable {
    /// How long the server may hold a live `/sync` open.
    public var longPollTimeout: Duration
    /// Delays between failed `/sync` requests.
    public var syncBackoff: RetryBackoff
    /// Delays between failed sends of a room's queue.
    public var sendBackoff: RetryBackoff
    /// Events per room in each `/sync` (the filter's timeline limit); more make a `limited`
    /// timeline, which leaves a gap that back-pagination fills.
    public var syncTimelineLimit: Int
    /// Events the first load of an observed timeline asks for.
    public var initialPageSize: Int
    /// Whether rooms created without saying otherwise are end-to-end encrypted (the manifest's
    /// `encryption.defaultEnabled`).
    public var encryptsNewRooms: Bool
    /// The community's space (the manifest's `community.space`, a room ID or alias), whose
    /// rooms ``AccountChat/communityRooms(pageSize:)`` pages.
    public var communitySpace: String?
    /// The folder (in the account's folder) where files waiting to be sent are copied; `nil`:
    /// attachments cannot be sent (``ChatError/attachmentsUnavailable``).
    public var attachmentsDirectory: String?
    /// The folder (in the account's folder) of the media cache; `nil`: no cache.
    public var mediaCacheDirectory: String?
    /// The most bytes the media cache keeps (the manifest's `media.cacheBytes`); the least
    /// recently used files go first.
    public var mediaCacheBytes: Int64
    /// The sync protocol (the account module picks it from the manifest's `sync.mode` and the
    /// homeserver's `/versions`); `.v2` unless said otherwise.
    public var syncMode: SyncMode
    /// Sliding sync: rows of the conversation list in the first window.
    package var slidingFirstWindow = 20
    /// Sliding sync: rows each later request adds to the range until it covers the list.
    package var slidingGrowthStep = 200
    /// Whether read receipts are private (`m.read.private`): the server counts them, other
    /// members do not see them.
    public var sendsPrivateReceipts: Bool

    /// Options.
    public init(
        longPollTimeout: Duration = .seconds(30), syncBackoff: RetryBackoff = .sync,
        sendBackoff: RetryBackoff = .sendQueue, syncTimelineLimit: Int = 20, initialPageSize: Int = 20,
        encryptsNewRooms: Bool = false, communitySpace: String? = nil, attachmentsDirectory: String? = nil,
        mediaCacheDirectory: String? = nil, mediaCacheBytes: Int64 = 256 << 20, syncMode: SyncMode = .v2,
        sendsPrivateReceipts: Bool = false
    ) {
        self.syncMode = syncMode
        self.sendsPrivateReceipts = sendsPrivateReceipts
        self.encryptsNewRooms = encryptsNewRooms
        self.communitySpace = communitySpace
        self.attachmentsDirectory = attachmentsDirectory
        self.mediaCacheDirectory = mediaCacheDirectory
        self.mediaCacheBytes = mediaCacheBytes
        self.longPollTimeout = longPollTimeout
        self.syncBackoff = syncBackoff
        self.sendBackoff = sendBackoff
        self.syncTimelineLimit = max(1, syncTimelineLimit)
        self.initialPageSize = max(1, initialPageSize)
    }
}

/// One account's chat: the conversation list, conversations, and room operations, bound to
/// that account for its whole life.
///
/// Apps use ``ChatClient`` (`community.chat`), which follows whichever account is active and
/// delegates here. An `AccountChat` is what each signed-in account's chat module builds; tools
/// and tests that manage one account themselves may build one directly.
///
/// Views observe, the client owns: ``conversations`` and ``syncState`` are observable values
/// read from the account's store, so the list is there before any network on a cold start;
/// ``conversation(id:)`` hands out one ``Conversation`` per room, whose timeline does work only
/// while it is observed. Everything belongs to the account's ``/SymorvaRuntime/AccountScope``: when it ends,
/// every request is cancelled, late results are dropped, and the client and its conversations
/// answer ``ChatError/accountEnded``.
///
/// ```swift
/// let chat = AccountChat(requester: account.requester, database: account.database, scope: account.scope)
/// try await chat.start()
/// let conversation = try await chat.conversation(id: roomID)
/// let receipt = try await conversation.send(.text("Governance call starts at 18:00."))
/// ```
public final class AccountChat: Sendable {
    /// The signed-in account.
    public let userID: UserID
    /// How many `/sync` batches this client has committed (chat waits on it for a sync to bring
    /// something it knows is coming, such as the invites of a room it created).
    let commits = ObservableValue<UInt64>.Publisher(0)
    /// The conversation list, from the store, updated after every committed sync.
    public var conversations: ObservableValue<ConversationList> { listPublisher.observable }
    /// The sync loop's state: stopped, initial sync, catching up, live, backing off,
    /// awaiting a token, failed. With sliding sync the first window is the initial sync and
    /// growing the range to the whole list is catching up.
    public var syncState: ObservableValue<SyncState> { syncStates }
    /// The protocol this client syncs with.
    public var syncMode: SyncMode { syncLoop.mode }
    /// The account's media: uploads streamed from files, authenticated downloads, thumbnails.
    public let media: MediaClient

    let requester: any MatrixRequester
    let store: ChatStore
    let scope: AccountScope
    let clock: any RuntimeClock
    let wallClock: any WallClock
    let tracer: Tracer
    let options: ChatOptions
    let logger = Logger(category: "chat")
    let syncLoop: SyncLoop
    private let syncStates: ObservableValue<SyncState>
    /// Follows the sliding machine's states into ``syncStates``.
    private let slidingStateFollower = Lock<(@Sendable () -> Void)?>(nil)
    /// Rooms whose timeline is observed (open on screen): sliding sync subscribes to them.
    private let openRooms = Lock<[RoomID: Int]>([:])
    /// When the last sync response was committed in this run.
    private let lastCommit = Lock<Timestamp?>(nil)
    /// The observed windows of the conversation list.
    let windows = ConversationWindows()
    let receipts = SendReceiptRegistry()
    /// One request per page: a thread's `/relations` pages.
    let loads = RequestCoalescer<String, TimelinePage, TimelineError>()
    /// One request per page: `/messages` pages, which a timeline's pagination and the gap fill
    /// of device counts (``fillCountedGaps(_:)``) share.
    let messageLoads = RequestCoalescer<String, TimelineInterpreter.FetchedPage, TimelineError>()
    /// One `/members` request per room at a time (``roomForEncryption(_:)``).
    let memberLoads = RequestCoalescer<RoomID, Bool, MemberListError>()

    private let listPublisher: ObservableValue<ConversationList>.Publisher
    private let listState = Lock(ListState())
    let handles = Lock<[RoomID: Conversation]>([:])
    private let handleCoalescer = RequestCoalescer<RoomID, Conversation, ChatError>()
    private let tokenHandler = Lock<(@Sendable () -> Void)?>(nil)
    private let deviceChangesHandler = Lock<(@Sendable (SyncDeviceChanges) async -> Void)?>(nil)
    /// Hands users to the crypto module's tracking; answers whether they are tracked
    /// (``trackMembersOfJoinedRooms()``).
    let memberTracker = Lock<(@Sendable ([UserID]) async -> Bool)?>(nil)
    /// Which joined rooms' member hand-overs run, and which failed when.
    let memberTracking = Lock(MemberTrackingPlan())
    private let encryptorSlot = Lock<(any RoomEncryptor)?>(nil)
    private let thumbnailerSlot = Lock<(any AttachmentThumbnailer)?>(nil)
    /// Room keys arrived since the last decryption pass: the events waiting for a key are ready
    /// again.
    private let keysArrived = Lock(false)
    /// Users whose devices were queried since the last decryption pass: their events refused
    /// while the sending device was not trusted are tried again.
    private let sendersQueried = Lock<Set<String>>([])
    /// Events one decryption pass takes.
    static let decryptionPassSize = 500
    /// Rooms this client created encrypted, known before their state syncs.
    let encryptedRooms = Lock<Set<RoomID>>([])
    /// The room event tap (``tapRoomEvents(_:)``), once set.
    let roomEventTap = Lock<RoomEventTap?>(nil)
    private let decryptorSlot = Lock<(decryptor: any RoomDecryptor, runner: SerialRunner)?>(nil)
    private let stopActions = Lock<[@Sendable () -> Void]>([])
    /// Whether the device counts unencrypted rooms too (``countOnDeviceInEveryRoom(_:)``).
    let countsInEveryRoom = Lock(false)
    /// The push rules the device counts with, parsed, and the `m.push_rules` content they were
    /// parsed from (`nil`: the specification's defaults, while the account has none).
    let parsedPushRules = Lock<(content: [UInt8]?, rules: PushRuleSet)?>(nil)
    /// The users the account ignores (``ignore(_:)``), from `m.ignored_user_list`.
    let ignored = Lock<Set<String>>([])

    private struct ListState {
        var summaries: [ConversationSummary] = []
        var overrides: [RoomID: [ConversationFlag: Bool]] = [:]
        var nextTicket: UInt64 = 0
        var publishedTicket: UInt64 = 0
    }

    /// Creates the client. Nothing runs until ``start()``.
    ///
    /// - Parameters:
    ///   - requester: sends requests as the account (attaches and refreshes its token).
    ///   - database: the account's database, opened with `ChatSchema.migrations`.
    ///   - scope: the account's scope; ending it stops all chat work.
    ///   - clock: the clock of timers (retries).
    ///   - wallClock: the clock that stamps queued messages and reads `Retry-After` dates.
    public init(
        requester: any MatrixRequester, database: SQLiteDatabase, scope: AccountScope,
        clock: any RuntimeClock = SystemClock(), wallClock: any WallClock = SystemWallClock(), tracer: Tracer = .shared,
        options: ChatOptions = ChatOptions()
    ) {
        self.userID = requester.userID
        self.listPublisher = .init(ConversationList(status: .loading, userID: requester.userID))
        self.requester = requester
        self.store = ChatStore(database: database)
        self.scope = scope
        self.clock = clock
        self.wallClock = wallClock
        self.tracer = tracer
        self.options = options
        self.media = MediaClient(
            requester: requester, wallClock: wallClock,
            cache: options.mediaCacheDirectory.map { MediaCache(directory: $0, capacity: options.mediaCacheBytes) })
        switch options.syncMode {
        case .v2:
            let interpreter = SyncInterpreter(
                requester: requester, store: store, timelineLimit: options.syncTimelineLimit,
                longPollTimeout: options.longPollTimeout, wallClock: wallClock, logger: logger)
            let host = MachineHost(
                machine: SyncMachine(longPollTimeout: options.longPollTimeout, backoff: options.syncBackoff),
                initial: .stopped, interpreter: interpreter, instance: requester.userID.rawValue, scope: scope,
                clock: clock, tracer: tracer)
            self.syncLoop = .v2(host, interpreter)
            self.syncStates = host.states
        case .sliding:
            let interpreter = SlidingSyncInterpreter(
                requester: requester, store: store,
                options: SlidingSyncAPI.Options(subscriptionTimelineLimit: options.syncTimelineLimit),
                wallClock: wallClock, logger: logger)
            let host = MachineHost(
                machine: SlidingSyncMachine(
                    longPollTimeout: options.longPollTimeout, backoff: options.syncBackoff,
                    firstWindow: options.slidingFirstWindow, growthStep: options.slidingGrowthStep),
                initial: .stopped, interpreter: interpreter, instance: requester.userID.rawValue, scope: scope,
                clock: clock, tracer: tracer)
            self.syncLoop = .sliding(host, interpreter)
            let publisher = ObservableValue<SyncState>.Publisher(.stopped)
            self.syncStates = publisher.observable
            let follower = host.states.subscribe { state in
                let mapped = SyncState(state)
                if publisher.value != mapped { publisher.publish(mapped) }
            }
            slidingStateFollower.withLock { $0 = follower }
        }
        syncLoop.setDelegate(SyncDelegateBox(client: self))
    }

    // MARK: Lifecycle

    /// Shows what the store holds, resumes the send queues persisted by an earlier run, and
    /// starts syncing from the stored since-token.
    ///
    /// - Throws: `.store` when the database cannot be read.
    public func start() async throws(ChatError) {
        try await reloadList()
        let startedAt = Date()
        let queued: [QueuedMessage]
        do { queued = try await store.queuedMessages() } catch { throw .store(error) }
        if let directory = options.attachmentsDirectory {
            // Copies an earlier run left behind (a copy younger than a minute may be a send's
            // whose queue row is being written now).
            let removed = AttachmentFiles.removeOrphans(
                in: directory, keeping: queued.map(\.transactionID),
                writtenBefore: startedAt.addingTimeInterval(-Self.orphanedCopyAge))
            if removed > 0 { logger.info("attachment copies of no queued message removed count=\(removed)") }
        }
        for roomID in Set(queued.map(\.roomID)) {
            _ = try await conversation(loading: RoomID(roomID))
        }
        // Joined rooms whose members an earlier run did not hand over yet.
        await trackMembersOfJoinedRooms()
        switch syncLoop {
        case .v2(let host, _):
            let since: String?
            do { since = try await store.sinceToken() } catch { throw .store(error) }
            await host.send(
                .started(
                    SyncStart(
                        since: since.map(SyncToken.init(rawValue:)), jitterSeed: UInt64.random(in: 0...UInt64.max))))
        case .sliding(let host, _):
            let pos: String?
            do { pos = try await store.slidingSyncPosition().pos } catch { throw .store(error) }
            let open = Set(openRooms.withLock { $0.keys.map(\.rawValue) })
            await host.send(
                .started(
                    SlidingSyncStart(
                        pos: pos.map(SlidingSyncPosition.init(rawValue:)), subscriptions: open,
                        jitterSeed: UInt64.random(in: 0...UInt64.max))))
        }
    }

    /// How old (seconds) a copy in the attachments folder that no queued message names must be
    /// for ``start()`` to remove it.
    static let orphanedCopyAge: TimeInterval = 60

    /// Stops syncing, sending and every timeline. The store keeps what it has, queued messages
    /// included; a later ``start()`` (or a new client on the same database) resumes them.
    public func stop() async {
        let actions = stopActions.withLock { actions in
            defer { actions.removeAll() }
            return actions
        }
        for action in actions { action() }
        await syncLoop.stop()
        slidingStateFollower.withLock { follower in
            follower?()
            follower = nil
        }
        let all = handles.withLock { handles in
            defer { handles.removeAll() }
            return Array(handles.values)
        }
        for conversation in all { await conversation.shutDown() }
    }

    /// Re-reads the list from the store and makes the sync loop catch up now (after a retry
    /// delay or a long poll).
    public func refresh() async {
        try? await reloadList()
        await syncLoop.networkChanged()
    }

    /// Tells the sync loop and the send queues that connectivity changed: waiting retries run now.
    public func networkChanged() async {
        await syncLoop.networkChanged()
        for conversation in handles.withLock({ Array($0.values) }) {
            await conversation.sendQueue.send(.networkChanged)
        }
    }

    /// Sets what to call when the homeserver rejects the access token even after the
    /// requester's refresh: a session problem (sign in again). Call ``tokenRefreshed()`` once the
    /// session has a working token.
    public func onTokenRejected(_ handler: @escaping @Sendable () -> Void) {
        tokenHandler.withLock { $0 = handler }
    }

    /// Connects the crypto module: `inbox` receives each sync's to-device events, device lists
    /// and key counts inside the sync's transaction, and `handler` is called after each
    /// committed sync with what it said about devices and keys (with the members of encrypted
    /// rooms when rooms changed), before the conversation list is updated. `trackMembers`
    /// receives the whole member list (`/members`) of each encrypted room this account joins,
    /// and answers whether it tracks them (``trackMembersOfJoinedRooms()``).
    package func connectDevices(
        inbox: @escaping SyncInboxWriter, onChanges handler: @escaping @Sendable (SyncDeviceChanges) async -> Void,
        trackMembers: (@Sendable ([UserID]) async -> Bool)? = nil
    ) {
        syncLoop.setInbox(inbox)
        deviceChangesHandler.withLock { $0 = handler }
        memberTracker.withLock { $0 = trackMembers }
    }

    /// Sets what encrypts events for encrypted rooms (the crypto module). Without one, a send to
    /// an encrypted room fails with `encryptionFailed`: never plaintext.
    package func setEncryptor(_ encryptor: any RoomEncryptor) {
        encryptorSlot.withLock { $0 = encryptor }
    }

    /// Sets what makes the thumbnails of images sent without one
    /// (``OutgoingAttachment/thumbnail``); `nil` sends them without. The standard modules set
    /// the platform's (GStreamer on Linux); an app on another platform sets its own.
    public func setThumbnailer(_ thumbnailer: (any AttachmentThumbnailer)?) {
        thumbnailerSlot.withLock { $0 = thumbnailer }
    }

    /// What makes the thumbnails of images sent without one, if anything.
    var thumbnailer: (any AttachmentThumbnailer)? { thumbnailerSlot.withLock { $0 } }

    /// Sets what decrypts the events of encrypted rooms (the crypto module). Encrypted events are
    /// tried when they are stored; those whose key has not arrived wait until
    /// ``roomKeysArrived()`` says new keys are stored; a decrypted event replaces its row in place.
    package func setDecryptor(_ decryptor: any RoomDecryptor) {
        let runner = SerialRunner { [weak self] in await self?.decryptPending() }
        decryptorSlot.withLock { $0 = (decryptor, runner) }
        runner.request()
    }

    /// The decryptor of encrypted rooms, once the crypto module set it.
    var decryptor: (any RoomDecryptor)? { decryptorSlot.withLock { $0 }?.decryptor }

    /// New room keys are stored: try the events that wait for a key again.
    package func roomKeysArrived() {
        keysArrived.withLock { $0 = true }
        decryptorSlot.withLock { $0 }?.runner.request()
    }

    /// The devices of `users` were brought up to date (a `keys/query` answered): the events of
    /// theirs refused while their sending device was not trusted are tried again, since it may be
    /// cross-signed, or verified by this account, now.
    package func senderDevicesUpdated(_ users: [UserID]) {
        guard !users.isEmpty else { return }
        sendersQueried.withLock { $0.formUnion(users.map(\.rawValue)) }
        decryptorSlot.withLock { $0 }?.runner.request()
    }

    /// New `m.room.encrypted` events are stored (a sync, a page of history): try them.
    func encryptedEventsStored() {
        decryptorSlot.withLock { $0 }?.runner.request()
    }

    /// Decrypts what can be decrypted of the stored encrypted events and shows it in place
    /// (`package` for `symorva-bench ingest --encrypted`, which times it).
    ///
    /// One pass takes up to ``decryptionPassSize`` events that are not waiting for a key, newest
    /// first; those still without their key are marked waiting (tried again when keys arrive),
    /// and a full pass asks for the next one (unless `continuing` is `false`: the benchmark runs
    /// its passes itself), so a backlog drains pass after pass.
    package func decryptPending(continuing: Bool = true) async {
        guard let slot = decryptorSlot.withLock({ $0 }) else { return }
        let decryptor = slot.decryptor
        if keysArrived.withLock({ arrived in
            defer { arrived = false }
            return arrived
        }) {
            do { try await store.retryEventsWaitingForKeys() } catch {
                logger.error("events waiting for keys not reset error=\(error)")
            }
        }
        let queried = sendersQueried.withLock { queried in
            defer { queried = [] }
            return queried
        }
        if !queried.isEmpty {
            do { try await store.retryEventsRefusedForTrust(senders: queried) } catch {
                // Put back: the next pass resets them.
                sendersQueried.withLock { $0.formUnion(queried) }
                logger.error("events refused for their sender's trust not reset error=\(error)")
            }
        }
        let events: [UndecryptedEvent]
        do { events = try await store.undecryptedEvents(limit: Self.decryptionPassSize) } catch {
            logger.error("undecrypted events not read error=\(error)")
            return
        }
        var outcomes: [(event: UndecryptedEvent, outcome: DecryptionOutcome)] = []
        var waiting: [UndecryptedEvent] = []
        for (event, outcome) in zip(events, await decryptor.decrypt(events)) {
            if let outcome {
                outcomes.append((event, outcome))
            } else {
                waiting.append(event)
            }
        }
        do { try await store.markWaitingForKeys(waiting) } catch {
            logger.error("events waiting for keys not marked error=\(error)")
            return
        }
        if continuing, events.count == Self.decryptionPassSize { slot.runner.request() }
        guard !outcomes.isEmpty else { return }
        do { try await store.storeDecryption(outcomes) } catch {
            logger.error("decrypted events not stored error=\(error)")
            return
        }
        await countDecrypted(outcomes)
        await tapDecrypted(outcomes, decryptor: decryptor)
        try? await reloadList()
        for roomID in Set(outcomes.map(\.event.roomID)) {
            let room = RoomID(roomID)
            handles.withLock({ $0[room] })?.requestRebuild()
        }
    }

    /// Opens the sealed plaintexts of decrypted items (they are stored sealed, never in the
    /// clear); an item that cannot be opened shows as unable to decrypt.
    func openDecrypted(_ items: inout [StoredTimelineItem]) {
        let decryptor = decryptorSlot.withLock { $0 }?.decryptor
        for index in items.indices {
            if let encryption = items[index].encryption, encryption.failure == nil {
                if let opened = open(
                    items[index].content, eventID: EventID(items[index].eventID),
                    sealedForTransaction: encryption.sealedForTransaction, decryptor: decryptor)
                {
                    items[index].content = opened
                } else {
                    items[index].type = "m.room.encrypted"
                    items[index].encryption?.failure = "missingKey"
                }
            }
            // The latest edit is encrypted: its new content replaces what is shown.
            if let sealed = items[index].sealedEdit, let editID = items[index].replacedBy {
                items[index].sealedEdit = nil
                if let opened = open(
                    sealed.content, eventID: EventID(editID), sealedForTransaction: sealed.sealedForTransaction,
                    decryptor: decryptor),
                    let range = opened.withUnsafeBytes({ RawJSON.value("m.new_content", in: $0) })
                {
                    items[index].content = Array(opened[range])
                } else {
                    items[index].replacedBy = nil
                }
            }
        }
    }

    /// A decrypted content as the store keeps it, opened: sealed by the decryptor for its event,
    /// or, for this device's own message not read by the decryption pass yet, by the send queue.
    private func open(
        _ sealed: [UInt8], eventID: EventID, sealedForTransaction: String?, decryptor: (any RoomDecryptor)?
    ) -> [UInt8]? {
        if let transactionID = sealedForTransaction {
            return encryptor?.open(sealed, transactionID: TransactionID(transactionID))
        }
        return decryptor?.open(sealed, eventID: eventID)
    }

    /// Shows the decrypted latest message of encrypted rooms in their previews: the sealed
    /// plaintext is opened in memory only (a preview that cannot be opened stays encrypted).
    func openPreviews(_ summaries: inout [ConversationSummary]) {
        guard let decryptor = decryptorSlot.withLock({ $0 })?.decryptor else { return }
        for index in summaries.indices {
            guard let sealed = summaries[index].decryptedPreview, let preview = summaries[index].preview,
                let content = open(
                    sealed.content, eventID: EventID(preview.eventID),
                    sealedForTransaction: sealed.sealedForTransaction,
                    decryptor: decryptor)
            else { continue }
            summaries[index].preview = content.withUnsafeBytes { bytes in
                MessagePreview(
                    eventID: preview.eventID, sender: preview.sender, type: sealed.type,
                    originServerTS: preview.originServerTS,
                    body: RawJSON.string("body", in: bytes).map { String($0.prefix(ChatStore.previewLength)) },
                    messageType: RawJSON.string("msgtype", in: bytes), isRedacted: false)
            }
        }
    }

    /// Records that `roomID` is encrypted (this client created it so, turned it on, or the
    /// server said so before its state synced) and tells its conversation.
    func markEncrypted(_ roomID: RoomID) async {
        encryptedRooms.withLock { _ = $0.insert(roomID) }
        if let conversation = handles.withLock({ $0[roomID] }) { await conversation.encryptionTurnedOn() }
    }

    /// The encryptor for encrypted rooms, if one is set.
    var encryptor: (any RoomEncryptor)? { encryptorSlot.withLock { $0 } }

    /// Runs `action` when the client stops (ending what was set up for it, such as following
    /// the session's tokens).
    package func onStop(_ action: @escaping @Sendable () -> Void) {
        stopActions.withLock { $0.append(action) }
    }

    /// Resumes the sync loop and the send queues that wait for a new access token.
    public func tokenRefreshed() async {
        await syncLoop.tokenRefreshed()
        for conversation in handles.withLock({ Array($0.values) }) {
            await conversation.sendQueue.send(.tokenRefreshed)
        }
    }

    // MARK: Conversations

    /// The conversation with `id`: one instance per room and client.
    ///
    /// - Throws: `.accountEnded` once the account's scope has ended; `.unknownConversation` when the room is not in this account's store (not
    ///   joined or invited, or not synced yet).
    public func conversation(id: RoomID) async throws(ChatError) -> Conversation {
        try ensureCurrent()
        if let existing = handles.withLock({ $0[id] }) { return existing }
        let known: Bool
        do {
            known = try await store.hasRoom(id)
        } catch {
            throw .store(error)
        }
        guard known else { throw .unknownConversation(id) }
        return try await conversation(loading: id)
    }

    /// The conversation for `id`, created (its send queue restored from the store) once.
    func conversation(loading id: RoomID) async throws(ChatError) -> Conversation {
        if let existing = handles.withLock({ $0[id] }) { return existing }
        return try await handleCoalescer.value(for: id) { () async throws(ChatError) -> Conversation in
            if let existing = self.handles.withLock({ $0[id] }) { return existing }
            let conversation = Conversation(roomID: id, client: self)
            try await conversation.restoreQueue()
            self.handles.withLock { $0[id] = conversation }
            return conversation
        }
    }

    /// Whether the account's scope has ended (switched away from, signed out): the client and
    /// its conversations then refuse to act.
    public var isEnded: Bool { scope.isEnded }

    /// Throws `.accountEnded` once the account's scope has ended.
    func ensureCurrent() throws(ChatError) {
        if scope.isEnded { throw .accountEnded }
    }

    // MARK: Sync routing

    func syncCommitted(_ changes: SyncChanges) async {
        let now = wallClock.now
        lastCommit.withLock { $0 = now }
        if let handler = deviceChangesHandler.withLock({ $0 }) {
            var devices = changes.devices
            if devices.roomsChanged {
                do throws(ChatStoreError) {
                    devices.encryptedRoomMembers = try await store.membersOfEncryptedRooms()
                } catch {
                    logger.error("members of encrypted rooms not read error=\(error)")
                }
            }
            await handler(devices)
        }
        // A join (or encryption) brought by this sync: the room's whole member list goes to the
        // crypto module; a failed hand-over is tried again by a later commit.
        if changes.devices.roomsChanged || memberTracking.withLock({ $0.hasFailures }) {
            await trackMembersOfJoinedRooms()
        }
        // The events a limited timeline left out of a counted room are fetched before counting.
        var changes = changes
        await fillCountedGaps(&changes)
        // Stored events wait for a key: they are tried again when keys arrive (the crypto module
        // says so), and new encrypted events when they are stored, not after every sync.
        if changes.hasEncryptedEvents { encryptedEventsStored() }
        await countStoredEvents()
        await refreshIgnored()
        try? await reloadList()
        for room in changes.rooms {
            guard let conversation = handles.withLock({ $0[room.roomID] }) else { continue }
            await conversation.apply(room)
        }
        commits.publish { $0 &+ 1 }
    }

    // MARK: Sliding sync subscriptions

    /// A conversation's timeline gained its first observer: with sliding sync the room gets a
    /// room subscription (its timeline and full state) until the last observer leaves.
    func conversationOpened(_ roomID: RoomID) {
        openRooms.withLock { rooms in
            rooms[roomID, default: 0] += 1
            postSubscriptions(rooms)
        }
    }

    /// A conversation's timeline lost its last observer.
    func conversationClosed(_ roomID: RoomID) {
        openRooms.withLock { rooms in
            guard let count = rooms[roomID] else { return }
            rooms[roomID] = count > 1 ? count - 1 : nil
            postSubscriptions(rooms)
        }
    }

    /// Posted under the `openRooms` lock, so that the machine hears the sets in order.
    private func postSubscriptions(_ rooms: [RoomID: Int]) {
        guard case .sliding(let host, _) = syncLoop else { return }
        host.post(.subscriptionsChanged(Set(rooms.keys.map(\.rawValue))))
    }

    /// The rooms with a sliding sync room subscription (conversations open on screen).
    package var subscribedRooms: Set<RoomID> { Set(openRooms.withLock { $0.keys }) }

    /// The mode, the window loaded and when the last response was committed (`sync status`).
    package var syncStatus: SyncStatus {
        var status = SyncStatus(mode: syncMode, window: nil, lastCommit: lastCommit.withLock { $0 })
        if case .sliding(let host, _) = syncLoop, let progress = host.states.value.progress {
            status.window = (progress.rangeEnd, progress.roomCount)
        }
        return status
    }

    func syncTokenRejected() {
        logger.warning("access token rejected during sync; waiting for the session")
        tokenHandler.withLock { $0 }?()
    }

    /// Called by send queues that hit `M_UNKNOWN_TOKEN`.
    func sendQueueTokenRejected() {
        logger.warning("access token rejected while sending; waiting for the session")
        tokenHandler.withLock { $0 }?()
    }

    // MARK: List

    /// Reads the list from the store and publishes it, unless a later read already did.
    func reloadList() async throws(ChatError) {
        reloadWindows()
        // An app that shows windows and does not observe the whole list never builds it.
        guard !hasOpenWindows || listPublisher.observable.observerCount > 0 else { return }
        let ticket = listState.withLock { state -> UInt64 in
            state.nextTicket += 1
            return state.nextTicket
        }
        var summaries: [ConversationSummary]
        do { summaries = try await store.loadConversationList() } catch { throw .store(error) }
        openPreviews(&summaries)
        let list = listState.withLock { state -> ConversationList? in
            guard ticket > state.publishedTicket else { return nil }
            state.publishedTicket = ticket
            state.summaries = summaries
            return ConversationList.build(summaries, ownUserID: userID, overrides: state.overrides)
        }
        if let list { listPublisher.publish(list) }
    }

    /// The optimistic flags laid over the list now.
    var listOverrides: [RoomID: [ConversationFlag: Bool]] { listState.withLock { $0.overrides } }

    /// Lays an optimistic flag over the list (`nil` removes it) and publishes at once.
    func setOverride(_ flag: ConversationFlag, _ value: Bool?, roomID: RoomID) {
        let list = listState.withLock { state -> ConversationList in
            state.overrides[roomID, default: [:]][flag] = value
            if state.overrides[roomID]?.isEmpty == true { state.overrides[roomID] = nil }
            return ConversationList.build(state.summaries, ownUserID: userID, overrides: state.overrides)
        }
        listPublisher.publish(list)
        reloadWindows()
    }
}

/// Holds the client weakly for the sync interpreter, which the client owns.
private final class SyncDelegateBox: SyncInterpreterDelegate {
    weak let client: AccountChat?

    init(client: AccountChat) { self.client = client }

    func syncCommitted(_ changes: SyncChanges) async { await client?.syncCommitted(changes) }
    func syncTokenRejected() { client?.syncTokenRejected() }
    func timelineCommitted(_ body: SyncResponseBody) async { await client?.tapCommitted(body) }
}

// Small concurrency tools of the chat product layer.

/// Runs `body` again and again while requests keep coming, never twice at once: bursts of
/// requests (sync batches, queue changes) collapse into one run after the current one.
final class SerialRunner: Sendable {
    private struct State {
        var isRunning = false
        var isDirty = false
    }

    private let state = Lock(State())
    private let body: @Sendable () async -> Void

    init(_ body: @escaping @Sendable () async -> Void) { self.body = body }

    /// Asks for a run; returns at once.
    func request() {
        let mustStart = state.withLock { state -> Bool in
            if state.isRunning {
                state.isDirty = true
                return false
            }
            state.isRunning = true
            return true
        }
        if mustStart { Task { await self.loop() } }
    }

    private func loop() async {
        while true {
            state.withLock { $0.isDirty = false }
            await body()
            let again = state.withLock { state -> Bool in
                if state.isDirty { return true }
                state.isRunning = false
                return false
            }
            if !again { return }
        }
    }
}

extension AccountChat {
    /// Milliseconds since 1970 now, by the injected wall clock: the store's `created_at`.
    func currentUnixMilliseconds() -> Int64 { wallClock.now.millisecondsSince1970 }

    /// A fresh transaction ID: unique per device and never reused for another event.
    func makeTransactionID() -> TransactionID {
        TransactionID(
            "sk" + String(currentUnixMilliseconds(), radix: 36) + "."
                + String(UInt64.random(in: 0...UInt64.max), radix: 36))
    }
}

/// Encrypts events for encrypted rooms: what the crypto module gives chat's send queues.
package protocol RoomEncryptor: Sendable {
    /// The `m.room.encrypted` content for `content` (an event of `eventType`) in `room` (its
    /// members and settings as chat's store has them).
    ///
    /// - Throws: ``/SymorvaMachines/SendError`` `.network` (or `.server`, `.rateLimited`) when
    ///   encrypting needed a request that can be retried, `.permanent(.encryptionFailed)` otherwise.
    func encrypt(_ content: MessageContent, in room: EncryptedRoom) async throws(SendError) -> MessageContent
    /// The content of a message queued for an encrypted room, sealed for the store and bound
    /// to its transaction ID (`nil` when it cannot be sealed): it is never on disk in the clear.
    func seal(_ content: [UInt8], transactionID: TransactionID) -> [UInt8]?
    /// Opens what ``seal(_:transactionID:)`` sealed (`nil` when it cannot be opened).
    func open(_ sealed: [UInt8], transactionID: TransactionID) -> [UInt8]?
}

/// Decrypts the events of encrypted rooms: what the crypto module gives chat's timelines.
package protocol RoomDecryptor: Sendable {
    /// The plaintext type and **sealed** content of an `m.room.encrypted` event (the store keeps
    /// nothing of an encrypted room's messages in the clear), a permanent failure, or `nil`
    /// while its room key has not arrived.
    func decrypt(_ content: [UInt8], in roomID: RoomID, eventID: EventID, sender: UserID) async -> DecryptionOutcome?
    /// The outcomes of a pass's events, in order, as ``decrypt(_:in:eventID:sender:)`` gives
    /// each: a decryptor that can share work across them (one commit for the pass's replay
    /// records, one read of each sender's devices) does.
    func decrypt(_ events: [UndecryptedEvent]) async -> [DecryptionOutcome?]
    /// The plaintext content of a decrypted event as ``decrypt(_:in:eventID:sender:)`` sealed it
    /// for the store (`nil` when it cannot be opened).
    func open(_ sealed: [UInt8], eventID: EventID) -> [UInt8]?
    /// Asks the account's other devices again for the room keys requested for `roomID` and not
    /// received; how many requests go out again.
    ///
    /// - Throws: the crypto store's failure.
    func requestKeysAgain(in roomID: RoomID) async throws(StoreError) -> Int
}

extension RoomDecryptor {
    /// Each event on its own.
    package func decrypt(_ events: [UndecryptedEvent]) async -> [DecryptionOutcome?] {
        var outcomes: [DecryptionOutcome?] = []
        for event in events {
            outcomes.append(
                await decrypt(
                    event.content, in: RoomID(event.roomID), eventID: EventID(event.eventID),
                    sender: UserID(stored: event.sender)))
        }
        return outcomes
    }
}
