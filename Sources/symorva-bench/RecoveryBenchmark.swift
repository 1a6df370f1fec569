import Foundation
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTransport

/// `symorva-bench recovery [--rooms N] [--sessions N] [--messages N]`: a new device given only
/// the recovery key of an account with `--rooms` encrypted rooms, about `--sessions` Megolm
/// sessions and `--messages` messages: how long until every message is readable, and how many
/// stay undecryptable. Against the local dev servers (`Scripts/dev-server start --test`;
/// `source "$(Scripts/dev-server envfile)"`).
///
/// The first device (a ``SymorvaCommunity`` with the crypto and chat modules) sets up recovery
/// (which creates the key backup), creates the rooms, each with `rotation_period_msgs` set so
/// that its messages span `sessions / rooms` sessions, sends the messages through chat, waits
/// until the backup holds every session, and shuts down. The messages' encrypted events are then
/// read from the server (`/messages`, outside the clock). Measured on a second device of the
/// account: sign-in until the crypto account is ready, then `AccountCrypto.restore(recoveryKey:)`
/// (identity, backup enabled, every room key restored) until every event decrypts through
/// `AccountCrypto.decrypt` (the call chat's timeline decryption makes).
struct RecoveryBenchmark: DevServerBenchmark {
    /// The mode's word on the command line.
    let name = "recovery"
    /// The mode's arguments for the usage text.
    let argumentsSynopsis = "[--rooms N] [--sessions N] [--messages N]"
    /// What the mode measures.
    let summary = "new device with only the recovery key → every message readable (SYMORVA_* env)"

    let optionNames: Set<String> = ["rooms", "sessions", "messages"]

    struct Settings {
        var rooms: Int
        var sessions: Int
        var messages: Int
    }

    func settings(from options: inout Options) -> Settings {
        Settings(
            rooms: options.integer("rooms", default: 50), sessions: options.integer("sessions", default: 500),
            messages: options.integer("messages", default: 5_000))
    }

    /// How many sends run at once (one room each).
    static let parallelRooms = 8

    func measure(_ settings: Settings, homeserver: URL, services: URL) async throws {
        let serverName = ProcessInfo.processInfo.environment["SYMORVA_SERVER_NAME"] ?? "localhost"
        guard let homeserverURL = HomeserverURL(homeserver.absoluteString) else { throw BenchFailure("bad URL") }
        let transport = CurlTransport()
        let username = BenchMember.uniqueName("bench-recovery")
        // A plain device of the account (no crypto): sets the rooms' rotation and reads the
        // events back, outside the clock.
        let (user, token) = try await BenchMember.register(username, homeserver: homeserver, transport: transport)
        guard let userID = UserID(user) else { throw BenchFailure("registration gave '\(user)', not a user ID") }
        let raw = FixedTokenMatrixRequester(
            homeserverURL: homeserverURL, userID: userID, accessToken: token, transport: transport)
        let clock = ContinuousClock()

        let first = try await Self.device(
            username, homeserver: homeserverURL, services: services, serverName: serverName)
        let recoveryKey = try await first.crypto.setUpRecovery()
        let perRoom = max(1, settings.messages / settings.rooms)
        let rotation = max(1, perRoom * settings.rooms / max(1, settings.sessions))
        let setupStart = clock.now
        var roomIDs: [RoomID] = []
        for index in 0..<settings.rooms {
            let roomID = try await first.community.chat.createRoom(name: "Recovery \(index)", isEncrypted: true)
            let content =
                #"{"algorithm":"m.megolm.v1.aes-sha2","rotation_period_ms":604800000,"rotation_period_msgs":\#(rotation)}"#
            _ = try await raw.send(ChatAPI.setState(roomID: roomID, type: "m.room.encryption", content: content))
            roomIDs.append(roomID)
        }
        let community = first.community
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (position, roomID) in roomIDs.enumerated() {
                if position >= Self.parallelRooms { try await group.next() }
                group.addTask {
                    let conversation = try await community.chat.conversation(id: roomID)
                    for index in 0..<perRoom {
                        let receipt = try await conversation.send(.text("message \(index) of \(roomID.rawValue)"))
                        let state = try await receipt.state.wait(timeout: .seconds(120)) { state in
                            if case .sent = state { return true }
                            if case .failed = state { return true }
                            return false
                        }
                        if case .failed = state { throw BenchFailure("a message failed to send") }
                    }
                }
            }
            try await group.waitForAll()
        }
        _ = try await first.crypto.backupState.wait(timeout: .seconds(600)) { $0 == .upToDate }
        let backedUp = try await first.crypto.currentBackupVersion().count
        let built = clock.now - setupStart
        await first.community.shutdown()

