import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import Testing

@testable import SymorvaChat
@testable import SymorvaChatStore
@testable import SymorvaMatrix

/// Fills `database` to its page limit (`PRAGMA max_page_count`), then frees `spare` pages, so
/// that a write needing more than `spare` new pages fails with `SQLITE_FULL`.
func fillUp(_ database: SQLiteDatabase, leaving spare: Int = 0) async throws {
    try await database.executeScript("CREATE TABLE IF NOT EXISTS filler(x BLOB)")
    let pages = try await database.queryOne("PRAGMA page_count") { $0.int(0) } ?? 0
    try await database.executeScript("PRAGMA max_page_count = \(pages + 64)")
    try await database.run { db throws(StoreError) in
        while true {
            do throws(StoreError) {
                try db.execute("INSERT INTO filler VALUES (randomblob(3000))")
            } catch {
                guard error == .full else { throw error }
                return
            }
        }
    }
    if spare > 0 {
        try await database.execute(
            "DELETE FROM filler WHERE rowid IN (SELECT rowid FROM filler ORDER BY rowid DESC LIMIT ?)", [.int(spare)])
    }
}

/// Gives the database room again, as freeing disk space does.
func makeRoom(in database: SQLiteDatabase) async throws {
    try await database.executeScript("PRAGMA max_page_count = 1073741823")
}

@Suite("Sending with a full disk")
struct ChatStorageFullTests {
    typealias Room = ConversationReactionTests

    let homeserver = ReactionHomeserver()

    func conversation() async throws -> (AccountChat, Conversation) {
        let store = try await ChatStore.open(path: ":memory:")
        _ = try await SyncIngestor(store: store).ingest(
            Room.sync("b1", [Room.member("@me:example.org", id: "$join-me")]))
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL("https://matrix.example.org")!, userID: Room.me, accessToken: Secret("token"),
            transport: homeserver.transport)
        let chat = AccountChat(
            requester: requester, database: store.databaseForTesting, scope: AccountScope(label: Room.me.rawValue),
            clock: ManualClock(), tracer: Tracer())
        return (chat, try await chat.conversation(id: Room.roomID))
    }

    var sentMessages: Int { homeserver.requests.filter { $0.hasPrefix("PUT send m.room.message") }.count }

    @Test("A long message that does not fit is queued not at all: a typed failure, no part sent; with room again it is")
    func splitMessageWhole() async throws {
        let (chat, conversation) = try await conversation()
        let database = chat.store.databaseForTesting
        // Parts of about 4 KB; the first would fit in the pages left, the rest would not.
        let text = String(repeating: "word ", count: 4_500)
        let parts = MessageSplitter.split(text).count
        #expect(parts >= 5)
        try await fillUp(database, leaving: 3)

        await #expect(throws: ChatError.store(.store(.full))) {
            _ = try await conversation.send(.text(text))
        }
        #expect(try await chat.store.queuedMessages().isEmpty, "a part was queued without the others")
        #expect(await conversation.sendQueue.currentState.items.isEmpty)
        #expect(sentMessages == 0, "a part went out")

        try await makeRoom(in: database)
        let receipt = try await conversation.send(.text(text))
        try await receipt.state.wait(until: { if case .sent = $0 { true } else { false } })
        #expect(sentMessages == parts)
        await chat.stop()
    }
}

@Suite("Syncing with a full disk")
struct SyncStorageFullTests {
    typealias Room = ConversationReactionTests

    /// Larger than a page (8 KB for the account database): it needs new pages.
    static let bigBody = String(repeating: "x", count: 20_000)

    @Test("A batch that does not fit backs off; once there is room the same batch is stored and sync goes live")
    func backsOffAndCatchesUp() async throws {
        let store = try await ChatStore.open(path: ":memory:")
        _ = try await SyncIngestor(store: store).ingest(
            Room.sync("b1", [Room.member("@me:example.org", id: "$join-me")]))
        let transport = ScriptedHTTPTransport()
        let longPoll = TestGate()
        transport.on("POST", pathPrefix: "/_matrix/client/v3/user/") { _ in .json(200, #"{"filter_id": "f1"}"#) }
        transport.on("GET", "/_matrix/client/v3/sync") { request in
            if request.url.query?.contains("since=b1") == true {
                let batch = Room.sync("b2", [Room.text(id: "$big", from: "@alice:example.org", body: Self.bigBody)])
                return .success(HTTPResponse(status: 200, body: batch))
            }
            await longPoll.wait()
            return .json(200, #"{"next_batch": "b3"}"#)
        }
        let clock = ManualClock()
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL("https://matrix.example.org")!, userID: Room.me, accessToken: Secret("token"),
            transport: transport)
        let chat = AccountChat(
            requester: requester, database: store.databaseForTesting, scope: AccountScope(label: Room.me.rawValue),
            clock: clock, tracer: Tracer())
        try await fillUp(store.databaseForTesting)

        try await chat.start()
        let backingOff = try await chat.syncState.wait(until: {
            if case .backingOff = $0 { true } else if case .failed = $0 { true } else { false }
        })
        guard case .backingOff(let progress, attempt: 1, _) = backingOff else {
            Issue.record("sync did not back off: \(backingOff)")
            return
        }
        #expect(progress.since == SyncToken("b1") && progress.pendingBatch == nil)
        #expect(try await store.sinceToken() == "b1")
        #expect(try await store.loadTimelinePage(roomID: Room.roomID.rawValue).items.map(\.eventID) == ["$join-me"])

        try await makeRoom(in: store.databaseForTesting)
        try await clock.waitForSleepers(count: 1)
        await clock.advance(by: .seconds(120))
        _ = try await chat.syncState.wait(until: {
            if case .live(let progress) = $0 { progress.since == SyncToken("b2") } else { false }
        })
        #expect(try await store.sinceToken() == "b2")
        let items = try await store.loadTimelinePage(roomID: Room.roomID.rawValue).items
        #expect(items.map(\.eventID) == ["$join-me", "$big"])
        let fromB1 = transport.requests.filter { $0.url.query?.contains("since=b1") == true }
        #expect(fromB1.count == 2, "the batch after b1 was asked for again")
        await chat.stop()
        longPoll.open()
    }
}
