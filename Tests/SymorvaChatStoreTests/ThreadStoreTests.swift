import SymorvaChatStore
import SymorvaMachines
import SymorvaStore
import SymorvaTesting
import Testing

/// The store's half of threads (chat schema 15): the thread rows kept by the trigger, a
/// thread's own pages, `/relations` and thread-list pages written outside the timeline, and a
/// back-pagination that meets them.
@Suite("Threads in the chat store")
struct ThreadStoreTests {
    static let me = "@me:example.com"
    static let bob = "@bob:example.com"
    static let room = "!threads:example.com"

    static func reply(_ id: String, root: String, ts: Int64, sender: String = bob) -> String {
        #"{"type":"m.room.message","event_id":"\#(id)","sender":"\#(sender)","origin_server_ts":\#(ts),"content":{"msgtype":"m.text","body":"reply \#(id)","m.relates_to":{"rel_type":"m.thread","event_id":"\#(root)","is_falling_back":true,"m.in_reply_to":{"event_id":"\#(root)"}}}}"#
    }

    static func sync(_ batch: String, _ events: [String], limited: String? = nil) -> [UInt8] {
        let gap = limited.map { #","limited":true,"prev_batch":"\#($0)""# } ?? ""
        return Array(
            #"{"next_batch":"\#(batch)","rooms":{"join":{"\#(room)":{"timeline":{"events":[\#(events.joined(separator: ","))]\#(gap)}}}}}"#
                .utf8)
    }

    static func seed(_ store: ChatStore) async throws {
        _ = try await SyncIngestor(store: store).ingest(
            sync(
                "1",
                [
                    SyncSamples.message("$root", ts: 10, sender: bob), reply("$r1", root: "$root", ts: 20),
                    SyncSamples.message("$other", ts: 25, sender: bob), reply("$r2", root: "$root", ts: 30, sender: me),
                ], limited: "gap-1"))
    }

    @Test("Synced replies make the thread: count, latest reply, participation; a redelivered reply counts once")
    func syncedReplies() async throws {
        let store = try await makeChatStore()
        try await Self.seed(store)
        let threads = try await store.threads(roomID: RoomID(Self.room), ownUserID: Self.me)
        #expect(
            threads == [
                StoredThread(
                    rootEventID: "$root", replyCount: 2, latestEventID: "$r2", latestSender: Self.me, latestTS: 30,
                    participated: true)
            ])
        _ = try await SyncIngestor(store: store).ingest(Self.sync("2", [Self.reply("$r2", root: "$root", ts: 30)]))
        #expect(try await store.threads(roomID: RoomID(Self.room), ownUserID: Self.me).first?.replyCount == 2)
        // The root's row in a window carries the summary; a reply names its root.
        let snapshot = try await store.windowSnapshot(
            roomID: RoomID(Self.room), eventIDs: [EventID("$root"), EventID("$r1")], ownUserID: Self.me)
        #expect(snapshot.items.first?.thread?.replyCount == 2)
        #expect(snapshot.items.last?.thread == nil && snapshot.items.last?.threadRootID == "$root")
    }

