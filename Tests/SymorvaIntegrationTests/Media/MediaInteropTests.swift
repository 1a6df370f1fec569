import Foundation
import SymorvaChat
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Files between SymorvaKit and matrix-nio (`nio.crypto.attachments`, nio's v1 media download)
/// on the real Synapse: encrypted in an encrypted room, plain in a plain one, both ways.
@Suite(
    "Attachments with matrix-nio", .requires(NioPeer.isAvailable, "needs Scripts/dev-server (with the nio venv)"),
    .shutsDownCommunities, .serialized)
struct MediaInteropTests {
    /// Random bytes in a temporary file.
    static func randomFile(bytes count: Int) throws -> (path: String, bytes: [UInt8]) {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let path = FileManager.default.temporaryDirectory.appending(path: "symorva-interop-\(UUID().uuidString)").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return (path, bytes)
    }

    static func sha256Hex(_ path: String) throws -> String {
        let digest = try EncryptedAttachment.sha256(of: path)
        return digest.map { String(format: "%02x", $0) }.joined()
    }

    /// The media of the `.file` row with `body` once it is in `room`'s timeline.
    static func fileRow(_ body: String, in room: Conversation) async throws -> MediaInfo {
        let items = try await room.waitForTimeline { items in
            items.contains { if case .file(let info) = $0.content { info.body == body } else { false } }
        }
        return try #require(
            items.compactMap { item -> MediaInfo? in
                if case .file(let info) = item.content, info.body == body { return info }
                return nil
            }.first)
    }

    @Test(
        "Encrypted room: nio downloads, hash-checks and decrypts SymorvaKit's encrypted file; SymorvaKit does the same with nio's"
    )
    func encryptedBothWays() async throws {
        let fixture = CommunityFixture(configuration: DevEnvironment.current!.permissiveConfiguration)
        _ = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let crypto = try await fixture.readyCrypto()
        let (peer, nioUser, nio) = try await NioPeer.onNewAccount("nio")
        let chat = fixture.community.chat
        let roomID = try await chat.createRoom(name: "Files", invitees: [nioUser], isEncrypted: true)
        try await peer.waitForInvite(roomID)
        try await peer.join(roomID)
        let room = try await chat.conversation(id: roomID)
        let stop = room.observe()
        defer { stop() }
        try await crypto.waitForDevice(nio.deviceID, of: nioUser)

        // SymorvaKit → nio.
        let ours = try Self.randomFile(bytes: 300_000)
        defer { unlink(ours.path) }
        let sent = try await room.send(
            OutgoingAttachment(path: ours.path, contentType: "application/pdf", fileName: "report.pdf")
        ).sentEventID()
        let nioSaved = ours.path + "-nio"
        defer { unlink(nioSaved) }
        let fetched = try await peer.downloadFile(sent.rawValue, in: roomID, to: nioSaved)
        #expect(fetched.encrypted)
        #expect(fetched.size == ours.bytes.count)
        #expect(fetched.sha256 == (try Self.sha256Hex(ours.path)))
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: nioSaved))) == ours.bytes)

        // nio → SymorvaKit.
        let theirs = try Self.randomFile(bytes: 200_000)
        defer { unlink(theirs.path) }
        _ = try await peer.sendFile(theirs.path, contentType: "application/zip", name: "photos.zip", to: roomID)
        let info = try await Self.fileRow("photos.zip", in: room)
        #expect(info.isEncrypted && info.source == nil)
        #expect(info.mimeType == "application/zip" && info.size == theirs.bytes.count)
        let saved = theirs.path + "-symorva"
        defer { unlink(saved) }
        let size = try await room.media.download(info, toFileAt: saved)
        #expect(size == Int64(theirs.bytes.count))
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: saved))) == theirs.bytes)
        try await peer.quit()
    }

    @Test("Plain room: nio downloads SymorvaKit's file and SymorvaKit downloads nio's, the same bytes")
    func plainBothWays() async throws {
        let fixture = CommunityFixture(configuration: DevEnvironment.current!.permissiveConfiguration)
        let alice = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let (peer, _, _) = try await NioPeer.onNewAccount("nio")
        let roomID = try await peer.createPlainRoom(name: "Plain files", invite: [alice.userID])
        let chat = fixture.community.chat
        try await chat.waitForConversation(roomID, .invited)
        _ = try await chat.join(roomIDOrAlias: roomID.rawValue)
        try await peer.waitForMember(alice.userID, in: roomID)
        let room = try await chat.conversation(id: roomID)
        let stop = room.observe()
        defer { stop() }

        let theirs = try Self.randomFile(bytes: 150_000)
        defer { unlink(theirs.path) }
        _ = try await peer.sendFile(theirs.path, contentType: "text/csv", name: "budget.csv", to: roomID)
        let info = try await Self.fileRow("budget.csv", in: room)
        #expect(!info.isEncrypted)
        let source = try #require(info.source)
        #expect(try await room.media.data(for: source) == theirs.bytes)

        let ours = try Self.randomFile(bytes: 250_000)
        defer { unlink(ours.path) }
        let sent = try await room.send(
            OutgoingAttachment(path: ours.path, contentType: "application/octet-stream", fileName: "notes.bin")
        ).sentEventID()
        let nioSaved = ours.path + "-nio"
        defer { unlink(nioSaved) }
        let fetched = try await peer.downloadFile(sent.rawValue, in: roomID, to: nioSaved)
        #expect(!fetched.encrypted)
        #expect(fetched.sha256 == (try Self.sha256Hex(ours.path)))
        try await peer.quit()
    }
}

extension NioPeer {
    /// Creates a room without encryption inviting `invitees`; returns its ID once synced.
    func createPlainRoom(name: String, invite invitees: [UserID]) async throws -> RoomID {
        let answer = try await call(
            "create_room",
            [
                "name": .string(name), "invite": .array(invitees.map { .string($0.rawValue) }),
                "encrypted": .bool(false),
            ])
        guard case .string(let roomID)? = answer["room_id"] else {
            throw IntegrationFailure("create_room answer without a room: \(answer)")
        }
        return RoomID(roomID)
    }

    /// Uploads the file at `path` with nio (encrypted by `nio.crypto.attachments` in an encrypted
    /// room) and sends its message; returns the event ID.
    func sendFile(_ path: String, contentType: String, name: String, to roomID: RoomID) async throws -> String {
        let answer = try await call(
            "send_file",
            [
                "room_id": .string(roomID.rawValue), "path": .string(path), "content_type": .string(contentType),
                "name": .string(name),
            ])
        guard case .string(let eventID)? = answer["event_id"] else {
            throw IntegrationFailure("send_file answer without an event: \(answer)")
        }
        return eventID
    }

    /// Downloads the media of event `eventID` with nio into `path` (hash-checked and decrypted
    /// by nio when encrypted): its size, whether it was encrypted, and the SHA-256 (hex) of what
    /// was written.
    func downloadFile(_ eventID: String, in roomID: RoomID, to path: String) async throws -> (
        size: Int, encrypted: Bool, sha256: String
    ) {
        let answer = try await call(
            "download_file",
            ["room_id": .string(roomID.rawValue), "event_id": .string(eventID), "path": .string(path)])
        guard let size = answer["size"]?.integerValue, case .bool(let encrypted)? = answer["encrypted"],
            case .string(let sha256)? = answer["sha256"]
        else { throw IntegrationFailure("download_file answer incomplete: \(answer)") }
        return (size, encrypted, sha256)
    }
}
