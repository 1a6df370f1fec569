import Foundation
import SymorvaChat
import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import SymorvaTransport

/// `symorva-bench first-list [--rooms N] [--runs N] [--parallel N]`: against the local dev
/// servers (`Scripts/dev-server start --test`), through the product path, the time from
/// `session.signIn` to the first 20 rows of `chat.conversations.window(0..<20)` seen by an
/// observer, with sliding sync and with `/sync` v2 on the same account, and the bytes the
/// transport received before them.
///
/// The account (`bench-first-list-N`) is joined to `N` rooms the bench creates (`--parallel`
/// at a time) and is kept on the server: a later run signs in to it, counts its joined rooms
/// (`/joined_rooms`) and creates only the missing ones, so only the first run pays for them
/// (`--existing 1` creates none and measures the rooms the account has).
///
/// Each measured run is a new device: a ``SymorvaCommunity`` with the crypto and chat modules
/// on an empty data folder, the manifest's `sync.mode` forced to `sliding` or `v2`, the libcurl
/// transport wrapped to count response bytes. The clock starts before `signIn` (so login,
/// `/versions`, the crypto module's start and the first sync request are all in the figure) and
/// stops when the window's observer sees 20 rows. Each run then signs out (the device is deleted
/// on the server). The two modes alternate.
struct FirstListBenchmark: DevServerBenchmark {
    let name = "first-list"
    let argumentsSynopsis = "[--rooms N] [--runs N] [--parallel N] [--existing 1]"
    let summary =
        "N joined rooms: signIn → first 20 rows of the conversation window, sliding sync vs v2; bytes (SYMORVA_* env)"
    let optionNames: Set<String> = ["rooms", "runs", "parallel", "existing"]

    struct Settings {
        var rooms: Int
        var runs: Int
        var parallel: Int
        /// Measure the account with the rooms it has now, creating none (`--existing 1`): for an
        /// account whose rooms are still being made.
        var existingOnly: Bool
    }

    /// One measured sign-in.
    struct Run {
        var time: Double
        var signIn: Double
        var bytes: Int
        var syncBytes: Int
        var rows: [RoomID]
        var total: Int
        var mode: SyncMode?
    }

    static let password = "correct horse battery staple"

    func settings(from options: inout Options) -> Settings {
        Settings(
            rooms: options.integer("rooms", default: 1_000), runs: options.integer("runs", default: 3),
            parallel: options.integer("parallel", default: 16),
            existingOnly: options.integer("existing", default: 0) != 0)
    }

