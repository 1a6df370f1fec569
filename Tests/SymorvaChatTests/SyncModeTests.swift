import Foundation
import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaChat
@testable import SymorvaChatStore
@testable import SymorvaMatrix

@Suite("Sync mode, windows and room subscriptions")
struct SyncModeTests {
    typealias Room = ConversationReactionTests

    @Test("auto takes sliding sync only when /versions advertises it; the manifest can force either")
    func choice() {
        let sliding = ServerVersions(versions: ["v1.11"], unstableFeatures: ["org.matrix.simplified_msc3575": true])
        let switchedOff = ServerVersions(
            versions: ["v1.11"], unstableFeatures: ["org.matrix.simplified_msc3575": false])
        let plain = ServerVersions(versions: ["v1.11"])
        #expect(SyncMode.choose(.automatic, versions: sliding) == .sliding)
        #expect(SyncMode.choose(.automatic, versions: switchedOff) == .v2)
        #expect(SyncMode.choose(.automatic, versions: plain) == .v2)
        #expect(SyncMode.choose(.automatic, versions: nil) == .v2)
        #expect(SyncMode.choose(.v2, versions: sliding) == .v2)
        #expect(SyncMode.choose(.sliding, versions: plain) == .sliding)
    }

    @Test("The sliding loop's states read as the app's sync states")
    func states() {
        let jitter = JitterSource(seed: 1)
        let progress = SlidingSyncProgress(
            pos: SlidingSyncPosition("3/s1"), rangeEnd: 19, roomCount: 40, consecutiveFailures: 2, jitter: jitter)
        let expected = SyncProgress(since: SyncToken("3/s1"), filterID: nil, consecutiveFailures: 2, jitter: jitter)
        #expect(SyncState(SlidingSyncState.stopped) == .stopped)
        #expect(SyncState(.firstWindow(progress)) == .initialSync(expected))
        #expect(SyncState(.growing(progress)) == .catchingUp(expected))
        #expect(SyncState(.live(progress)) == .live(expected))
        #expect(
            SyncState(.backingOff(progress, attempt: 2, after: .seconds(4)))
                == .backingOff(expected, attempt: 2, after: .seconds(4)))
        #expect(SyncState(.awaitingToken(progress)) == .awaitingToken(expected))
        #expect(SyncState(.failed(.storeFailed)) == .failed(.storeFailed))
    }

    func chat(mode: SyncMode, rooms: Int = 0) async throws -> AccountChat {
        let store = try await ChatStore.open(path: ":memory:")
        _ = try await SyncIngestor(store: store).ingest(
            Room.sync("b1", [Room.member("@me:example.org", id: "$join-me")]))
        for index in 0..<rooms {
            let message =
                #"{"type":"m.room.message","event_id":"$e\#(index)","sender":"@alice:x","origin_server_ts":\#(10_000 + index),"content":{"msgtype":"m.text","body":"hi"}}"#
            let response =
                #"{"next_batch":"r\#(index)","rooms":{"join":{"!r\#(index):x":{"timeline":{"events":["#
                + message + "]}}}}}"
            _ = try await SyncIngestor(store: store).ingest(Array(response.utf8))
        }
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL("https://matrix.example.org")!, userID: Room.me, accessToken: Secret("token"),
            transport: ReactionHomeserver().transport)
        return AccountChat(
            requester: requester, database: store.databaseForTesting, scope: AccountScope(label: Room.me.rawValue),
            clock: ManualClock(), tracer: Tracer(), options: ChatOptions(syncMode: mode))
    }

    @Test("With sliding sync an observed timeline is a room subscription until its last observer leaves")
    func subscriptions() async throws {
        let chat = try await chat(mode: .sliding)
        #expect(chat.syncMode == .sliding)
        let conversation = try await chat.conversation(id: Room.roomID)
        #expect(chat.subscribedRooms.isEmpty)
        let first = conversation.timeline.subscribe { _ in }
        let second = conversation.timeline.subscribe { _ in }
        #expect(chat.subscribedRooms == [Room.roomID])
        first()
        #expect(chat.subscribedRooms == [Room.roomID])
        second()
        #expect(chat.subscribedRooms.isEmpty)
        await chat.stop()
    }

    @Test("A window builds its rows only and says how many the list has; the v2 client has windows too")
    func window() async throws {
        for mode in [SyncMode.v2, .sliding] {
            let chat = try await chat(mode: mode, rooms: 30)
            #expect(chat.syncMode == mode)
            let window = chat.conversationWindow(5..<8)
            var values = window.values.makeAsyncIterator()
            var loaded = await values.next()
            while loaded?.status == .loading { loaded = await values.next() }
            #expect(loaded?.total == 31)
            #expect(loaded?.range == 5..<8)
            #expect(loaded?.items.map(\.id.rawValue) == ["!r24:x", "!r23:x", "!r22:x"])
            await chat.stop()
        }
    }
}
