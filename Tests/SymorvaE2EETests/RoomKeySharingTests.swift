import SymorvaChatStore
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import Synchronization
import Testing

@testable import SymorvaE2EE

/// Who gets a room's key and when it is replaced, from the room as chat describes it.
@Suite("Sharing a room's key")
struct RoomKeySharingTests {
    let fixture = EngineFixture()
    let alice: UserID = "@alice:example.org"
    let roomID = RoomID("!room:example.org")

    /// Alice's crypto module on a scripted homeserver that knows `others`' devices and
    /// one-time keys, with the `sendToDevice` bodies it received.
    struct Homeserver {
        let crypto: AccountCrypto
        let sent: SentBodies
        let transport: ScriptedHTTPTransport
    }

    /// The `sendToDevice` bodies a homeserver received.
    final class SentBodies: Sendable {
        let bodies = Lock<[JSONValue]>([])
        func withLock<T>(_ body: (inout [JSONValue]) -> T) -> T { bodies.withLock { body(&$0) } }
    }

    func homeserver(knowing others: [EngineFixture.Device]) async throws -> Homeserver {
        var deviceKeys: [String: JSONValue] = [:]
        var oneTimeKeys: [String: JSONValue] = [:]
        for device in others {
            let upload = try JSONValue(
                parsing: try #require(
                    try await device.engine.prepareUpload(KeyUploadPlan(deviceKeys: true, newOneTimeKeys: 1)).body))
            guard case .object(let top) = upload, let keys = top["device_keys"],
                case .object(let otks)? = top["one_time_keys"], let (keyID, signed) = otks.first
            else { throw TestFailure("no keys in \(device.deviceID)'s upload") }
            deviceKeys[device.userID.rawValue] = .object([device.deviceID: keys])
            oneTimeKeys[device.userID.rawValue] = .object([device.deviceID: .object([keyID: signed])])
        }
        let queryAnswer = String(
            decoding: try JSONValue.object(["device_keys": .object(deviceKeys)]).canonicalEncoding(), as: UTF8.self)
        let claimAnswer = String(
            decoding: try JSONValue.object(["one_time_keys": .object(oneTimeKeys)]).canonicalEncoding(),
            as: UTF8.self)
        let sent = SentBodies()
        let transport = ScriptedHTTPTransport()
        transport.on("POST", "/_matrix/client/v3/keys/upload") { _ in
            .json(200, #"{"one_time_key_counts": {"signed_curve25519": 50}}"#)
        }
        transport.on("POST", "/_matrix/client/v3/keys/query") { _ in .json(200, queryAnswer) }
        transport.on("POST", "/_matrix/client/v3/keys/claim") { _ in .json(200, claimAnswer) }
        transport.on("PUT", pathPrefix: "/_matrix/client/v3/sendToDevice/") { request in
            if let body = try? JSONValue(parsing: request.body) { sent.withLock { $0.append(body) } }
            return .json(200, "{}")
        }
        let database = try await SQLiteDatabase.open(path: ":memory:", migrations: ChatSchema.migrations)
        try await database.migrate(feature: CryptoStore.feature, CryptoStore.migrations)
        let crypto = try await AccountCrypto(
            userID: alice, deviceID: DeviceID("ALICE"), database: database, secretsKey: try SecretBox.generateKey(),
            requester: FixedTokenMatrixRequester(
                homeserverURL: HomeserverURL("https://example.org")!, userID: alice, accessToken: Secret("token"),
                transport: transport),
            scope: AccountScope(label: alice.rawValue), clock: ManualClock(), wallClock: SystemWallClock(),
            tracer: Tracer(), logCenter: LogCenter(threshold: .trace),
            // These devices have no cross-signing: the sharing mechanics, under the permissive policy.
            roomKeyPolicy: .allDevices)
        await crypto.start()
        try await crypto.state.wait {
            if case .ready = $0 { return true }
            return false
        }
        return Homeserver(crypto: crypto, sent: sent, transport: transport)
    }

    /// The users whose devices the `sendToDevice` requests addressed.
    func addressees(_ bodies: [JSONValue]) -> Set<String> {
        var users: Set<String> = []
        for body in bodies {
            guard case .object(let top) = body, case .object(let messages)? = top["messages"] else { continue }
            users.formUnion(messages.keys)
        }
        return users
    }

