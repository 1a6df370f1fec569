import SymorvaMachines
import SymorvaMatrix

/// A file to send to a conversation (``Conversation/send(_:)-(OutgoingAttachment)``): an image,
/// a file, audio or video, with what the receiver's client shows before downloading it.
///
/// The file is copied into the account's folder when it is queued; the original may change or
/// go away afterwards. Its descriptions show the kind only: names and captions are user content.
public struct OutgoingAttachment: Sendable, Hashable, CustomStringConvertible {
    /// How the receiver's client shows the file (the event's `msgtype`).
    public enum Kind: String, Sendable, Hashable {
        /// `m.image`.
        case image
        /// `m.file`.
        case file
        /// `m.audio`.
        case audio
        /// `m.video`.
        case video
    }

    /// The file to send.
    public var path: String
    /// Its MIME type (`image/png`).
    public var contentType: String
    /// How it is shown; by default from ``contentType`` (`image/…` is an image, …, else a file).
    public var kind: Kind
    /// The name the receiver sees; by default the path's last component.
    public var fileName: String
    /// Text sent with the file (the event's `body`, the file name going to `filename`).
    public var caption: String?
    /// The image's or video's size in pixels, when known (a PNG's is read from its header when
    /// not given).
    public var width: Int?
    /// See ``width``.
    public var height: Int?
    /// The audio's or video's length, when known.
    public var duration: Duration?
    /// The image's thumbnail, sent with it (`info.thumbnail_*`, encrypted in an encrypted room).
    /// When `nil`, the account's ``AttachmentThumbnailer`` makes one for an image, if it has one.
    public var thumbnail: AttachmentThumbnail?

    /// An attachment; `kind` and `fileName` follow `contentType` and `path` unless given.
    public init(
        path: String, contentType: String, kind: Kind? = nil, fileName: String? = nil, caption: String? = nil,
        width: Int? = nil, height: Int? = nil, duration: Duration? = nil, thumbnail: AttachmentThumbnail? = nil
    ) {
        self.path = path
        self.contentType = contentType
        self.kind = kind ?? Self.kind(for: contentType)
        self.fileName = fileName ?? String(path.split(separator: "/").last ?? "file")
        self.caption = caption
        self.width = width
        self.height = height
        self.duration = duration
        self.thumbnail = thumbnail
    }

    /// The kind only.
    public var description: String { "OutgoingAttachment.\(kind.rawValue)(<private>)" }

    /// The kind a MIME type suggests.
    static func kind(for contentType: String) -> Kind {
        let major = contentType.lowercased().split(separator: "/").first ?? ""
        switch major {
        case "image": return .image
        case "audio": return .audio
        case "video": return .video
        default: return .file
        }
    }

    /// The `m.room.message` content without its `url` (added when the URI is reserved):
    /// msgtype, body, filename and `info` (mimetype, size, w/h, duration in ms). For an
    /// encrypted room, `encryptedFile` comes first as `file` (its `url` set at the reservation
    /// too); the content is then never stored in the clear. A `thumbnail` goes last in `info`
    /// (``QueuedThumbnailMembers``): `thumbnail_info`, and its `thumbnail_file` when encrypted.
    package func content(
        size: Int64, pixelSize: (width: Int, height: Int)?, encryptedFile: EncryptedFile? = nil,
        thumbnail: QueuedThumbnailMembers? = nil
    ) -> MessageContent {
        var info = JSONObjectWriter()
        info.string("mimetype", contentType)
        info.raw("size", String(size))
        if let width = width ?? pixelSize?.width, let height = height ?? pixelSize?.height,
            kind == .image || kind == .video
        {
            info.raw("w", String(width))
            info.raw("h", String(height))
        }
        if let duration, kind == .audio || kind == .video {
            let (seconds, attoseconds) = duration.components
            info.raw("duration", String(seconds * 1000 + attoseconds / 1_000_000_000_000_000))
        }
        var content = JSONObjectWriter()
        if let encryptedFile { content.raw("file", encryptedFile.json) }
        content.string("msgtype", "m.\(kind.rawValue)")
        content.string("body", caption ?? fileName)
        content.string("filename", fileName)
        content.raw("info", String(info.text.dropLast()) + (thumbnail?.json ?? "") + "}")
        return MessageContent(eventType: "m.room.message", json: content.text)
    }

