import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import Testing

@testable import SymorvaChat
@testable import SymorvaChatStore

/// The device counts only the events it stores: a limited timeline (sliding sync's list sends
/// one event per room, so a second message arriving between two responses is left out) opens a
/// gap whose events must be fetched before the batch is counted, or they never count. These
/// tests play the sync's commit (`syncCommitted`) with responses written by the ingestor and
/// `/messages` answered by the script; the room's counts are the device's (it is encrypted, or
/// the account counts every room).
@Suite("Device counts: the events a limited timeline left out are fetched and counted")
struct DeviceCountGapTests {
    let fixture = ConversationEncryptionTests()
    var roomID: RoomID { ConversationEncryptionTests.roomID }
    static let messagesPath = "/_matrix/client/v3/rooms/!vault:example.org/messages"

    /// Bob's text message.
    static func text(_ id: String, ts: Int, body: String) -> String {
        #"{"type": "m.room.message", "event_id": "\#(id)", "sender": "@bob:example.org", "origin_server_ts": \#(ts), "content": {"msgtype": "m.text", "body": "\#(body)"}}"#
    }

    /// Bob's encrypted text message (the fixture's crypto reads it).
    static func encrypted(_ id: String, ts: Int, body: String) -> String {
        let ciphertext = Data(FlippingRoomCrypto.flipped(Array(#"{"msgtype":"m.text","body":"\#(body)"}"#.utf8)))
            .base64EncodedString()
        return
            #"{"type": "m.room.encrypted", "event_id": "\#(id)", "sender": "@bob:example.org", "origin_server_ts": \#(ts), "content": {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "\#(ciphertext)"}}"#
    }

    /// A `/sync` batch for the room, `limited` from `prevBatch` when given.
    static func sync(_ batch: String, _ events: [String], receipts: String? = nil, limitedFrom prevBatch: String? = nil)
        -> [UInt8]
    {
        ConversationReactionTests.sync(
            batch, events, receipts: receipts, limitedFrom: prevBatch, room: ConversationEncryptionTests.roomID)
    }

    /// My `main` read receipt on `eventID`, sent at `ts`.
    static func receipt(_ eventID: String, ts: Int = 1) -> String {
        #"{"type": "m.receipt", "content": {"\#(eventID)": {"m.read": {"@me:example.org": {"ts": \#(ts), "thread_id": "main"}}}}}"#
    }

    /// `/messages?dir=b` pages by `from` token: newest first, with `end` when older events remain.
    func answerMessages(_ pages: [String: (events: [String], end: String?)]) {
        fixture.transport.on("GET", Self.messagesPath) { request in
            let from =
                URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems?
                .first { $0.name == "from" }?.value ?? ""
            guard let page = pages[from] else { return .json(400, #"{"errcode": "M_UNKNOWN"}"#) }
            let end = page.end.map { #", "end": "\#($0)""# } ?? ""
            return .json(200, #"{"chunk": [\#(page.events.joined(separator: ", "))], "start": "\#(from)"\#(end)}"#)
        }
    }

    /// Writes `body` and plays its commit, as the sync loop does.
    func commit(_ body: [UInt8], store: ChatStore, chat: AccountChat) async throws {
        let decoded = try SyncResponseDecoder.decode(body)
        let report = try await SyncIngestor(store: store).ingest(decoded)
        await chat.syncCommitted(SyncChanges(decoded, continued: report.continuedTimelines))
    }

    /// The room with its full state (me and Bob joined) and Bob's first message, counted.
    func room(encrypted: Bool, everyRoom: Bool) async throws -> (ChatStore, AccountChat) {
        let store = try await fixture.store(fullState: true, encrypted: encrypted)
        let chat = fixture.chat(on: store)
        chat.countOnDeviceInEveryRoom(everyRoom)
        let first = encrypted ? Self.encrypted("$1", ts: 10, body: "hello") : Self.text("$1", ts: 10, body: "hello")
        try await commit(
            Self.sync(
                "b2", [ConversationReactionTests.member("@bob:example.org", id: "$join-bob"), first]),
            store: store, chat: chat)
        return (store, chat)
    }

    @Test("A plain message left out of a limited timeline is fetched and counted, with its highlight")
    func plainGapCounted() async throws {
        let (store, chat) = try await room(encrypted: false, everyRoom: true)
        #expect(try await chat.deviceCounts(roomID: roomID).notifications == 1)
        // $2 (it names me: a highlight) came between two responses; the second carries $3 only.
        answerMessages([
            "gap-1": ([Self.text("$2", ts: 20, body: "ping me"), Self.text("$1", ts: 10, body: "hello")], "t0")
        ])
        try await commit(
            Self.sync("b3", [Self.text("$3", ts: 30, body: "three")], limitedFrom: "gap-1"),
            store: store, chat: chat)
        let counts = try await chat.deviceCounts(roomID: roomID)
        #expect(counts.notifications == 3 && counts.highlights == 1, "\(counts)")
        #expect(try await chat.hasStored(EventID("$2")))
        #expect(fixture.transport.count("GET", Self.messagesPath) == 1)
        // The gap is closed: the timeline reads back to the first message without the server.
        let page = try await store.loadTimelinePage(roomID: roomID.rawValue, before: nil, limit: 10)
        #expect(page.items.map(\.eventID).suffix(3) == ["$1", "$2", "$3"])
    }

    @Test("A thread reply left out of a limited timeline is fetched, counted, and shown by its observed thread")
    func threadReplyInGapReachesItsThread() async throws {
        let (store, chat) = try await room(encrypted: false, everyRoom: true)
        let thread = try await chat.conversation(id: roomID).thread(EventID("$1"))
        let observer = thread.timeline.subscribe { _ in }
        defer { observer() }
        try await thread.timeline.wait(until: { $0.contains { $0.eventID == EventID("$1") } })
        // Bob's reply in the thread of $1 came between two responses; the second carries $3 only.
        let reply =
            #"{"type": "m.room.message", "event_id": "$r", "sender": "@bob:example.org", "origin_server_ts": 20, "content": {"msgtype": "m.text", "body": "in the thread", "m.relates_to": {"rel_type": "m.thread", "event_id": "$1"}}}"#
        answerMessages(["gap-1": ([reply, Self.text("$1", ts: 10, body: "hello")], "t0")])
        try await commit(
            Self.sync("b3", [Self.text("$3", ts: 30, body: "three")], limitedFrom: "gap-1"), store: store, chat: chat)
        #expect(try await chat.hasStored(EventID("$r")))
        #expect(try await chat.deviceCounts(roomID: roomID).notifications == 3)
        try await thread.timeline.wait(until: { $0.contains { $0.eventID == EventID("$r") } })
    }

    @Test("A message left out before my receipt on a later one is fetched and not counted")
    func gapBeforeReceiptRead() async throws {
        let (store, chat) = try await room(encrypted: false, everyRoom: true)
        answerMessages(["gap-1": ([Self.text("$2", ts: 20, body: "ping me")], nil)])
        try await commit(
            Self.sync(
                "b3", [Self.text("$3", ts: 30, body: "three"), Self.text("$4", ts: 40, body: "me again")],
                receipts: Self.receipt("$3"), limitedFrom: "gap-1"),
            store: store, chat: chat)
        let counts = try await chat.deviceCounts(roomID: roomID)
        #expect(counts.notifications == 1 && counts.highlights == 1, "only $4 is unread: \(counts)")
        #expect(try await chat.hasStored(EventID("$2")))
    }

    @Test(
        "Encrypted messages left out are fetched, decrypted when their key arrives, and counted unless a receipt read them",
        arguments: [false, true])
    func encryptedGapCounted(keyFirst: Bool) async throws {
        fixture.crypto.hasKey.withLock { $0 = keyFirst }
        let (store, chat) = try await room(encrypted: true, everyRoom: false)
        if keyFirst {
            try await chat.conversations.wait { $0[roomID]?.unreadCount == 1 }
        }
        // $2 and $3 are left out, newest page first, over two pages; $2 names me; my receipt is
        // on $2 (sent at 25, before $3), so $2 is read, $3 and $4 are not ($4 names me).
        answerMessages([
            "gap-1": ([Self.encrypted("$3", ts: 30, body: "three")], "gap-2"),
            "gap-2": (
                [Self.encrypted("$2", ts: 20, body: "ping me"), Self.encrypted("$1", ts: 10, body: "hello")], "t0"
            ),
        ])
        try await commit(
            Self.sync(
                "b3", [Self.encrypted("$4", ts: 40, body: "me again")], receipts: Self.receipt("$2", ts: 25),
                limitedFrom: "gap-1"),
            store: store, chat: chat)
        #expect(fixture.transport.count("GET", Self.messagesPath) == 2)
        if !keyFirst {
            fixture.crypto.hasKey.withLock { $0 = true }
            chat.roomKeysArrived()
        }
        // The list shows the device's counts of an encrypted room.
        try await chat.conversations.wait {
            $0[roomID]?.unreadCount == 2 && $0[roomID]?.highlightCount == 1
        }
        let counts = try await chat.deviceCounts(roomID: roomID)
        #expect(counts.notifications == 2 && counts.highlights == 1, "\(counts)")
    }

    @Test("A room's first timeline is not filled: what precedes it is not counted")
    func firstTimelineNotFilled() async throws {
        let store = try await ChatStore.open(path: ":memory:")
        let chat = fixture.chat(on: store)
        chat.countOnDeviceInEveryRoom(true)
        answerMessages([:])
        try await commit(
            Self.sync(
                "b1",
                [
                    ConversationReactionTests.member("@me:example.org", id: "$join-me"),
                    Self.text("$3", ts: 30, body: "three"),
                ], limitedFrom: "gap-0"),
            store: store, chat: chat)
        #expect(fixture.transport.count("GET", Self.messagesPath) == 0)
        #expect(try await chat.deviceCounts(roomID: roomID).notifications == 1)
    }

    @Test("A gap is filled with a bounded number of pages; a failed page leaves the rest of the gap")
    func boundedAndFailing() async throws {
        let (store, chat) = try await room(encrypted: false, everyRoom: true)
        // Every page has one more message and more before it: the fill stops after its pages.
        var pages: [String: (events: [String], end: String?)] = [:]
        for index in 0..<(AccountChat.countedGapPages + 2) {
            pages["gap-\(index)"] = ([Self.text("$g\(index)", ts: 100 - index, body: "older")], "gap-\(index + 1)")
        }
        answerMessages(pages)
        try await commit(
            Self.sync("b3", [Self.text("$new", ts: 200, body: "new")], limitedFrom: "gap-0"),
            store: store, chat: chat)
        #expect(fixture.transport.count("GET", Self.messagesPath) == AccountChat.countedGapPages)
        #expect(
            try await chat.deviceCounts(roomID: roomID).notifications == 2 + AccountChat.countedGapPages)
        // The rest of the gap is still there for the timeline to page.
        let remaining = "gap-\(AccountChat.countedGapPages)"
        #expect(
            try await store.databaseForTesting.queryOne(
                "SELECT COUNT(*) FROM timeline_gaps WHERE prev_batch = ?", [.text(remaining)]
            ) { $0.int(0) } == 1)

        // The server fails: the batch is counted as before, its gap kept.
        answerMessages([:])
        try await commit(
            Self.sync("b4", [Self.text("$newer", ts: 300, body: "newer")], limitedFrom: "gap-x"),
            store: store, chat: chat)
        #expect(
            try await chat.deviceCounts(roomID: roomID).notifications == 3 + AccountChat.countedGapPages)
        #expect(
            try await store.databaseForTesting.queryOne(
                "SELECT COUNT(*) FROM timeline_gaps WHERE prev_batch = 'gap-x'"
            ) { $0.int(0) } == 1)
    }

    @Test("The gaps of many rooms are filled a few rooms at a time, not one after another, and every one is counted")
    func manyRoomsAtOnce() async throws {
        let store = try await ChatStore.open(path: ":memory:")
        let chat = fixture.chat(on: store)
        chat.countOnDeviceInEveryRoom(true)
        let rooms = (1...(AccountChat.countedGapRoomsAtOnce * 2 + 1)).map { "!r\($0):example.org" }
        try await fillGaps(of: rooms, store: store, chat: chat)
        for room in rooms {
            #expect(try await chat.hasStored(EventID("$left-\(room)")))
            #expect(try await chat.deviceCounts(roomID: RoomID(room)).notifications == 3, "\(room)")
        }
    }

    @Test(
        "A batch fills the gaps of a bounded number of rooms, the most recently active first; the others keep their gap"
    )
    func roomsPerBatchBounded() async throws {
        let store = try await ChatStore.open(path: ":memory:")
        let chat = fixture.chat(on: store)
        chat.countOnDeviceInEveryRoom(true)
        let rooms = (1...(AccountChat.countedGapRoomsPerBatch + 2)).map { "!r\($0):example.org" }
        // The response names the least recently active rooms first: those are the ones left.
        try await fillGaps(of: rooms, store: store, chat: chat) { position in 30 + position }
        let messages = fixture.transport.requests.filter { $0.url.path.hasSuffix("/messages") }
        #expect(messages.count == AccountChat.countedGapRoomsPerBatch)
        for (position, room) in rooms.enumerated() {
            let filled = position >= rooms.count - AccountChat.countedGapRoomsPerBatch
            #expect(try await chat.hasStored(EventID("$left-\(room)")) == filled, "\(room)")
            #expect(try await chat.deviceCounts(roomID: RoomID(room)).notifications == (filled ? 3 : 2), "\(room)")
        }
    }

    /// Stores `rooms` with one message each, then commits a batch that leaves one message out of
    /// every room (the last message of the room at `position` sent at `lastSent(position)`),
    /// its `/messages` held at a gate until as many rooms as may be filled at once (or all of
    /// them) ask; checks that no more asked at once.
    func fillGaps(
        of rooms: [String], store: ChatStore, chat: AccountChat, lastSent: (_ position: Int) -> Int = { _ in 30 }
    ) async throws {
        /// A `/sync` batch with `events(room)` in every room, limited when `gap` is set.
        func batch(_ name: String, gap: Bool, _ events: (String) -> [String]) -> [UInt8] {
            let joined = rooms.map { room in
                let limited = gap ? #""limited": true, "prev_batch": "gap-\#(room)""# : #""limited": false"#
                return #""\#(room)": {"timeline": {"events": [\#(events(room).joined(separator: ", "))], \#(limited)}}"#
            }
            return Array(#"{"next_batch": "\#(name)", "rooms": {"join": {\#(joined.joined(separator: ", "))}}}"#.utf8)
        }
        try await commit(
            batch("b1", gap: false) { _ in [ConversationReactionTests.member("@me:example.org", id: "$join-me")] },
            store: store, chat: chat)
        try await commit(
            batch("b2", gap: false) { [Self.text("$first-\($0)", ts: 10, body: "hello")] }, store: store, chat: chat)
        // Every room's next response leaves one message out; its /messages waits at the gate.
        let gate = TestGate()
        let concurrency = Lock((now: 0, most: 0))
        fixture.transport.on(
            "GET", pathPrefix: "/_matrix/client/v3/rooms/",
            { request in
                concurrency.withLock {
                    $0.now += 1
                    $0.most = max($0.most, $0.now)
                }
                await gate.wait()
                concurrency.withLock { $0.now -= 1 }
                let room = request.url.path.split(separator: "/")[4]
                return .json(
                    200, #"{"chunk": [\#(Self.text("$left-\(room)", ts: 20, body: "left out"))], "start": "s"}"#)
            })
        let last = batch("b3", gap: true) {
            [Self.text("$last-\($0)", ts: lastSent(rooms.firstIndex(of: $0)!), body: "last")]
        }
        async let committed: Void = commit(last, store: store, chat: chat)
        // As many rooms as allowed are fetched together (the first ones ask at once), never more.
        try await gate.waitForWaiters(count: AccountChat.countedGapRoomsAtOnce)
        gate.open()
        try await committed
        #expect(concurrency.withLock { $0.most } == AccountChat.countedGapRoomsAtOnce)
    }
}
