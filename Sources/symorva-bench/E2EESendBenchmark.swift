import Foundation
import SymorvaChatStore
import SymorvaCrypto
import SymorvaE2EE
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import SymorvaTransport

/// `symorva-bench e2ee-send [--runs N] [--users N] [--devices N]`: the first message in a new
/// encrypted room whose members' devices have no Olm session with the sender, against the local
/// dev servers (`Scripts/dev-server start --test`; `source "$(Scripts/dev-server envfile)"`).
///
/// Before the clock runs: `--users` members (10) with `--devices` devices each (5: 50 member
/// devices), each device's keys made and uploaded by the SDK's crypto engine (device keys, 50
/// one-time keys, a fallback key). Each run then registers a fresh sender (a
/// ``SymorvaCommunity`` with the crypto and chat modules, so it has no Olm session with anyone),
/// waits until its keys are published, creates an encrypted room inviting every member, and
/// times `Conversation.send(.text(…))` until the receipt says `sent` (the server answered the
/// `PUT /send`): the send queue's `encrypting` step (members tracked, device lists queried,
/// one `keys/claim`, 50 Olm sessions created and the `m.room_key` Olm-encrypted for each,
/// `sendToDevice`, the Megolm encryption) and the send. A transport wrapper notes every request
/// with its start and end, which splits the time into the requests and the local work between.
struct E2EESendBenchmark: DevServerBenchmark {
    /// The mode's word on the command line.
    let name = "e2ee-send"
    /// The mode's arguments for the usage text.
    let argumentsSynopsis = "[--runs N] [--users N] [--devices N] [--immediate 1]"
    /// What the mode measures.
    let summary = "send → on the server, new encrypted room, 50 devices without Olm sessions (SYMORVA_* env)"

    let optionNames: Set<String> = ["runs", "users", "devices", "immediate"]

    struct Settings {
        var runs: Int
        var users: Int
        var devices: Int
        var immediate: Bool
    }

    func settings(from options: inout Options) -> Settings {
        Settings(
            runs: options.integer("runs", default: 10), users: options.integer("users", default: 10),
            devices: options.integer("devices", default: 5),
            immediate: options.string("immediate", default: "0") == "1")
    }

    func measure(_ settings: Settings, homeserver: URL, services: URL) async throws {
        try await measure(
            runs: settings.runs, users: settings.users, devices: settings.devices, immediate: settings.immediate,
            homeserver: homeserver, services: services)
    }

    /// One run's figures, in seconds.
    struct Run {
        var total: Double
        /// From `createRoom` returning to every member device known (not timed; 0 with `--immediate`).
        var settle: Double
        /// The `keys/query` requests of that time, and their summed duration.
        var backgroundQueries: Int
        var backgroundQuery: Double
        var phases: [String: Double]
        var toDeviceMessages: Int
        var queriedBeforeSend: Bool
    }

    private func measure(
        runs: Int, users: Int, devices: Int, immediate: Bool, homeserver: URL, services: URL
    ) async throws {
        let serverName = ProcessInfo.processInfo.environment["SYMORVA_SERVER_NAME"] ?? "localhost"
        let transport = CurlTransport()
        let clock = ContinuousClock()
        let setupStart = clock.now
        var members: [UserID] = []
        for index in 0..<users {
            members.append(
                try await Self.member(index, devices: devices, homeserver: homeserver, transport: transport))
        }
        print(
            "e2ee-send: \(users) members × \(devices) devices = \(users * devices) devices with uploaded keys "
                + "(setup \(fixed((clock.now - setupStart).seconds, 1)) s); load average \(MegolmBenchmark.loadAverage())"
        )

        var results: [Run] = []
        for run in 0...runs {
            let result = try await Self.oneRun(
                members: members, devices: users * devices, immediate: immediate, homeserver: homeserver,
                serverName: serverName, services: services)
            print(
                "  run \(run)\(run == 0 ? " (warm-up)" : ""): \(fixed(result.total * 1000, 1)) ms, room key to "
                    + "\(result.toDeviceMessages) of \(users * devices) devices"
                    + (result.queriedBeforeSend ? ", no keys/query in the window" : "")
                    + (immediate
                        ? ""
                        : "; before: members and devices known \(fixed(result.settle * 1000, 1)) ms after "
                            + "createRoom, \(result.backgroundQueries) keys/query (\(fixed(result.backgroundQuery * 1000, 1)) ms)")
            )
            if run == 0 { continue }  // warm-up: the first run pays for the server's caches
            results.append(result)
        }
        let phases = [
            "before the first request (members, tracking, sessions looked up)", "keys/query", "keys/claim",
            "Olm: 50 sessions created, m.room_key encrypted (between claim and sendToDevice)", "sendToDevice",
            "Megolm encrypt, stored (between sendToDevice and send)", "PUT /send", "after the answer (receipt)",
        ]
        print("  \(runs) runs (+1 warm-up), send → receipt sent:")
        let totals = Repeated(values: results.map(\.total))
        print(
            "  total                         p50 \(fixed(totals.median * 1000, 1)) ms  "
                + "[\(fixed(totals.min * 1000, 1))–\(fixed(totals.max * 1000, 1))]")
        for phase in phases {
            let values = Repeated(values: results.map { $0.phases[phase] ?? 0 })
            print(
                "    \(padded(fixed(values.median * 1000, 1), 7)) ms [\(fixed(values.min * 1000, 1))–"
                    + "\(fixed(values.max * 1000, 1))]  \(phase)")
        }
        print("  load average afterwards \(MegolmBenchmark.loadAverage())")
    }

