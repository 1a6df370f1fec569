import Foundation
import SymorvaChat
import SymorvaChatStore
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import SymorvaTransport
import Testing

@Suite(
    "Attachments through the send queue, against Synapse",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct AttachmentSendTests {
    let transport = CurlTransport()

    static func options(for account: ChatTestAccount) -> ChatOptions {
        var options = ChatOptions.testing
        options.attachmentsDirectory =
            URL(fileURLWithPath: account.databasePath).deletingLastPathComponent().path
            + "/attachments"
        return options
    }

    /// Alice (optionally through `homeserverURL`) and Bob in a room, both started.
    func makePair(_ run: ChatTestRun, aliceHomeserver: HomeserverURL? = nil) async throws -> (
        alice: AccountChat, bob: AccountChat, roomID: RoomID, aliceAccount: ChatTestAccount
    ) {
        let aliceAccount = try await ChatTestAccount.register("alice", transport: transport)
        let bobAccount = try await ChatTestAccount.register("bob", transport: transport)
        let alice = try await aliceAccount.makeClient(
            in: run, transport: transport, homeserverURL: aliceHomeserver, options: Self.options(for: aliceAccount))
        let bob = try await bobAccount.makeClient(in: run, transport: transport)
        try await alice.startAndSync()
        try await bob.startAndSync()
        let roomID = try await alice.createRoom(name: "Photos", invitees: [bobAccount.userID])
        try await bob.waitForConversation(roomID, .invited)
        _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
        try await alice.waitForConversation(roomID)
        return (alice, bob, roomID, aliceAccount)
    }

    static func temporaryFile(_ bytes: [UInt8], name: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appending(path: "symorva-attach-\(UUID().uuidString)-\(name)")
            .path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    static func copies(in options: ChatOptions) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: options.attachmentsDirectory!)) ?? []
    }

    @Test(
        "An image between two texts arrives in order with its info; Bob downloads the same bytes and a thumbnail; the copy goes"
    )
    func imageInOrderWithText() async throws {
        try await withChatTestRun { run in
            let (alice, bob, roomID, aliceAccount) = try await makePair(run)
            let bobRoom = try await bob.conversation(id: roomID)
            let stopObserving = bobRoom.observe()
            defer { stopObserving() }
            let aliceRoom = try await alice.conversation(id: roomID)
            let png = TestImage.png(width: 400, height: 300)
            let source = try Self.temporaryFile(png, name: "garden.png")
            defer { unlink(source) }

            alice.setThumbnailer(GStreamerImageThumbnailer(maximumWidth: 320, maximumHeight: 320))
            let before = try await aliceRoom.send(.text("before the photo"))
            let image = try await aliceRoom.send(
                OutgoingAttachment(path: source, contentType: "image/png", fileName: "garden.png"))
            let after = try await aliceRoom.send(.text("after the photo"))
            #expect(Self.copies(in: Self.options(for: aliceAccount)).count <= 2)  // the file's and its thumbnail's
            for receipt in [before, image, after] { try await receipt.waitUntilSent() }

            let items = try await bobRoom.waitForTimeline { items in
                items.contains { $0.text == "after the photo" }
            }
            let shown = items.compactMap { item -> String? in
                switch item.content {
                case .message(_, let body): body
                case .image(let info): "image:\(info.body)"
                default: nil
                }
            }
            #expect(shown.suffix(3) == ["before the photo", "image:garden.png", "after the photo"])
            let info = try #require(
                items.compactMap { item -> MediaInfo? in
                    if case .image(let info) = item.content { return info }
                    return nil
                }.first)
            #expect(info.mimeType == "image/png")
            #expect(info.size == png.count)
            #expect(info.width == 400 && info.height == 300)
            let uri = try #require(info.url.flatMap(MediaURI.init))
            #expect(try await bob.media.data(for: uri) == png)
            let thumbnail = try await bob.media.thumbnail(of: uri, width: 96, height: 96, cropped: true)
            #expect(TestImage.pngSize(thumbnail.bytes).map { [$0.width, $0.height] } == [96, 96])
            // The thumbnail Alice's thumbnailer made went with it: thumbnail_url and its info.
            #expect(info.hasThumbnail && info.thumbnailEncryptedFile == nil)
            #expect(info.thumbnailWidth == 320 && info.thumbnailHeight == 240 && info.thumbnailMimeType == "image/jpeg")
            let sentThumbnail = source + "-thumbnail"
            defer { unlink(sentThumbnail) }
            try await bob.media.downloadThumbnail(info, toFileAt: sentThumbnail)
            #expect(
                try [UInt8](Data(contentsOf: URL(fileURLWithPath: sentThumbnail))).starts(with: [0xFF, 0xD8, 0xFF]))
            #expect(Self.copies(in: Self.options(for: aliceAccount)).isEmpty)
            #expect(aliceRoom.uploads.value.isEmpty)
        }
    }

    @Test(
        "A video goes with its first frame as thumbnail and the size and length GStreamer read; a transparent PNG with a PNG thumbnail"
    )
    func videoAndTransparentImage() async throws {
        try await withChatTestRun { run in
            let (alice, bob, roomID, _) = try await makePair(run)
            let bobRoom = try await bob.conversation(id: roomID)
            let stopObserving = bobRoom.observe()
            defer { stopObserving() }
            let aliceRoom = try await alice.conversation(id: roomID)
            alice.setThumbnailer(GStreamerImageThumbnailer(maximumWidth: 320, maximumHeight: 320))
            // 20 frames at 10 a second: a 2 s WebM, made with the gst-launch-1.0 the scripts install.
            let video = FileManager.default.temporaryDirectory.appending(path: "symorva-clip-\(UUID().uuidString).webm")
                .path
            defer { unlink(video) }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/gst-launch-1.0")
            process.arguments = [
                "-q", "videotestsrc", "num-buffers=20", "!", "video/x-raw,width=640,height=360,framerate=10/1", "!",
                "vp8enc", "!", "webmmux", "!", "filesink", "location=\(video)",
            ]
            try process.run()
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            let png = TestImage.png(width: 300, height: 200, alpha: true)
            let image = try Self.temporaryFile(png, name: "glass.png")
            defer { unlink(image) }

            try await aliceRoom.send(OutgoingAttachment(path: video, contentType: "video/webm", fileName: "clip.webm"))
                .waitUntilSent()
            try await aliceRoom.send(OutgoingAttachment(path: image, contentType: "image/png", fileName: "glass.png"))
                .waitUntilSent()

            let items = try await bobRoom.waitForTimeline { items in
                items.contains { if case .image = $0.content { true } else { false } }
            }
            let clip = try #require(
                items.compactMap { item -> MediaInfo? in
                    if case .video(let info) = item.content { return info }
                    return nil
                }.first)
            #expect(clip.width == 640 && clip.height == 360)
            let duration = try #require(clip.duration)
            #expect(duration > .milliseconds(1500) && duration < .milliseconds(2500), "\(duration)")
            #expect(clip.hasThumbnail && clip.thumbnailMimeType == "image/jpeg")
            #expect(clip.thumbnailWidth == 320 && clip.thumbnailHeight == 180)
            let frame = video + "-frame"
            defer { unlink(frame) }
            try await bob.media.downloadThumbnail(clip, toFileAt: frame)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: frame))).starts(with: [0xFF, 0xD8, 0xFF]))

            let glass = try #require(
                items.compactMap { item -> MediaInfo? in
                    if case .image(let info) = item.content { return info }
                    return nil
                }.first)
            #expect(glass.hasThumbnail && glass.thumbnailMimeType == "image/png")
            let thumbnail = image + "-thumbnail"
            defer { unlink(thumbnail) }
            try await bob.media.downloadThumbnail(glass, toFileAt: thumbnail)
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: thumbnail)))
            #expect(TestImage.pngSize(bytes).map { [$0.width, $0.height] } == [300, 200])
            #expect(bytes.count > 25 && bytes[25] == 6, "the thumbnail keeps the alpha channel")
        }
    }

    @Test(
        "send() returns before the thumbnail is made; the echo shows at once and the text behind waits; a stop during the step makes it again after the restart: one event with its thumbnail, in order"
    )
    func thumbnailStepResumes() async throws {
        try await withChatTestRun { run in
            let (alice, bob, roomID, aliceAccount) = try await makePair(run)
            let options = Self.options(for: aliceAccount)
            let aliceRoom = try await alice.conversation(id: roomID)
            let stopAlice = aliceRoom.observe()
            let gated = GatedThumbnailer(GStreamerImageThumbnailer(maximumWidth: 320, maximumHeight: 320))
            alice.setThumbnailer(gated)
            let png = TestImage.png(width: 400, height: 300)
            let source = try Self.temporaryFile(png, name: "beds.png")
            defer { unlink(source) }

            let image = try await aliceRoom.send(
                OutgoingAttachment(path: source, contentType: "image/png", fileName: "beds.png"))
            let text = try await aliceRoom.send(.text("after the beds"))
            // The queue's thumbnail step has started and is held: send() did not wait for it.
            try await gated.calls.wait(timeout: .seconds(30)) { $0 >= 1 }
            let echo = try await aliceRoom.waitForTimeline { items in
                items.contains { if case .image = $0.content { $0.sendState == .sending } else { false } }
                    && items.contains { $0.text == "after the beds" }
            }
            #expect(echo.filter { $0.sendState == .sending }.count == 2)
            #expect(image.state.value == .sending && text.state.value == .sending, "the text waits behind the image")
            #expect(Self.copies(in: options).count == 1, "the copy only: no thumbnail yet")
            stopAlice()
            await alice.stop()

            // The same account folder, a thumbnailer that makes it at once: the step runs again.
            let resumed = try await aliceAccount.makeClient(in: run, transport: transport, options: options)
            resumed.setThumbnailer(GStreamerImageThumbnailer(maximumWidth: 320, maximumHeight: 320))
            try await resumed.startAndSync()
            let room = try await resumed.conversation(id: roomID)
            try await room.outbox.wait(timeout: .seconds(60)) { $0.isEmpty }
            gated.open()

            let bobRoom = try await bob.conversation(id: roomID)
            let stopBob = bobRoom.observe()
            defer { stopBob() }
            let items = try await bobRoom.waitForTimeline { items in items.contains { $0.text == "after the beds" } }
            let images = items.compactMap { item -> MediaInfo? in
                if case .image(let info) = item.content { return info }
                return nil
            }
            #expect(images.count == 1)
            let shown = items.compactMap { item -> String? in
                switch item.content {
                case .message(_, let body): body
                case .image(let info): "image:\(info.body)"
                default: nil
                }
            }
            #expect(shown.suffix(2) == ["image:beds.png", "after the beds"])
            let info = try #require(images.first)
            #expect(info.width == 400 && info.height == 300)
            #expect(info.hasThumbnail && info.thumbnailWidth == 320 && info.thumbnailHeight == 240)
            #expect(info.thumbnailMimeType == "image/jpeg")
            let thumbnail = source + "-thumbnail"
            defer { unlink(thumbnail) }
            try await bob.media.downloadThumbnail(info, toFileAt: thumbnail)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: thumbnail))).starts(with: [0xFF, 0xD8, 0xFF]))
            #expect(Self.copies(in: options).isEmpty)
        }
    }

    @Test("A queue whose upload reached the server but was not recorded resumes without a second upload or event")
    func resumeAfterUnrecordedUpload() async throws {
        try await withChatTestRun { run in
            let (alice, bob, roomID, aliceAccount) = try await makePair(run)
            await alice.stop()
            let options = Self.options(for: aliceAccount)
            // What a kill right after the upload leaves: the row, its reserved URI with the
            // content naming it, the bytes on the server, no record of the upload.
            let bytes = Array("minutes of the garden club".utf8)
            let source = try Self.temporaryFile(bytes, name: "minutes.txt")
            defer { unlink(source) }
            let reserved = try await alice.media.reserveURI()
            try await alice.media.upload(fileAt: source, contentType: "text/plain", to: reserved.uri)
            try FileManager.default.createDirectory(
                atPath: options.attachmentsDirectory!, withIntermediateDirectories: true)
            let copy = options.attachmentsDirectory! + "/skresume.1"
            try Data(bytes).write(to: URL(fileURLWithPath: copy))
            let store = try await ChatStore.open(path: aliceAccount.databasePath)
            let content =
                #"{"url":"\#(reserved.uri.uriString)","msgtype":"m.file","body":"minutes.txt","filename":"minutes.txt","info":{"mimetype":"text/plain","size":\#(bytes.count)}}"#
            _ = try await store.enqueueMessages(
                roomID: roomID.rawValue,
                [
                    QueuedMessageDraft(
                        transactionID: "skresume.1", eventType: "m.room.message", content: Array(content.utf8),
                        attachment: QueuedMessageAttachment(
                            path: copy, contentType: "text/plain", size: Int64(bytes.count)))
                ], createdAt: 0)
            try await store.recordMediaReserved(
                transactionID: "skresume.1", mediaURI: reserved.uri.uriString, content: Array(content.utf8))

            let counting = CountingTransport(transport)
            let resumed = try await aliceAccount.makeClient(in: run, transport: counting, options: options)
            try await resumed.startAndSync()
            let room = try await resumed.conversation(id: roomID)
            try await room.outbox.wait(timeout: .seconds(60)) { $0.isEmpty }
            let bobRoom = try await bob.conversation(id: roomID)
            let stopObserving = bobRoom.observe()
            defer { stopObserving() }
            let items = try await bobRoom.waitForTimeline { items in
                items.contains {
                    if case .file(let info) = $0.content { return info.body == "minutes.txt" } else { return false }
                }
            }
            let files = items.filter { if case .file = $0.content { return true } else { return false } }
            #expect(files.count == 1)
            #expect(counting.count(pathPrefix: "/_matrix/media/v3/upload") == 1)  // the refused overwrite
            #expect(counting.count(pathPrefix: "/_matrix/media/v1/create") == 0)
            #expect(!FileManager.default.fileExists(atPath: copy))
        }
    }

    @Test(
        "An attachment from an unreadable file, or to an encrypted room from an account without crypto, is refused before anything is queued"
    )
    func refusals() async throws {
        try await withChatTestRun { run in
            let (alice, _, roomID, aliceAccount) = try await makePair(run)
            let room = try await alice.conversation(id: roomID)
            await #expect(throws: ChatError.fileUnreadable) {
                try await room.send(OutgoingAttachment(path: "/nonexistent/photo.png", contentType: "image/png"))
            }
            let encrypted = try await alice.createRoom(name: "Sealed", invitees: [], isEncrypted: true)
            let sealed = try await alice.conversation(id: encrypted)
            let source = try Self.temporaryFile([1, 2, 3], name: "x.bin")
            defer { unlink(source) }
            await #expect(throws: ChatError.encryptionUnavailable) {
                try await sealed.send(OutgoingAttachment(path: source, contentType: "application/octet-stream"))
            }
            #expect(room.outbox.value.isEmpty && sealed.outbox.value.isEmpty)
            #expect(Self.copies(in: Self.options(for: aliceAccount)).isEmpty)
        }
    }
}

