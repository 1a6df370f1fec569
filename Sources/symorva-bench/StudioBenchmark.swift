import Foundation
import SymorvaAIStudio
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices
import SymorvaStore
import SymorvaTransport

/// `symorva-bench studio [--rounds N] [--warmup N] [--messages N]`: consent accepted → grant →
/// summary of a conversation of `--messages` messages (200 by default), through the whole SDK —
/// ``/SymorvaAIStudio/AccountStudio``, a ``MachineHost`` of ``StudioGrantMachine`` per grant, the
/// consent presenter (answering yes at once), the homeserver content source (`/context` and
/// `/messages?dir=f` from Synapse), the grant store (SQLite file) and libcurl — against the
/// local dev servers (`Scripts/dev-server start`), whose addresses it reads from
/// `SYMORVA_HOMESERVER_URL` and `SYMORVA_SERVICES_URL`.
///
/// It registers a member, creates a room and sends the messages (not timed), then runs the
/// rounds one after the other, each a new `conversation(since:)` grant over all the messages,
/// its summary (the service's sumy LexRank over every message) and a revoke (not timed).
/// Prints p50/p90/p99/max of the round trip and of its two halves.
struct StudioBenchmark: DevServerBenchmark {
    /// The mode's word on the command line.
    let name = "studio"
    /// The mode's arguments for the usage text.
    let argumentsSynopsis = "[--rounds N] [--warmup N] [--messages N]"
    /// What the mode measures.
    let summary = "consent → grant → summary of N messages against the dev servers (SYMORVA_* env)"

    let optionNames: Set<String> = ["rounds", "warmup", "messages"]

    struct Settings {
        var rounds: Int
        var warmup: Int
        var messages: Int
    }

    func settings(from options: inout Options) -> Settings {
        Settings(
            rounds: options.integer("rounds", default: 50), warmup: options.integer("warmup", default: 5, minimum: 0),
            messages: min(options.integer("messages", default: 200), 500))
    }

    private static let sentences = [
        "The release is blocked because the database migration timed out on the large table",
        "We should rerun the migration with a longer timeout and build the index first",
        "Lunch is at noon on Friday in the small meeting room",
        "The new index makes the migration finish in under a minute on staging",
        "Can someone review the rollback plan before we try again tonight",
        "The monitoring dashboard shows the replica lag going back to normal",
        "Customers reported slow page loads during the failed deploy",
        "Let us write down what we learned in the incident notes",
    ]

    func measure(_ options: Settings, homeserver: URL, services servicesURL: URL) async throws {
        let transport = CurlTransport()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("symorva-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        let (userID, token) = try await BenchMember.register(
            BenchMember.uniqueName("bench-studio"), homeserver: homeserver, transport: transport)
        guard let member = UserID(userID), let base = HomeserverURL(homeserver.absoluteString) else {
            throw BenchFailure("registration gave '\(userID)', not a user ID")
        }
        let requester = FixedTokenMatrixRequester(
            homeserverURL: base, userID: member, accessToken: token, transport: transport)
        let room = try await Self.createRoom(requester)
        var first: EventID?
        for n in 0..<options.messages {
            let text = "\(Self.sentences[n % Self.sentences.count]) (\(n))."
            let id = try await Self.send(text, to: room, transactionID: "bench-\(n)", requester)
            if first == nil { first = id }
        }
        guard let first else { throw BenchFailure("no message sent") }

        let services = CommunityServicesClient(
            baseURL: servicesURL, transport: transport,
            tokenSource: BenchOpenIDSource(
                userID: userID, accessToken: token, homeserver: homeserver, transport: transport))
        let scope = AccountScope(label: userID)
        let studio = try await AccountStudio(
            member: member, services: services, content: HomeserverContentSource(requester: requester),
            database: try await SQLiteDatabase.open(path: folder.appendingPathComponent("studio.sqlite").path),
            scope: scope, presenter: ClosureConsentPresenter { _ in .approved },
            configuration: StudioConfiguration(maximumItems: options.messages))

        var roundTrips: [Duration] = []
        var grants: [Duration] = []
        var summaries: [Duration] = []
        let clock = ContinuousClock()
        for index in 0..<(options.rounds + options.warmup) {
            let start = clock.now
            let grant = try await studio.requestGrant(for: room, scope: .conversation(since: first))
            let granted = clock.now
            let summary = try await studio.summarize(using: grant)
            let end = clock.now
            guard summary.itemCount == options.messages else {
                throw BenchFailure("round \(index) summarized \(summary.itemCount) messages, not \(options.messages)")
            }
            try await studio.revoke(grant)
            guard index >= options.warmup else { continue }
            roundTrips.append(end - start)
            grants.append(granted - start)
            summaries.append(end - granted)
        }
        scope.end(reason: .shutdown)

        print(
            "studio: \(options.rounds) rounds (+\(options.warmup) warm-up): consent accepted → grant → summary of "
                + "\(options.messages) messages, one at a time")
        print("  \("".padding(toLength: 12, withPad: " ", startingAt: 0))      p50      p90      p99      max")
        for (label, samples) in [("round trip", roundTrips), ("grant", grants), ("summary", summaries)] {
            let sorted = samples.sorted()
            let columns =
                [0.50, 0.90, 0.99].map { WalletBenchmark.milliseconds(WalletBenchmark.percentile(sorted, $0)) }
                + [WalletBenchmark.milliseconds(sorted.last ?? .zero)]
            print("  \(label.padding(toLength: 12, withPad: " ", startingAt: 0)) \(columns.joined(separator: " ")) ms")
        }
    }

    private static func createRoom(_ requester: any MatrixRequester) async throws -> RoomID {
        let response = try await requester.send(
            MatrixEndpoint(
                method: .post, path: "/_matrix/client/v3/createRoom", body: Array("{}".utf8), requiresAuth: true))
        struct Created: Decodable { let room_id: String }
        return RoomID(try WireJSON.decode(Created.self, from: response.body).room_id)
    }

    private static func send(
        _ text: String, to room: RoomID, transactionID: String, _ requester: any MatrixRequester
    ) async throws -> EventID {
        let content = try WireJSON.encode(["msgtype": "m.text", "body": text])
        let response = try await requester.send(
            MatrixEndpoint(
                method: .put,
                path: "/_matrix/client/v3/rooms/\(percentEncoded(room.rawValue))/send/m.room.message/\(transactionID)",
                body: Array(content), requiresAuth: true))
        struct Sent: Decodable { let event_id: String }
        return EventID(try WireJSON.decode(Sent.self, from: response.body).event_id)
    }
}
