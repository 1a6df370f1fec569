import Foundation
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices
import SymorvaStore
import SymorvaTransport
import SymorvaWallet

/// `symorva-bench wallet [--transfers N] [--warmup N]`: the wallet's prepare + confirm round
/// trip through the whole SDK — ``AccountWallet``, a ``MachineHost`` per transfer, the
/// ``TransferInterpreter`` (libsodium sealing, the pending-command write to a SQLite file,
/// libcurl) — against the local dev servers (`Scripts/dev-server start --test`), whose
/// addresses it reads from `SYMORVA_HOMESERVER_URL` and `SYMORVA_SERVICES_URL`.
///
/// It registers two members on the homeserver, credits the sender through the server's
/// test-only endpoint, sets both PINs (sealed), then sends `N` transfers of 1.00 ORB one after
/// the other and prints p50/p90/p99/max of the round trip and of its two halves. The confirm
/// half includes the server's argon2id PIN check, which dominates it by design.
struct WalletBenchmark: DevServerBenchmark {
    /// The mode's word on the command line.
    let name = "wallet"
    /// The mode's arguments for the usage text.
    let argumentsSynopsis = "[--transfers N] [--warmup N]"
    /// What the mode measures.
    let summary = "prepare + confirm round trips against the dev servers (SYMORVA_* env)"

    let optionNames: Set<String> = ["transfers", "warmup"]

    struct Settings {
        var transfers: Int
        var warmup: Int
    }

    func settings(from options: inout Options) -> Settings {
        Settings(
            transfers: options.integer("transfers", default: 500),
            warmup: options.integer("warmup", default: 20, minimum: 0))
    }

    func measure(_ options: Settings, homeserver: URL, services: URL) async throws {
        let transport = CurlTransport()
        let orb = Asset(code: "ORB", precision: 2)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("symorva-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        let sender = try await BenchMember.make(
            "bench-sender", homeserver: homeserver, services: services,
            transport: transport, database: folder.appendingPathComponent("sender.sqlite").path)
        let recipient = try await BenchMember.make(
            "bench-recipient", homeserver: homeserver, services: services,
            transport: transport, database: folder.appendingPathComponent("recipient.sqlite").path)
        try await sender.wallet.setPIN(Secret("4711"))
        try await recipient.wallet.setPIN(Secret("2580"))
        let total = options.transfers + options.warmup
        let credit = #"{"user_id": "\#(sender.userID)", "asset": "ORB", "amount": "\#(total + 1).00"}"#
        _ = try await sender.services.send(.post, "/_symorva/v1/test/wallet/credit", json: Array(credit.utf8))

        var roundTrips: [Duration] = []
        var prepares: [Duration] = []
        var confirms: [Duration] = []
        let clock = ContinuousClock()
        let started = clock.now
        for index in 0..<total {
            let start = clock.now
            let draft = try await sender.wallet.prepareTransfer(
                to: recipient.wallet.member, asset: orb, amount: try Amount("1.00"))
            let drafted = clock.now
            let outcome = try await draft.confirm(with: .pin(Secret("4711")))
            let end = clock.now
            guard case .settled = outcome else { throw BenchFailure("transfer \(index) ended \(outcome.caseName)") }
            guard index >= options.warmup else { continue }
            roundTrips.append(end - start)
            prepares.append(drafted - start)
            confirms.append(end - drafted)
        }
        let elapsed = clock.now - started
        sender.scope.end(reason: .shutdown)
        recipient.scope.end(reason: .shutdown)

        print("wallet: \(options.transfers) transfers (+\(options.warmup) warm-up) of 1.00 ORB, one at a time")
        print("  \("".padding(toLength: 12, withPad: " ", startingAt: 0))      p50      p90      p99      max")
        for (label, samples) in [("round trip", roundTrips), ("prepare", prepares), ("confirm", confirms)] {
            let sorted = samples.sorted()
            let columns =
                [0.50, 0.90, 0.99].map { Self.milliseconds(Self.percentile(sorted, $0)) }
                + [Self.milliseconds(sorted.last ?? .zero)]
            print("  \(label.padding(toLength: 12, withPad: " ", startingAt: 0)) \(columns.joined(separator: " ")) ms")
        }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        print("  throughput   \(String(format: "%.1f", Double(total) / seconds)) transfers/s (whole run)")
    }

    /// The nearest-rank percentile of sorted samples.
    static func percentile(_ sorted: [Duration], _ fraction: Double) -> Duration {
        guard !sorted.isEmpty else { return .zero }
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    /// `12.34`-style milliseconds, right-aligned in 8 columns.
    static func milliseconds(_ duration: Duration) -> String {
        let value = duration / .milliseconds(1)
        let text = String(format: "%.2f", value)
        return String(repeating: " ", count: max(0, 8 - text.count)) + text
    }
}

/// A member registered on the homeserver for the benchmark, with their wallet.
/// A member registered on the dev homeserver under a unique name, with a community services
/// client that signs in over OpenID: what every mode against the dev servers starts from.
struct BenchAccount: Sendable {
    let userID: UserID
    let token: Secret<String>
    let services: CommunityServicesClient

