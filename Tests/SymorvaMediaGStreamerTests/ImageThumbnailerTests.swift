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

        @Test("A file that is not an image, or no file, gets no thumbnail")
        func notAnImage() async throws {
            let path = try Self.file(Array("not an image at all, just text".utf8))
            defer { unlink(path) }
            let thumbnailer = GStreamerImageThumbnailer()
            #expect(await thumbnailer.thumbnail(ofImageAt: path, contentType: "image/png") == nil)
            #expect(await thumbnailer.thumbnail(ofImageAt: path + ".missing", contentType: "image/png") == nil)
        }
    }
#endif