    @Test("A thread's store pages go back in time, then hand over to the server, then reach the root")
    func threadPages() async throws {
        let store = try await makeChatStore()
        try await Self.seed(store)
        let roomID = RoomID(Self.room)
        let newest = try await store.loadThreadPage(roomID: roomID, root: EventID("$root"), before: nil, limit: 1)
        #expect(newest.eventIDs == ["$r2"])
        guard case .stored(let position) = newest.boundary else {
            Issue.record("expected a stored boundary, got \(newest.boundary)")
            return
        }
        let older = try await store.loadThreadPage(roomID: roomID, root: EventID("$root"), before: position, limit: 5)
        #expect(older.eventIDs == ["$r1"])
        #expect(older.boundary == .server(token: nil))

        // A /relations page (newest first) with an older reply and one already stored.
        let page = try SyncResponseDecoder.decodeMessages(
            Array(
                #"{"chunk":[\#(Self.reply("$r1", root: "$root", ts: 20)),\#(Self.reply("$r0", root: "$root", ts: 15))]}"#
                    .utf8))
        let stored = try await store.storeThreadPage(roomID: roomID, root: EventID("$root"), page: page, nextBatch: nil)
        #expect(stored == [EventID("$r0"), EventID("$r1")])
        let all = try await store.loadThreadPage(roomID: roomID, root: EventID("$root"), before: nil, limit: 10)
        #expect(all.eventIDs == ["$r0", "$r1", "$r2"])
        #expect(all.boundary == .root)
        // The older reply raised the count to what is stored, not the latest reply.
        let thread = try await store.thread(roomID: roomID, root: EventID("$root"))
        #expect(thread?.replyCount == 3 && thread?.latestEventID == "$r2")
        // The room's main timeline never walks into the detached chunk.
        let timeline = try await store.loadTimelinePage(roomID: Self.room, limit: 50)
        #expect(!timeline.items.map(\.eventID).contains("$r0"))
        // A new gap in the room (a limited sync) sends the thread back to the server.
        _ = try await SyncIngestor(store: store).ingest(
            Self.sync("2", [SyncSamples.message("$late", ts: 50, sender: Self.bob)], limited: "gap-2"))
        let after = try await store.loadThreadPage(roomID: roomID, root: EventID("$root"), before: nil, limit: 10)
        #expect(after.boundary == .server(token: nil))
    }