    func measure(_ settings: Settings, homeserver: URL, services: URL) async throws {
        guard let homeserverURL = HomeserverURL(homeserver.absoluteString) else {
            throw BenchFailure("SYMORVA_HOMESERVER_URL is not a homeserver URL")
        }
        let serverName = ProcessInfo.processInfo.environment["SYMORVA_SERVER_NAME"] ?? "localhost"
        let transport = CurlTransport()
        let username = "bench-first-list-\(settings.rooms)"
        let (requester, userID) = try await Self.account(username, homeserver: homeserverURL, transport: transport)
        let clock = ContinuousClock()
        let prepared = clock.now
        let (had, created) = try await createRooms(
            upTo: settings.existingOnly ? 0 : settings.rooms, parallel: max(1, settings.parallel), requester: requester)
        print(
            "first-list: \(userID) joined to \(had + created) rooms (\(had) already, \(created) created in "
                + "\(ChatBench.format(Self.seconds(clock.now - prepared), 1)) s); load average "
                + MegolmBenchmark.loadAverage())
        _ = try? await requester.send(
            MatrixEndpoint(method: .post, path: "/_matrix/client/v3/logout", body: Array("{}".utf8), requiresAuth: true)
        )

        var results: [SymorvaConfiguration.Sync.Mode: [Run]] = [.sliding: [], .v2: []]
        for run in 0..<settings.runs {
            // Alternate which mode goes first, so neither always meets the warmer server.
            let order: [SymorvaConfiguration.Sync.Mode] = run % 2 == 0 ? [.sliding, .v2] : [.v2, .sliding]
            for mode in order {
                let result = try await Self.signInRun(
                    mode: mode, username: username, homeserver: homeserverURL, serverName: serverName,
                    services: services, expectedRows: min(20, had + created))
                print(
                    "  run \(run + 1) \(mode.rawValue): first 20 rows after \(ChatBench.format(result.time)) s "
                        + "(signIn returned after \(ChatBench.format(result.signIn)) s); \(result.bytes) bytes received "
                        + "(\(result.syncBytes) from sync); \(result.rows.count) rows of \(result.total); "
                        + "load \(MegolmBenchmark.loadAverage())")
                results[mode, default: []].append(result)
            }
        }
        for mode in [SymorvaConfiguration.Sync.Mode.sliding, .v2] {
            let runs = results[mode] ?? []
            let times = runs.map(\.time)
            print(
                "  \(mode == .v2 ? "v2     " : "sliding"): first 20 rows median \(ChatBench.format(ChatBench.median(times))) s "
                    + "(runs: \(times.map { ChatBench.format($0) }.joined(separator: ", "))); "
                    + "bytes median \(Int(ChatBench.median(runs.map { Double($0.bytes) }))) "
                    + "(sync \(Int(ChatBench.median(runs.map { Double($0.syncBytes) })))); "
                    + "mode \(runs.first?.mode?.rawValue ?? "?")")
        }
        let slidingBytes = ChatBench.median((results[.sliding] ?? []).map { Double($0.bytes) })
        let v2Bytes = ChatBench.median((results[.v2] ?? []).map { Double($0.bytes) })
        // Synapse orders sliding sync's list by the latest "bump" event (creation, messages; not
        // `m.room.name`), the store by the latest event: rooms made in parallel can differ at the
        // window's edge.
        let slidingRows = Set((results[.sliding] ?? []).flatMap(\.rows))
        let v2Rows = Set((results[.v2] ?? []).flatMap(\.rows))
        print(
            "  sliding ÷ v2 bytes: \(ChatBench.format(slidingBytes / max(1, v2Bytes) * 100, 2)) % (goal ≤ 10 %); "
                + "rooms of sliding's first rows also in v2's: \(slidingRows.intersection(v2Rows).count) of "
                + "\(slidingRows.count); goal ≤ 1 s for 1,000 rooms, ≤ 2 s for 10,000")
        guard (results[.sliding] ?? []).allSatisfy({ $0.mode == .sliding }),
            (results[.v2] ?? []).allSatisfy({ $0.mode == .v2 })
        else { throw BenchFailure("a run did not sync in the mode it asked for") }
    }

    /// One new device of `username` signing in with `mode`, measured up to the first window.
    static func signInRun(
        mode: SymorvaConfiguration.Sync.Mode, username: String, homeserver: HomeserverURL, serverName: String,
        services: URL, expectedRows: Int
    ) async throws -> Run {
        let folder = NSTemporaryDirectory() + "symorva-bench-first-list-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let counter = RequestCountingTransport(CurlTransport())
        let isSync: @Sendable (String) -> Bool = { $0.hasSuffix("/sync") }
        let configuration = SymorvaConfiguration(
            community: .init(name: "Benchmark"),
            homeserver: .init(url: homeserver, serverName: serverName),
            services: .init(url: services),
            modules: .init(
                meetings: .init(isEnabled: false), aiStudio: .init(isEnabled: false),
                wallet: .init(isEnabled: false, assets: []), directory: .init(isEnabled: false)),
            sync: .init(mode: mode))
        let community = SymorvaCommunity(
            configuration: configuration,
            environment: SymorvaEnvironment(dataDirectory: folder, transport: counter),
            modules: [.crypto, .chat])
        await community.launch()
        let clock = ContinuousClock()
        let start = clock.now
        try await community.session.signIn(username: username, password: Secret(password))
        let signedIn = clock.now
        let window = community.chat.conversations.window(0..<20)
        let seen = Lock<(at: ContinuousClock.Instant, bytes: Int, syncBytes: Int)?>(nil)
        let found = try await window.wait(timeout: .seconds(1_800)) { window in
            guard window.items.count >= expectedRows else { return false }
            let (bytes, syncBytes) = (counter.receivedBytes, counter.receivedBytes(path: isSync))
            seen.withLock { if $0 == nil { $0 = (clock.now, bytes, syncBytes) } }
            return true
        }
        guard let (at, bytes, syncBytes) = seen.withLock({ $0 }) else { throw BenchFailure("no window seen") }
        let syncMode = community.module(AccountChat.self)?.syncMode
        try await community.session.signOut()
        await community.shutdown()
        return Run(
            time: seconds(at - start), signIn: seconds(signedIn - start), bytes: bytes, syncBytes: syncBytes,
            rows: found.items.map(\.id), total: found.total, mode: syncMode)
    }

