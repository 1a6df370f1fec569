import SymorvaChatStore
import SymorvaFeatureKit
import SymorvaKit
import SymorvaTesting

/// `symorva-bench generate-sync OUT [--rooms N] [--events N] [--members N] [--seed N]`
///
/// Writes a deterministic, realistic `/sync` response (see `SyncResponseGenerator`).
enum GenerateSyncBenchmark: StaticBenchmark {
    static let name = "generate-sync"
    static let argumentsSynopsis = "OUT [--rooms 1000] [--events 50] [--members 20] [--seed N]"
    static let summary = "writes a deterministic /sync response (1,000 × 50 × 20 ≈ 47 MB)"

    static func run(arguments: [String]) async -> Int32 {
        do throws(ChatBench.Failure) {
            let (positional, values) = try ChatBench.options(arguments, known: ["rooms", "events", "members", "seed"])
            guard let path = positional.first else { throw ChatBench.Failure(message: "missing OUT") }
            let configuration = SyncResponseGenerator.Configuration(
                rooms: try ChatBench.integer(values, "rooms", 1000),
                eventsPerRoom: try ChatBench.integer(values, "events", 50),
                membersPerRoom: try ChatBench.integer(values, "members", 20),
                seed: UInt64(try ChatBench.integer(values, "seed", 0x5EED_CAFE)))
            let start = ChatBench.now()
            let bytes = SyncResponseGenerator(configuration).generate()
            let elapsed = ChatBench.now() - start
            try ChatBench.writeFile(path, bytes)
            print(
                "wrote \(path): \(ChatBench.megabytes(bytes.count)) (\(bytes.count) bytes) in \(ChatBench.format(elapsed)) s"
            )
            return 0
        } catch {
            print("generate-sync: \(error.message)\nusage: symorva-bench \(name) \(argumentsSynopsis)")
            return 2
        }
    }
}

/// `symorva-bench coldstart [--rooms 10000] [--runs 5]`
///
/// Fills a store with N rooms, closes it, then measures opening it and loading the whole
/// conversation list with display names and previews built: what an app does at launch.
enum ColdStartBenchmark: StaticBenchmark {
    static let name = "coldstart"
    static let argumentsSynopsis = "[--rooms 10000] [--runs 5] [--window 50]"
    static let summary =
        "store with N rooms → open + conversation list query + items built; then the first window alone"

    static func run(arguments: [String]) async -> Int32 {
        do throws(ChatBench.Failure) {
            let (_, values) = try ChatBench.options(arguments, known: ["rooms", "runs", "window"])
            let rooms = try ChatBench.integer(values, "rooms", 10_000)
            let runs = try ChatBench.integer(values, "runs", 5)
            let windowSize = try ChatBench.integer(values, "window", 50)
            let folder = try ChatBench.temporaryDirectory()
            let path = folder + "/coldstart.sqlite"
            defer {
                ChatBench.removeDatabase(path)
                ChatBench.removeDirectory(folder)
            }
            try await fill(path, rooms: rooms)
            var opens: [Double] = []
            var totals: [Double] = []
            var cpu: [Double] = []
            var count = 0
            for _ in 0..<runs {
                let startCPU = ChatBench.cpuTime()
                let start = ChatBench.now()
                let store = try await open(path)
                let opened = ChatBench.now()
                let list = try await list(store)
                let items = list.map(ConversationItem.init)
                let end = ChatBench.now()
                cpu.append(ChatBench.cpuTime() - startCPU)
                count = items.count
                opens.append(opened - start)
                totals.append(end - start)
            }
            print("coldstart: \(count) rooms in the list")
            print(
                "  open (connection + schema check): median \(ChatBench.format(ChatBench.median(opens) * 1000, 2)) ms")
            print(
                "  open + query + items: median \(ChatBench.format(ChatBench.median(totals) * 1000, 2)) ms, max "
                    + "\(ChatBench.format((totals.max() ?? .nan) * 1000, 2)) ms, CPU median "
                    + "\(ChatBench.format(ChatBench.median(cpu) * 1000, 2)) ms (goal < 150 ms)")
            // The first window only, from a cold start: what a screen of rows needs
            // (`ChatStore.loadConversationWindow`: the rows and the list's size).
            var windows: [Double] = []
            var windowCPU: [Double] = []
            var shown = 0
            var total = 0
            for _ in 0..<runs {
                let startCPU = ChatBench.cpuTime()
                let start = ChatBench.now()
                let store = try await open(path)
                let window: (rows: [ConversationSummary], total: Int)
                do {
                    window = try await store.loadConversationWindow(0..<windowSize)
                } catch {
                    throw ChatBench.Failure(message: "window query failed: \(error)")
                }
                let items = window.rows.map(ConversationItem.init)
                windows.append(ChatBench.now() - start)
                windowCPU.append(ChatBench.cpuTime() - startCPU)
                shown = items.count
                total = window.total
            }
            print(
                "  first window, open + \(shown) rows of \(total) + items: median "
                    + "\(ChatBench.format(ChatBench.median(windows) * 1000, 2)) ms, max "
                    + "\(ChatBench.format((windows.max() ?? .nan) * 1000, 2)) ms, CPU median "
                    + "\(ChatBench.format(ChatBench.median(windowCPU) * 1000, 2)) ms (goal ≤ 16 ms)")
            return 0
        } catch {
            print("coldstart: \(error.message)")
            return 1
        }
    }

