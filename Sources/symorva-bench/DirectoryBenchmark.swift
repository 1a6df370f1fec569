import Foundation
import SymorvaChat
import SymorvaDirectory
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaPush
import SymorvaRuntime
import SymorvaServices
import SymorvaTransport

/// `symorva-bench directory [--rooms N] [--searches N] [--pushes N]`: against the local dev
/// servers (`Scripts/dev-server start --test`, addresses from `SYMORVA_HOMESERVER_URL` and
/// `SYMORVA_SERVICES_URL`):
///
/// 1. **Public-room search.** Makes sure the homeserver's room directory holds at least `N`
///    published rooms named `bench-room-NNNNN` (creating the missing ones, 8 at a time; they
///    stay for later runs), then times `PublicRoomsClient.page(term:limit: 20)` signed out (as
///    a guest) for `--searches` different terms, and the plain first page: p50/p90/max.
/// 2. **Push latency.** A sets a pusher to the services' reference Push Gateway through
///    `PushClient`; B sends `--pushes` messages one at a time; each is timed from B's send
///    request to the first poll (every 5 ms) that finds A's notification at the gateway.
struct DirectoryBenchmark: DevServerBenchmark {
    /// The mode's word on the command line.
    let name = "directory"
    /// The mode's arguments for the usage text.
    let argumentsSynopsis = "[--rooms N] [--searches N] [--pushes N]"
    /// What the mode measures.
    let summary = "public-room search over N published rooms; message → gateway notification (SYMORVA_* env)"

    let optionNames: Set<String> = ["rooms", "searches", "pushes"]

    struct Settings {
        var rooms: Int
        var searches: Int
        var pushes: Int
    }

    func settings(from options: inout Options) -> Settings {
        Settings(
            rooms: options.integer("rooms", default: 10_000), searches: options.integer("searches", default: 200),
            pushes: options.integer("pushes", default: 50))
    }

    func measure(_ options: Settings, homeserver: URL, services: URL) async throws {
        guard let homeserverURL = HomeserverURL(homeserver.absoluteString) else {
            throw BenchFailure("SYMORVA_HOMESERVER_URL is not a homeserver URL")
        }
        let transport = CurlTransport()
        let alice = try await Self.member("bench-dir-a", homeserver, homeserverURL, services, transport)
        try await seed(options.rooms, as: alice, transport: transport)
        try await searches(options, homeserverURL: homeserverURL, transport: transport)
        let bob = try await Self.member("bench-dir-b", homeserver, homeserverURL, services, transport)
        try await pushes(options.pushes, alice: alice, bob: bob, services: services, transport: transport)
    }

    struct Member {
        let userID: UserID
        let requester: FixedTokenMatrixRequester
        let services: CommunityServicesClient
    }

    static func member(
        _ prefix: String, _ homeserver: URL, _ homeserverURL: HomeserverURL, _ servicesURL: URL,
        _ transport: CurlTransport
    ) async throws -> Member {
        let account = try await BenchAccount.register(
            prefix, homeserver: homeserver, services: servicesURL, transport: transport)
        let requester = FixedTokenMatrixRequester(
            homeserverURL: homeserverURL, userID: account.userID, accessToken: account.token, transport: transport)
        return Member(userID: account.userID, requester: requester, services: account.services)
    }

    static func createRoom(_ body: String, as member: Member) async throws -> RoomID {
        let response = try await member.requester.send(
            MatrixEndpoint(
                method: .post, path: "/_matrix/client/v3/createRoom", body: Array(body.utf8), requiresAuth: true))
        struct Created: Decodable { let room_id: String }
        return RoomID(try WireJSON.decode(Created.self, from: response.body).room_id)
    }

    // MARK: Search

