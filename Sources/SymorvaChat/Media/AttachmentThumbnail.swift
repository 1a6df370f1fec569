import Foundation
import SymorvaCipher
import SymorvaMachines
import SymorvaMatrix

/// A small image that a receiver's client shows before it downloads an attachment: the event's
/// `info.thumbnail_info` with `info.thumbnail_url`, or `info.thumbnail_file` in an encrypted room
/// (where the thumbnail is encrypted like the file).
///
/// Give one with ``OutgoingAttachment/thumbnail``, or let the account's
/// ``AttachmentThumbnailer`` make one for an image (on Linux the SDK's GStreamer one). Its
/// descriptions show the size only.
public struct AttachmentThumbnail: Sendable, Hashable, CustomStringConvertible {
    /// The encoded image (`image/jpeg`, `image/png`, …).
    public var bytes: [UInt8]
    /// Its MIME type.
    public var contentType: String
    /// Its width in pixels.
    public var width: Int
    /// Its height in pixels.
    public var height: Int
    /// The source's width in pixels, when the thumbnailer read it (a video's goes to the event's
    /// `info.w` unless ``OutgoingAttachment/width`` is given).
    public var sourceWidth: Int?
    /// The source's height in pixels, when the thumbnailer read it.
    public var sourceHeight: Int?
    /// A video's length, when the thumbnailer read it (the event's `info.duration` unless
    /// ``OutgoingAttachment/duration`` is given).
    public var duration: Duration?

    /// A thumbnail of `width` × `height` pixels encoded as `contentType`, of a source of
    /// `sourceWidth` × `sourceHeight` pixels lasting `duration` when known.
    public init(
        bytes: [UInt8], contentType: String, width: Int, height: Int, sourceWidth: Int? = nil,
        sourceHeight: Int? = nil, duration: Duration? = nil
    ) {
        self.bytes = bytes
        self.contentType = contentType
        self.width = width
        self.height = height
        self.sourceWidth = sourceWidth
        self.sourceHeight = sourceHeight
        self.duration = duration
    }

    /// The size only.
    public var description: String { "AttachmentThumbnail(\(width)x\(height), \(bytes.count) bytes)" }
}

/// Makes the thumbnail of an image or a video being sent (the send queue asks it for one when
/// ``OutgoingAttachment/thumbnail`` is `nil`). `nil` sends the file without one. It runs as the
/// queue's first step for the message, after ``Conversation/send(_:)-(OutgoingAttachment)`` has
/// returned, on the queue's copy of the file (in an encrypted room a path to that copy decrypted
/// in memory); it holds the room's queue while it runs, so keep it to a second or so.
public protocol AttachmentThumbnailer: Sendable {
    /// A thumbnail of the image file at `path` (of MIME type `contentType`), or `nil` when none
    /// can be made (not an image it reads, a decoder missing).
    func thumbnail(ofImageAt path: String, contentType: String) async -> AttachmentThumbnail?
    /// A thumbnail of a frame of the video file at `path`, with the video's size and length
    /// when it reads them, or `nil`. By default none.
    func thumbnail(ofVideoAt path: String, contentType: String) async -> AttachmentThumbnail?
}

extension AttachmentThumbnailer {
    /// No video thumbnails.
    public func thumbnail(ofVideoAt path: String, contentType: String) async -> AttachmentThumbnail? { nil }
}

