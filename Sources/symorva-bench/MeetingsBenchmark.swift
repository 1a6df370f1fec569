import Foundation
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaServices
import SymorvaTransport

/// `symorva-bench meetings [--rounds N]`: the meeting control plane through the whole SDK
/// (``AccountMeetings``, a meeting machine host per member, the services over libcurl) against the
/// dev servers with Janus (`Scripts/dev-server start --test`; `SYMORVA_HOMESERVER_URL`,
/// `SYMORVA_SERVICES_URL`).
///
/// Each round opens a meeting in a fresh room (stage capacity 2) with three fresh members, whose
/// services sessions are made before the clock runs: the host and a first member go
/// on stage, a third member joins as a listener and plays the stream, raises a hand, and the host
/// demotes the first member and promotes the listener. It prints p50/p99 of:
/// - join → admitted role (the listener's join; the host's, which opens the meeting and its Janus
///   room and packager, apart);
/// - hand raised → seen by the host (the host's change feed);
/// - promotion → joined to the media room (promote request, the listener's feed, its own
///   descriptor, and the services' AudioBridge join of the member, `POST …/media/connect`);
/// - listener live latency: the age of the newest segment when the playback stream fetched it.
struct MeetingsBenchmark: DevServerBenchmark {
    /// The mode's word on the command line.
    let name = "meetings"
    /// The mode's arguments for the usage text.
    let argumentsSynopsis = "[--rounds N]"
    /// What the mode measures.
    let summary = "join, hand, promotion and playback latency against the dev servers with Janus (SYMORVA_* env)"

    let optionNames: Set<String> = ["rounds"]

    func settings(from options: inout Options) -> Int { options.integer("rounds", default: 10) }

    private struct Member {
        let userID: UserID
        let token: Secret<String>
        let meetings: AccountMeetings
        let services: CommunityServicesClient
    }

    private func member(_ prefix: String, homeserver: URL, services: URL, transport: CurlTransport) async throws
        -> Member
    {
        let account = try await BenchAccount.register(
            prefix, homeserver: homeserver, services: services, transport: transport)
        let meetings = AccountMeetings(
            member: account.userID, services: account.services, scope: AccountScope(label: account.userID.rawValue),
            feedWait: .seconds(10), tracer: Tracer())
        // The services session (OpenID exchange) is made before anything is measured.
        _ = try await account.services.send(.get, "/_symorva/v1/whoami")
        return Member(userID: account.userID, token: account.token, meetings: meetings, services: account.services)
    }

    func measure(_ rounds: Int, homeserver: URL, services: URL) async throws {
        let transport = CurlTransport()
        let clock = ContinuousClock()
        var opens: [Duration] = []
        var joins: [Duration] = []
        var hands: [Duration] = []
        var promotions: [Duration] = []
        var latencies: [Duration] = []
        for _ in 0..<rounds {
            let host = try await member("bench-host", homeserver: homeserver, services: services, transport: transport)
            let first = try await member("bench-a", homeserver: homeserver, services: services, transport: transport)
            let listener = try await member("bench-b", homeserver: homeserver, services: services, transport: transport)
            let roomID =
                try await matrix(
                    transport, homeserver, host.token, "/_matrix/client/v3/createRoom", ["preset": "public_chat"])[
                    "room_id"]
                as? String
            guard let roomID = roomID.map({ RoomID(rawValue: $0) }) else {
                throw BenchFailure("createRoom gave no room")
            }
            let escaped = roomID.rawValue.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            for joiner in [first, listener] {
                _ = try await matrix(transport, homeserver, joiner.token, "/_matrix/client/v3/join/\(escaped)", [:])
            }

            var start = clock.now
            let hostRoom = try await host.meetings.join(roomID: roomID)
            opens.append(clock.now - start)
            _ = try await first.meetings.join(roomID: roomID)
            start = clock.now
            let listenerRoom = try await listener.meetings.join(roomID: roomID)
            joins.append(clock.now - start)
            guard case .listener(let playback) = listenerRoom.role.value else {
                throw BenchFailure("the third member was not admitted as a listener")
            }
            playback.play()

            start = clock.now
            try await listenerRoom.raiseHand()
            _ = try await until(hostRoom.participants) { (people: [MeetingParticipant]) in
                people.contains { $0.userID == listener.userID && $0.handRaised }
            }
            hands.append(clock.now - start)

            if let latency = try? await until(
                playback.liveLatency, timeout: .seconds(15), { (value: Duration?) in value != nil })
            {
                latencies.append(latency)
            }

            try await hostRoom.demote(first.userID)
            start = clock.now
            try await hostRoom.promote(listener.userID)
            let role = try await until(listenerRoom.role) { (role: MeetingRole) in role.kind == ParticipantRole.stage }
            guard case .stage = role else { throw BenchFailure("no stage session") }
            // The services join the promoted member to the AudioBridge room and hand over the session.
            let answer = try await listener.services.send(
                .post, "/_symorva/v1/meetings/\(listenerRoom.meetingID.rawValue)/media/connect")
            let joined = (try JSONSerialization.jsonObject(with: Data(answer)) as? [String: Any])?["handle_id"]
            guard joined != nil else { throw BenchFailure("the services did not join the promoted member") }
            promotions.append(clock.now - start)

            try await hostRoom.end()
        }
        print("meetings: \(rounds) rounds (a fresh room and meeting each, stage capacity 2)")
        print("                                           p50        p99        max")
        report("open (first join: Janus room, packager)", opens)
        report("join → admitted role (listener)", joins)
        report("hand raised → seen by the host", hands)
        report("promotion → joined to the media room", promotions)
        report("listener live latency (newest segment age)", latencies)
    }

    private func report(_ label: String, _ samples: [Duration]) {
        let sorted = samples.sorted()
        guard !sorted.isEmpty else {
            print("  \(label.padding(toLength: 42, withPad: " ", startingAt: 0))  no samples")
            return
        }
        let columns = [0.50, 0.99, 1.0].map { WalletBenchmark.milliseconds(WalletBenchmark.percentile(sorted, $0)) }
        print("  \(label.padding(toLength: 42, withPad: " ", startingAt: 0)) \(columns.joined(separator: " ")) ms")
    }

    private func until<Value: Sendable>(
        _ value: ObservableValue<Value>, timeout: Duration = .seconds(20),
        _ predicate: @escaping @Sendable (Value) -> Bool
    ) async throws -> Value {
        let found = await withTaskGroup(of: Value?.self) { group in
            group.addTask { await value.first(until: { predicate($0) ? $0 : nil }) }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        guard let found else { throw BenchFailure("timed out waiting for a value") }
        return found
    }

    private func matrix(
        _ transport: CurlTransport, _ homeserver: URL, _ token: Secret<String>, _ path: String, _ body: [String: Any]
    ) async throws -> [String: Any] {
        var components = URLComponents(url: homeserver, resolvingAgainstBaseURL: false)!
        components.percentEncodedPath = path
        let response = try await transport.send(
            .json(
                .post, url: components.url!, body: Array(try JSONSerialization.data(withJSONObject: body)),
                bearerToken: token))
        guard response.isSuccess else { throw BenchFailure("\(path) answered \(response.status)") }
        return (try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]) ?? [:]
    }
}
