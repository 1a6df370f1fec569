import Foundation
import SymorvaChatStore
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import SymorvaTransport
import Testing

@testable import SymorvaChat

/// The sliding sync request, decoder and ingest against the real Synapse, compared with what
/// the `/sync` v2 loop stored for the same account. No sync loop runs them yet: the test sends
/// the requests the ``SlidingSyncMachine`` would ask for, in its order.
@Suite("Sliding sync wire against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct SlidingSyncWireTests {
    let transport = CurlTransport()

    @Test("The first window holds the most recent rooms; the grown range gives the list v2 gives")
    func firstWindowThenTheRest() async throws {
        try await withChatTestRun { run in
            let account = try await ChatTestAccount.register("sliding", transport: transport)
            let v2 = try await account.makeClient(in: run, transport: transport)
            try await v2.startAndSync()
            // A randomised account: rooms with and without names, activity in a shuffled order.
            var random = SystemRandomNumberGenerator()
            let seed = UInt64.random(in: 0...UInt64.max, using: &random)
            var generator = SeededGenerator(seed: seed)
            var rooms: [RoomID] = []
            for index in 0..<9 {
                let named = Bool.random(using: &generator)
                rooms.append(try await v2.createRoom(name: named ? "Room \(index) of \(seed % 1000)" : nil))
            }
            for roomID in rooms.shuffled(using: &generator) {
                let conversation = try await v2.conversation(id: roomID)
                try await conversation.send(.text("activity")).waitUntilSent()
                try await v2.conversations.wait(timeout: .seconds(60)) { $0[roomID]?.lastMessage != nil }
            }
            // What the v2 loop stored (a second connection to its file).
            let v2List = try await ChatStore.open(path: account.databasePath).loadConversationList()
            let expected = v2List.map(\.roomID)
            #expect(Set(expected) == Set(rooms.map(\.rawValue)), "seed \(seed)")

            // Sliding sync into a store of its own.
            let path = NSTemporaryDirectory() + "symorva-sliding-\(UUID().uuidString).sqlite"
            let store = try await ChatStore.open(path: path)
            let requester = FixedTokenMatrixRequester(
                homeserverURL: account.homeserverURL, userID: account.userID, accessToken: account.account.accessToken,
                transport: transport)
            let ingestor = SyncIngestor(store: store)

            let first = try await exchange(
                SlidingSyncRequest(pos: nil, timeout: .zero, range: 0...3, subscriptions: []), store: store,
                requester: requester, ingestor: ingestor, userID: account.userID)
            #expect(first.listCounts[SlidingSyncAPI.listName] == rooms.count, "seed \(seed)")
            // The to-device extension answered with its own position, committed with the window.
            let toDeviceSince = try #require(first.toDeviceNextBatch)
            #expect(try await store.slidingSyncPosition().toDeviceSince == toDeviceSince)
            let window = try await store.loadConversationList().map(\.roomID)
            #expect(window == Array(expected.prefix(4)), "seed \(seed)")

            _ = try await exchange(
                SlidingSyncRequest(
                    pos: SlidingSyncPosition(first.pos), timeout: .zero, range: 0...(rooms.count - 1), subscriptions: []
                ),
                store: store, requester: requester, ingestor: ingestor, userID: account.userID)
            let slidingList = try await store.loadConversationList()
            #expect(slidingList.map(\.roomID) == expected, "seed \(seed)")
            for (row, v2Row) in zip(slidingList, v2List) {
                #expect(row.name == v2Row.name, "seed \(seed)")
                #expect(row.membership == v2Row.membership && row.latestActivityTS == v2Row.latestActivityTS)
                #expect(row.preview?.eventID == v2Row.preview?.eventID, "seed \(seed)")
                #expect(row.joinedMemberCount == v2Row.joinedMemberCount, "seed \(seed)")
            }
            #expect(try await store.slidingSyncPosition().pos != first.pos)
        }
    }

    @Test(
        "The sliding sync loop (machine, host, interpreter): first window, growth, live updates, M_UNKNOWN_POS recovered"
    )
    func loop() async throws {
        try await withChatTestRun { run in
            let account = try await ChatTestAccount.register("slidingloop", transport: transport)
            let v2 = try await account.makeClient(in: run, transport: transport)
            try await v2.startAndSync()
            var rooms: [RoomID] = []
            for index in 0..<9 {
                let roomID = try await v2.createRoom(name: "Loop \(index)")
                try await (try await v2.conversation(id: roomID)).send(.text("m\(index)")).waitUntilSent()
                rooms.append(roomID)
            }
            let created = rooms
            try await v2.conversations.wait(timeout: .seconds(60)) { list in
                created.allSatisfy { list[$0]?.lastMessage != nil }
            }
            let v2List = try await ChatStore.open(path: account.databasePath).loadConversationList()

            let path = NSTemporaryDirectory() + "symorva-sliding-loop-\(UUID().uuidString).sqlite"
            let store = try await ChatStore.open(path: path)
            let requester = FixedTokenMatrixRequester(
                homeserverURL: account.homeserverURL, userID: account.userID, accessToken: account.account.accessToken,
                transport: transport)
            let commits = CommitRecorder(store: store)
            let states = Lock<[String]>([])
            func host(from pos: SlidingSyncPosition?) async -> MachineHost<SlidingSyncMachine> {
                let interpreter = SlidingSyncInterpreter(
                    requester: requester, store: store, wallClock: SystemWallClock(),
                    logger: Logger(category: "sliding"))
                interpreter.setDelegate(commits)
                let host = MachineHost(
                    machine: SlidingSyncMachine(
                        longPollTimeout: .seconds(2), backoff: ChatOptions.testing.syncBackoff, firstWindow: 4,
                        growthStep: 3),
                    initial: .stopped, interpreter: interpreter, instance: "sliding-test")
                let unsubscribe = host.states.subscribe { state in states.withLock { $0.append(state.caseName) } }
                run.atEnd {
                    unsubscribe()
                    await host.send(.stopped)
                    await host.stop()
                }
                await host.send(.started(SlidingSyncStart(pos: pos, jitterSeed: 1)))
                return host
            }
            let first = await host(from: nil)
            let live = try await first.states.wait(timeout: .seconds(60)) { state in
                if case .live = state { return true }
                return false
            }
            // The first window came first, then the range grew by 3 rows per response.
            #expect(Array(commits.roomCounts.prefix(3)) == [4, 7, 9])
            #expect(try await store.loadConversationList().map(\.roomID) == v2List.map(\.roomID))

            // Live: a message in the oldest room moves it to the top of the sliding list.
            let oldest = try #require(v2List.last).roomID
            let sent = try await (try await v2.conversation(id: RoomID(oldest))).send(.text("newest"))
            try await sent.waitUntilSent()
            let eventID = try #require(sent.eventIDs.last).rawValue
            try await commits.wait { list in list.first?.roomID == oldest && list.first?.preview?.eventID == eventID }

            // The server no longer knows the connection: a stored position with an unknown
            // connection number gets M_UNKNOWN_POS; the loop starts a new connection and
            // nothing stored is lost.
            await first.send(.stopped)
            let stored = try #require(live.progress?.pos?.rawValue)
            let token = stored.split(separator: "/", maxSplits: 1).last.map(String.init) ?? stored
            let before = try await store.loadConversationList()
            states.withLock { $0.removeAll() }
            let restarted = await host(from: SlidingSyncPosition("9999/" + token))
            try await restarted.states.wait(timeout: .seconds(60)) { state in
                if case .live(let progress) = state { return progress.pos?.rawValue.hasPrefix("9999/") == false }
                return false
            }
            // growing (the stored pos), M_UNKNOWN_POS, firstWindow (a new connection), …, live.
            let trajectory = states.withLock { $0 }
            // (A new subscriber first hears the current state: stopped.)
            #expect(Array(trajectory.prefix(3)) == ["stopped", "growing", "firstWindow"] && trajectory.last == "live")
            let after = try await store.loadConversationList()
            #expect(after.map(\.roomID) == before.map(\.roomID))
            #expect(after.map(\.preview?.eventID) == before.map(\.preview?.eventID))
            #expect(try await store.slidingSyncPosition().pos?.hasPrefix("9999/") == false)
        }
    }

    /// Sends one request, decodes and stores its response, and returns it.
    private func exchange(
        _ request: SlidingSyncRequest, store: ChatStore, requester: FixedTokenMatrixRequester,
        ingestor: SyncIngestor, userID: UserID
    ) async throws -> SlidingSyncResponse {
        let since = try await store.slidingSyncPosition().toDeviceSince
        let response = try await requester.send(try SlidingSyncAPI.sync(request, toDeviceSince: since))
        let decoded = try SlidingSyncResponseDecoder.decode(response.body, ownUserID: userID.rawValue)
        _ = try await ingestor.ingest(sliding: decoded)
        return decoded
    }
}

/// Records, after each committed sliding sync response, how many rooms the store lists, and
/// lets a test wait for a list that satisfies a condition (checked after each commit).
final class CommitRecorder: SyncInterpreterDelegate, Sendable {
    let store: ChatStore
    private let counts = Lock<[Int]>([])
    private let commits: AsyncStream<[ConversationSummary]>
    private let continuation: AsyncStream<[ConversationSummary]>.Continuation

    init(store: ChatStore) {
        self.store = store
        (commits, continuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    }

    var roomCounts: [Int] { counts.withLock { $0 } }

    func syncCommitted(_ changes: SyncChanges) async {
        let list = (try? await store.loadConversationList()) ?? []
        counts.withLock { $0.append(list.count) }
        continuation.yield(list)
    }

    func syncTokenRejected() {}

    /// Waits (60 s at most) for a commit after which the list satisfies `condition`.
    func wait(_ condition: @escaping @Sendable ([ConversationSummary]) -> Bool) async throws {
        let commits = self.commits
        let found = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await list in commits where condition(list) { return true }
                return false
            }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                return false
            }
            let first = try await group.next() ?? false
            group.cancelAll()
            return first
        }
        #expect(found, "no commit brought the expected list within 60 s")
    }
}
