import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaTransport
import Testing

/// The send queue against a real process death: the `symorva` program is killed with `SIGKILL`
/// while it sends, then started again on the same data folder.
@Suite(
    "Chat survives the client process being killed",
    .requires(DevEnvironment.isAvailable && DevEnvironment.current?.manifestPath != nil, "needs Scripts/dev-server"),
    .requires(REPLProcess.binary != nil, "needs the symorva binary (swift build)"))
struct ChatKillTests {
    let transport = CurlTransport()

    static let burstSize = 40
    static let killAfter = 20

    @Test("Killing the client (SIGKILL) in the middle of a burst of sends loses nothing and duplicates nothing")
    func killDuringBurst() async throws {
        let environment = DevEnvironment.current!
        let data = TemporaryDataDirectory("chat-kill")
        let processEnvironment = ["SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": environment.manifestPath!]
        let bob = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername("bob"), in: environment, transport: transport)
        let bobRequester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL(environment.homeserverURL.absoluteString)!, userID: UserID(bob.userID)!,
            accessToken: bob.accessToken, transport: transport)

        // Process 1: Alice registers, creates a room with Bob, and starts a burst of sends.
        let first = try REPLProcess(environment: processEnvironment)
        first.send("register \(DevEnvironment.uniqueUsername("alice")) --password-stdin")
        first.send(testPassword.exposedValue)
        let registered = try await first.waitForLine { $0.hasPrefix("registered and signed in as ") }
        first.send("create Burst \(bob.userID)")
        let created = try await first.waitForLine { $0.hasPrefix("created !") }
        let roomID = RoomID(String(created.dropFirst("created ".count)))
        _ = try await bobRequester.send(ChatAPI.join(roomID.rawValue))

        first.send("burst \(roomID) \(Self.burstSize) burst")
        try await first.waitForLine { $0.hasPrefix("queued \(Self.killAfter) ") }
        // Sending has begun (Bob can read the first message) and goes on: kill it now.
        let aliceID = String(registered.dropFirst("registered and signed in as ".count).prefix { $0 != " " })
        try await Self.waitForMessages(in: roomID, from: aliceID, requester: bobRequester)
        try await first.kill()
        // Each printed line is a message in the persisted queue (more may be, unprinted).
        let printed = first.output.filter { $0.hasPrefix("queued ") }.map { Int($0.split(separator: " ")[1])! }
        #expect(printed == Array(1...printed.count))
        #expect(printed.count >= Self.killAfter)

        // Process 2 on the same data folder: the account is restored and the queue resumed.
        let second = try REPLProcess(environment: processEnvironment)
        second.send("whoami")
        try await second.waitForLine { $0.contains(" on http") }
        second.send("outbox \(roomID) --wait")
        let status = try await second.waitForLine { $0.hasSuffix(" unsent") || $0 == "outbox empty" }
        try await second.waitForLine(timeout: .seconds(120)) { $0 == "all sent" || $0 == "outbox empty" }
        second.send("quit")
        #expect(try await second.finish() == 0)
        // The kill really left work behind: the restarted process had messages to send.
        #expect(status.hasSuffix(" unsent"), "nothing was left to send after the kill: \(status)")

        // Bob reads the room's history from the server: 1…n once each, in order, n ≥ printed.
        let bodies = try await Self.messageBodies(in: roomID, from: aliceID, requester: bobRequester)
        #expect(bodies.count >= printed.count)
        #expect(bodies.count <= Self.burstSize)
        #expect(bodies == (0..<bodies.count).map { "burst \($0 + 1)" })
    }

    /// Waits until the room holds at least one message of `sender`.
    static func waitForMessages(
        in roomID: RoomID, from sender: String, requester: FixedTokenMatrixRequester
    ) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if try await !messageBodies(in: roomID, from: sender, requester: requester).isEmpty { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw IntegrationFailure("no message of \(sender) reached the room")
    }

    /// The bodies of `sender`'s messages in the room, oldest first, read with `/messages`
    /// from the newest event back to the room's creation.
    static func messageBodies(
        in roomID: RoomID, from sender: String, requester: FixedTokenMatrixRequester
    ) async throws -> [String] {
        var bodies: [String] = []
        var token: String?
        repeat {
            var query: [MatrixEndpoint.QueryItem] = [
                .init(name: "dir", value: "b"), .init(name: "limit", value: "100"),
            ]
            if let token { query.append(.init(name: "from", value: token)) }
            let encoded = roomID.rawValue.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let response = try await requester.send(
                MatrixEndpoint(
                    method: .get, path: "/_matrix/client/v3/rooms/\(encoded)/messages", query: query,
                    requiresAuth: true))
            let page = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
            for event in page["chunk"] as? [[String: Any]] ?? [] {
                guard event["type"] as? String == "m.room.message", event["sender"] as? String == sender,
                    let body = (event["content"] as? [String: Any])?["body"] as? String
                else { continue }
                bodies.append(body)
            }
            let chunk = page["chunk"] as? [Any] ?? []
            token = chunk.isEmpty ? nil : page["end"] as? String
        } while token != nil
        return bodies.reversed()
    }
}
