import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import Testing

/// Opens an empty in-memory chat store.
func makeChatStore() async throws -> ChatStore {
    try await ChatStore.open(path: ":memory:")
}

/// Counts the rows of `table`.
func count(_ table: String, in store: ChatStore, where condition: String = "1") async throws -> Int {
    try await store.databaseForTesting.queryOne("SELECT COUNT(*) FROM \(table) WHERE \(condition)") { $0.int(0) } ?? 0
}

@Suite("Sync ingest")
struct SyncIngestorTests {
    @Test("A response is stored whole: rooms, state, timeline, receipts, account data, device data, token")
    func writesEverything() async throws {
        let store = try await makeChatStore()
        let handed = Lock<[SyncDeviceInbox]>([])
        let ingestor = SyncIngestor(store: store, inbox: { inbox, _ in handed.withLock { $0.append(inbox) } })
        let report = try await ingestor.ingest(SyncSamples.specBytes)
        #expect(report.rooms == 2 && report.timelineEvents == 8 && report.stateEvents == 5)
        #expect(report.redactionsApplied == 1 && report.gapsCreated == 1 && report.nextBatch == "s72595_4483_1934")
        #expect(try await store.sinceToken() == "s72595_4483_1934")
        #expect(try await count("rooms", in: store) == 2)
        #expect(try await count("room_state", in: store) == 5)
        #expect(try await count("events", in: store) == 8)
        #expect(try await count("receipts", in: store) == 2)
        #expect(try await count("receipts", in: store, where: "thread_id = 'main'") == 1)
        #expect(try await count("account_data", in: store) == 2)
        // Encryption's share went to the crypto module's inbox, not to chat's tables.
        let inbox = try #require(handed.withLock { $0 }.first)
        #expect(handed.withLock { $0.count } == 1)
        #expect(inbox.toDevice.map(\.type) == ["m.new_device"] && inbox.toDevice[0].sender == "@alice:example.com")
        #expect(inbox.deviceListsChanged.count + inbox.deviceListsLeft.count == 2)
        #expect(inbox.oneTimeKeyCounts == ["signed_curve25519": 20])
    }

    @Test("The crypto inbox is written in the sync's transaction: when it fails, nothing is stored and the token stays")
    func inboxInTheTransaction() async throws {
        let store = try await makeChatStore()
        let ingestor = SyncIngestor(store: store, inbox: { _, _ throws(StoreError) in throw StoreError.full })
        await #expect(throws: ChatStoreError.store(.full)) { try await ingestor.ingest(SyncSamples.specBytes) }
        #expect(try await store.sinceToken() == nil)
        #expect(try await count("rooms", in: store) == 0)
        // Without an inbox (no encryption on the account) the share is dropped, the rest stored.
        _ = try await SyncIngestor(store: store).ingest(SyncSamples.specBytes)
        #expect(try await store.sinceToken() == "s72595_4483_1934")
    }