    /// Signs in to `username` with the bench password, registering it first if it does not exist.
    static func account(_ username: String, homeserver: HomeserverURL, transport: CurlTransport) async throws
        -> (requester: FixedTokenMatrixRequester, userID: UserID)
    {
        let url = URL(string: homeserver.rawValue)!.appending(path: "/_matrix/client/v3/login")
        let body = """
            {"type": "m.login.password", "identifier": {"type": "m.id.user", "user": "\(username)"}, \
            "password": "\(password)", "initial_device_display_name": "first-list preparation"}
            """
        var response = try await transport.send(.json(.post, url: url, body: Array(body.utf8)))
        if response.status == 403 {
            _ = try await BenchMember.register(
                username, homeserver: URL(string: homeserver.rawValue)!, transport: transport)
            response = try await transport.send(.json(.post, url: url, body: Array(body.utf8)))
        }
        guard response.isSuccess else { throw BenchFailure("login of \(username) answered \(response.status)") }
        struct LoggedIn: Decodable {
            let user_id: String
            let access_token: String
        }
        let loggedIn = try WireJSON.decode(LoggedIn.self, from: response.body)
        guard let userID = UserID(loggedIn.user_id) else { throw BenchFailure("login gave '\(loggedIn.user_id)'") }
        return (
            FixedTokenMatrixRequester(
                homeserverURL: homeserver, userID: userID, accessToken: Secret(loggedIn.access_token),
                transport: transport), userID
        )
    }

    /// Creates rooms until the account has joined `count`: how many it had, how many were made.
    private func createRooms(upTo count: Int, parallel: Int, requester: FixedTokenMatrixRequester) async throws
        -> (had: Int, created: Int)
    {
        let joined = try await requester.send(
            MatrixEndpoint(method: .get, path: "/_matrix/client/v3/joined_rooms", requiresAuth: true))
        guard case .object(let top)? = try? JSONValue(parsing: joined.body),
            case .array(let rooms)? = top["joined_rooms"]
        else { throw BenchFailure("unreadable /joined_rooms answer") }
        let had = rooms.count
        let missing = max(0, count - had)
        guard missing > 0 else { return (had, 0) }
        let clock = ContinuousClock()
        let start = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = 0
            var done = 0
            func add() {
                let index = had + next
                next += 1
                group.addTask {
                    _ = try await requester.send(
                        MatrixEndpoint(
                            method: .post, path: "/_matrix/client/v3/createRoom",
                            body: Array(#"{"name": "first-list \#(index)", "preset": "public_chat"}"#.utf8),
                            requiresAuth: true))
                }
            }
            for _ in 0..<min(parallel, missing) { add() }
            while try await group.next() != nil {
                done += 1
                if done % 500 == 0 {
                    print(
                        "  \(had + done) rooms, \(ChatBench.format(Self.seconds(clock.now - start), 1)) s, "
                            + "load \(MegolmBenchmark.loadAverage())")
                }
                if next < missing { add() }
            }
        }
        return (had, missing)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
