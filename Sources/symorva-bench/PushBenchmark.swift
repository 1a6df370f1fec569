import Foundation
import SymorvaChat
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaPush
import SymorvaRuntime
import SymorvaServices
import SymorvaTesting

/// `symorva-bench push [--keywords N] [--muted N] [--reads N] [--pushers N]`: the shipped push
/// code on a scripted homeserver (no server, no network, so the figures are the SDK's own work):
///
/// 1. **Reading the rules.** `PushClient.rules()` over Synapse's default ruleset plus
///    `--keywords` keyword rules and `--muted` muted rooms (``PushRulesJSON``): the requester,
///    the one JSON coder and the mapping to `PushRule`s, `--reads` times; µs per read, p50/p90/max,
///    and rules read per second.
/// 2. **Registering a pusher.** `--pushers` rounds of `setPusher` then `removePusher` through
///    `PushClient`, the `PusherMachine` host in the account's scope, its interpreter and the
///    requester; µs per round trip, p50/p90/max.
struct PushBenchmark: BenchmarkMode {
    let name = "push"
    let argumentsSynopsis = "[--keywords N] [--muted N] [--reads N] [--pushers N]"
    let summary = "push rules read (default ruleset + N keywords) and pusher set/remove, scripted homeserver"

    func run(arguments: [String]) async -> Int32 {
        var options = Options(arguments, known: ["keywords", "muted", "reads", "pushers"])
        let keywords = options.integer("keywords", default: 200, minimum: 0)
        let muted = options.integer("muted", default: 100, minimum: 0)
        let reads = options.integer("reads", default: 2_000)
        let pushers = options.integer("pushers", default: 2_000)
        guard options.problems.isEmpty else {
            print("usage: symorva-bench \(name) \(argumentsSynopsis)  (\(options.problems.joined(separator: "; ")))")
            return 2
        }
        let folder = NSTemporaryDirectory() + "symorva-bench-push-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let rules = PushRulesJSON.synapseDefaults(
            keywords: (0..<keywords).map { "keyword\($0)" }, mutedRooms: (0..<muted).map { "!muted\($0):localhost" })
        let transport = ScriptedHTTPTransport.communityServices()
        transport.onUnrecorded("GET", "/_matrix/client/v3/pushrules") { _ in .json(200, rules) }
        transport.onUnrecorded("POST", "/_matrix/client/v3/pushers/set") { _ in .json(200, "{}") }
        let scope = AccountScope(label: "bench")
        defer { scope.end(reason: .signedOut) }
        let push = Self.client(transport: transport, folder: folder, scope: scope)
        do throws(PushError) {
            let count = try await push.rules().count
            print("push: \(count) rules (\(keywords) keywords, \(muted) muted rooms, \(rules.utf8.count) bytes)")
            var timings: [Double] = []
            timings.reserveCapacity(reads)
            for _ in 0..<reads {
                let start = ContinuousClock.now
                _ = try await push.rules()
                timings.append((ContinuousClock.now - start).seconds * 1e6)
            }
            Self.report("rules read", timings, unit: "µs", perSecond: Double(count))
            timings.removeAll(keepingCapacity: true)
            for round in 0..<pushers {
                let start = ContinuousClock.now
                _ = try await push.setPusher(
                    pushkey: "bench-key-\(round)", appID: "org.symorva.bench", appDisplayName: "Bench",
                    deviceDisplayName: "Bench", gatewayURL: "https://push.example.org/_matrix/push/v1/notify")
                try await push.removePusher()
                timings.append((ContinuousClock.now - start).seconds * 1e6)
            }
            Self.report("pusher set+remove", timings, unit: "µs", perSecond: nil)
        } catch {
            print("push: failed: \(error)")
            return 1
        }
        return 0
    }

    /// `community.push` for one account on `transport`, as the community wires it.
    private static func client(transport: ScriptedHTTPTransport, folder: String, scope: AccountScope) -> PushClient {
        let push = PushClient(dataDirectory: folder, chat: ChatClient(), servicesURL: "http://127.0.0.1:9/")
        let services = CommunityServicesClient(
            baseURL: URL(string: "http://127.0.0.1:9")!, transport: transport, tokenSource: NoOpenID())
        let userID = UserID("@bench:localhost")
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL("http://127.0.0.1:9")!, userID: userID, accessToken: Secret("bench-token"),
            transport: transport)
        push.follow(
            AccountPush(userID: userID, requester: requester, services: services, scope: scope, tracer: Tracer()))
        return push
    }

    private static func report(_ label: String, _ timings: [Double], unit: String, perSecond items: Double?) {
        let sorted = timings.sorted()
        let p50 = percentile(sorted, 0.5)
        var line =
            "  \(padded(label, 20, right: true)) p50 \(fixed(p50, 1)) \(unit)  p90 \(fixed(percentile(sorted, 0.9), 1)) \(unit)"
            + "  max \(fixed(sorted.last ?? .nan, 1)) \(unit)  (\(sorted.count) runs)"
        if let items { line += "  \(grouped(items / p50 * 1e6)) rules/s" }
        print(line)
    }

    /// The benchmark makes no services request: no OpenID token is ever asked for.
    private struct NoOpenID: OpenIDTokenSource {
        func requestOpenIDToken() async throws(ServicesError) -> OpenIDToken {
            throw .openIDRefused(.unknown, status: 0)
        }
    }
}
