import Foundation
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting

#if canImport(Glibc)
    import Glibc
#endif

/// A matrix-nio client (`Tests/InteropPeer/nio_peer.py`) running as a child process: an
/// independent Matrix implementation with its own end-to-end encryption (vodozemac), driven
/// over JSON lines. Each request carries an ID; the peer answers each with one line carrying
/// the same ID, and requests may overlap (a wait does not hold up a send).
///
/// The interpreter is the venv's Python that `Scripts/dev-server` installs matrix-nio into and
/// names in its env file (`SYMORVA_INTEROP_PYTHON`).
final class NioPeer: Sendable {
    /// The peer's device, as it reports it after logging in.
    struct Device: Sendable {
        let userID: String
        let deviceID: String
        let curve25519: String
        let ed25519: String
    }

    /// A room event as the peer sees it.
    struct Message: Sendable, Equatable {
        let eventID: String
        let sender: String
        /// The plaintext body, when nio decrypted the event.
        let body: String?
        /// The Megolm session it was encrypted with.
        let sessionID: String?
        /// `m.relates_to.rel_type` and `event_id` (an edit: `m.replace`), when related.
        var relType: String? = nil
        var relatesTo: String? = nil
        /// The event it replies to.
        var inReplyTo: String? = nil
        /// An edit's `m.new_content.body`.
        var newBody: String? = nil
    }

    /// The Python that runs the peer, when the dev environment installed it.
    static var python: String? {
        ProcessInfo.processInfo.environment["SYMORVA_INTEROP_PYTHON"].flatMap {
            FileManager.default.isExecutableFile(atPath: $0) ? $0 : nil
        }
    }

    /// Whether the servers run and the peer's environment is installed.
    static var isAvailable: Bool { DevEnvironment.isAvailable && python != nil }

    /// The Python of the second peer environment: matrix-nio 0.25.2 on python-olm (libolm),
    /// whose SAS follows the spec where 0.26's does not (`SYMORVA_NIO_OLM_PYTHON`,
    /// `Tests/InteropPeer/requirements-nio-olm.txt`); the verification tests run the same script
    /// with it.
    static var olmPython: String? {
        ProcessInfo.processInfo.environment["SYMORVA_NIO_OLM_PYTHON"].flatMap {
            FileManager.default.isExecutableFile(atPath: $0) ? $0 : nil
        }
    }

    /// Whether the servers run and the olm peer's environment is installed.
    static var isOlmAvailable: Bool { DevEnvironment.isAvailable && olmPython != nil }

    private final class Lines: Sendable {
        let publisher = ObservableValue<(output: [String], exited: Bool)>.Publisher(([], false))
        private let lock = Lock(())
        func update(_ change: @Sendable (inout (output: [String], exited: Bool)) -> Void) {
            lock.withLock { _ in publisher.update(change) }
        }
    }

    private let lines = Lines()
    private let input: FileHandle
    private let processID: Int32
    private let nextID = Lock(0)
    /// Where the peer's standard error (nio's warnings) goes, shown when a request fails.
    private let errorLog: URL

    /// Starts the peer with `python` (the vodozemac environment's by default, ``olmPython`` for
    /// the libolm one).
    init(python: String? = NioPeer.python) throws {
        guard let python else { throw IntegrationFailure("the nio peer's Python is not set (dev-server env file)") }
        let script = try ChartLocator.packageRoot().appending(path: "Tests/InteropPeer/nio_peer.py")
        errorLog = FileManager.default.temporaryDirectory.appending(path: "nio-peer-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: errorLog.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script.path]
        var environment = ProcessInfo.processInfo.environment
        // Loopback only: a proxy from the environment must not see the peer's requests.
        for name in ["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] {
            environment[name] = nil
        }
        environment["PYTHONUNBUFFERED"] = "1"
        process.environment = environment
        let inputPipe = Pipe()
        let outputPipe = Pipe()
        process.standardInput = inputPipe
        process.standardOutput = outputPipe
        process.standardError = try FileHandle(forWritingTo: errorLog)
        let lines = self.lines
        process.terminationHandler = { _ in lines.update { $0.exited = true } }
        try process.run()
        processID = process.processIdentifier
        input = inputPipe.fileHandleForWriting
        let reader = outputPipe.fileHandleForReading
        Thread {
            var pending: [UInt8] = []
            while true {
                let data = reader.availableData
                if data.isEmpty { break }
                pending += data
                var complete: [String] = []
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    complete.append(String(decoding: pending[..<newline], as: UTF8.self))
                    pending.removeSubrange(...newline)
                }
                let delivered = complete
                if !delivered.isEmpty { lines.update { $0.output += delivered } }
            }
        }.start()
    }