    @Test("The conversation list carries the summary: heroes, counts, tags, encryption, preview")
    func conversationList() async throws {
        let store = try await makeChatStore()
        _ = try await SyncIngestor(store: store).ingest(SyncSamples.specBytes)
        let list = try await store.loadConversationList()
        #expect(list.map(\.roomID) == [SyncSamples.roomID, "!696r7674:example.com"])
        let room = list[0]
        #expect(room.membership == .joined && room.isEncrypted)
        #expect(
            room.heroes == [
                RoomHero(userID: "@alice:example.com", displayName: "Alïce 😀"),
                RoomHero(userID: "@bob:example.com", displayName: nil),
            ])
        // An encrypted room shows the device's counts (none evaluated here), never the server's
        // 5 and 1: the server cannot read its messages.
        #expect(room.joinedMemberCount == 2 && room.notificationCount == 0 && room.highlightCount == 0)
        #expect(
            try await store.databaseForTesting.queryOne(
                "SELECT notification_count, highlight_count FROM rooms WHERE room_id = ?", [.text(SyncSamples.roomID)]
            ) { [$0.int(0), $0.int(1)] } == [5, 1])
        #expect(room.isFavourite && room.isPinned && !room.isLowPriority && !room.isMuted)
        #expect(room.latestActivityTS == 1_432_735_824_667)
        #expect(room.preview?.eventID == "$e8" && room.preview?.body == "mine")
        #expect(!"\(room)".contains("mine") && !"\(room.preview!)".contains("mine"))
        let invite = list[1]
        #expect(invite.membership == .invited && invite.name == "My Room Name" && invite.preview == nil)
    }

    @Test("Direct chats in the list: rooms m.direct names (malformed entries ignored), and invites marked is_direct")
    func directChatsInTheList() async throws {
        let store = try await makeChatStore()
        let document = Array(
            #"""
            {"next_batch": "d1",
             "account_data": {"events": [{"type": "m.direct", "content": {
                "@alice:x": ["!dm:x", 7, {"no": "room"}], "@bob:x": "!notalist:x", "@carol:x": []}}]},
             "rooms": {
               "join": {
                 "!dm:x": {"timeline": {"events": [\#(SyncSamples.message("$a"))]}},
                 "!group:x": {"timeline": {"events": [\#(SyncSamples.message("$b"))]}},
                 "!notalist:x": {"timeline": {"events": [\#(SyncSamples.message("$c"))]}}
               },
               "invite": {
                 "!dminvite:x": {"invite_state": {"events": [
                   {"type": "m.room.member", "state_key": "@me:x", "sender": "@alice:x", "content": {"membership": "invite", "is_direct": true}}]}},
                 "!invite:x": {"invite_state": {"events": [
                   {"type": "m.room.member", "state_key": "@me:x", "sender": "@alice:x", "content": {"membership": "invite"}}]}}
               }
             }}
            """#.utf8)
        _ = try await SyncIngestor(store: store).ingest(document)
        let list = try await store.loadConversationList()
        let direct = Set(list.filter(\.isDirect).map(\.roomID))
        #expect(direct == ["!dm:x", "!dminvite:x"])
        #expect(list.count == 5)
        #expect(try await store.directInviter(roomID: RoomID("!dminvite:x"), userID: "@me:x") == "@alice:x")
        #expect(try await store.directInviter(roomID: RoomID("!invite:x"), userID: "@me:x") == nil)
        #expect(try await store.directInviter(roomID: RoomID("!dminvite:x"), userID: "@other:x") == nil)
    }

    @Test("A failure in the middle of the transaction writes nothing and keeps the token")
    func atomicFailure() async throws {
        let store = try await makeChatStore()
        _ = try await SyncIngestor(store: store).ingest(
            SyncSamples.response(nextBatch: "first", events: [SyncSamples.message("$a")]))
        try await store.databaseForTesting.executeScript(
            "CREATE TRIGGER poison BEFORE INSERT ON events WHEN NEW.event_id = '$poison' BEGIN SELECT RAISE(ABORT, 'injected'); END;"
        )
        let rooms = (0..<40).map { index in
            #""!r\#(index):x":{"timeline":{"events":[\#(SyncSamples.message("$r\(index)"))]}}"#
        }
        let poisoned = #""!z:x":{"timeline":{"events":[\#(SyncSamples.message("$poison"))]}}"#
        let document = Array(
            #"{"next_batch":"second","rooms":{"join":{\#((rooms + [poisoned]).joined(separator: ","))}}}"#.utf8)
        let ingestor = SyncIngestor(store: store)
        await #expect(throws: ChatStoreError.self) { try await ingestor.ingest(document) }
        #expect(try await store.sinceToken() == "first")
        #expect(try await count("rooms", in: store) == 1)
        #expect(try await count("events", in: store) == 1)
    }

    @Test("A document malformed after its rooms writes none of them")
    func malformedTail() async throws {
        let store = try await makeChatStore()
        var document = SyncResponseGenerator(.init(rooms: 30, eventsPerRoom: 5, membersPerRoom: 3)).generate()
        document.removeLast(2)
        let ingestor = SyncIngestor(store: store)
        await #expect(throws: ChatStoreError.malformedResponse(.syntax(offset: document.count))) {
            try await ingestor.ingest(document)
        }
        #expect(try await store.sinceToken() == nil)
        #expect(try await count("rooms", in: store) == 0)
        #expect(try await count("events", in: store) == 0)
    }

    @Test("Malformed events are kept for diagnosis and counted, never fatal")
    func malformedKept() async throws {
        let store = try await makeChatStore()
        let bad = #"{"type":"m.room.message","sender":"@a:x","origin_server_ts":1,"content":{}}"#
        let report = try await SyncIngestor(store: store).ingest(
            SyncSamples.response(nextBatch: "n", events: [SyncSamples.message("$a"), bad]))
        #expect(report.malformedEvents == 1 && report.timelineEvents == 1)
        #expect(try await store.malformedEventCount() == 1)
        let raw = try await store.databaseForTesting.queryOne("SELECT raw, reason FROM malformed_events") {
            (String(decoding: $0.blob(0), as: UTF8.self), $0.string(1))
        }
        #expect(raw?.0 == bad && raw?.1 == "missing event_id")
    }

    @Test("A limited timeline opens a gap carrying prev_batch; a continuous one appends to the live chunk")
    func gaps() async throws {
        let store = try await makeChatStore()
        let ingestor = SyncIngestor(store: store)
        _ = try await ingestor.ingest(SyncSamples.response(nextBatch: "1", events: [SyncSamples.message("$a")]))
        _ = try await ingestor.ingest(SyncSamples.response(nextBatch: "2", events: [SyncSamples.message("$b")]))
        _ = try await ingestor.ingest(
            SyncSamples.response(
                nextBatch: "3", events: [SyncSamples.message("$c")], limited: true, prevBatch: "gap-token"))
        #expect(try await count("timeline_chunks", in: store) == 3)
        #expect(try await count("timeline_gaps", in: store, where: "prev_batch = 'gap-token'") == 1)

        let newest = try await store.loadTimelinePage(roomID: SyncSamples.roomID, limit: 10)
        #expect(newest.items.map(\.eventID) == ["$c"])
        guard case .gap(let token, let gapChunk) = newest.boundary else {
            Issue.record("expected a gap, got \(newest.boundary)")
            return
        }
        #expect(token == "gap-token")
        let chunkOrder = try await store.databaseForTesting.queryAll(
            "SELECT chunk_id, prev_chunk_id, next_chunk_id FROM timeline_chunks ORDER BY chunk_id"
        ) {
            [$0.optionalInt64(0), $0.optionalInt64(1), $0.optionalInt64(2)]
        }
        #expect(chunkOrder == [[1, nil, 2], [2, 1, 3], [3, 2, nil]])
        #expect(gapChunk == 2)
        let older = try await store.loadTimelinePage(
            roomID: SyncSamples.roomID, before: TimelinePosition(chunkID: 1, position: .max), limit: 10)
        #expect(older.items.map(\.eventID) == ["$a", "$b"] && older.boundary == .roomStart)
    }

    @Test(
        "A limited timeline that reaches back to the newest stored event continues the live chunk: no gap, nothing reordered"
    )
    func limitedOverlapOpensNoGap() async throws {
        let store = try await makeChatStore()
        let ingestor = SyncIngestor(store: store)
        _ = try await ingestor.ingest(
            SyncSamples.response(nextBatch: "1", events: [SyncSamples.message("$a"), SyncSamples.message("$b")]))
        // After a gap, the live chunk holds $d only; $c lies behind that gap.
        _ = try await ingestor.ingest(
            SyncSamples.response(nextBatch: "2", events: [SyncSamples.message("$d")], limited: true, prevBatch: "g1"))
        #expect(try await count("timeline_gaps", in: store) == 1)
        // A new sliding sync connection sends the room again, limited, from $c: it contains $d.
        let report = try await ingestor.ingest(
            SyncSamples.response(
                nextBatch: "3",
                events: [SyncSamples.message("$c"), SyncSamples.message("$d"), SyncSamples.message("$e")],
                limited: true, prevBatch: "g2"))
        #expect(report.gapsCreated == 0)
        #expect(report.continuedTimelines == [SyncSamples.roomID: 2])
        #expect(report.timelineEvents == 1, "only $e is new here; $c stays behind the older gap")
        #expect(try await count("timeline_gaps", in: store) == 1)
        #expect(try await count("timeline_chunks", in: store) == 3)
        let newest = try await store.loadTimelinePage(roomID: SyncSamples.roomID, limit: 10)
        #expect(newest.items.map(\.eventID) == ["$d", "$e"])
        guard case .gap(let token, _) = newest.boundary else {
            Issue.record("expected the older gap, got \(newest.boundary)")
            return
        }
        #expect(token == "g1")

        // One that does not reach back to $e still opens a gap.
        let apart = try await ingestor.ingest(
            SyncSamples.response(
                nextBatch: "4", events: [SyncSamples.message("$g")], limited: true, prevBatch: "g3"))
        #expect(apart.gapsCreated == 1)
    }

    @Test("A repeated event is stored once")
    func duplicates() async throws {
        let store = try await makeChatStore()
        let ingestor = SyncIngestor(store: store)
        _ = try await ingestor.ingest(SyncSamples.response(nextBatch: "1", events: [SyncSamples.message("$a")]))
        let report = try await ingestor.ingest(
            SyncSamples.response(nextBatch: "2", events: [SyncSamples.message("$a"), SyncSamples.message("$b")]))
        #expect(report.timelineEvents == 1)
        let page = try await store.loadTimelinePage(roomID: SyncSamples.roomID)
        #expect(page.items.map(\.eventID) == ["$a", "$b"])
    }

    @Test("Relations are indexed, and a timeline page applies edits, reactions, replies, threads and redactions")
    func relations() async throws {
        let store = try await makeChatStore()
        _ = try await SyncIngestor(store: store).ingest(SyncSamples.specBytes)
        #expect(
            try await count("events", in: store, where: "relates_to_event_id = '$e1' AND rel_type = 'm.replace'") == 1)
        #expect(try await count("events", in: store, where: "relates_to_event_id = '$e1' AND relation_key = '👍'") == 1)
        #expect(try await count("events", in: store, where: "in_reply_to = '$e1'") == 2)
        #expect(try await count("events", in: store, where: "txn_id = 'txn-1'") == 1)

        let page = try await store.loadTimelinePage(roomID: SyncSamples.roomID)
        // $e5 is a thread reply: its thread's item, not the main timeline's.
        #expect(page.items.map(\.eventID) == ["$e1", "$e2", "$e6", "$e8"])
        let first = page.items[0]
        #expect(first.replacedBy == "$e3")
        #expect(String(decoding: first.content, as: UTF8.self) == #"{"msgtype": "m.text", "body": "Hello edited"}"#)
        #expect(first.reactions == [ReactionGroup(key: "👍", senders: ["@bob:example.com"])])
        #expect(page.items[1].inReplyTo == "$e1")
        let reply = try await store.windowSnapshot(roomID: RoomID(SyncSamples.roomID), eventIDs: [EventID("$e5")])
        #expect(reply.items.first?.threadRootID == "$e1")
        let redacted = page.items[2]
        #expect(redacted.redactedBy == "$e7" && redacted.content == Array("{}".utf8))
        #expect(page.items[3].transactionID == "txn-1")
        #expect(!"\(first)".contains("Hello"))
    }

    @Test("A redaction that arrives before its target still applies when the timeline is read")
    func lateRedaction() async throws {
        let store = try await makeChatStore()
        let redaction =
            #"{"type":"m.room.redaction","event_id":"$r","sender":"@a:x","origin_server_ts":5,"content":{"redacts":"$later"}}"#
        let ingestor = SyncIngestor(store: store)
        _ = try await ingestor.ingest(SyncSamples.response(nextBatch: "1", events: [redaction]))
        _ = try await ingestor.ingest(SyncSamples.response(nextBatch: "2", events: [SyncSamples.message("$later")]))
        let page = try await store.loadTimelinePage(roomID: SyncSamples.roomID)
        #expect(page.items.map(\.eventID) == ["$later"])
        #expect(page.items[0].redactedBy == "$r" && page.items[0].content == Array("{}".utf8))
    }

    @Test("The remote echo of a queued message removes it from the send queue in the same transaction")
    func remoteEcho() async throws {
        let store = try await makeChatStore()
        _ = try await store.enqueueMessage(
            roomID: SyncSamples.roomID, transactionID: "txn-1", eventType: "m.room.message",
            content: Array(#"{"body":"mine"}"#.utf8), createdAt: 1)
        #expect(try await store.queuedMessages().count == 1)
        _ = try await SyncIngestor(store: store).ingest(SyncSamples.specBytes)
        #expect(try await store.queuedMessages().isEmpty)
    }

    @Test("A queued message is committed with synchronous=FULL, all parts in one transaction; sync stays NORMAL")
    func durableSendQueue() async throws {
        let store = try await makeChatStore()
        let commits = Lock<[[Int]]>([])
        await store.databaseForTesting.setCommitProbe { db, synchronous in
            let rows = (try? db.queryOne("SELECT COUNT(*) FROM send_queue") { $0.int(0) }) ?? nil
            commits.withLock { $0.append([synchronous, rows ?? -1]) }
        }
        let parts = (1...3).map {
            QueuedMessageDraft(transactionID: "txn-\($0)", eventType: "m.room.message", content: [])
        }
        _ = try await store.enqueueMessages(roomID: SyncSamples.roomID, parts, createdAt: 1)
        _ = try await store.enqueueMessage(
            roomID: SyncSamples.roomID, transactionID: "txn-4", eventType: "m.room.message", content: [], createdAt: 2)
        _ = try await SyncIngestor(store: store).ingest(SyncSamples.response(nextBatch: "n", events: []))
        #expect(commits.withLock { $0 } == [[2, 3], [2, 4], [1, 4]])
        #expect(try await store.queuedMessages().map(\.position) == [0, 1, 2, 3])
    }

    @Test("The preview follows the last message, its edits by its sender, and its redaction")
    func previewUpdates() async throws {
        let store = try await makeChatStore()
        let ingestor = SyncIngestor(store: store)
        let edit = { (sender: String, body: String) in
            #"{"type":"m.room.message","event_id":"$edit-\#(body)","sender":"\#(sender)","origin_server_ts":9,"content":{"body":"* x","m.new_content":{"body":"\#(body)"},"m.relates_to":{"rel_type":"m.replace","event_id":"$p"}}}"#
        }
        _ = try await ingestor.ingest(
            SyncSamples.response(nextBatch: "1", events: [SyncSamples.message("$p", body: "before")]))
        #expect(try await store.loadConversationList().first?.preview?.body == "before")
        _ = try await ingestor.ingest(
            SyncSamples.response(
                nextBatch: "2", events: [edit("@alice:example.com", "after"), edit("@mallory:x", "forged")]))
        let edited = try await store.loadConversationList().first?.preview
        #expect(edited?.eventID == "$p" && edited?.body == "after" && edited?.type == "m.room.message")
        let redaction =
            #"{"type":"m.room.redaction","event_id":"$r","sender":"@alice:example.com","origin_server_ts":10,"redacts":"$p","content":{}}"#
        _ = try await ingestor.ingest(SyncSamples.response(nextBatch: "3", events: [redaction]))
        let redacted = try await store.loadConversationList().first?.preview
        #expect(redacted?.eventID == "$p" && redacted?.isRedacted == true && redacted?.body == nil)
    }

    @Test("Push rules that silence a room mark it muted")
    func muted() async throws {
        let store = try await makeChatStore()
        let bytes = SyncResponseGenerator(.init(rooms: 40, eventsPerRoom: 2, membersPerRoom: 3)).generate()
        _ = try await SyncIngestor(store: store).ingest(bytes)
        let muted = try await store.loadConversationList().filter(\.isMuted).map(\.roomID).sorted()
        #expect(muted == [3, 20, 37].map { SyncResponseGenerator.roomID($0) }.sorted())
    }

    @Test("Later push rules re-mark the stored rooms and the response's own; a response without them changes no flag")
    func mutedLater() async throws {
        let store = try await makeChatStore()
        let ingestor = SyncIngestor(store: store)
        let rooms = ["!a:example.com", "!b:example.com", "!c:example.com"]
        func response(_ batch: String, rooms: [String], silenced: [String]?) -> [UInt8] {
            var text = #"{"next_batch":"\#(batch)","#
            if let silenced {
                let rules = silenced.map { #"{"rule_id":"\#($0)","actions":["dont_notify"],"enabled":true}"# }
                text += #""account_data":{"events":[{"type":"m.push_rules","content":{"global":{"room":["#
                text += rules.joined(separator: ",") + "]}}}]},"
            }
            text += #""rooms":{"join":{"#
            text += rooms.map { #""\#($0)":{"timeline":{"events":[],"limited":false}}"# }.joined(separator: ",")
            return Array((text + "}}}").utf8)
        }
        func muted() async throws -> [String] {
            try await store.loadConversationList().filter(\.isMuted).map(\.roomID).sorted()
        }
        _ = try await ingestor.ingest(response("1", rooms: rooms, silenced: ["!a:example.com", "!b:example.com"]))
        #expect(try await muted() == ["!a:example.com", "!b:example.com"])
        // Rules naming a room the response does not carry, and one it carries.
        _ = try await ingestor.ingest(
            response("2", rooms: ["!c:example.com"], silenced: ["!b:example.com", "!c:example.com"]))
        #expect(try await muted() == ["!b:example.com", "!c:example.com"])
        // A new room and a stored one, without rules: no flag moves.
        _ = try await ingestor.ingest(response("3", rooms: ["!b:example.com", "!d:example.com"], silenced: nil))
        #expect(try await muted() == ["!b:example.com", "!c:example.com"])
        // Rules for a room first seen in the same response.
        _ = try await ingestor.ingest(response("4", rooms: ["!e:example.com"], silenced: ["!e:example.com"]))
        #expect(try await muted() == ["!e:example.com"])
    }
}
