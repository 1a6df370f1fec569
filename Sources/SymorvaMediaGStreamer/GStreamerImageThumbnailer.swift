#if os(Linux)
    internal import CGStreamer
    internal import CGStreamerShim
    import Glibc
    import SymorvaChat
    import SymorvaRuntime

    /// Makes the thumbnails of images and videos sent to a conversation with GStreamer: the file
    /// is decoded (`decodebin`: PNG, JPEG, WebM, … what the installed plugins read; a video's first
    /// frame), scaled to fit ``maximumWidth`` × ``maximumHeight`` with its aspect kept
    /// (`videoscale`), and encoded as JPEG (`jpegenc`), or as PNG (`pngenc`) for a PNG with
    /// transparency so that its alpha is kept, all in memory: nothing is written, so an
    /// encrypted room's image is never in the clear on disk. A video's thumbnail also says the
    /// video's size and length. The standard modules give it to every account on Linux
    /// (`AccountChat.setThumbnailer`).
    ///
    /// It runs on a thread of its own (not the cooperative pool), for at most ``timeout``.
    public struct GStreamerImageThumbnailer: AttachmentThumbnailer {
        /// The largest width of a thumbnail, in pixels.
        public var maximumWidth: Int
        /// The largest height of a thumbnail, in pixels.
        public var maximumHeight: Int
        /// How long one thumbnail may take before the file is sent without one.
        public var timeout: Duration

        /// A thumbnailer fitting thumbnails in `maximumWidth` × `maximumHeight` pixels.
        public init(maximumWidth: Int = 800, maximumHeight: Int = 600, timeout: Duration = .seconds(10)) {
            self.maximumWidth = maximumWidth
            self.maximumHeight = maximumHeight
            self.timeout = timeout
        }

        /// A JPEG thumbnail of the image at `path` (a PNG one when the image is a PNG with an
        /// alpha channel or a transparent colour), or `nil` (not an image GStreamer decodes, an
        /// element missing, too slow).
        public func thumbnail(ofImageAt path: String, contentType: String) async -> AttachmentThumbnail? {
            await make(path, png: Self.pngHasTransparency(path))
        }

        /// A JPEG thumbnail of the first frame of the video at `path`, with the video's size and
        /// length (when its container states it), or `nil`.
        public func thumbnail(ofVideoAt path: String, contentType: String) async -> AttachmentThumbnail? {
            await make(path, png: false)
        }

        private func make(_ path: String, png: Bool) async -> AttachmentThumbnail? {
            let width = Int32(clamping: max(1, maximumWidth))
            let height = Int32(clamping: max(1, maximumHeight))
            let (seconds, attoseconds) = timeout.components
            let milliseconds = UInt32(clamping: max(0, seconds * 1000 + attoseconds / 1_000_000_000_000_000))
            return await withCheckedContinuation { continuation in
                DedicatedThread.start {
                    continuation.resume(
                        returning: Self.make(
                            path, width: width, height: height, png: png, timeoutMilliseconds: milliseconds))
                }
            }
        }

        private static func make(_ path: String, width: Int32, height: Int32, png: Bool, timeoutMilliseconds: UInt32)
            -> AttachmentThumbnail?
        {
            var bytes: UnsafeMutablePointer<UInt8>?
            var count = 0
            var madeWidth: Int32 = 0
            var madeHeight: Int32 = 0
            var sourceWidth: Int32 = 0
            var sourceHeight: Int32 = 0
            var nanoseconds: Int64 = -1
            let result = symorva_image_thumbnail(
                path, width, height, 80, png ? 1 : 0, timeoutMilliseconds, &bytes, &count, &madeWidth, &madeHeight,
                &sourceWidth, &sourceHeight, &nanoseconds)
            guard result == 0, let bytes else { return nil }
            defer { symorva_thumbnail_free(bytes) }
            return AttachmentThumbnail(
                bytes: Array(UnsafeBufferPointer(start: bytes, count: count)),
                contentType: png ? "image/png" : "image/jpeg",
                width: Int(madeWidth), height: Int(madeHeight), sourceWidth: sourceWidth > 0 ? Int(sourceWidth) : nil,
                sourceHeight: sourceHeight > 0 ? Int(sourceHeight) : nil,
                duration: nanoseconds > 0 ? .nanoseconds(nanoseconds) : nil)
        }

        /// Whether the file at `path` is a PNG that can be transparent: an alpha channel (colour
        /// type 4 or 6) or a `tRNS` chunk before the image data. Reads the chunk headers only.
        package static func pngHasTransparency(_ path: String) -> Bool {
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { return false }
            defer { close(descriptor) }
            func bytes(at offset: Int, _ count: Int) -> [UInt8]? {
                var buffer = [UInt8](repeating: 0, count: count)
                let read = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, count, off_t(offset)) }
                return read == count ? buffer : nil
            }
            guard let header = bytes(at: 0, 26), header.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]),
                header[12..<16].elementsEqual("IHDR".utf8)
            else { return false }
            if header[25] == 4 || header[25] == 6 { return true }
            var offset = 8
            for _ in 0..<64 {
                guard let chunk = bytes(at: offset, 8) else { return false }
                let length = chunk[0..<4].reduce(0) { $0 << 8 | Int($1) }
                let type = String(decoding: chunk[4..<8], as: UTF8.self)
                if type == "tRNS" { return true }
                if type == "IDAT" || type == "IEND" { return false }
                offset += length + 12
            }
            return false
        }
    }
#endif