/// The thumbnail members at the end of a queued attachment's `info`, as
/// ``OutgoingAttachment/content(size:pixelSize:encryptedFile:thumbnail:)`` writes them:
/// `thumbnail_info`, then `thumbnail_file` (encrypted room) or, once reserved, `thumbnail_url`.
package struct QueuedThumbnailMembers: Sendable, Hashable {
    /// `thumbnail_info` (mimetype, size, w, h).
    package var contentType: String
    /// See ``contentType``.
    package var size: Int
    /// See ``contentType``.
    package var width: Int
    /// See ``contentType``.
    package var height: Int
    /// `thumbnail_file`: how the thumbnail is encrypted (its URI once reserved).
    package var encryptedFile: EncryptedFile?
    /// `thumbnail_url`, once reserved (plain rooms).
    package var uri: MediaURI?

    /// The URI the thumbnail goes to, once reserved.
    package var reservedURI: MediaURI? { encryptedFile?.uri ?? uri }

    /// The members' JSON text, each preceded by a comma.
    var json: String {
        var info = JSONObjectWriter()
        info.string("mimetype", contentType)
        info.raw("size", String(size))
        info.raw("w", String(width))
        info.raw("h", String(height))
        var text = #","thumbnail_info":"# + info.text
        if let encryptedFile {
            text += #","thumbnail_file":"# + encryptedFile.json
        } else if let uri {
            var url = JSONObjectWriter()
            url.string("thumbnail_url", uri.uriString)
            text += "," + url.text.dropFirst().dropLast()
        }
        return text
    }

    private struct Wire: Decodable {
        struct Info: Decodable {
            var mimetype: String
            var size: Int
            var w: Int
            var h: Int
        }
        var thumbnail_info: Info
        var thumbnail_file: EncryptedFile.Wire?
        var thumbnail_url: String?
    }

    private static let marker = #","thumbnail_info":"#

    /// The members at the end of `content`'s `info` and the text before them; `nil` without a
    /// thumbnail. (The marker cannot occur inside a string: JSON escapes its quotes.)
    package static func read(_ content: MessageContent) -> (members: QueuedThumbnailMembers, prefix: Substring)? {
        let json = content.json
        guard let start = json.range(of: marker, options: .backwards), json.hasSuffix("}}") else { return nil }
        // `"thumbnail_info":{…}[,"thumbnail_file":{…}|,"thumbnail_url":"…"]` then `}}`.
        let object = "{" + json[json.index(after: start.lowerBound)..<json.index(json.endIndex, offsetBy: -1)]
        guard let wire = WireJSON.decodeIfValid(Wire.self, from: Array(object.utf8)) else { return nil }
        var file: EncryptedFile?
        if let encrypted = wire.thumbnail_file {
            guard let valid = EncryptedFile(wire: encrypted) else { return nil }
            file = valid
        }
        let members = QueuedThumbnailMembers(
            contentType: wire.thumbnail_info.mimetype, size: wire.thumbnail_info.size, width: wire.thumbnail_info.w,
            height: wire.thumbnail_info.h, encryptedFile: file, uri: wire.thumbnail_url.flatMap(MediaURI.init))
        return (members, json[..<start.lowerBound])
    }

    /// `content` with its thumbnail members replaced by `self`.
    package func replacing(in content: MessageContent) -> MessageContent? {
        guard let (_, prefix) = Self.read(content) else { return nil }
        return MessageContent(eventType: content.eventType, json: String(prefix) + json + "}}")
    }
}

extension OutgoingAttachment {
    /// `content` with its thumbnail named by `uri`: `thumbnail_file.url` when it is encrypted,
    /// else `thumbnail_url`. Unchanged without a thumbnail.
    package static func namingThumbnail(_ uri: MediaURI, in content: MessageContent) -> MessageContent {
        guard var members = QueuedThumbnailMembers.read(content)?.members else { return content }
        if members.encryptedFile != nil {
            members.encryptedFile?.uri = uri
        } else {
            members.uri = uri
        }
        return members.replacing(in: content) ?? content
    }

    /// Whether `content` has a thumbnail with no URI yet (the reservation makes one).
    package static func thumbnailNeedsURI(_ content: MessageContent) -> Bool {
        guard let members = QueuedThumbnailMembers.read(content)?.members else { return false }
        return members.reservedURI == nil
    }

    /// The copy of an attachment's thumbnail, next to the attachment's copy.
    static func thumbnailPath(of copy: String) -> String { copy + ".thumb" }
}

extension EncryptedAttachment {
    /// `plaintext` encrypted in memory with a fresh key and IV (v2), and the `EncryptedFile`
    /// (no URI) with the ciphertext's SHA-256: a thumbnail, never written in the clear.
    package static func encrypt(bytes plaintext: [UInt8]) throws(EncryptedAttachmentError) -> (
        ciphertext: [UInt8], file: EncryptedFile
    ) {
        do {
            let key = try SecureRandom.bytes(AES256CTR.keyLength)
            let iv = try SecureRandom.bytes(8) + [UInt8](repeating: 0, count: 8)
            let ciphertext = try AES256CTR.apply(key: key, iv: iv, to: plaintext)
            let hash = try SHA256Digest.hash(ciphertext)
            return (ciphertext, EncryptedFile(uri: nil, key: key, iv: iv, sha256: hash))
        } catch {
            throw .cipher(error)
        }
    }
}

