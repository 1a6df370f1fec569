import Foundation
import SymorvaChat
import SymorvaChatStore
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaTransport
import Testing

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

/// SplitMix64: a reproducible stream from a printed seed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E9B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
