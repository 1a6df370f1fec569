import Foundation
import SymorvaChat
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import SymorvaTransport
import Testing

/// Attachments in an encrypted room, between two SymorvaKit accounts with their crypto, on the
/// real Synapse.
@Suite(
    "Encrypted attachments against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct EncryptedMediaTests {
    /// Alice and Bob, each with ready crypto, in an encrypted room where Alice knows Bob's device.
    static func makeEncryptedPair(aliceTransport: (any HTTPTransport)? = nil) async throws -> (
        alice: CommunityFixture, bob: CommunityFixture, roomID: RoomID
    ) {
        let aliceFixture = CommunityFixture(transport: aliceTransport)
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
        "An encrypted room's image: its echo is encrypted from the start; its thumbnail is made after send() from the ciphertext copy decrypted in memory, and is ciphertext on the server"
    )
    func echoEncryptedThumbnailFromCopy() async throws {
        let (aliceFixture, bobFixture, roomID) = try await Self.makeEncryptedPair()
        let aliceChat = try #require(aliceFixture.community.module(AccountChat.self))
        let gated = GatedThumbnailer(GStreamerImageThumbnailer(maximumWidth: 320, maximumHeight: 320))
        aliceChat.setThumbnailer(gated)
        let png = TestImage.png(width: 640, height: 480)
        let source = FileManager.default.temporaryDirectory.appending(path: "symorva-sealed-\(UUID().uuidString).png")
            .path
        try Data(png).write(to: URL(fileURLWithPath: source))
        defer { unlink(source) }

        let aliceRoom = try await aliceFixture.community.chat.conversation(id: roomID)
        let stopAlice = aliceRoom.observe()
        defer { stopAlice() }
        let receipt = try await aliceRoom.send(
            OutgoingAttachment(path: source, contentType: "image/png", fileName: "sealed.png"))
        // Held in the thumbnail step (nothing uploaded, no hash yet): the echo is already encrypted.
        try await gated.calls.wait(timeout: .seconds(30)) { $0 >= 1 }
        let echo = try await aliceRoom.waitForTimeline { items in
            items.contains { if case .image = $0.content { $0.sendState == .sending } else { false } }
        }
        let queued = try #require(
            echo.compactMap { item -> MediaInfo? in
                if case .image(let info) = item.content, item.sendState == .sending { return info }
                return nil
            }.first)
        #expect(queued.isEncrypted && queued.url == nil && queued.width == 640)
        #expect(!queued.hasThumbnail)
        #expect(receipt.state.value == .sending)
        gated.open()
        _ = try await receipt.sentEventID()

        let bobRoom = try await bobFixture.community.chat.conversation(id: roomID)
        let stopBob = bobRoom.observe()
        defer { stopBob() }
        let items = try await bobRoom.waitForTimeline { items in
            items.contains { if case .image(let info) = $0.content { info.body == "sealed.png" } else { false } }
        }
        let info = try #require(
            items.compactMap { item -> MediaInfo? in
                if case .image(let info) = item.content { return info }
                return nil
            }.first)
        #expect(info.isEncrypted && info.hasThumbnail && info.thumbnailURL == nil)
        #expect(info.thumbnailWidth == 320 && info.thumbnailHeight == 240 && info.thumbnailMimeType == "image/jpeg")
        let thumbnailFile = try #require(info.thumbnailEncryptedFile)
        let ciphertext = try await bobRoom.media.data(for: try #require(thumbnailFile.uri))
        #expect(!ciphertext.starts(with: [0xFF, 0xD8, 0xFF]))
        let saved = FileManager.default.temporaryDirectory.appending(path: "symorva-sealed-\(UUID().uuidString)").path
        defer { unlink(saved) }
        try await bobRoom.media.downloadThumbnail(info, toFileAt: saved)
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: saved))).starts(with: [0xFF, 0xD8, 0xFF]))
        // Alice's folder keeps no slice of the image (the copy was only ever decrypted in memory).
        let accounts = aliceFixture.data.path + "/accounts"
        let slices = Self.canarySlices(of: png)
        for name in Self.files(under: accounts) {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: accounts + "/" + name))
            #expect(slices.filter { bytes.range(of: $0) != nil }.isEmpty, "plaintext slices in \(name)")
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

        // The thumbnail Alice's GStreamer thumbnailer made is encrypted too (thumbnail_file, no
        // thumbnail_url): on the server ciphertext, for Bob a JPEG after the hash check.
        #expect(info.hasThumbnail && info.thumbnailURL == nil && info.thumbnailMimeType == "image/jpeg")
        #expect(info.thumbnailWidth == 173 && info.thumbnailHeight == 67)
        let thumbnailFile = try #require(info.thumbnailEncryptedFile)
        let thumbnailCiphertext = try await bobRoom.media.data(for: try #require(thumbnailFile.uri))
        #expect(!thumbnailCiphertext.starts(with: [0xFF, 0xD8, 0xFF]))
        let thumbnailSaved = saved + "-thumbnail"
        defer { unlink(thumbnailSaved) }
        let thumbnailSize = try await bobRoom.media.downloadThumbnail(info, toFileAt: thumbnailSaved)
        let thumbnail = try [UInt8](Data(contentsOf: URL(fileURLWithPath: thumbnailSaved)))
        #expect(thumbnail.count == Int(thumbnailSize) && thumbnail.starts(with: [0xFF, 0xD8, 0xFF]))
        #expect(thumbnailCiphertext.count == thumbnail.count && thumbnailCiphertext != thumbnail)

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

    @Test(
        "An attachment queued in a plain room that becomes encrypted before its upload goes up encrypted: the event carries file, never url, and the server never holds the plain bytes"
    )
    func roomEncryptedBeforeUpload() async throws {
        let aliceFixture = CommunityFixture()
        let bobFixture = CommunityFixture()
        let alice = try await aliceFixture.community.session.register(
            username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let bob = try await bobFixture.community.session.register(
            username: DevEnvironment.uniqueUsername("bob"), password: testPassword)
        let aliceCrypto = try await aliceFixture.readyCrypto()
        let bobCrypto = try await bobFixture.readyCrypto()
        let roomID = try await aliceFixture.community.chat.createRoom(
            name: "Sealed later", invitees: [bob.userID], isEncrypted: false)
        try await bobFixture.community.chat.waitForConversation(roomID, .invited)
        _ = try await bobFixture.community.chat.join(roomIDOrAlias: roomID.rawValue)
        try await aliceFixture.community.chat.waitForConversation(roomID)
        let aliceRoom = try await aliceFixture.community.chat.conversation(id: roomID)
        #expect(aliceRoom.encryption.value != .encrypted)

        let png = TestImage.png(width: 211, height: 97)
        let source = FileManager.default.temporaryDirectory.appending(path: "symorva-late-\(UUID().uuidString).png")
            .path
        try Data(png).write(to: URL(fileURLWithPath: source))
        defer { unlink(source) }

        // The queue is paused at its reservation: the server has answered, the answer is held.
        let gate = TestGate()
        aliceFixture.transport.hold("/media/v1/create", at: gate)
        let receipt = try await aliceRoom.send(
            OutgoingAttachment(path: source, contentType: "image/png", fileName: "late.png", caption: "sealed later"))
        try await gate.waitForWaiters(count: 1)
        // Queued while the room was plain: the copy in the account folder is the file itself,
        // next to its plain thumbnail's (the GStreamer thumbnailer's JPEG).
        let accounts = aliceFixture.data.path + "/accounts"
        let copies = { Self.files(under: accounts).filter { $0.contains("/attachments/") } }
        #expect(copies().count == 2)
        #expect(copies().filter { $0.hasSuffix(".thumb") }.count == 1)
        #expect(
            try copies().contains { try [UInt8](Data(contentsOf: URL(fileURLWithPath: accounts + "/" + $0))) == png })

        // The room turns encrypted before the upload starts; then the queue goes on.
        try await aliceRoom.enableEncryption()
        try await aliceCrypto.waitForDevice(bobCrypto.deviceID.rawValue, of: bob.userID)
        gate.open()
        let eventID = try await receipt.sentEventID()

        // Two reservations of the file's and the thumbnail's URIs (the first pair may hold nothing
        // but is never used), one event, encrypted.
        #expect(aliceFixture.transport.count("/media/v1/create") == 4)
        let raw = try await bobFixture.community.requester!.send(ChatAPI.event(roomID: roomID, eventID: eventID)).body
        let event = try #require(try JSONSerialization.jsonObject(with: Data(raw)) as? [String: Any])
        #expect(event["type"] as? String == "m.room.encrypted")
        #expect(!String(decoding: raw, as: UTF8.self).contains("sealed later"))

        // Bob's row: the image with its encrypted file, no url; his download decrypts to the PNG.
        let bobRoom = try await bobFixture.community.chat.conversation(id: roomID)
        let stopBob = bobRoom.observe()
        defer { stopBob() }
        let items = try await bobRoom.waitForTimeline { items in
            items.contains { if case .image(let info) = $0.content { info.body == "sealed later" } else { false } }
        }
        let info = try #require(
            items.compactMap { item -> MediaInfo? in
                if case .image(let info) = item.content { return info }
                return nil
            }.first)
        #expect(info.isEncrypted && info.url == nil && info.source == nil)
        #expect(info.mimeType == "image/png" && info.size == png.count && info.width == 211)
        let uri = try #require(info.encryptedFile?.uri)
        let saved = FileManager.default.temporaryDirectory.appending(path: "symorva-late-\(UUID().uuidString)").path
        defer { unlink(saved) }
        #expect(try await bobRoom.media.download(info, toFileAt: saved) == Int64(png.count))
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: saved))) == png)
        // The thumbnail was encrypted with the file: thumbnail_file, no thumbnail_url.
        #expect(info.hasThumbnail && info.thumbnailURL == nil && info.thumbnailEncryptedFile?.uri != nil)
        #expect(info.thumbnailWidth == 211 && info.thumbnailHeight == 97)
        let thumbnailSaved = saved + "-thumbnail"
        defer { unlink(thumbnailSaved) }
        try await bobRoom.media.downloadThumbnail(info, toFileAt: thumbnailSaved)
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: thumbnailSaved))).starts(with: [0xFF, 0xD8, 0xFF]))

        // What Synapse stores: every media object of Alice's with bytes is ciphertext (the file's
        // and the thumbnail's); none holds the PNG, any slice of it, or a JPEG.
        let environment = DevEnvironment.current!
        let bobRequester = try #require(bobFixture.community.requester)
        let admin = try #require(DevEnvironment.admin)
        let adminLogin = try await bobRequester.send(
            AuthAPI.login(
                LoginRequest(
                    homeserverURL: HomeserverURL(environment.homeserverURL.absoluteString)!,
                    credentials: .password(username: admin.user, password: Secret(admin.password)),
                    requestsRefreshToken: false)))
        let adminRequester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL(environment.homeserverURL.absoluteString)!, userID: UserID(admin.user)!,
            accessToken: try AuthAPI.decode(LoginResponse.self, from: adminLogin.body).accessToken,
            transport: CurlTransport())
        let encoded = alice.userID.rawValue.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let listed = try await adminRequester.send(
            MatrixEndpoint(method: .get, path: "/_synapse/admin/v1/users/\(encoded)/media", requiresAuth: true))
        let list = try #require(try JSONSerialization.jsonObject(with: Data(listed.body)) as? [String: Any])
        let stored = (list["media"] as? [[String: Any]] ?? []).filter { ($0["media_length"] as? Int ?? 0) > 0 }
        #expect(stored.count == 2, "two media objects with bytes: \(stored.count)")
        let slices = Self.canarySlices(of: png)
        for media in stored {
            let mediaID = try #require(media["media_id"] as? String)
            let bytes = try await bobRoom.media.data(for: try #require(MediaURI("mxc://\(uri.serverName)/\(mediaID)")))
            #expect(bytes != png && !bytes.starts(with: [0xFF, 0xD8, 0xFF]))
            let data = Data(bytes)
            #expect(slices.allSatisfy { data.range(of: $0) == nil }, "plaintext slices on the server")
        }

        // The copy is gone, and no plaintext slice is left in Alice's account folder.
        #expect(copies().isEmpty)
        for name in Self.files(under: accounts) {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: accounts + "/" + name))
            let leaked = slices.filter { bytes.range(of: $0) != nil }.count
            #expect(leaked == 0, "\(leaked) plaintext slices in \(name)")
        }
    }

    @Test(
        "An encrypted attachment whose upload answer is lost: the retry meets 409, the hash is taken from the copy and stored, and Bob's download checks it"
    )
    func lostUploadAnswer() async throws {
        let lossy = LostUploadAnswerTransport()
        let (aliceFixture, bobFixture, roomID) = try await Self.makeEncryptedPair(aliceTransport: lossy)
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<300_007).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let caption = "lost answer \(UUID().uuidString.prefix(8))"
        let source = FileManager.default.temporaryDirectory.appending(path: "symorva-lost-\(UUID().uuidString)").path
        try Data(bytes).write(to: URL(fileURLWithPath: source))
        defer { unlink(source) }

        let aliceRoom = try await aliceFixture.community.chat.conversation(id: roomID)
        _ = try await aliceRoom.send(
            OutgoingAttachment(
                path: source, contentType: "application/octet-stream", fileName: "lost.bin", caption: caption)
        ).sentEventID()
        // The server took the first upload whole; its answer never reached the queue, which
        // uploaded again and met 409 M_CANNOT_OVERWRITE_MEDIA: one media object.
        #expect(lossy.uploads.map(\.status) == [200, 409])

        let bobRoom = try await bobFixture.community.chat.conversation(id: roomID)
        let stopBob = bobRoom.observe()
        defer { stopBob() }
        let items = try await bobRoom.waitForTimeline { items in
            items.contains { if case .file(let info) = $0.content { info.body == caption } else { false } }
        }
        let info = try #require(
            items.compactMap { item -> MediaInfo? in
                if case .file(let info) = item.content, info.body == caption { return info }
                return nil
            }.first)
        #expect(info.isEncrypted && info.url == nil && info.size == bytes.count)
        // The event's hash is the one of the ciphertext on the server: the download checks it.
        let saved = FileManager.default.temporaryDirectory.appending(path: "symorva-lost-\(UUID().uuidString)").path
        defer { unlink(saved) }
        #expect(try await bobRoom.media.download(info, toFileAt: saved) == Int64(bytes.count))
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: saved))) == bytes)
        #expect(!Self.files(under: aliceFixture.data.path + "/accounts").contains { $0.contains("/attachments/") })
    }
}

/// The libcurl transport, except that the answer to the first attachment upload
/// (`PUT /_matrix/media/v3/upload/…`) is lost after the server took the upload whole: what a
/// connection cut between the server's answer and the client looks like (`partialResponse`).
final class LostUploadAnswerTransport: HTTPFileTransport {
    private let base = CurlTransport()
    private let answers = Lock<[HTTPResponse]>([])

    /// The uploads' answers, in order (the lost one included).
    var uploads: [HTTPResponse] { answers.withLock { $0 } }

    func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        let response = try await base.send(request)
        guard request.method == .put, request.url.path.contains("/_matrix/media/v3/upload/") else { return response }
        let isFirst = answers.withLock { answers in
            answers.append(response)
            return answers.count == 1
        }
        if isFirst { throw .partialResponse }
        return response
    }
}
