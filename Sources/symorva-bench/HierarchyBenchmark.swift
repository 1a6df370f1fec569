import Foundation
import SymorvaChat
import SymorvaChatStore
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTransport

/// `symorva-bench hierarchy [--rooms N] [--page N] [--runs N]`: against the local dev servers
/// (`Scripts/dev-server start --test`), a space with `N` child rooms (created by the bench, 8 at a
/// time, each linked with `m.space.child`), then the time to page the whole hierarchy in through
/// the shipped path — `AccountChat.hierarchy(of:pageSize:)` and ``SpaceHierarchy/loadNextPage()``
/// until `isComplete` (`GET /v1/rooms/{roomId}/hierarchy`, decoded, merged and published) — on a
/// fresh hierarchy each run. Issue 27's goal: under 1 s for 500 rooms. Synapse rate-limits
/// `/hierarchy` per user; a `429`'s wait is taken out of the figure and counted.
struct HierarchyBenchmark: DevServerBenchmark {
    let name = "hierarchy"
    let argumentsSynopsis = "[--rooms N] [--page N] [--runs N]"
    let summary = "a space of N rooms: its whole hierarchy paged in through AccountChat (SYMORVA_* env)"
    let optionNames: Set<String> = ["rooms", "page", "runs"]

    struct Settings {
        var rooms: Int
        var page: Int
        var runs: Int
    }

    func settings(from options: inout Options) -> Settings {
        Settings(
            rooms: options.integer("rooms", default: 500), page: options.integer("page", default: 50),
            runs: options.integer("runs", default: 5))
    }

    func measure(_ settings: Settings, homeserver: URL, services: URL) async throws {
        let transport = CurlTransport()
        let (requester, userID) = try await BenchMember.signedIn(
            "bench-hierarchy", homeserver: homeserver, transport: transport)
        let server = String(userID.rawValue.drop { $0 != ":" }.dropFirst())
        let clock = ContinuousClock()
        let created = clock.now
        let space = try await requester.send(
            MatrixEndpoint(
                method: .post, path: "/_matrix/client/v3/createRoom",
                body: Array(#"{"name": "bench space", "creation_content": {"type": "m.space"}}"#.utf8),
                requiresAuth: true))
        guard let spaceRaw = RawJSON.string("room_id", in: space.body) else {
            throw BenchFailure("createRoom gave no room_id")
        }
        let spaceID = RoomID(spaceRaw)
        try await createChildren(settings.rooms, of: spaceID, server: server, requester: requester)
        print(
            "hierarchy: a space with \(settings.rooms) rooms created in "
                + "\(ChatBench.format(seconds(clock.now - created))) s")

        let folder = try ChatBench.temporaryDirectory()
        defer { ChatBench.removeDirectory(folder) }
        let store = try await ColdStartBenchmark.open(folder + "/account.sqlite")
        let chat = AccountChat(
            requester: requester, database: store.databaseForTesting, scope: AccountScope(label: userID.rawValue),
            tracer: Tracer())
        var times: [Double] = []
        var pages = 0
        var rooms = 0
        var waits = 0
        for run in 0..<settings.runs {
            // Synapse limits /hierarchy per user (a burst of 10, then 5 a second): let the bucket
            // refill between runs, and take a 429's wait out of the figure (counted apart).
            if run > 0 { try await Task.sleep(for: .seconds(3)) }
            let hierarchy = try chat.hierarchy(of: spaceID, pageSize: settings.page)
            var waited = Duration.zero
            let start = clock.now
            pages = 0
            while !hierarchy.state.value.isComplete {
                do {
                    try await hierarchy.loadNextPage()
                    pages += 1
                } catch {
                    guard case .rateLimited(let retryAfter) = error else { throw error }
                    waits += 1
                    let wait = retryAfter ?? .seconds(1)
                    waited += wait
                    try await Task.sleep(for: wait)
                }
            }
            times.append(seconds(clock.now - start - waited))
            rooms = hierarchy.state.value.rooms.count
        }
        await chat.stop()
        let sorted = times.sorted()
        print(
            "  whole hierarchy: median \(ChatBench.format(ChatBench.median(times))) s, max "
                + "\(ChatBench.format(sorted.last ?? 0)) s (runs: \(times.map { ChatBench.format($0) }.joined(separator: ", "))); "
                + "\(rooms) rooms (the space and its children) in \(pages) pages of \(settings.page); "
                + "\(waits) rate-limit wait(s), taken out; goal < 1 s for 500"
        )
    }

    private func createChildren(
        _ count: Int, of spaceID: RoomID, server: String, requester: FixedTokenMatrixRequester
    ) async throws {
        let spacePath = spaceID.rawValue.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = 0
            func add() {
                let index = next
                next += 1
                group.addTask {
                    let room = try await requester.send(
                        MatrixEndpoint(
                            method: .post, path: "/_matrix/client/v3/createRoom",
                            body: Array(#"{"name": "space room \#(index)"}"#.utf8), requiresAuth: true))
                    guard let roomID = RawJSON.string("room_id", in: room.body) else {
                        throw BenchFailure("createRoom gave no room_id")
                    }
                    let child = roomID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
                    _ = try await requester.send(
                        MatrixEndpoint(
                            method: .put, path: "/_matrix/client/v3/rooms/\(spacePath)/state/m.space.child/\(child)",
                            body: Array(#"{"via": ["\#(server)"]}"#.utf8), requiresAuth: true))
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