    deinit {
        if !lines.publisher.value.exited { _ = Glibc.kill(processID, SIGKILL) }
        try? FileManager.default.removeItem(at: errorLog)
    }

    /// Sends one request and returns the peer's answer, or throws its error.
    @discardableResult
    func call(_ op: String, _ arguments: [String: JSONValue] = [:], timeout: Duration = .seconds(120)) async throws
        -> [String: JSONValue]
    {
        let id = nextID.withLock { value in
            value += 1
            return value
        }
        var request = arguments
        request["op"] = .string(op)
        request["id"] = .number(Double(id))
        input.write(Data(try JSONValue.object(request).canonicalEncoding() + [UInt8(ascii: "\n")]))
        let answered = try await lines.publisher.observable.wait(timeout: timeout) { state in
            state.exited || state.output.contains { Self.answer(in: $0, id: id) != nil }
        }
        guard let answer = answered.output.lazy.compactMap({ Self.answer(in: $0, id: id) }).first else {
            throw IntegrationFailure("the nio peer exited during \(op):\n\(stderrTail)")
        }
        guard answer["ok"] == .bool(true) else {
            throw IntegrationFailure(
                "the nio peer failed \(op): \(answer["error"].map { "\($0)" } ?? "?")\n\(stderrTail)")
        }
        return answer
    }

    private static func answer(in line: String, id: Int) -> [String: JSONValue]? {
        guard case .object(let object)? = try? JSONValue(parsing: Array(line.utf8)),
            object["id"]?.integerValue == id
        else { return nil }
        return object
    }

    var stderrTail: String {
        let text = (try? String(contentsOf: errorLog, encoding: .utf8)) ?? ""
        // The same line again and again (an event retried each sync) says no more than once.
        var lines: [Substring] = []
        for line in text.split(separator: "\n") where lines.last != line { lines.append(line) }
        return lines.suffix(20).joined(separator: "\n")
    }

    // MARK: Operations

    /// A peer signed in to a new account registered for it (`prefix` and a unique suffix):
    /// the account's first device is nio's.
    static func onNewAccount(_ prefix: String) async throws -> (peer: NioPeer, userID: UserID, device: Device) {
        let account = try await registerPeerAccount(prefix)
        guard let userID = UserID(account.userID) else { throw IntegrationFailure("registered '\(account.userID)'") }
        let peer = try NioPeer()
        let device = try await peer.login(
            user: account.userID, password: testPassword.exposedValue,
            homeserver: DevEnvironment.current!.homeserverURL)
        return (peer, userID, device)
    }

    /// Logs in as `user` (registered beforehand) and starts the peer's sync loop.
    func login(user: String, password: String, homeserver: URL) async throws -> Device {
        let answer = try await call(
            "login",
            [
                "homeserver": .string(homeserver.absoluteString), "user": .string(user),
                "password": .string(password),
            ])
        guard case .string(let userID)? = answer["user_id"], case .string(let deviceID)? = answer["device_id"],
            case .string(let curve25519)? = answer["curve25519"], case .string(let ed25519)? = answer["ed25519"]
        else { throw IntegrationFailure("login answer without the device: \(answer)") }
        return Device(userID: userID, deviceID: deviceID, curve25519: curve25519, ed25519: ed25519)
    }

    /// Creates an encrypted room (Megolm) inviting `invitees`; returns its ID once synced.
    func createRoom(name: String, invite invitees: [UserID], historyVisibility: String? = nil) async throws -> RoomID {
        var arguments: [String: JSONValue] = [
            "name": .string(name), "invite": .array(invitees.map { .string($0.rawValue) }),
        ]
        if let historyVisibility { arguments["history_visibility"] = .string(historyVisibility) }
        let answer = try await call("create_room", arguments)
        guard case .string(let roomID)? = answer["room_id"] else {
            throw IntegrationFailure("create_room answer without a room: \(answer)")
        }
        return RoomID(roomID)
    }

    /// Waits until the invite to `roomID` has synced.
    func waitForInvite(_ roomID: RoomID) async throws {
        try await call("wait_invite", ["room_id": .string(roomID.rawValue)])
    }

    /// Joins `roomID` and waits until the joined room has synced.
    func join(_ roomID: RoomID) async throws {
        try await call("join", ["room_id": .string(roomID.rawValue)])
    }

    /// Leaves `roomID`.
    func leave(_ roomID: RoomID) async throws {
        try await call("leave", ["room_id": .string(roomID.rawValue)])
    }

    /// Waits until `userID` is a joined member of `roomID` in the peer's view.
    func waitForMember(_ userID: UserID, in roomID: RoomID) async throws {
        try await call("wait_member", ["room_id": .string(roomID.rawValue), "user_id": .string(userID.rawValue)])
    }