extension AttachmentThumbnail {
    /// The thumbnail written next to an attachment's `copy` (`<copy>.thumb`, 0600, synced),
    /// encrypted in memory first when `encrypted` (its own key and IV: never in the clear on
    /// disk), and the content members that describe it; `nil` for an empty one.
    func stored(next copy: String, encrypted: Bool) throws(ChatError) -> (
        members: QueuedThumbnailMembers, copy: QueuedThumbnail
    )? {
        guard !bytes.isEmpty, width > 0, height > 0 else { return nil }
        var written = bytes
        var file: EncryptedFile?
        if encrypted {
            do throws(EncryptedAttachmentError) {
                (written, file) = try EncryptedAttachment.encrypt(bytes: bytes)
            } catch {
                throw .encryptionUnavailable
            }
        }
        let path = OutgoingAttachment.thumbnailPath(of: copy)
        guard AttachmentFiles.writeSynced(written, to: path) else { throw .store(.store(.full)) }
        let members = QueuedThumbnailMembers(
            contentType: contentType, size: bytes.count, width: width, height: height, encryptedFile: file)
        let queued = QueuedThumbnail(localPath: path, contentType: encrypted ? "application/octet-stream" : contentType)
        return (members, queued)
    }
}

extension OutgoingAttachment {
    /// What the send queue's thumbnail step reads of a queued attachment's content.
    package struct QueuedInfo: Sendable, Hashable {
        /// The `msgtype`'s kind.
        package var kind: Kind
        /// `info.mimetype`: the file's own type (an encrypted copy uploads as
        /// `application/octet-stream`).
        package var mimeType: String
        /// Whether `info` states `w` and `h`.
        package var hasPixelSize: Bool
        /// Whether `info` states `duration`.
        package var hasDuration: Bool
        /// Whether `info` has a thumbnail already (the app's).
        package var hasThumbnail: Bool

        /// Whether the queue makes this attachment's thumbnail: an image or a video without one.
        package var wantsThumbnail: Bool { (kind == .image || kind == .video) && !hasThumbnail }
    }

    private struct InfoWire: Decodable {
        struct Present: Decodable {}
        struct Info: Decodable {
            var mimetype: String?
            var w: Int?
            var h: Int?
            var duration: Int?
            var thumbnail_info: Present?
        }
        var msgtype: String
        var info: Info?
    }

    /// The kind, MIME type and stated members of a queued attachment's content; `nil` when it is
    /// not one.
    package static func queuedInfo(in content: MessageContent) -> QueuedInfo? {
        guard let wire = WireJSON.decodeIfValid(InfoWire.self, from: Array(content.json.utf8)),
            wire.msgtype.hasPrefix("m."), let kind = Kind(rawValue: String(wire.msgtype.dropFirst(2)))
        else { return nil }
        return QueuedInfo(
            kind: kind, mimeType: wire.info?.mimetype ?? "application/octet-stream",
            hasPixelSize: wire.info?.w != nil && wire.info?.h != nil, hasDuration: wire.info?.duration != nil,
            hasThumbnail: wire.info?.thumbnail_info != nil)
    }

    /// `content` (as ``content(size:pixelSize:encryptedFile:thumbnail:)`` wrote it, not yet
    /// reserved) with `members` at the end of its `info`, and a video's `w`, `h` and `duration`
    /// from what the thumbnailer read of `made` where `info` has none; `nil` for a content that is
    /// not a queued attachment's.
    package static func adding(
        _ members: QueuedThumbnailMembers?, readFrom made: AttachmentThumbnail?, to content: MessageContent
    ) -> MessageContent? {
        guard let info = queuedInfo(in: content), content.json.hasSuffix("}}") else { return nil }
        var extra = ""
        if info.kind == .video, let made {
            if !info.hasPixelSize, let width = made.sourceWidth, let height = made.sourceHeight {
                extra += #","w":\#(width),"h":\#(height)"#
            }
            if !info.hasDuration, let duration = made.duration {
                let (seconds, attoseconds) = duration.components
                extra += #","duration":\#(seconds * 1000 + attoseconds / 1_000_000_000_000_000)"#
            }
        }
        return MessageContent(
            eventType: content.eventType, json: String(content.json.dropLast(2)) + extra + (members?.json ?? "") + "}}")
    }
}