/// Counts the requests by path while passing them to the real transport (streaming included).
final class CountingTransport: HTTPFileTransport {
    private let inner: CurlTransport
    private let paths = Lock<[String]>([])

    init(_ inner: CurlTransport) { self.inner = inner }

    func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        paths.withLock { $0.append(request.url.path) }
        return try await inner.send(request)
    }

    func count(pathPrefix: String) -> Int { paths.withLock { $0.filter { $0.hasPrefix(pathPrefix) }.count } }
}

@Suite("Receiving media against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct MediaReceiveTests {
    let transport = CurlTransport()

    @Test("Received audio shows as audio with its duration; the cached file is downloaded once and so is a thumbnail")
    func receiveAndCache() async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("alice", transport: transport)
            let bobAccount = try await ChatTestAccount.register("bob", transport: transport)
            let alice = try await aliceAccount.makeClient(
                in: run, transport: transport, options: AttachmentSendTests.options(for: aliceAccount))
            var bobOptions = ChatOptions.testing
            let bobFolder = URL(fileURLWithPath: bobAccount.databasePath).deletingLastPathComponent().path
            bobOptions.mediaCacheDirectory = bobFolder + "/media-cache"
            let counting = CountingTransport(transport)
            let bob = try await bobAccount.makeClient(in: run, transport: counting, options: bobOptions)
            try await alice.startAndSync()
            try await bob.startAndSync()
            let roomID = try await alice.createRoom(name: "Recordings", invitees: [bobAccount.userID])
            try await bob.waitForConversation(roomID, .invited)
            _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
            try await alice.waitForConversation(roomID)
            let bobRoom = try await bob.conversation(id: roomID)
            let stopObserving = bobRoom.observe()
            defer { stopObserving() }

            let sound = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 * 13) }
            let soundFile = try AttachmentSendTests.temporaryFile(sound, name: "call.ogg")
            let png = TestImage.png(width: 200, height: 100)
            let imageFile = try AttachmentSendTests.temporaryFile(png, name: "view.png")
            defer {
                unlink(soundFile)
                unlink(imageFile)
            }
            let room = try await alice.conversation(id: roomID)
            let audio = try await room.send(
                OutgoingAttachment(
                    path: soundFile, contentType: "audio/ogg", fileName: "call.ogg", caption: "the call",
                    duration: .milliseconds(4250)))
            let image = try await room.send(OutgoingAttachment(path: imageFile, contentType: "image/png"))
            try await audio.waitUntilSent()
            try await image.waitUntilSent()

            let items = try await bobRoom.waitForTimeline { items in
                items.contains { if case .image = $0.content { true } else { false } }
            }
            let audioInfo = try #require(
                items.compactMap { item -> MediaInfo? in
                    if case .audio(let info) = item.content { return info }
                    return nil
                }.first)
            #expect(audioInfo.body == "the call" && audioInfo.fileName == "call.ogg")
            #expect(audioInfo.duration == .milliseconds(4250))
            #expect(audioInfo.mimeType == "audio/ogg" && audioInfo.size == sound.count)
            let imageInfo = try #require(
                items.compactMap { item -> MediaInfo? in
                    if case .image(let info) = item.content { return info }
                    return nil
                }.first)

            let audioURI = try #require(audioInfo.source)
            let first = try await bob.media.cachedFile(for: audioURI)
            let second = try await bob.media.cachedFile(for: audioURI)
            #expect(first == second && first.hasPrefix(bobFolder + "/media-cache/"))
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: first))) == sound)
            let imageURI = try #require(imageInfo.source)
            let thumbnail = try await bob.media.cachedThumbnail(of: imageURI, width: 32, height: 32, cropped: true)
            #expect(
                try await bob.media.cachedThumbnail(of: imageURI, width: 32, height: 32, cropped: true) == thumbnail)
            let thumbnailBytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: thumbnail)))
            #expect(TestImage.pngSize(thumbnailBytes).map { [$0.width, $0.height] } == [32, 32])
            #expect(counting.count(pathPrefix: "/_matrix/client/v1/media/download/") == 1)
            #expect(counting.count(pathPrefix: "/_matrix/client/v1/media/thumbnail/") == 1)
        }
    }
}
