import Foundation
import SymorvaChatStore
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import Testing

/// The `symorva` program dies (`SIGKILL`) at a chosen point of chat's work, armed with
/// `SYMORVA_FAULT_POINT`, and a second process on the same data folder picks up from there.
extension ChatKillTests {
    @Test(
        "Killed after a message is persisted and before its request leaves: after restart each message arrives once, in order"
    )
    func killBetweenPersistAndSend() async throws {
        let environment = DevEnvironment.current!
        let data = TemporaryDataDirectory("chat-fault-send")
        let processEnvironment = ["SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": environment.manifestPath!]
        let bob = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername("bob"), in: environment, transport: transport)
        let bobRequester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL(environment.homeserverURL.absoluteString)!, userID: UserID(bob.userID)!,
            accessToken: bob.accessToken, transport: transport)

        // Process 1 dies the second time a persisted message is about to be sent: the first
        // message has reached the server, the second is stored and never left.
        var armed = processEnvironment
        armed[FaultPoint.environmentVariable] = FaultPoint.messagePersisted.rawValue + "@2"
        let first = try REPLProcess(environment: armed)
        first.send("register \(DevEnvironment.uniqueUsername("alice")) --password-stdin")
        first.send(testPassword.exposedValue)
        let registered = try await first.waitForLine { $0.hasPrefix("registered and signed in as ") }
        let aliceID = String(registered.dropFirst("registered and signed in as ".count).prefix { $0 != " " })
        first.send("create Persisted \(bob.userID)")
        let created = try await first.waitForLine { $0.hasPrefix("created !") }
        let roomID = RoomID(String(created.dropFirst("created ".count)))
        _ = try await bobRequester.send(ChatAPI.join(roomID.rawValue))
        first.send("burst \(roomID) 3 persisted")
        try await first.waitForFaultPoint(.messagePersisted)
        let printed = first.output.filter { $0.hasPrefix("queued ") }.count
        #expect(printed >= 2, "the second message was persisted before its send began")
        #expect(try await Self.messageBodies(in: roomID, from: aliceID, requester: bobRequester) == ["persisted 1"])

        // Process 2: the queue resumes; the first message is not sent again.
        let second = try REPLProcess(environment: processEnvironment)
        second.send("outbox \(roomID) --wait")
        try await second.waitForLine(timeout: .seconds(120)) { $0 == "all sent" || $0 == "outbox empty" }
        second.send("quit")
        #expect(try await second.finish() == 0)
        let bodies = try await Self.messageBodies(in: roomID, from: aliceID, requester: bobRequester)
        #expect(bodies.count >= printed)
        #expect(bodies == (1...bodies.count).map { "persisted \($0)" })
    }

    @Test("Killed in the middle of a /sync ingest: the token did not move, and after restart every event is there once")
    func killDuringSyncIngest() async throws {
        let environment = DevEnvironment.current!
        let data = TemporaryDataDirectory("chat-fault-sync")
        let processEnvironment = ["SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": environment.manifestPath!]
        let bob = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername("bob"), in: environment, transport: transport)
        let bobRequester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL(environment.homeserverURL.absoluteString)!, userID: UserID(bob.userID)!,
            accessToken: bob.accessToken, transport: transport)

        // Process 1: Alice creates a room with Bob and quits cleanly.
        let first = try REPLProcess(environment: processEnvironment)
        first.send("register \(DevEnvironment.uniqueUsername("alice")) --password-stdin")
        first.send(testPassword.exposedValue)
        try await first.waitForLine { $0.hasPrefix("registered and signed in as ") }
        first.send("create Ingest \(bob.userID)")
        let created = try await first.waitForLine { $0.hasPrefix("created !") }
        let roomID = RoomID(String(created.dropFirst("created ".count)))
        first.send("quit")
        #expect(try await first.finish() == 0)

        // While Alice is away, Bob joins and writes.
        _ = try await bobRequester.send(ChatAPI.join(roomID.rawValue))
        let texts = (1...5).map { "while away \($0)" }
        for (index, text) in texts.enumerated() {
            let content = MessageContent(eventType: "m.room.message", json: #"{"msgtype":"m.text","body":"\#(text)"}"#)
            _ = try await bobRequester.send(
                ChatAPI.send(roomID: roomID, transactionID: TransactionID("ingest-\(index)"), content: content))
        }
        let storePath = try WalletIntegrationTests.accountStorePath(in: data.path)
        let tokenBefore = try await Self.syncToken(at: storePath)
        #expect(tokenBefore != nil)

        // Process 2 dies inside the first ingest that writes a room: the one with Bob's messages.
        var armed = processEnvironment
        armed[FaultPoint.environmentVariable] = FaultPoint.syncIngest.rawValue
        let second = try REPLProcess(environment: armed)
        second.send("whoami")
        try await second.waitForFaultPoint(.syncIngest)
        #expect(try await Self.syncToken(at: storePath) == tokenBefore)
        #expect(try await Self.storedBodies(in: roomID, at: storePath).isEmpty)

        // Process 3 syncs again from the same token: each message once, in order.
        let third = try REPLProcess(environment: processEnvironment)
        third.send("open \(roomID)")
        try await third.waitForLine { $0.hasSuffix(": while away 5") }
        third.send("quit")
        #expect(try await third.finish() == 0)
        #expect(try await Self.storedBodies(in: roomID, at: storePath) == texts)
        #expect(third.output.filter { $0.contains(": while away ") }.count == texts.count)
    }

    /// The stored sync position of the account database at `path`: v2's since-token and
    /// sliding sync's `pos` and to-device `since` (the program syncs with whichever `/versions`
    /// chose).
    static func syncToken(at path: String) async throws -> String? {
        let database = try await SQLiteDatabase.open(path: path, migrations: ChatSchema.migrations)
        return try await database.run { db throws(StoreError) in
            let since = try db.queryOne("SELECT since_token FROM sync_state WHERE id = 1") { $0.optionalString(0) }
            let sliding = try db.queryOne("SELECT pos, to_device_since FROM sliding_sync_state WHERE id = 1") {
                ($0.optionalString(0) ?? "-") + " " + ($0.optionalString(1) ?? "-")
            }
            guard since != nil || sliding != nil else { return nil }
            return "v2: \((since ?? nil) ?? "-"), sliding: \(sliding ?? "-")"
        }
    }

    /// The bodies of the room's stored `m.room.message` events, in timeline order.
    static func storedBodies(in roomID: RoomID, at path: String) async throws -> [String] {
        let database = try await SQLiteDatabase.open(path: path, migrations: ChatSchema.migrations)
        let contents = try await database.run { db throws(StoreError) in
            try db.queryAll(
                """
                SELECT e.content FROM events e JOIN rooms r ON r.room_nid = e.room_nid
                WHERE r.room_id = ? AND e.type = 'm.room.message' ORDER BY e.chunk_id, e.position
                """, [.text(roomID.rawValue)]
            ) { $0.blob(0) }
        }
        return contents.compactMap { content in
            (try? JSONSerialization.jsonObject(with: Data(content)) as? [String: Any])?["body"] as? String
        }
    }
}
