#if os(Linux)
    internal import CGStreamer
    internal import CGStreamerShim
    import SymorvaChat
    import SymorvaRuntime

    /// Makes the thumbnails of images sent to a conversation with GStreamer: the file is decoded
    /// (`decodebin`: PNG, JPEG and what else the installed plugins read), scaled to fit
    /// ``maximumWidth`` × ``maximumHeight`` with its aspect kept (`videoscale`), and encoded as
    /// JPEG (`jpegenc`), all in memory: nothing is written, so an encrypted room's image is never
    /// in the clear on disk. The standard modules give it to every account on Linux
    /// (`AccountChat.setThumbnailer`).
    ///
    /// It runs on a thread of its own (not the cooperative pool), for at most ``timeout``.
    public struct GStreamerImageThumbnailer: AttachmentThumbnailer {
        /// The largest width of a thumbnail, in pixels.
        public var maximumWidth: Int
        /// The largest height of a thumbnail, in pixels.
        public var maximumHeight: Int
        /// How long one thumbnail may take before the image is sent without one.
        public var timeout: Duration

        /// A thumbnailer fitting thumbnails in `maximumWidth` × `maximumHeight` pixels.
        public init(maximumWidth: Int = 800, maximumHeight: Int = 600, timeout: Duration = .seconds(10)) {
            self.maximumWidth = maximumWidth
            self.maximumHeight = maximumHeight
            self.timeout = timeout
        }

        /// A JPEG thumbnail of the image at `path`, or `nil` (not an image GStreamer decodes, an
        /// element missing, too slow).
        public func thumbnail(ofImageAt path: String, contentType: String) async -> AttachmentThumbnail? {
            let width = Int32(clamping: max(1, maximumWidth))
            let height = Int32(clamping: max(1, maximumHeight))
            let (seconds, attoseconds) = timeout.components
            let milliseconds = UInt32(clamping: max(0, seconds * 1000 + attoseconds / 1_000_000_000_000_000))
            return await withCheckedContinuation { continuation in
                DedicatedThread.start {
                    continuation.resume(
                        returning: Self.make(path, width: width, height: height, timeoutMilliseconds: milliseconds))
                }
            }
        }

        private static func make(_ path: String, width: Int32, height: Int32, timeoutMilliseconds: UInt32)
            -> AttachmentThumbnail?
        {
            var bytes: UnsafeMutablePointer<UInt8>?
            var count = 0
            var madeWidth: Int32 = 0
            var madeHeight: Int32 = 0
            let result = symorva_image_thumbnail(
                path, width, height, 80, timeoutMilliseconds, &bytes, &count, &madeWidth, &madeHeight)
            guard result == 0, let bytes else { return nil }
            defer { symorva_thumbnail_free(bytes) }
            return AttachmentThumbnail(
                bytes: Array(UnsafeBufferPointer(start: bytes, count: count)), contentType: "image/jpeg",
                width: Int(madeWidth), height: Int(madeHeight))
        }
    }
#endif