    private func seed(_ count: Int, as member: Member, transport: CurlTransport) async throws {
        let listing = PublicRoomsClient(homeserverURL: member.requester.homeserverURL, transport: transport)
        let existing = try await listing.page(term: "bench-room", limit: 1).totalEstimate ?? 0
        guard existing < count else {
            print("directory: \(existing) bench rooms already published (wanted \(count))")
            return
        }
        print("directory: publishing \(count - existing) rooms (\(existing) there)…")
        let clock = ContinuousClock()
        let started = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = existing
            func add() {
                let index = next
                next += 1
                group.addTask {
                    let name = String(format: "bench-room-%05d", index)
                    _ = try await Self.createRoom(
                        #"{"preset": "public_chat", "visibility": "public", "name": "\#(name)", "topic": "benchmark room \#(index)"}"#,
                        as: member)
                }
            }
            for _ in 0..<min(8, count - existing) { add() }
            while try await group.next() != nil {
                if next < count { add() }
            }
        }
        print("directory: published in \(fixed(seconds(clock.now - started), 1)) s")
    }

    private func searches(_ options: Settings, homeserverURL: HomeserverURL, transport: CurlTransport) async throws {
        let rooms = PublicRoomsClient(homeserverURL: homeserverURL, transport: transport)
        _ = try await rooms.page(term: "bench-room-00000", limit: 20)  // registers the guest
        let clock = ContinuousClock()
        var search: [Double] = []
        var listing: [Double] = []
        var total = 0
        for index in 0..<options.searches {
            let term = String(format: "bench-room-%05d", (index * 7_919) % max(1, options.rooms))
            let start = clock.now
            let page = try await rooms.page(term: term, limit: 20)
            search.append(seconds(clock.now - start) * 1_000)
            guard !page.items.isEmpty else { throw BenchFailure("no room found for \(term)") }
            let listStart = clock.now
            let first = try await rooms.page(limit: 20)
            listing.append(seconds(clock.now - listStart) * 1_000)
            total = first.totalEstimate ?? total
        }
        print("directory: \(options.searches) signed-out searches over \(total) published rooms, first page of 20")
        report("search", search)
        report("list page 1", listing)
    }

    // MARK: Push

    private func pushes(_ count: Int, alice: Member, bob: Member, services: URL, transport: CurlTransport) async throws
    {
        let folder = NSTemporaryDirectory() + "symorva-bench-push-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let scope = AccountScope(label: alice.userID.rawValue)
        defer { scope.end(reason: .shutdown) }
        let push = PushClient(dataDirectory: folder, chat: ChatClient(), servicesURL: services.absoluteString)
        push.follow(
            AccountPush(userID: alice.userID, requester: alice.requester, services: alice.services, scope: scope))
        let roomID = try await Self.createRoom(#"{"preset": "public_chat", "name": "bench push"}"#, as: alice)
        _ = try await bob.requester.send(ChatAPI.join(roomID.rawValue))
        let pushkey = "bench-\(UUID().uuidString)"
        let appID = "org.symorva.bench.dev"
        try await push.registerWithCommunityGateway(pushkey: pushkey, appID: appID)
        try await push.setPusher(
            pushkey: pushkey, appID: appID, appDisplayName: "bench", deviceDisplayName: "bench",
            gatewayURL: push.communityGatewayURL)

        let clock = ContinuousClock()
        var latencies: [Double] = []
        var after = 0
        for index in 0..<count {
            let path =
                "/_matrix/client/v3/rooms/\(percentEncoded(roomID.rawValue))/send/m.room.message/bench-\(UUID().uuidString)"
            let start = clock.now
            let response = try await bob.requester.send(
                MatrixEndpoint(
                    method: .put, path: path, body: Array(#"{"msgtype": "m.text", "body": "ping \#(index)"}"#.utf8),
                    requiresAuth: true))
            struct Sent: Decodable { let event_id: String }
            let eventID = try WireJSON.decode(Sent.self, from: response.body).event_id
            while true {
                let seen = try await push.communityGatewayNotifications(pushkey: pushkey, appID: appID, after: after)
                if let hit = seen.first(where: { $0.eventID == eventID }) {
                    latencies.append(seconds(clock.now - start) * 1_000)
                    after = max(after, hit.sequence)
                    break
                }
                guard clock.now - start < .seconds(30) else { throw BenchFailure("no push for message \(index)") }
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        print("directory: \(count) messages sent → notification at the gateway (polled every 5 ms)")
        report("push", latencies)
    }

    // MARK: Figures

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }

    private func report(_ label: String, _ samples: [Double]) {
        let sorted = samples.sorted()
        print(
            "  \(padded(label, 12)) p50 \(fixed(percentile(sorted, 0.5), 2)) ms  p90 \(fixed(percentile(sorted, 0.9), 2)) ms  max \(fixed(sorted.last ?? 0, 2)) ms"
        )
    }
}