    @Test("The thread list takes the server's count and latest reply unless a newer reply is stored")
    func threadList() async throws {
        let store = try await makeChatStore()
        try await Self.seed(store)
        let roomID = RoomID(Self.room)
        let roots = try SyncResponseDecoder.decodeMessages(
            Array(#"{"chunk":[\#(SyncSamples.message("$old", ts: 5, sender: Self.bob))]}"#.utf8))
        let latest = try SyncResponseDecoder.decodeMessages(
            Array(#"{"chunk":[\#(Self.reply("$o9", root: "$old", ts: 8))]}"#.utf8))
        try await store.storeThreadList(
            roomID: roomID, roots: roots, latest: latest,
            threads: [
                BundledThread(
                    rootEventID: "$old", count: 9, participated: false, latestEventID: "$o9", latestSender: Self.bob,
                    latestTS: 8),
                BundledThread(
                    rootEventID: "$root", count: 7, participated: false, latestEventID: "$r1", latestSender: Self.bob,
                    latestTS: 20),
            ])
        let threads = try await store.threads(roomID: roomID, ownUserID: Self.me)
        #expect(threads.map(\.rootEventID) == ["$root", "$old"])
        // $root's stored latest reply ($r2 at 30) is newer than the server's: kept, count raised.
        #expect(threads[0].replyCount == 7 && threads[0].latestEventID == "$r2" && threads[0].participated)
        #expect(threads[1].replyCount == 9 && threads[1].latestEventID == "$o9" && !threads[1].participated)
        // The fetched root and reply are stored (outside the timeline) and count once.
        #expect(try await store.sender(of: EventID("$old")) == Self.bob)
        #expect(try await store.threadRoot(of: EventID("$o9")) == "$old")
    }

    @Test("Back-pagination that meets an event fetched for a thread moves it into the timeline")
    func backfillMovesDetached() async throws {
        let store = try await makeChatStore()
        try await Self.seed(store)
        let roomID = RoomID(Self.room)
        let roots = try SyncResponseDecoder.decodeMessages(
            Array(#"{"chunk":[\#(SyncSamples.message("$old", ts: 5, sender: Self.bob))]}"#.utf8))
        try await store.storeThreadList(
            roomID: roomID, roots: roots, latest: MessagesPage(),
            threads: [
                BundledThread(
                    rootEventID: "$old", count: 1, participated: false, latestEventID: nil, latestSender: nil,
                    latestTS: 0)
            ])
        let page = try SyncResponseDecoder.decodeMessages(
            Array(
                #"{"chunk":[\#(SyncSamples.message("$old", ts: 5, sender: Self.bob)),\#(SyncSamples.message("$first", ts: 1, sender: Self.bob))],"start":"gap-1"}"#
                    .utf8))
        let result = try await store.backfill(roomID: roomID, token: PaginationToken("gap-1"), page: page)
        #expect(result?.eventIDs == [EventID("$first"), EventID("$old")])
        #expect(result?.boundary == .roomStart)
        let timeline = try await store.loadTimelinePage(roomID: Self.room, limit: 50)
        #expect(timeline.items.map(\.eventID).prefix(2) == ["$first", "$old"])
    }
}

extension ThreadStoreTests {
    @Test("A back-paginated root's bundled thread aggregation gives its count and latest reply")
    func backfillReadsBundledThread() async throws {
        let store = try await makeChatStore()
        try await Self.seed(store)
        let bundled =
            #"{"type":"m.room.message","event_id":"$old","sender":"\#(Self.bob)","origin_server_ts":5,"content":{"msgtype":"m.text","body":"old root"},"unsigned":{"m.relations":{"m.thread":{"count":12,"current_user_participated":true,"latest_event":\#(Self.reply("$o12", root: "$old", ts: 9))}}}}"#
        let page = try SyncResponseDecoder.decodeMessages(
            Array(#"{"chunk":[\#(bundled)],"start":"gap-1","end":"gap-0"}"#.utf8))
        _ = try await store.backfill(roomID: RoomID(Self.room), token: PaginationToken("gap-1"), page: page)
        let thread = try await store.thread(roomID: RoomID(Self.room), root: EventID("$old"))
        #expect(thread?.replyCount == 12 && thread?.latestEventID == "$o12" && thread?.participated == true)
        let snapshot = try await store.windowSnapshot(roomID: RoomID(Self.room), eventIDs: [EventID("$old")])
        #expect(snapshot.items.first?.thread?.replyCount == 12)
    }
}

extension ThreadStoreTests {
    static func bundledRoot(_ id: String, ts: Int64, count: Int, latest: String, participated: Bool) -> String {
        #"{"type":"m.room.message","event_id":"\#(id)","sender":"\#(bob)","origin_server_ts":\#(ts),"content":{"msgtype":"m.text","body":"root"},"unsigned":{"m.relations":{"m.thread":{"count":\#(count),"current_user_participated":\#(participated),"latest_event":\#(latest)}}}}"#
    }

    @Test("A synced root's bundled thread aggregation gives its count before its older replies are stored")
    func syncReadsBundledThread() async throws {
        let store = try await makeChatStore()
        let roomID = RoomID(Self.room)
        // The root with the server's aggregation (5 replies, the account among their senders,
        // $s5 the newest) and two of the replies: the other three are in the server's count
        // only (a server may leave replies out of the timeline it syncs).
        let latest = Self.reply("$s5", root: "$sroot", ts: 50)
        _ = try await SyncIngestor(store: store).ingest(
            Self.sync(
                "1",
                [
                    Self.bundledRoot("$sroot", ts: 10, count: 5, latest: latest, participated: true),
                    Self.reply("$s4", root: "$sroot", ts: 40), latest,
                ], limited: "gap-1"))
        var thread = try await store.thread(roomID: roomID, root: EventID("$sroot"))
        // The batch's two replies are in the server's five: counted once.
        #expect(thread?.replyCount == 5 && thread?.latestEventID == "$s5" && thread?.participated == true)
        // A reply synced later adds to it.
        _ = try await SyncIngestor(store: store).ingest(Self.sync("2", [Self.reply("$s6", root: "$sroot", ts: 60)]))
        thread = try await store.thread(roomID: roomID, root: EventID("$sroot"))
        #expect(thread?.replyCount == 6 && thread?.latestEventID == "$s6")
        // A root redelivered with an older aggregation keeps the newer stored reply.
        _ = try await SyncIngestor(store: store).ingest(
            Self.sync("3", [Self.bundledRoot("$sroot", ts: 10, count: 5, latest: latest, participated: false)]))
        thread = try await store.thread(roomID: roomID, root: EventID("$sroot"))
        #expect(thread?.replyCount == 6 && thread?.latestEventID == "$s6" && thread?.participated == true)
        let snapshot = try await store.windowSnapshot(roomID: roomID, eventIDs: [EventID("$sroot")])
        #expect(snapshot.items.first?.thread?.replyCount == 6)
    }

    @Test("Thread replies take no room in the main timeline's pages, stored or back-paginated")
    func repliesTakeNoWindowSpace() async throws {
        let store = try await makeChatStore()
        try await Self.seed(store)
        // Stored: $root, $r1, $other, $r2 in one chunk; a page of 2 is the two main items.
        let page = try await store.loadTimelinePage(roomID: Self.room, limit: 2)
        #expect(page.items.map(\.eventID) == ["$root", "$other"])
        // A /messages page with a reply between two main messages reports the messages only.
        let older = try SyncResponseDecoder.decodeMessages(
            Array(
                #"{"chunk":[\#(SyncSamples.message("$m2", ts: 8, sender: Self.bob)),\#(Self.reply("$q1", root: "$m1", ts: 7)),\#(SyncSamples.message("$m1", ts: 6, sender: Self.bob))],"start":"gap-1"}"#
                    .utf8))
        let result = try await store.backfill(roomID: RoomID(Self.room), token: PaginationToken("gap-1"), page: older)
        #expect(result?.eventIDs == [EventID("$m1"), EventID("$m2")])
        #expect(try await store.threadRoot(of: EventID("$q1")) == "$m1")
    }

    @Test("A member's newer main receipt replaces their older unthreaded one in the main rows' readers")
    func mainReceiptReplacesUnthreaded() async throws {
        let store = try await makeChatStore()
        try await Self.seed(store)
        func receipt(_ eventID: String, ts: Int64, thread: String?) -> String {
            let field = thread.map { #","thread_id":"\#($0)""# } ?? ""
            return #"{"type":"m.receipt","content":{"\#(eventID)":{"m.read":{"\#(Self.bob)":{"ts":\#(ts)\#(field)}}}}}"#
        }
        func ingest(_ batch: String, _ receipts: [String]) async throws {
            let document =
                #"{"next_batch":"\#(batch)","rooms":{"join":{"\#(Self.room)":{"ephemeral":{"events":[\#(receipts.joined(separator: ","))]}}}}}"#
            _ = try await SyncIngestor(store: store).ingest(Array(document.utf8))
        }
        let ids = ["$root", "$other", "$r1"].map(EventID.init(rawValue:))
        try await ingest("2", [receipt("$root", ts: 100, thread: nil), receipt("$r1", ts: 150, thread: "$root")])
        var readers = try await store.windowSnapshot(roomID: RoomID(Self.room), eventIDs: ids).readers
        #expect(readers["$root"] == [Self.bob] && readers["$r1"] == [Self.bob])
        try await ingest("3", [receipt("$other", ts: 200, thread: "main")])
        readers = try await store.windowSnapshot(roomID: RoomID(Self.room), eventIDs: ids).readers
        #expect(readers["$root"] == nil && readers["$other"] == [Self.bob] && readers["$r1"] == [Self.bob])
    }

    @Test(
        "The server's counts per thread (unread_thread_notifications): the room's totals add them, the list shows them")
    func serverThreadCounts() async throws {
        let store = try await makeChatStore()
        try await Self.seed(store)
        func counts(_ batch: String, main: Int, threads: String?) async throws {
            let threaded = threads.map { #","unread_thread_notifications":\#($0)"# } ?? ""
            let document =
                #"{"next_batch":"\#(batch)","rooms":{"join":{"\#(Self.room)":{"unread_notifications":{"notification_count":\#(main),"highlight_count":0}\#(threaded)}}}}"#
            _ = try await SyncIngestor(store: store).ingest(Array(document.utf8))
        }
        try await counts("2", main: 1, threads: #"{"$root":{"notification_count":2,"highlight_count":1}}"#)
        var row = try await store.loadConversationList().first { $0.roomID == Self.room }
        #expect(row?.notificationCount == 3 && row?.highlightCount == 1)
        var thread = try await store.threads(roomID: RoomID(Self.room), ownUserID: Self.me).first
        #expect(thread?.unread == .init(notifications: 2, highlights: 1))
        // The next counts leave the thread out: it has no unread event any more.
        try await counts("3", main: 1, threads: nil)
        row = try await store.loadConversationList().first { $0.roomID == Self.room }
        #expect(row?.notificationCount == 1 && row?.highlightCount == 0)
        thread = try await store.threads(roomID: RoomID(Self.room), ownUserID: Self.me).first
        #expect(thread?.unread == .init(notifications: 0, highlights: 0))
    }
}