    /// Registers member `index` and gives them `devices` devices with keys uploaded by the SDK's
    /// crypto engine.
    static func member(_ index: Int, devices: Int, homeserver: URL, transport: CurlTransport) async throws -> UserID {
        let username = "bench-e2ee-\(UInt64(Date().timeIntervalSince1970 * 1000))-\(index)"
        let (registered, _) = try await BenchMember.register(username, homeserver: homeserver, transport: transport)
        guard let userID = UserID(registered), let base = HomeserverURL(homeserver.absoluteString) else {
            throw BenchFailure("registration gave '\(registered)'")
        }
        var deviceKeys: [String: JSONValue] = [:]
        var token = Secret("")
        for _ in 0..<devices {
            let login =
                #"{"type": "m.login.password", "identifier": {"type": "m.id.user", "user": "\#(username)"}, "#
                + #""password": "correct horse battery staple"}"#
            let answer = try await transport.send(
                .json(.post, url: homeserver.appending(path: "/_matrix/client/v3/login"), body: Array(login.utf8)))
            struct LoggedIn: Decodable {
                let access_token: String
                let device_id: String
            }
            guard answer.isSuccess else { throw BenchFailure("login answered \(answer.status)") }
            let loggedIn = try WireJSON.decode(LoggedIn.self, from: answer.body)
            let database = try await SQLiteDatabase.open(path: ":memory:", migrations: ChatSchema.migrations)
            let store = try await CryptoStore.migrating(on: database, userID: userID, key: try SecretBox.generateKey())
            let engine = CryptoEngine(
                driver: OlmCryptoDriver(), store: store, userID: userID, deviceID: loggedIn.device_id)
            _ = try await engine.load()
            let upload = try await engine.prepareUpload(
                KeyUploadPlan(deviceKeys: true, newOneTimeKeys: 50, rotateFallbackKey: true))
            _ = try await MatrixExchange.perform(
                upload, on: base, token: Secret(loggedIn.access_token), timeout: nil, transport: transport)
            try await engine.uploadAnswered(includedDeviceKeys: true, nowMilliseconds: 0)
            if let body = upload.body, case .object(let top)? = try? JSONValue(parsing: body),
                let keys = top["device_keys"]
            {
                deviceKeys[loggedIn.device_id] = keys
            }
            token = Secret(loggedIn.access_token)
        }
        // Under the default room key policy (MSC4153's crossSignedOnly) the sender shares its
        // key only with devices their owner cross-signed: the member's identity signs them all.
        try await BenchCrossSigning.crossSign(
            userID, devices: deviceKeys, token: token, base: base, transport: transport)
        return userID
    }