    /// `content` naming `uri`: for an encrypted file its `file` object (the first member) gets
    /// `url`; otherwise `"url": uri` becomes the first member.
    package static func naming(_ uri: MediaURI, in content: MessageContent) -> MessageContent {
        if let (file, rest) = leadingFile(in: content) {
            var named = file
            named.uri = uri
            var member = JSONObjectWriter()
            member.raw("file", named.json)
            return MessageContent(eventType: content.eventType, json: String(member.text.dropLast()) + rest)
        }
        var url = JSONObjectWriter()
        url.string("url", uri.uriString)
        let rest = content.json.drop { $0 == " " }.dropFirst()  // past "{"
        let separator = rest.drop { $0 == " " }.first == "}" ? "" : ","
        return MessageContent(eventType: content.eventType, json: String(url.text.dropLast()) + separator + rest)
    }

    /// `content` whose encrypted file (its first member) states `sha256`, the hash of the
    /// ciphertext taken while it uploaded; `nil` for a content without one.
    package static func hashing(_ sha256: [UInt8], in content: MessageContent) -> MessageContent? {
        guard let (file, rest) = leadingFile(in: content) else { return nil }
        var hashed = file
        hashed.sha256 = sha256
        var member = JSONObjectWriter()
        member.raw("file", hashed.json)
        return MessageContent(eventType: content.eventType, json: String(member.text.dropLast()) + rest)
    }

    /// A plain attachment's `content` (with or without its leading `url`) made to carry
    /// `file` instead, as its first member: its room became encrypted before the upload. The
    /// `url` goes (the reservation is made again for the ciphertext).
    package static func carrying(_ file: EncryptedFile, in content: MessageContent) -> MessageContent {
        var rest = Substring(content.json.drop { $0 == " " }.dropFirst())  // past "{"
        let urlPrefix = #""url":""#
        if rest.hasPrefix(urlPrefix), let close = rest.dropFirst(urlPrefix.count).firstIndex(of: "\"") {
            // An mxc URI holds no quote or escape: the string ends at the next quote.
            rest = rest[rest.index(after: close)...].drop { $0 == " " }
            if rest.first == "," { rest = rest.dropFirst() }
        }
        var member = JSONObjectWriter()
        member.raw("file", file.json)
        let separator = rest.drop { $0 == " " }.first == "}" ? "" : ","
        return MessageContent(eventType: content.eventType, json: String(member.text.dropLast()) + separator + rest)
    }

    /// The encrypted file an attachment's queued content carries (its first member, as
    /// ``content(size:pixelSize:encryptedFile:)`` writes it; its ``EncryptedFile/sha256`` empty
    /// until the upload stored it); `nil` for a plain attachment.
    package static func encryptedFile(in content: MessageContent) -> EncryptedFile? {
        leadingFile(in: content)?.file
    }

    /// The leading `"file": {…}` member and the text after it (from its `,` or the closing `}`).
    private static func leadingFile(in content: MessageContent) -> (file: EncryptedFile, rest: Substring)? {
        let prefix = #"{"file":"#
        let json = content.json
        guard json.hasPrefix(prefix) else { return nil }
        let objectStart = json.index(json.startIndex, offsetBy: prefix.count)
        // The object holds only base64 text, fixed names and an mxc URI: no brace in a string.
        var depth = 0
        var end: String.Index?
        for index in json[objectStart...].indices {
            switch json[index] {
            case "{": depth += 1
            case "}":
                depth -= 1
                if depth == 0 { end = json.index(after: index) }
            default: break
            }
            if end != nil { break }
        }
        guard let end, let file = EncryptedFile(json: Array(json[objectStart..<end].utf8), hashPending: true)
        else { return nil }
        return (file, json[end...])
    }

    /// The width and height a PNG header states, from the file's first 24 bytes.
    static func pngSize(_ header: [UInt8]) -> (width: Int, height: Int)? {
        guard header.count >= 24, header.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else {
            return nil
        }
        func word(_ at: Int) -> Int { header[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
        return (word(16), word(20))
    }
}