    /// What a conversation list cell shows.
    struct ConversationItem {
        var title: String
        var subtitle: String
        var unread: Int

        init(_ summary: ConversationSummary) {
            let heroes = summary.heroes.prefix(3).map { $0.displayName ?? $0.userID }
            title =
                summary.name ?? summary.canonicalAlias
                ?? (heroes.isEmpty ? "Empty room" : heroes.joined(separator: ", "))
            subtitle = summary.preview?.body ?? (summary.preview == nil ? "" : "Encrypted message")
            unread = summary.notificationCount
        }
    }

    static func fill(_ path: String, rooms: Int) async throws(ChatBench.Failure) {
        let document = SyncResponseGenerator(.init(rooms: rooms, eventsPerRoom: 10, membersPerRoom: 8)).generate()
        let store = try await open(path)
        do {
            _ = try await SyncIngestor(store: store).ingest(document)
        } catch {
            throw ChatBench.Failure(message: "fill failed: \(error)")
        }
    }

    /// Opens the chat store of an account database at `path` the way a signed-in account
    /// does: `AccountDatabase.openFile` (the account settings) with the standard migrations.
    ///
    /// `SYMORVA_BENCH_SYNCHRONOUS=FULL` runs the whole connection with `synchronous=FULL`, to
    /// measure what making every commit durable would cost (`docs/benchmarks.md`).
    static func open(_ path: String) async throws(ChatBench.Failure) -> ChatStore {
        do {
            let database = try await AccountDatabase.openFile(path: path, migrations: .standard)
            if ChatBench.synchronousFull { try await database.executeScript("PRAGMA synchronous=FULL") }
            return ChatStore(database: database)
        } catch {
            throw ChatBench.Failure(message: "cannot open the store: \(error)")
        }
    }

    static func list(_ store: ChatStore) async throws(ChatBench.Failure) -> [ConversationSummary] {
        do {
            return try await store.loadConversationList()
        } catch {
            throw ChatBench.Failure(message: "query failed: \(error)")
        }
    }
}

/// `symorva-bench timeline [--events 10000] [--runs 20]`
///
/// Fills one room with N events (messages, reactions, edits, replies, redactions), then
/// measures loading its newest 50 items with relations applied from a freshly opened store.
enum TimelineBenchmark: StaticBenchmark {
    static let name = "timeline"
    static let argumentsSynopsis = "[--events 10000] [--runs 20]"
    static let summary = "one room with N stored events → first 50 items with relations applied"

    static func run(arguments: [String]) async -> Int32 {
        do throws(ChatBench.Failure) {
            let (_, values) = try ChatBench.options(arguments, known: ["events", "runs"])
            let events = try ChatBench.integer(values, "events", 10_000)
            let runs = try ChatBench.integer(values, "runs", 20)
            let folder = try ChatBench.temporaryDirectory()
            let path = folder + "/timeline.sqlite"
            defer {
                ChatBench.removeDatabase(path)
                ChatBench.removeDirectory(folder)
            }
            let document = SyncResponseGenerator(.init(rooms: 1, eventsPerRoom: events, membersPerRoom: 20)).generate()
            let store = try await ColdStartBenchmark.open(path)
            let roomID = SyncResponseGenerator.roomID(0)
            do {
                _ = try await SyncIngestor(store: store).ingest(document)
            } catch {
                throw ChatBench.Failure(message: "fill failed: \(error)")
            }
            var firstPage: [Double] = []
            var warm: [Double] = []
            var cpu: [Double] = []
            var page: StoredTimelinePage?
            for _ in 0..<runs {
                let fresh = try await ColdStartBenchmark.open(path)
                let startCPU = ChatBench.cpuTime()
                let start = ChatBench.now()
                page = try? await fresh.loadTimelinePage(roomID: roomID, limit: 50)
                firstPage.append(ChatBench.now() - start)
                cpu.append(ChatBench.cpuTime() - startCPU)
                let again = ChatBench.now()
                _ = try? await fresh.loadTimelinePage(roomID: roomID, limit: 50)
                warm.append(ChatBench.now() - again)
            }
            let items = page?.items ?? []
            let reactions = items.reduce(0) { $0 + $1.reactions.reduce(0) { $0 + $1.senders.count } }
            print(
                "timeline: \(events) events stored; first page \(items.count) items "
                    + "(\(items.filter { $0.replacedBy != nil }.count) edited, "
                    + "\(items.filter { $0.redactedBy != nil }.count) redacted, \(reactions) reactions)")
            print(
                "  first 50 items, fresh connection: median \(ChatBench.format(ChatBench.median(firstPage) * 1000, 2)) ms, "
                    + "max \(ChatBench.format((firstPage.max() ?? .nan) * 1000, 2)) ms, CPU median "
                    + "\(ChatBench.format(ChatBench.median(cpu) * 1000, 2)) ms (goal < 20 ms); "
                    + "warm: median \(ChatBench.format(ChatBench.median(warm) * 1000, 2)) ms")
            return 0
        } catch {
            print("timeline: \(error.message)")
            return 1
        }
    }
}