    /// One fresh sender, one new encrypted room, one timed send.
    static func oneRun(
        members: [UserID], devices: Int, immediate: Bool, homeserver: URL, serverName: String, services: URL
    ) async throws -> Run {
        let folder = NSTemporaryDirectory() + "symorva-bench-e2ee-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let transport = TimingTransport(CurlTransport())
        guard let homeserverURL = HomeserverURL(homeserver.absoluteString) else { throw BenchFailure("bad URL") }
        let configuration = SymorvaConfiguration(
            community: .init(name: "Benchmark"),
            homeserver: .init(url: homeserverURL, serverName: serverName),
            services: .init(url: services),
            modules: .init(
                meetings: .init(isEnabled: false), aiStudio: .init(isEnabled: false),
                wallet: .init(isEnabled: false, assets: []), directory: .init(isEnabled: false)))
        let community = SymorvaCommunity(
            configuration: configuration, environment: SymorvaEnvironment(dataDirectory: folder, transport: transport),
            modules: [.crypto, .chat])
        let username = BenchMember.uniqueName("bench-sender")
        _ = try await community.session.register(username: username, password: Secret("correct horse battery staple"))
        guard let crypto = community.module(AccountCrypto.self) else { throw BenchFailure("no crypto module") }
        _ = try await crypto.state.wait(timeout: .seconds(60)) { state in
            if case .ready(let work) = state { return !work.isUploading }
            return false
        }
        let roomID = try await community.chat.createRoom(name: "Bench", invitees: members, isEncrypted: true)
        let conversation = try await community.chat.conversation(id: roomID)
        let clock = ContinuousClock()
        let created = clock.now
        if !immediate {
            // The list shows a new room from the first sync that has it, which may come before the
            // server has sent every invite: a message sent then would not reach the members not yet
            // in the room's state (the SDK's race, see docs/benchmarks.md). Wait until every member
            // device is known (the crypto module queries them in the background).
            let deadline = clock.now + .seconds(60)
            while clock.now < deadline {
                var known = 0
                for member in members { known += try await crypto.devices(of: member).count }
                if known >= devices { break }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        let start = clock.now
        let receipt = try await conversation.send(.text("the first message of the room"))
        _ = try await receipt.state.wait(timeout: .seconds(120)) { state in
            if case .sent = state { return true }
            if case .failed = state { return true }
            return false
        }
        let end = clock.now
        guard case .sent = receipt.state.value else { throw BenchFailure("send ended \(receipt.state.value)") }
        await community.shutdown()

        let background = transport.records.filter {
            $0.start >= created && $0.end <= start && $0.path.contains("/keys/query")
        }
        let records = transport.records.filter { $0.end > start && $0.start < end && !$0.path.hasSuffix("/sync") }
        func first(_ suffix: String) -> TimingTransport.Record? { records.first { $0.path.contains(suffix) } }
        let query = first("/keys/query")
        let claim = first("/keys/claim")
        let toDevice = records.last { $0.path.contains("/sendToDevice/") }
        let send = first("/send/m.room.")
        guard let claim, let toDevice, let send else {
            throw BenchFailure("missing requests: \(records.map(\.path))")
        }
        let firstRequest = query ?? claim
        var phases: [String: Double] = [:]
        phases["before the first request (members, tracking, sessions looked up)"] =
            (firstRequest.start - start).seconds
        if let query { phases["keys/query"] = (query.end - query.start).seconds }
        phases["keys/claim"] = (claim.end - claim.start).seconds
        phases["Olm: 50 sessions created, m.room_key encrypted (between claim and sendToDevice)"] =
            (toDevice.start - claim.end).seconds
        phases["sendToDevice"] = (toDevice.end - toDevice.start).seconds
        phases["Megolm encrypt, stored (between sendToDevice and send)"] = (send.start - toDevice.end).seconds
        phases["PUT /send"] = (send.end - send.start).seconds
        phases["after the answer (receipt)"] = (end - send.end).seconds
        if let query, claim.start > query.end {
            phases["before the first request (members, tracking, sessions looked up)"]! +=
                (claim.start - query.end).seconds
        }
        return Run(
            total: (end - start).seconds, settle: (start - created).seconds, backgroundQueries: background.count,
            backgroundQuery: background.reduce(0) { $0 + ($1.end - $1.start).seconds }, phases: phases,
            toDeviceMessages: toDevice.toDeviceMessages,
            queriedBeforeSend: query == nil)
    }
}

/// A transport that notes each request's path, start and end (and, for `sendToDevice`, how
/// many messages it carried).
final class TimingTransport: HTTPTransport {
    struct Record: Sendable {
        var path: String
        var start: ContinuousClock.Instant
        var end: ContinuousClock.Instant
        var toDeviceMessages: Int
    }

    private let base: any HTTPTransport
    private let noted = Lock<[Record]>([])

    init(_ base: any HTTPTransport) { self.base = base }

    /// Every request so far, in the order they ended.
    var records: [Record] { noted.withLock { $0 } }

    func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        let start = ContinuousClock.now
        let response = try await base.send(request)
        let end = ContinuousClock.now
        let path = request.url.path
        var messages = 0
        if path.contains("/sendToDevice/"),
            case .object(let top)? = try? JSONValue(parsing: request.body), case .object(let users)? = top["messages"]
        {
            for case .object(let devices) in users.values { messages += devices.count }
        }
        if ProcessInfo.processInfo.environment["BENCH_DUMP"] != nil,
            path.contains("/keys/") || path.contains("/sendToDevice/")
        {
            writeStandardError(
                "\(path)\n> \(String(decoding: request.body.prefix(3000), as: UTF8.self))\n< \(String(decoding: response.body.prefix(600), as: UTF8.self))\n"
            )
        }
        noted.withLock { $0.append(Record(path: path, start: start, end: end, toDeviceMessages: messages)) }
        return response
    }
}
