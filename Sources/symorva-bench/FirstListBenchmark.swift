import Foundation
import SymorvaChatStore
import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTransport

/// `symorva-bench first-list [--rooms N] [--runs N]`: against the local dev servers
/// (`Scripts/dev-server start --test`), one account joined to `N` rooms (created by the bench,
/// 8 at a time), then, on a fresh account database each run, the time from the first sync
/// request to the first 20 rows of the conversation list, and the bytes received before them:
///
/// - **v2**: `GET /sync?timeout=0` with the SDK's filter (uploaded before the clock runs, as a
///   returning account has it), decoded, ingested, then `ChatStore.loadConversationWindow(0..<20)`;
/// - **sliding**: the sliding sync machine's first request (`SlidingSyncAPI`, rows 0–19, no
///   `pos`), decoded (`SlidingSyncResponseDecoder`), ingested (`SyncIngestor.ingest(sliding:)`),
///   then the same window.
///
/// Sign-in itself is not in the figure (it is the same for both). The two alternate per run.
struct FirstListBenchmark: DevServerBenchmark {
    let name = "first-list"
    let argumentsSynopsis = "[--rooms N] [--runs N]"
    let summary = "N joined rooms: first sync request → first 20 rows, sliding sync vs v2; bytes (SYMORVA_* env)"
    let optionNames: Set<String> = ["rooms", "runs"]

    struct Settings {
        var rooms: Int
        var runs: Int
    }

    func settings(from options: inout Options) -> Settings {
        Settings(rooms: options.integer("rooms", default: 1_000), runs: options.integer("runs", default: 3))
    }

    func measure(_ settings: Settings, homeserver: URL, services: URL) async throws {
        let transport = CurlTransport()
        let (requester, userID) = try await BenchMember.signedIn(
            "bench-first-list", homeserver: homeserver, transport: transport)
        let clock = ContinuousClock()
        let created = clock.now
        try await createRooms(settings.rooms, requester: requester)
        print("first-list: \(settings.rooms) rooms created in \(ChatBench.format(seconds(clock.now - created))) s")
        let filter = try await requester.send(
            ChatAPI.uploadFilter(userID: userID, definition: ChatAPI.syncFilterDefinition(timelineLimit: 20)))
        guard let filterID = RawJSON.string("filter_id", in: filter.body) else { throw BenchFailure("no filter_id") }

        let folder = try ChatBench.temporaryDirectory()
        defer { ChatBench.removeDirectory(folder) }
        var v2: [(time: Double, bytes: Int, rows: Int, total: Int)] = []
        var sliding: [(time: Double, bytes: Int, rows: Int, total: Int)] = []
        for run in 0..<settings.runs {
            let v2Store = try await ColdStartBenchmark.open(folder + "/v2-\(run).sqlite")
            let v2Start = clock.now
            let v2Response = try await requester.send(
                ChatAPI.sync(since: nil, timeout: .zero, filterID: FilterID(filterID)), timeout: .seconds(600))
            _ = try await SyncIngestor(store: v2Store).ingest(v2Response.body)
            let v2Window = try await v2Store.loadConversationWindow(0..<20)
            v2.append((seconds(clock.now - v2Start), v2Response.body.count, v2Window.rows.count, v2Window.total))

            let slidingStore = try await ColdStartBenchmark.open(folder + "/sliding-\(run).sqlite")
            let slidingStart = clock.now
            let request = SlidingSyncRequest(pos: nil, timeout: .zero, range: 0...19, subscriptions: [])
            let slidingResponse = try await requester.send(
                try SlidingSyncAPI.sync(request, toDeviceSince: nil), timeout: .seconds(600))
            let decoded = try SlidingSyncResponseDecoder.decode(slidingResponse.body, ownUserID: userID.rawValue)
            _ = try await SyncIngestor(store: slidingStore).ingest(sliding: decoded)
            let slidingWindow = try await slidingStore.loadConversationWindow(0..<20)
            sliding.append(
                (
                    seconds(clock.now - slidingStart), slidingResponse.body.count, slidingWindow.rows.count,
                    decoded.listCounts[SlidingSyncAPI.listName] ?? 0
                ))
        }
        for (label, results) in [("v2     ", v2), ("sliding", sliding)] {
            let times = results.map(\.time)
            print(
                "  \(label): first 20 rows median \(ChatBench.format(ChatBench.median(times))) s "
                    + "(runs: \(times.map { ChatBench.format($0) }.joined(separator: ", "))); "
                    + "\(results.last?.bytes ?? 0) bytes received; "
                    + "\(results.last?.rows ?? 0) rows shown of \(results.last?.total ?? 0)")
        }
        let ratio = Double(sliding.last?.bytes ?? 0) / Double(max(1, v2.last?.bytes ?? 1))
        print(
            "  sliding ÷ v2 bytes: \(ChatBench.format(ratio * 100, 2)) % (goal ≤ 10 %); goal ≤ 1 s for 1,000 rooms, "
                + "≤ 2 s for 10,000")
    }

    private func createRooms(_ count: Int, requester: FixedTokenMatrixRequester) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = 0
            func add() {
                let index = next
                next += 1
                group.addTask {
                    _ = try await requester.send(
                        MatrixEndpoint(
                            method: .post, path: "/_matrix/client/v3/createRoom",
                            body: Array(#"{"name": "first-list \#(index)"}"#.utf8), requiresAuth: true))
                }
            }
            for _ in 0..<min(8, count) { add() }
            while try await group.next() != nil {
                if next < count { add() }
            }
        }
    }

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
