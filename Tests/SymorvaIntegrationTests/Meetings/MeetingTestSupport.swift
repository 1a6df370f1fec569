import Foundation
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaServices
import SymorvaTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The Janus HTTP API of the dev environment (`SYMORVA_JANUS_URL`), when it runs.
enum DevJanus {
    static let url: URL? = ProcessInfo.processInfo.environment["SYMORVA_JANUS_URL"].flatMap(URL.init(string:))
    static var isAvailable: Bool { url != nil && DevEnvironment.isAvailable }

    /// Kills the dev environment's Janus and starts it again on the same port
    /// (`Scripts/dev-server restart-janus`), as a crash would: every session and AudioBridge room
    /// is gone until the services put the rooms back. Returns once Janus answers.
    static func restart() async throws {
        let script = try ChartLocator.packageRoot().appending(path: "Scripts/dev-server")
        let output = FileManager.default.temporaryDirectory.appending(path: "restart-janus-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [script.path, "restart-janus"]
        process.environment = ProcessInfo.processInfo.environment  // with the env file's SYMORVA_STATE_DIR
        let log = try FileHandle(forWritingTo: output)
        process.standardOutput = log
        process.standardError = log
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch { continuation.resume(throwing: error) }
        }
        try? log.close()
        guard status == 0 else {
            let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            throw IntegrationFailure("Scripts/dev-server restart-janus exited with \(status): \(text)")
        }
    }
}

/// Cuts the media path on loopback: every UDP packet to or from the dev Janus's RTP ports
/// (16384-32767, the range `configure_janus.py` gives it, outside Linux's ephemeral ports) is
/// held back by a traffic-control class of 8 bit/s with a one-packet queue, while TCP (HTTP
/// signalling) and every other port pass. Needs `tc` (iproute2, installed by the scripts) and
/// CAP_NET_ADMIN: root, or `sudo -n`.
enum LoopbackUDPBlock {
    static let janusPorts = "16384-32767"

    /// Blocks the packets to Janus, and (`bothWays`) those from it.
    static func start(bothWays: Bool = true) throws {
        // 16384-32767 is 0x4000 under the mask 0xc000.
        let filter = "tc filter add dev lo parent 1: protocol ip prio"
        let udp = "u32 match ip protocol 17 0xff match ip"
        try run(
            [
                "tc qdisc add dev lo root handle 1: htb default 10",
                "tc class add dev lo parent 1: classid 1:10 htb rate 10gbit",
                "tc class add dev lo parent 1: classid 1:20 htb rate 8bit ceil 8bit",
                "tc qdisc add dev lo parent 1:20 handle 20: pfifo limit 1",
                "\(filter) 1 \(udp) dport 16384 0xc000 flowid 1:20",
            ] + (bothWays ? ["\(filter) 2 \(udp) sport 16384 0xc000 flowid 1:20"] : []))
    }

    /// Runs `body` with the block on, and removes it whatever `body` does.
    static func during<T: Sendable>(bothWays: Bool, _ body: () async throws -> T) async throws -> T {
        try start(bothWays: bothWays)
        do {
            let result = try await body()
            stop()
            return result
        } catch {
            stop()
            throw error
        }
    }

    /// Removes the block (and nothing else: loopback has no qdisc of its own).
    static func stop() {
        try? run(["tc qdisc del dev lo root"])
    }

    /// Whether the dev Janus uses the range the block cuts.
    static func janusUsesTheBlockedPorts() throws -> Bool {
        guard let state = ProcessInfo.processInfo.environment["SYMORVA_STATE_DIR"] else {
            throw IntegrationFailure("SYMORVA_STATE_DIR is not set (the env file of Scripts/dev-server)")
        }
        return try String(contentsOfFile: state + "/janus/janus.jcfg", encoding: .utf8).contains(
            "rtp_port_range = \"\(janusPorts)\"")
    }

    private static func run(_ commands: [String]) throws {
        let prefix = geteuid() == 0 ? "" : "sudo -n "
        let script = commands.map { prefix + $0 }.joined(separator: " && ")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", script + " 2>&1"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw IntegrationFailure(
                "blocking loopback UDP with tc needs iproute2 and CAP_NET_ADMIN (root or sudo -n): \(output)")
        }
    }
}

/// A member of the dev community with a real Matrix account and their ``AccountMeetings``.
final class MeetingMember: Sendable {
    let account: RegisteredAccount
    let services: CommunityServicesClient
    let scope: AccountScope
    let meetings: AccountMeetings
    let environment: DevEnvironment
    let transport: any HTTPTransport

    var userID: UserID { UserID(account.userID)! }

    private init(
        account: RegisteredAccount, services: CommunityServicesClient, scope: AccountScope, meetings: AccountMeetings,
        environment: DevEnvironment, transport: any HTTPTransport
    ) {
        self.account = account
        self.services = services
        self.scope = scope
        self.meetings = meetings
        self.environment = environment
        self.transport = transport
    }

