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

/// Janus's HTTP API, for what a test does to the media server behind a member's back.
struct JanusProbe {
    let transport: any HTTPTransport

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

extension MeetingMember {
    /// Has the services join this member to the meeting's media room (`POST …/media/connect`,
    /// what the member's media session does to connect): `"joined"` when they hand over a Janus
    /// session and handle, else `"refused"`.
    func connectMedia(_ meetingID: MeetingID) async -> String {
        guard
            let answer = try? await services.send(.post, "/_symorva/v1/meetings/\(meetingID.rawValue)/media/connect"),
            let json = try? JSONSerialization.jsonObject(with: Data(answer)) as? [String: Any],
            json["handle_id"] != nil
        else { return "refused" }
        return "joined"
    }
}

/// The services' own database in the dev environment: the media tokens they hold, which no
/// member ever receives (the log canaries look for them).
enum ServicesDatabase {
    /// The media tokens the services hold now for `meetingID`'s stage members.
    static func mediaTokens(_ meetingID: MeetingID) throws -> [String] {
        guard let state = ProcessInfo.processInfo.environment["SYMORVA_STATE_DIR"] else {
            throw IntegrationFailure("SYMORVA_STATE_DIR is not set (the env file of Scripts/dev-server)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
                + "print('\\n'.join(r[0] for r in c.execute('SELECT token FROM meeting_media_tokens WHERE meeting_id = ?', (sys.argv[2],))))",
            state + "/services/services.db", meetingID.rawValue,
        ]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw IntegrationFailure("reading the services database failed") }
        return output.split(separator: "\n").map(String.init).filter { !$0.isEmpty }
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