    /// Sends a text message (nio encrypts it, sharing its room key first as it needs to).
    @discardableResult
    func send(
        _ body: String, to roomID: RoomID, replacing edited: String? = nil, inThread root: String? = nil,
        replyingTo repliedTo: String? = nil
    ) async throws -> String {
        var arguments: [String: JSONValue] = ["room_id": .string(roomID.rawValue), "body": .string(body)]
        arguments["replaces"] = edited.map { .string($0) }
        arguments["thread"] = root.map { .string($0) }
        arguments["reply_to"] = repliedTo.map { .string($0) }
        let answer = try await call("send", arguments)
        guard case .string(let eventID)? = answer["event_id"] else {
            throw IntegrationFailure("send answer without an event: \(answer)")
        }
        return eventID
    }

    /// The room's text and encrypted events the peer has seen: those it decrypted and those it
    /// could not (yet).
    func messages(in roomID: RoomID) async throws -> (decrypted: [Message], undecrypted: [Message]) {
        let answer = try await call("messages", ["room_id": .string(roomID.rawValue)])
        func list(_ key: String) -> [Message] {
            guard case .array(let items)? = answer[key] else { return [] }
            return items.compactMap { item in
                guard case .object(let event) = item, case .string(let eventID)? = event["event_id"],
                    case .string(let sender)? = event["sender"]
                else { return nil }
                var body: String?
                if case .string(let text)? = event["body"] { body = text }
                var sessionID: String?
                if case .string(let session)? = event["session_id"] { sessionID = session }
                func text(_ key: String) -> String? {
                    if case .string(let value)? = event[key] { return value }
                    return nil
                }
                return Message(
                    eventID: eventID, sender: sender, body: body, sessionID: sessionID, relType: text("rel_type"),
                    relatesTo: text("relates_to"), inReplyTo: text("in_reply_to"), newBody: text("new_body"))
            }
        }
        return (list("decrypted"), list("undecrypted"))
    }

    /// Waits (polling the peer) until its view of `roomID` satisfies `predicate`; returns it.
    @discardableResult
    func waitForMessages(
        in roomID: RoomID, timeout: Duration = .seconds(60),
        until predicate: (_ decrypted: [Message], _ undecrypted: [Message]) -> Bool
    ) async throws -> (decrypted: [Message], undecrypted: [Message]) {
        let deadline = ContinuousClock.now + timeout
        while true {
            let seen = try await messages(in: roomID)
            if predicate(seen.decrypted, seen.undecrypted) { return seen }
            guard ContinuousClock.now < deadline else {
                throw IntegrationFailure(
                    "the nio peer's view of the room never matched: decrypted \(seen.decrypted.map(\.eventID)), "
                        + "undecrypted \(seen.undecrypted.map(\.eventID))\n\(stderrTail)")
            }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    /// Forgets nio's Olm sessions with the device whose Curve25519 key is `curve25519`, as a
    /// device that lost its session store would; returns how many it had.
    @discardableResult
    func forgetSessions(with curve25519: String) async throws -> Int {
        let answer = try await call("forget_sessions", ["curve25519": .string(curve25519)])
        return answer["forgotten"]?.integerValue ?? 0
    }

    /// The device IDs nio knows for `userID` (from its own `keys/query`).
    func deviceIDs(of userID: UserID) async throws -> [String] {
        let answer = try await call("devices", ["user_id": .string(userID.rawValue)])
        guard case .array(let items)? = answer["device_ids"] else { return [] }
        return items.compactMap { if case .string(let id) = $0 { id } else { nil } }
    }

    /// Waits until nio knows `deviceID` of `userID`, then marks it verified (nio forwards keys
    /// to, and accepts forwarded keys from, verified devices of its own account only).
    func verify(_ deviceID: String, of userID: UserID) async throws {
        try await call("verify", ["user_id": .string(userID.rawValue), "device_id": .string(deviceID)])
    }

    /// Asks the account's other devices for the keys of the room's undecrypted events; returns
    /// how many requests left.
    @discardableResult
    func requestKeys(in roomID: RoomID) async throws -> Int {
        try await call("request_keys", ["room_id": .string(roomID.rawValue)])["requested"]?.integerValue ?? 0
    }

    /// Closes the client and waits for the process to exit.
    func quit() async throws {
        input.write(Data(#"{"op": "quit"}"#.utf8 + [UInt8(ascii: "\n")]))
        try? input.close()
        try await lines.publisher.observable.wait(timeout: .seconds(30)) { $0.exited }
    }
}
