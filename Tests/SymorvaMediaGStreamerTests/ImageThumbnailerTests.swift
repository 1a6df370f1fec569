#if os(Linux)
    import Foundation
    import SymorvaChat
    import SymorvaMediaGStreamer
    import SymorvaTesting
    import Testing

    /// The thumbnails of images sent in chat, made in memory with GStreamer.
    @Suite("GStreamer image thumbnails")
    struct ImageThumbnailerTests {
        static func file(_ bytes: [UInt8]) throws -> String {
            let path = FileManager.default.temporaryDirectory.appending(path: "symorva-thumb-\(UUID().uuidString)").path
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return path
        }

        @Test("A wide and a tall PNG get JPEG thumbnails that fit the box with their aspect kept")
        func fitsTheBox() async throws {
            let thumbnailer = GStreamerImageThumbnailer(maximumWidth: 320, maximumHeight: 240)
            for (width, height, expected) in [(1000, 500, (320, 160)), (300, 900, (80, 240))] {
                let path = try Self.file(TestImage.png(width: width, height: height))
                defer { unlink(path) }
                let thumbnail = try #require(await thumbnailer.thumbnail(ofImageAt: path, contentType: "image/png"))
                #expect(thumbnail.contentType == "image/jpeg")
                #expect(thumbnail.width == expected.0 && thumbnail.height == expected.1)
                #expect(thumbnail.bytes.starts(with: [0xFF, 0xD8, 0xFF]), "a JPEG")
                #expect(
                    thumbnail.description
                        == "AttachmentThumbnail(\(expected.0)x\(expected.1), \(thumbnail.bytes.count) bytes)")
            }
        }

        @Test("A PNG with an alpha channel gets a PNG thumbnail that keeps it; one without, a JPEG")
        func transparencyKept() async throws {
            let thumbnailer = GStreamerImageThumbnailer(maximumWidth: 320, maximumHeight: 240)
            let path = try Self.file(TestImage.png(width: 400, height: 200, alpha: true))
            defer { unlink(path) }
            let thumbnail = try #require(await thumbnailer.thumbnail(ofImageAt: path, contentType: "image/png"))
            #expect(thumbnail.contentType == "image/png")
            #expect(thumbnail.width == 320 && thumbnail.height == 160)
            #expect(thumbnail.bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]), "a PNG")
            #expect(thumbnail.bytes.count > 25 && thumbnail.bytes[25] == 6, "colour type 6: RGBA")
            #expect(TestImage.pngSize(thumbnail.bytes).map { [$0.width, $0.height] } == [320, 160])
            #expect(GStreamerImageThumbnailer.pngHasTransparency(path))
            let opaque = try Self.file(TestImage.png(width: 400, height: 200))
            defer { unlink(opaque) }
            #expect(!GStreamerImageThumbnailer.pngHasTransparency(opaque))
            #expect(
                await thumbnailer.thumbnail(ofImageAt: opaque, contentType: "image/png")?.contentType == "image/jpeg")
        }

        @Test("A video (WebM made here with GStreamer) gets its first frame as a JPEG, with its size and length")
        func videoFrame() async throws {
            let path = try TestVideo.webm(width: 640, height: 360, frames: 20, framesPerSecond: 10)
            defer { unlink(path) }
            let thumbnailer = GStreamerImageThumbnailer(maximumWidth: 320, maximumHeight: 240)
            let thumbnail = try #require(await thumbnailer.thumbnail(ofVideoAt: path, contentType: "video/webm"))
            #expect(thumbnail.contentType == "image/jpeg" && thumbnail.bytes.starts(with: [0xFF, 0xD8, 0xFF]))
            #expect(thumbnail.width == 320 && thumbnail.height == 180)
            #expect(thumbnail.sourceWidth == 640 && thumbnail.sourceHeight == 360)
            let duration = try #require(thumbnail.duration)
            #expect(duration > .milliseconds(1500) && duration < .milliseconds(2500), "20 frames at 10/s: \(duration)")
        }

        @Test("A file that is not an image, or no file, gets no thumbnail")
        func notAnImage() async throws {
            let path = try Self.file(Array("not an image at all, just text".utf8))
            defer { unlink(path) }
            let thumbnailer = GStreamerImageThumbnailer()
            #expect(await thumbnailer.thumbnail(ofImageAt: path, contentType: "image/png") == nil)
            #expect(await thumbnailer.thumbnail(ofImageAt: path + ".missing", contentType: "image/png") == nil)
        }
    }

    /// Small videos for tests, made with the `gst-launch-1.0` program the scripts install
    /// (`gstreamer1.0-tools`; `videotestsrc`, `vp8enc`, `webmmux`).
    enum TestVideo {
        /// A WebM (VP8) of `frames` test-pattern frames at `framesPerSecond`, in a temporary file.
        static func webm(width: Int, height: Int, frames: Int, framesPerSecond: Int) throws -> String {
            let path = FileManager.default.temporaryDirectory.appending(path: "symorva-video-\(UUID().uuidString).webm")
                .path
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/gst-launch-1.0")
            process.arguments = [
                "-q", "videotestsrc", "num-buffers=\(frames)", "!",
                "video/x-raw,width=\(width),height=\(height),framerate=\(framesPerSecond)/1", "!", "vp8enc", "!",
                "webmmux", "!", "filesink", "location=\(path)",
            ]
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                unlink(path)
                throw TestVideoError.notMade(status: process.terminationStatus)
            }
            return path
        }

        enum TestVideoError: Error { case notMade(status: Int32) }
    }
#endif