    @Test("With history visible to joined members only, invitees get no key; otherwise they do")
    func inviteesAndHistoryVisibility() async throws {
        let bob = try await fixture.device("@bob:example.org", "BOB")
        let carol = try await fixture.device("@carol:example.org", "CAROL")
        let server = try await homeserver(knowing: [bob, carol])
        let content = Array(#"{"msgtype":"m.text","body":"hi"}"#.utf8)
        let joinedOnly = EncryptedRoom(
            roomID: roomID, joined: [alice, bob.userID], invited: [carol.userID], historyVisibility: "joined")
        _ = try await server.crypto.encryptEvent(room: joinedOnly, eventType: "m.room.message", content: content)
        #expect(addressees(server.sent.withLock { $0 }) == ["@bob:example.org"])

        // The same room once its history is shared: Carol, still invited, gets the key now.
        server.sent.withLock { $0 = [] }
        var shared = joinedOnly
        shared.historyVisibility = "shared"
        _ = try await server.crypto.encryptEvent(room: shared, eventType: "m.room.message", content: content)
        #expect(addressees(server.sent.withLock { $0 }) == ["@carol:example.org"])
    }

    @Test("The room's rotation_period_msgs replaces the session after that many messages")
    func roomRotationPeriod() async throws {
        let bob = try await fixture.device("@bob:example.org", "BOB")
        let server = try await homeserver(knowing: [bob])
        let room = EncryptedRoom(roomID: roomID, joined: [alice, bob.userID], rotationPeriodMessages: 2)
        var sessions: [String] = []
        for _ in 0..<5 {
            let encrypted = try await server.crypto.encryptEvent(
                room: room, eventType: "m.room.message", content: Array(#"{"body":"x"}"#.utf8))
            guard case .object(let members) = try JSONValue(parsing: encrypted),
                case .string(let sessionID)? = members["session_id"]
            else { throw TestFailure("no session ID") }
            sessions.append(sessionID)
        }
        #expect(Set(sessions).count == 3, "sessions used: \(sessions)")
        #expect(sessions[0] == sessions[1] && sessions[1] != sessions[2] && sessions[2] == sessions[3])
    }

    @Test("Rotation settings are kept between an hour and a week, and 1 and 10,000 messages")
    func rotationClamped() {
        let room = EncryptedRoom(
            roomID: roomID, joined: [], rotationPeriodMilliseconds: 1_000, rotationPeriodMessages: 1_000_000)
        let policy = RotationPolicy(room: room)
        #expect(policy.milliseconds == 3_600_000)
        #expect(policy.messages == 10_000)
        let long = RotationPolicy(
            room: EncryptedRoom(roomID: roomID, joined: [], rotationPeriodMilliseconds: .max, rotationPeriodMessages: 0)
        )
        #expect(long.milliseconds == 7 * 24 * 3_600_000)
        #expect(long.messages == 1)
        #expect(RotationPolicy(room: EncryptedRoom(roomID: roomID, joined: [])) == .init())
    }

    @Test("Sharing the same session with a device again goes out under a new transaction ID, never as a retry")
    func reshareIsNotARetry() async throws {
        let bob = try await fixture.device("@bob:example.org", "BOB")
        let server = try await homeserver(knowing: [bob])
        let room = EncryptedRoom(roomID: roomID, joined: [alice, bob.userID])
        let content = Array(#"{"body":"x"}"#.utf8)
        _ = try await server.crypto.encryptEvent(room: room, eventType: "m.room.message", content: content)
        // Bob starts a new Olm session with us: the room's key goes to him again.
        let bobCurve = try await bob.keys().curve25519
        try await server.crypto.store.database.transaction { db throws(StoreError) in
            try CryptoStore.forgetSharing(withCurveKey: bobCurve, in: db)
        }
        _ = try await server.crypto.encryptEvent(room: room, eventType: "m.room.message", content: content)
        let paths = server.transport.requests.filter { $0.url.path.contains("/sendToDevice/") }.map(\.url.path)
        #expect(paths.count == 2)
        #expect(Set(paths).count == 2, "the same transaction ID twice: \(paths)")
    }
}
