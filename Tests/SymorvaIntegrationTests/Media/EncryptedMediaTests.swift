import Foundation
import SymorvaChat
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import Testing

/// Attachments in an encrypted room, between two SymorvaKit accounts with their crypto, on the
/// real Synapse.
@Suite(
    "Encrypted attachments against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct EncryptedMediaTests {
    /// Alice and Bob, each with ready crypto, in an encrypted room where Alice knows Bob's device.
    static func makeEncryptedPair() async throws -> (
        alice: CommunityFixture, bob: CommunityFixture, roomID: RoomID
    ) {
        let aliceFixture = CommunityFixture()
        let bobFixture = CommunityFixture()
        _ = try await aliceFixture.community.session.register(
            username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let bob = try await bobFixture.community.session.register(
            username: DevEnvironment.uniqueUsername("bob"), password: testPassword)
        let aliceCrypto = try await aliceFixture.readyCrypto()
        let bobCrypto = try await bobFixture.readyCrypto()
        let roomID = try await aliceFixture.community.chat.createRoom(
            name: "Sealed photos", invitees: [bob.userID], isEncrypted: true)
        try await bobFixture.community.chat.waitForConversation(roomID, .invited)
        _ = try await bobFixture.community.chat.join(roomIDOrAlias: roomID.rawValue)
        try await aliceFixture.community.chat.waitForConversation(roomID)
        try await aliceCrypto.waitForDevice(bobCrypto.deviceID.rawValue, of: bob.userID)
        return (aliceFixture, bobFixture, roomID)
    }

    /// Slices of `bytes` (48 bytes each, spread over the file) that a plaintext copy would contain.
    static func canarySlices(of bytes: [UInt8]) -> [Data] {
        stride(from: 0, to: bytes.count - 48, by: max(48, bytes.count / 40)).map { Data(bytes[$0..<$0 + 48]) }
    }

    /// Every regular file under `folder` (databases, WAL, the media cache, attachment copies).
    static func files(under folder: String) -> [String] {
        let names = FileManager.default.enumerator(atPath: folder)?.allObjects as? [String] ?? []
        return names.compactMap { name in
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder + "/" + name, isDirectory: &isDirectory),
                !isDirectory.boolValue
            else { return nil }
            return name
        }
    }

    @Test(
        "A canary image sent to an encrypted room goes up as ciphertext in a Megolm event; Bob's download checks the hash and decrypts it; neither account folder holds a plaintext byte of it"
    )
    func canaryImage() async throws {
        let (aliceFixture, bobFixture, roomID) = try await Self.makeEncryptedPair()
        let png = TestImage.png(width: 173, height: 67)
        let caption = "canary \(UUID().uuidString.prefix(12))"
        let source = FileManager.default.temporaryDirectory.appending(path: "symorva-canary-\(UUID().uuidString).png")
            .path
        try Data(png).write(to: URL(fileURLWithPath: source))
        defer { unlink(source) }

        let aliceRoom = try await aliceFixture.community.chat.conversation(id: roomID)
        let eventID = try await aliceRoom.send(
            OutgoingAttachment(path: source, contentType: "image/png", fileName: "canary.png", caption: caption)
        ).sentEventID()

        // On the server: an m.room.encrypted event, and the media is ciphertext.
        let raw = try await bobFixture.community.requester!.send(ChatAPI.event(roomID: roomID, eventID: eventID)).body
        let event = try #require(try JSONSerialization.jsonObject(with: Data(raw)) as? [String: Any])
        #expect(event["type"] as? String == "m.room.encrypted")
        #expect(!String(decoding: raw, as: UTF8.self).contains(caption))

        // Bob's timeline shows the image (decrypted event) with its encrypted file.
        let bobRoom = try await bobFixture.community.chat.conversation(id: roomID)
        let stopBob = bobRoom.observe()
        defer { stopBob() }
        let items = try await bobRoom.waitForTimeline { items in
            items.contains { if case .image(let info) = $0.content { info.body == caption } else { false } }
        }
        let info = try #require(
            items.compactMap { item -> MediaInfo? in
                if case .image(let info) = item.content { return info }
                return nil
            }.first)
        #expect(info.isEncrypted && info.source == nil && info.url == nil)
        #expect(info.fileName == "canary.png" && info.mimeType == "image/png" && info.size == png.count)
        #expect(info.width == 173 && info.height == 67)
        let file = try #require(info.encryptedFile)
        let uri = try #require(file.uri)
        let ciphertext = try await bobRoom.media.data(for: uri)
        #expect(ciphertext.count == png.count && ciphertext != png)

        // Bob downloads: hash checked, then decrypted; the cache keeps the ciphertext.
        let saved = FileManager.default.temporaryDirectory.appending(path: "symorva-canary-\(UUID().uuidString)").path
        defer { unlink(saved) }
        let size = try await bobRoom.media.download(info, toFileAt: saved)
        #expect(size == Int64(png.count))
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: saved))) == png)
        // A second download is served from the cache (its ciphertext), again checked.
        try await bobRoom.media.download(info, toFileAt: saved)
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: saved))) == png)
        let bobCache = try #require(bobRoom.media.cache)
        #expect(bobCache.size() == Int64(png.count))

        // Alice's own row reads the same file; her copy in the account folder is gone.
        let stopAlice = aliceRoom.observe()
        defer { stopAlice() }
        let aliceItems = try await aliceRoom.waitForTimeline { items in
            items.contains {
                if case .image(let info) = $0.content { info.body == caption && $0.sendState == nil } else { false }
            }
        }
        let aliceInfo = try #require(
            aliceItems.compactMap { item -> MediaInfo? in
                if case .image(let info) = item.content { return info }
                return nil
            }.last)
        let aliceSaved = saved + "-alice"
        defer { unlink(aliceSaved) }
        try await aliceRoom.media.download(aliceInfo, toFileAt: aliceSaved)
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: aliceSaved))) == png)

        // The canary: no slice of the image and not the caption in any file of either account
        // folder (databases, WAL, media cache, attachment copies), nor in a log.
        let slices = Self.canarySlices(of: png)
        #expect(slices.count >= 30)
        for fixture in [aliceFixture, bobFixture] {
            #expect(!fixture.logs.text.contains(caption))
            let accounts = fixture.data.path + "/accounts"
            let files = Self.files(under: accounts)
            #expect(files.contains { $0.hasSuffix("-wal") }, "a WAL was read")
            #expect(!files.contains { $0.contains("/attachments/") }, "the copy is removed")
            for name in files {
                let bytes = try Data(contentsOf: URL(fileURLWithPath: accounts + "/" + name))
                #expect(bytes.range(of: Data(caption.utf8)) == nil, "caption in \(name)")
                let leaked = slices.filter { bytes.range(of: $0) != nil }.count
                #expect(leaked == 0, "\(leaked) plaintext slices in \(name)")
            }
        }
        #expect(Self.files(under: bobFixture.data.path + "/accounts").contains { $0.contains("/media-cache/") })
    }
}