    /// Registers a new member; `servicesURL` (a relay in front of the services) replaces the
    /// dev environment's for this member's services client.
    static func register(
        _ prefix: String, in environment: DevEnvironment, transport: any HTTPTransport, servicesURL: URL? = nil,
        username: String? = nil, tracer: Tracer = Tracer(), engine: (any MediaEngine)? = nil
    ) async throws -> MeetingMember {
        let account = try await RegisteredAccount.register(
            username ?? DevEnvironment.uniqueUsername(prefix), password: testPassword.exposedValue, in: environment,
            transport: transport)
        let services = CommunityServicesClient(
            baseURL: servicesURL ?? environment.servicesURL, transport: transport,
            tokenSource: HomeserverOpenIDSource(account: account, environment: environment, transport: transport))
        let scope = AccountScope(label: account.userID)
        let meetings = AccountMeetings(
            member: UserID(account.userID)!, services: services, scope: scope,
            engine: engine ?? UnavailableMediaEngine(), feedWait: .seconds(5), tracer: tracer)
        return MeetingMember(
            account: account, services: services, scope: scope, meetings: meetings, environment: environment,
            transport: transport)
    }

    /// Creates a public room as this member (its creator: a host).
    func createRoom() async throws -> RoomID {
        let answer = try await matrix(.post, "/_matrix/client/v3/createRoom", body: ["preset": "public_chat"])
        guard let roomID = answer["room_id"] as? String else { throw IntegrationFailure("createRoom: no room_id") }
        return RoomID(roomID)
    }

    /// Joins `roomID` on the homeserver.
    func joinRoom(_ roomID: RoomID) async throws {
        let escaped = roomID.rawValue.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? roomID.rawValue
        _ = try await matrix(.post, "/_matrix/client/v3/join/\(escaped)", body: [:])
    }

    private func matrix(_ method: HTTPMethod, _ path: String, body: [String: Any]) async throws -> [String: Any] {
        var components = URLComponents(url: environment.homeserverURL, resolvingAgainstBaseURL: false)!
        components.percentEncodedPath = path
        let data = try JSONSerialization.data(withJSONObject: body)
        let response = try await transport.send(
            .json(method, url: components.url!, body: Array(data), bearerToken: account.accessToken))
        guard response.isSuccess else { throw IntegrationFailure("\(path) answered \(response.status)") }
        return (try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]) ?? [:]
    }
}

/// Joins an AudioBridge room with a media-session descriptor over Janus's HTTP API, as a
/// participant without media (rooms take no plain-RTP participants): what a stage member's media
/// engine does before its WebRTC offer. The answer says whether the room accepted the token.
struct JanusProbe {
    let transport: any HTTPTransport

    /// `"joined"`, or the AudioBridge error code (489: the token is not in the allowed list).
    func join(with descriptor: MediaSessionDescriptor) async throws -> String {
        guard let base = URL(string: descriptor.serverURL) else { throw IntegrationFailure("bad server URL") }
        let session = try await id(post(base, ["janus": "create"]))
        defer {
            Task { [transport] in
                _ = try? await JanusProbe(transport: transport).post(
                    base.appending(path: "\(session)"), ["janus": "destroy"])
            }
        }
        let handle = try await id(
            post(base.appending(path: "\(session)"), ["janus": "attach", "plugin": descriptor.plugin]))
        let body: [String: Any] = [
            "request": "join", "room": descriptor.room, "token": descriptor.token.exposedValue,
            "id": descriptor.participantID, "display": descriptor.display,
        ]
        let ack = try await post(base.appending(path: "\(session)/\(handle)"), ["janus": "message", "body": body])
        let transaction = ack["transaction"] as? String
        for _ in 0..<10 {
            var components = URLComponents(url: base.appending(path: "\(session)"), resolvingAgainstBaseURL: false)!
            components.queryItems = [URLQueryItem(name: "maxev", value: "5")]
            let response = try await transport.send(
                HTTPRequest(method: .get, url: components.url!, timeout: .seconds(40)))
            let parsed = try JSONSerialization.jsonObject(with: Data(response.body))
            let events = (parsed as? [[String: Any]]) ?? [(parsed as? [String: Any]) ?? [:]]
            for event in events where event["transaction"] as? String == transaction {
                let data = ((event["plugindata"] as? [String: Any])?["data"] as? [String: Any]) ?? [:]
                if let code = data["error_code"] as? Int { return String(code) }
                return (data["audiobridge"] as? String) ?? "?"
            }
        }
        throw IntegrationFailure("no answer to the AudioBridge join")
    }

    /// Destroys a media-server session under its owner (what a restart of the server does to it).
    func destroy(session: UInt64, at serverURL: String) async throws {
        guard let base = URL(string: serverURL) else { throw IntegrationFailure("bad server URL") }
        _ = try await post(base.appending(path: "\(session)"), ["janus": "destroy"])
    }

    private func post(_ url: URL, _ body: [String: Any]) async throws -> [String: Any] {
        var body = body
        body["transaction"] = UUID().uuidString
        let response = try await transport.send(
            .json(.post, url: url, body: Array(try JSONSerialization.data(withJSONObject: body))))
        guard response.isSuccess else { throw IntegrationFailure("Janus answered \(response.status)") }
        return (try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]) ?? [:]
    }

    private func id(_ answer: [String: Any]) throws -> UInt64 {
        guard let data = answer["data"] as? [String: Any], let id = (data["id"] as? NSNumber)?.uint64Value else {
            throw IntegrationFailure("Janus: no id in \(answer["janus"] ?? "?")")
        }
        return id
    }
}

extension MeetingRoom {
    /// The stage session, when the member is on stage.
    var stageSession: (any MediaSession)? {
        if case .stage(let session) = role.value { return session }
        return nil
    }

    /// The playback stream, when the member listens.
    var playbackStream: (any PlaybackStream)? {
        if case .listener(let stream) = role.value { return stream }
        return nil
    }
}