        // The events as the server holds them (outside the clock).
        var events: [AccountCrypto.EncryptedRoomEvent] = []
        for roomID in roomIDs {
            let endpoint = MatrixEndpoint(
                method: .get, path: "/_matrix/client/v3/rooms/\(percentEncoded(roomID.rawValue))/messages",
                query: [.init(name: "dir", value: "b"), .init(name: "limit", value: String(perRoom + 50))],
                requiresAuth: true)
            guard case .object(let top)? = try? JSONValue(parsing: try await raw.send(endpoint).body),
                case .array(let chunk)? = top["chunk"]
            else { throw BenchFailure("unreadable /messages answer") }
            for event in chunk {
                guard case .object(let members) = event, members["type"] == .string("m.room.encrypted"),
                    case .string(let eventText)? = members["event_id"], let content = members["content"]
                else { continue }
                let eventID = EventID(eventText)
                events.append(
                    .init(content: try content.canonicalEncoding(), roomID: roomID, eventID: eventID, sender: userID))
            }
        }
        guard events.count >= perRoom * settings.rooms else {
            throw BenchFailure("the server holds \(events.count) encrypted events, not \(perRoom * settings.rooms)")
        }

        let signInStart = clock.now
        let second = try await Self.device(
            username, homeserver: homeserverURL, services: services, serverName: serverName)
        let ready = clock.now - signInStart
        let restoreStart = clock.now
        let restored = try await second.crypto.restore(recoveryKey: recoveryKey)
        let restoredAfter = clock.now - restoreStart
        var undecryptable = 0
        for start in stride(from: 0, to: events.count, by: 500) {
            let batch = Array(events[start..<min(start + 500, events.count)])
            for result in await second.crypto.decrypt(batch) {
                if case .success? = result { continue }
                undecryptable += 1
            }
        }
        let readable = clock.now - restoreStart
        await second.community.shutdown()

        print(
            "recovery: \(settings.rooms) rooms, \(events.count) messages, \(backedUp) sessions in the backup "
                + "(rotation every \(rotation) messages; built in \(fixed(built.seconds, 1)) s); "
                + "load average \(MegolmBenchmark.loadAverage())")
        print(
            "  new device: sign-in → crypto ready \(fixed(ready.seconds, 2)) s; restore with the recovery key "
                + "(identity + \(restored?.imported ?? 0) of \(restored?.total ?? 0) keys) \(fixed(restoredAfter.seconds, 2)) s; "
                + "every message readable \(fixed(readable.seconds, 2)) s after the restore began; "
                + "\(undecryptable) undecryptable")
    }

    struct Device {
        let community: SymorvaCommunity
        let crypto: AccountCrypto
    }

    /// A new device of account `username` (signed in with the bench password), crypto ready.
    static func device(_ username: String, homeserver: HomeserverURL, services: URL, serverName: String)
        async throws -> Device
    {
        let folder = NSTemporaryDirectory() + "symorva-bench-recovery-\(UUID().uuidString)"
        let community = BackupLagBenchmark.chatCommunity(
            homeserver: homeserver, serverName: serverName, services: services, folder: folder)
        _ = try await community.session.signIn(username: username, password: Secret("correct horse battery staple"))
        guard let crypto = community.module(AccountCrypto.self) else { throw BenchFailure("no crypto module") }
        _ = try await crypto.state.wait(timeout: .seconds(60)) { state in
            if case .ready(let work) = state { return !work.isUploading }
            return false
        }
        return Device(community: community, crypto: crypto)
    }
}