    static func register(_ prefix: String, homeserver: URL, services: URL, transport: CurlTransport) async throws
        -> BenchAccount
    {
        let (userID, token) = try await BenchMember.register(
            BenchMember.uniqueName(prefix), homeserver: homeserver, transport: transport)
        guard let member = UserID(userID) else { throw BenchFailure("registration gave '\(userID)', not a user ID") }
        let client = CommunityServicesClient(
            baseURL: services, transport: transport,
            tokenSource: BenchOpenIDSource(
                userID: userID, accessToken: token, homeserver: homeserver, transport: transport))
        return BenchAccount(userID: member, token: token, services: client)
    }
}

struct BenchMember: Sendable {
    let userID: String
    let services: CommunityServicesClient
    let scope: AccountScope
    let wallet: AccountWallet

    static func make(
        _ prefix: String, homeserver: URL, services servicesURL: URL, transport: CurlTransport, database path: String
    ) async throws -> BenchMember {
        let account = try await BenchAccount.register(
            prefix, homeserver: homeserver, services: servicesURL, transport: transport)
        let scope = AccountScope(label: account.userID.rawValue)
        let wallet = try await AccountWallet(
            member: account.userID, services: account.services, database: try await SQLiteDatabase.open(path: path),
            scope: scope, configuration: WalletConfiguration(assets: [Asset(code: "ORB", precision: 2)]))
        return BenchMember(userID: account.userID.rawValue, services: account.services, scope: scope, wallet: wallet)
    }

    /// A new account (`prefix` and a unique suffix) signed in with a requester of its own over
    /// `transport`: what the dev-server benchmarks that talk Matrix start from.
    static func signedIn(_ prefix: String, homeserver: URL, transport: CurlTransport) async throws
        -> (requester: FixedTokenMatrixRequester, userID: UserID)
    {
        guard let homeserverURL = HomeserverURL(homeserver.absoluteString) else {
            throw BenchFailure("SYMORVA_HOMESERVER_URL is not a homeserver URL")
        }
        let (user, token) = try await register(uniqueName(prefix), homeserver: homeserver, transport: transport)
        guard let userID = UserID(user) else { throw BenchFailure("registration gave '\(user)', not a user ID") }
        let requester = FixedTokenMatrixRequester(
            homeserverURL: homeserverURL, userID: userID, accessToken: token, transport: transport)
        return (requester, userID)
    }

    /// A user name no earlier run took: `prefix`, the time and a random number.
    static func uniqueName(_ prefix: String) -> String {
        "\(prefix)-\(UInt64(Date().timeIntervalSince1970 * 1000))-\(UInt32.random(in: 0...UInt32.max))"
    }

    /// Registers with user-interactive auth: the first call returns the session, the second
    /// completes the dummy stage.
    static func register(
        _ username: String, homeserver: URL, transport: CurlTransport
    ) async throws -> (String, Secret<String>) {
        let url = homeserver.appending(path: "/_matrix/client/v3/register")
        let password = "correct horse battery staple"
        let first = try await transport.send(
            .json(.post, url: url, body: Array(#"{"username": "\#(username)", "password": "\#(password)"}"#.utf8)))
        struct Challenge: Decodable { let session: String }
        let session = try WireJSON.decode(Challenge.self, from: first.body).session
        let body = """
            {"username": "\(username)", "password": "\(password)", "auth": {"type": "m.login.dummy", "session": "\(session)"}}
            """
        let second = try await transport.send(.json(.post, url: url, body: Array(body.utf8)))
        guard second.isSuccess else { throw BenchFailure("registration answered \(second.status)") }
        struct Registered: Decodable {
            let user_id: String
            let access_token: String
        }
        let registered = try WireJSON.decode(Registered.self, from: second.body)
        return (registered.user_id, Secret(registered.access_token))
    }
}

/// OpenID tokens straight from the homeserver.
struct BenchOpenIDSource: OpenIDTokenSource {
    let userID: String
    let accessToken: Secret<String>
    let homeserver: URL
    let transport: CurlTransport

    func requestOpenIDToken() async throws(ServicesError) -> OpenIDToken {
        let url = homeserver.appending(path: "/_matrix/client/v3/user/\(userID)/openid/request_token")
        let response: HTTPResponse
        do {
            response = try await transport.send(
                .json(.post, url: url, body: Array("{}".utf8), bearerToken: accessToken))
        } catch {
            throw .transport(error)
        }
        struct Answer: Decodable {
            let access_token: String
            let matrix_server_name: String
            let expires_in: Int
        }
        guard response.isSuccess, let answer = WireJSON.decodeIfValid(Answer.self, from: response.body) else {
            throw .malformedResponse(status: response.status)
        }
        return OpenIDToken(
            accessToken: Secret(answer.access_token), matrixServerName: answer.matrix_server_name,
            expiresIn: answer.expires_in)
    }
}

struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
