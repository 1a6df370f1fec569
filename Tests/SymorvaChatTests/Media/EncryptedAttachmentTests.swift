import Foundation
import SymorvaMachines
import Testing

@testable import SymorvaChat

@Suite("Encrypted attachments: EncryptedFile v2, AES-256-CTR in chunks, the hash checked first")
struct EncryptedAttachmentTests {
    static func path(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appending(path: "symorva-enc-\(UUID().uuidString)-\(name)").path
    }

    static func bytes(at path: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) }

    @Test("A known vector (openssl enc -aes-256-ctr): the ciphertext and its SHA-256 decrypt to the plaintext")
    func knownVector() throws {
        let ciphertext = Self.path("vector")
        defer { unlink(ciphertext) }
        let hex = "c0e275dd2be4cf658dfe2d2f1b4820da12c680d08d21b4d45e"
        let cipherBytes = stride(from: 0, to: hex.count, by: 2).map { offset -> UInt8 in
            let start = hex.index(hex.startIndex, offsetBy: offset)
            return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)!
        }
        try Data(cipherBytes).write(to: URL(fileURLWithPath: ciphertext))
        let json = #"""
            {"v":"v2","key":{"kty":"oct","key_ops":["encrypt","decrypt"],"alg":"A256CTR","k":"AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE","ext":true},"iv":"AgICAgICAgIAAAAAAAAAAA","hashes":{"sha256":"wqbEE4C351S4RvE6TxJX/5bQaGlDFIxg6SYEz6cUtpE"},"url":"mxc://example.org/vector"}
            """#
        let file = try #require(EncryptedFile(json: Array(json.utf8)))
        #expect(file.uri?.uriString == "mxc://example.org/vector")
        let plaintext = Self.path("plain")
        defer { unlink(plaintext) }
        #expect(try EncryptedAttachment.decrypt(ciphertext, to: plaintext, file: file) == 25)
        #expect(try Self.bytes(at: plaintext) == Array("Symorva attachment vector".utf8))
        #expect(file.description == "EncryptedFile(v2)")
    }

    @Test("A file over several chunks round-trips; the IV's counter half is zero; the JSON reads back")
    func roundTrip() throws {
        let source = Self.path("source")
        let encrypted = Self.path("encrypted")
        let decrypted = Self.path("decrypted")
        defer { for path in [source, encrypted, decrypted] { unlink(path) } }
        let plain = (0..<(3 << 20) + 5).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) }
        try Data(plain).write(to: URL(fileURLWithPath: source))
        let (file, size) = try EncryptedAttachment.encrypt(source, to: encrypted)
        #expect(size == Int64(plain.count))
        #expect(file.iv.suffix(8) == [UInt8](repeating: 0, count: 8))
        let cipher = try Self.bytes(at: encrypted)
        #expect(cipher.count == plain.count && cipher != plain)
        var named = file
        named.uri = MediaURI("mxc://example.org/abc")
        let read = try #require(EncryptedFile(json: Array(named.json.utf8)))
        #expect(read == named)
        #expect(try EncryptedAttachment.decrypt(encrypted, to: decrypted, file: read) == Int64(plain.count))
        #expect(try Self.bytes(at: decrypted) == plain)
        let again = try EncryptedAttachment.encrypt(source, to: encrypted)
        #expect(again.file.key != file.key && again.file.iv != file.iv)
    }

    @Test("A ciphertext whose hash does not match is refused before anything is decrypted")
    func hashMismatch() throws {
        let source = Self.path("source")
        let encrypted = Self.path("encrypted")
        let decrypted = Self.path("decrypted")
        defer { for path in [source, encrypted, decrypted] { unlink(path) } }
        try Data(Array("the minutes".utf8)).write(to: URL(fileURLWithPath: source))
        let (file, _) = try EncryptedAttachment.encrypt(source, to: encrypted)
        var cipher = try Self.bytes(at: encrypted)
        cipher[3] ^= 0x01
        try Data(cipher).write(to: URL(fileURLWithPath: encrypted))
        #expect(throws: EncryptedAttachmentError.hashMismatch) {
            try EncryptedAttachment.decrypt(encrypted, to: decrypted, file: file)
        }
        #expect(!FileManager.default.fileExists(atPath: decrypted))
        #expect(
            EncryptedFile(json: Array(#"{"v":"v1","key":{"alg":"A256CTR","k":"AQ"},"iv":"AA","hashes":{}}"#.utf8))
                == nil)
    }
}

@Suite("An attachment's event content: url for a plain file, file (EncryptedFile v2) for an encrypted one")
struct AttachmentContentTests {
    static let file = EncryptedFile(
        uri: nil, key: [UInt8](repeating: 1, count: 32),
        iv: [UInt8](repeating: 2, count: 8) + [UInt8](repeating: 0, count: 8),
        sha256: [UInt8](repeating: 3, count: 32))

    @Test("An encrypted file's content starts with file; the reservation writes url into it, never a url of its own")
    func encryptedContent() throws {
        let attachment = OutgoingAttachment(path: "/tmp/a.png", contentType: "image/png", caption: "a view")
        let content = attachment.content(size: 10, pixelSize: (4, 3), encryptedFile: Self.file)
        #expect(content.json.hasPrefix(#"{"file":{"v":"v2""#))
        #expect(OutgoingAttachment.encryptedFile(in: content) == Self.file)
        let uri = try #require(MediaURI("mxc://example.org/abc"))
        let named = OutgoingAttachment.naming(uri, in: content)
        var expected = Self.file
        expected.uri = uri
        #expect(OutgoingAttachment.encryptedFile(in: named) == expected)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(named.json.utf8)) as? [String: Any])
        #expect(object["url"] == nil)
        #expect((object["file"] as? [String: Any])?["url"] as? String == "mxc://example.org/abc")
        #expect(object["msgtype"] as? String == "m.image" && object["body"] as? String == "a view")
        #expect((object["info"] as? [String: Any])?["w"] as? Int == 4)
        // Naming again (a restart that re-reads the stored content) keeps one file, one URI.
        #expect(OutgoingAttachment.naming(uri, in: named) == named)
    }

    @Test("A plain file's content gets url as its first member and no file")
    func plainContent() throws {
        let attachment = OutgoingAttachment(path: "/tmp/notes.txt", contentType: "text/plain")
        let content = attachment.content(size: 5, pixelSize: nil)
        #expect(OutgoingAttachment.encryptedFile(in: content) == nil)
        let named = OutgoingAttachment.naming(try #require(MediaURI("mxc://example.org/n")), in: content)
        #expect(named.json.hasPrefix(#"{"url":"mxc://example.org/n","msgtype":"m.file""#))
        #expect(OutgoingAttachment.encryptedFile(in: named) == nil)
    }

    @Test("A plain content made to carry file (its room became encrypted): url goes, file comes first, the rest stays")
    func plainContentCarriesFile() throws {
        let attachment = OutgoingAttachment(path: "/tmp/a.png", contentType: "image/png", caption: "later sealed")
        let plain = attachment.content(size: 10, pixelSize: (4, 3))
        let reserved = OutgoingAttachment.naming(try #require(MediaURI("mxc://example.org/plain")), in: plain)
        for content in [plain, reserved] {
            let carried = OutgoingAttachment.carrying(Self.file, in: content)
            #expect(carried.json.hasPrefix(#"{"file":{"v":"v2""#))
            #expect(!carried.json.contains("mxc://example.org/plain"))
            #expect(OutgoingAttachment.encryptedFile(in: carried) == Self.file)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(carried.json.utf8)) as? [String: Any])
            #expect(object["url"] == nil)
            #expect(object["body"] as? String == "later sealed" && object["msgtype"] as? String == "m.image")
            #expect((object["info"] as? [String: Any])?["mimetype"] as? String == "image/png")
            // Its reservation then names the ciphertext inside file, as for a file encrypted at once.
            let uri = try #require(MediaURI("mxc://example.org/sealed"))
            let named = OutgoingAttachment.naming(uri, in: carried)
            #expect(OutgoingAttachment.encryptedFile(in: named)?.uri == uri)
            #expect(!named.json.contains(#""url":"mxc://example.org/sealed","#))
        }
        let empty = OutgoingAttachment.carrying(Self.file, in: MessageContent(eventType: "m.room.message", json: "{}"))
        #expect(OutgoingAttachment.encryptedFile(in: empty) == Self.file)
        #expect((try JSONSerialization.jsonObject(with: Data(empty.json.utf8))) is [String: Any])
    }
}

@Suite("An image's thumbnail in the content: thumbnail_info, thumbnail_url or thumbnail_file, read back on receive")
struct AttachmentThumbnailContentTests {
    static let file = AttachmentContentTests.file

    static func info(_ content: MessageContent) throws -> [String: Any] {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(content.json.utf8)) as? [String: Any])
        return try #require(object["info"] as? [String: Any])
    }

    @Test(
        "The queue's thumbnail step: the members go to the end of info, a video's size and length where info has none")
    func thumbnailStepContent() throws {
        let queued = OutgoingAttachment(path: "/tmp/clip.webm", contentType: "video/webm").content(
            size: 10, pixelSize: nil)
        let info = try #require(OutgoingAttachment.queuedInfo(in: queued))
        #expect(info.kind == .video && info.mimeType == "video/webm" && info.wantsThumbnail)
        #expect(!info.hasPixelSize && !info.hasDuration && !info.hasThumbnail)
        let made = AttachmentThumbnail(
            bytes: [1], contentType: "image/jpeg", width: 32, height: 18, sourceWidth: 640, sourceHeight: 360,
            duration: .milliseconds(2000))
        let members = QueuedThumbnailMembers(contentType: "image/jpeg", size: 1, width: 32, height: 18)
        let added = try #require(OutgoingAttachment.adding(members, readFrom: made, to: queued))
        let object = try Self.info(added)
        #expect(object["w"] as? Int == 640 && object["h"] as? Int == 360 && object["duration"] as? Int == 2000)
        #expect(object["mimetype"] as? String == "video/webm" && object["size"] as? Int == 10)
        #expect(QueuedThumbnailMembers.read(added)?.members == members)
        #expect(OutgoingAttachment.queuedInfo(in: added)?.wantsThumbnail == false)
        // What the app stated is kept, never written twice.
        let given = OutgoingAttachment(
            path: "/tmp/clip.webm", contentType: "video/webm", width: 1, height: 2, duration: .seconds(3)
        ).content(size: 10, pixelSize: nil)
        let kept = try Self.info(try #require(OutgoingAttachment.adding(nil, readFrom: made, to: given)))
        #expect(kept["w"] as? Int == 1 && kept["h"] as? Int == 2 && kept["duration"] as? Int == 3000)
        // An encrypted image: its file stays the first member, its size is not the thumbnail's source's.
        let image = OutgoingAttachment(path: "/tmp/a.png", contentType: "image/png").content(
            size: 10, pixelSize: (4, 3), encryptedFile: Self.file)
        let sealedMembers = QueuedThumbnailMembers(
            contentType: "image/jpeg", size: 1, width: 4, height: 3, encryptedFile: Self.file)
        let sealed = try #require(OutgoingAttachment.adding(sealedMembers, readFrom: made, to: image))
        #expect(OutgoingAttachment.encryptedFile(in: sealed) == Self.file)
        #expect(try Self.info(sealed)["w"] as? Int == 4)
        #expect(QueuedThumbnailMembers.read(sealed)?.members == sealedMembers)
        // A file wants none; text is no attachment.
        let text = OutgoingAttachment(path: "/tmp/a.txt", contentType: "text/plain").content(size: 1, pixelSize: nil)
        #expect(OutgoingAttachment.queuedInfo(in: text)?.wantsThumbnail == false)
        #expect(
            OutgoingAttachment.queuedInfo(
                in: MessageContent(eventType: "m.room.message", json: #"{"msgtype":"m.text","body":"hi"}"#))
                == nil)
    }

    @Test(
        "The local echo of a queued encrypted file, its hash still to come, is encrypted; a received one is read strictly"
    )
    func queuedEchoEncrypted() throws {
        var pending = Self.file
        pending.sha256 = []
        let content = OutgoingAttachment(path: "/tmp/a.png", contentType: "image/png").content(
            size: 10, pixelSize: (4, 3), encryptedFile: pending)
        let echo = TimelineItemContent(
            type: "m.room.message", stateKey: nil, content: Array(content.json.utf8), isRedacted: false, queued: true)
        guard case .image(let queued) = echo else {
            Issue.record("not an image: \(echo)")
            return
        }
        #expect(queued.isEncrypted && queued.source == nil)
        let received = TimelineItemContent(
            type: "m.room.message", stateKey: nil, content: Array(content.json.utf8), isRedacted: false)
        guard case .image(let other) = received else {
            Issue.record("not an image: \(received)")
            return
        }
        #expect(!other.isEncrypted)
    }

    @Test("Plain: thumbnail_info last in info, thumbnail_url once reserved; restored members read back")
    func plainThumbnail() throws {
        let attachment = OutgoingAttachment(path: "/tmp/a.png", contentType: "image/png", caption: "a \"quoted\" view")
        let members = QueuedThumbnailMembers(contentType: "image/jpeg", size: 1234, width: 80, height: 60)
        let content = attachment.content(size: 10, pixelSize: (4, 3), thumbnail: members)
        #expect(OutgoingAttachment.thumbnailNeedsURI(content))
        #expect(QueuedThumbnailMembers.read(content)?.members == members)
        let thumbnailInfo = try #require(try Self.info(content)["thumbnail_info"] as? [String: Any])
        #expect(thumbnailInfo["w"] as? Int == 80 && thumbnailInfo["mimetype"] as? String == "image/jpeg")
        let uri = try #require(MediaURI("mxc://example.org/file"))
        let thumbnailURI = try #require(MediaURI("mxc://example.org/thumb"))
        let named = OutgoingAttachment.namingThumbnail(thumbnailURI, in: OutgoingAttachment.naming(uri, in: content))
        #expect(!OutgoingAttachment.thumbnailNeedsURI(named))
        #expect(QueuedThumbnailMembers.read(named)?.members.reservedURI == thumbnailURI)
        #expect(try Self.info(named)["thumbnail_url"] as? String == "mxc://example.org/thumb")
        #expect(try Self.info(named)["w"] as? Int == 4)
        // What a receiver reads.
        let item = TimelineItemContent(
            type: "m.room.message", stateKey: nil, content: Array(named.json.utf8), isRedacted: false)
        guard case .image(let media) = item else {
            Issue.record("not an image: \(item)")
            return
        }
        #expect(media.hasThumbnail && media.thumbnailURL == "mxc://example.org/thumb")
        #expect(media.thumbnailWidth == 80 && media.thumbnailHeight == 60 && media.thumbnailMimeType == "image/jpeg")
        #expect(media.body == "a \"quoted\" view" && media.source == uri)
    }

    @Test("Encrypted: thumbnail_file (its URI set by the reservation); carrying moves a plain thumbnail to a file")
    func encryptedThumbnail() throws {
        let attachment = OutgoingAttachment(path: "/tmp/a.png", contentType: "image/png")
        var thumbnailFile = Self.file
        thumbnailFile.sha256 = [UInt8](repeating: 9, count: 32)
        let members = QueuedThumbnailMembers(
            contentType: "image/jpeg", size: 99, width: 8, height: 6, encryptedFile: thumbnailFile)
        let content = attachment.content(size: 10, pixelSize: (4, 3), encryptedFile: Self.file, thumbnail: members)
        #expect(OutgoingAttachment.encryptedFile(in: content) == Self.file)
        #expect(OutgoingAttachment.thumbnailNeedsURI(content))
        let thumbnailURI = try #require(MediaURI("mxc://example.org/sealed-thumb"))
        let named = OutgoingAttachment.namingThumbnail(thumbnailURI, in: content)
        var expected = thumbnailFile
        expected.uri = thumbnailURI
        #expect(QueuedThumbnailMembers.read(named)?.members.encryptedFile == expected)
        #expect(try Self.info(named)["thumbnail_url"] == nil)
        let item = TimelineItemContent(
            type: "m.room.message", stateKey: nil, content: Array(named.json.utf8), isRedacted: false)
        guard case .image(let media) = item else {
            Issue.record("not an image: \(item)")
            return
        }
        #expect(media.hasThumbnail && media.thumbnailURL == nil && media.thumbnailEncryptedFile == expected)

        // A plain, reserved thumbnail whose room became encrypted: the members take a file, no url.
        let plain = OutgoingAttachment.namingThumbnail(
            thumbnailURI,
            in: attachment.content(
                size: 10, pixelSize: nil,
                thumbnail: QueuedThumbnailMembers(contentType: "image/jpeg", size: 99, width: 8, height: 6)))
        var moved = try #require(QueuedThumbnailMembers.read(plain)?.members)
        moved.encryptedFile = thumbnailFile
        moved.uri = nil
        let carried = try #require(moved.replacing(in: OutgoingAttachment.carrying(Self.file, in: plain)))
        #expect(!carried.json.contains("sealed-thumb"))
        #expect(QueuedThumbnailMembers.read(carried)?.members == moved)
        #expect(OutgoingAttachment.thumbnailNeedsURI(carried))
    }

    @Test("A received thumbnail member that does not read is left out, never the message")
    func lenientThumbnail() throws {
        let json =
            #"{"msgtype":"m.image","body":"x","url":"mxc://e.org/a","info":{"w":3,"h":2,"thumbnail_file":7,"thumbnail_info":"no"}}"#
        let item = TimelineItemContent(
            type: "m.room.message", stateKey: nil, content: Array(json.utf8), isRedacted: false)
        guard case .image(let media) = item else {
            Issue.record("not an image: \(item)")
            return
        }
        #expect(!media.hasThumbnail && media.width == 3)
    }

    @Test(
        "Queued without its hash: the copy is the ciphertext, its file leaves hashes out (a receiver refuses it, the queue reads it); the upload's hash makes it whole"
    )
    func hashPendingUntilUpload() throws {
        let source = EncryptedAttachmentTests.path("source")
        let encrypted = EncryptedAttachmentTests.path("encrypted")
        let decrypted = EncryptedAttachmentTests.path("decrypted")
        defer { for path in [source, encrypted, decrypted] { unlink(path) } }
        let plain = (0..<(2 << 20) + 77).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 9) }
        try Data(plain).write(to: URL(fileURLWithPath: source))
        let (file, size) = try EncryptedAttachment.encrypt(source, to: encrypted, hashing: false)
        #expect(size == Int64(plain.count) && file.sha256.isEmpty)
        #expect(try EncryptedAttachmentTests.bytes(at: encrypted) != plain)
        #expect(!file.json.contains("hashes"))
        #expect(EncryptedFile(json: Array(file.json.utf8)) == nil)
        #expect(EncryptedFile(json: Array(file.json.utf8), hashPending: true) == file)

        let attachment = OutgoingAttachment(path: source, contentType: "application/octet-stream", fileName: "f.bin")
        let uri = try #require(MediaURI("mxc://example.org/pending"))
        let named = OutgoingAttachment.naming(
            uri,
            in: attachment.content(size: size, pixelSize: Optional<(width: Int, height: Int)>.none, encryptedFile: file)
        )
        let queued = try #require(OutgoingAttachment.encryptedFile(in: named))
        #expect(queued.sha256.isEmpty && queued.uri == uri && queued.key == file.key)

        let sha256 = try EncryptedAttachment.sha256(of: encrypted)
        let hashed = try #require(OutgoingAttachment.hashing(sha256, in: named))
        #expect(hashed.json.contains(#""msgtype":"m.file","body":"f.bin","filename":"f.bin""#))
        let sent = try #require(OutgoingAttachment.encryptedFile(in: hashed))
        #expect(sent.sha256 == sha256 && sent.uri == uri)
        // What a receiver reads: the whole object, checked and decrypted.
        let received = try #require(EncryptedFile(json: Array(sent.json.utf8)))
        #expect(try EncryptedAttachment.decrypt(encrypted, to: decrypted, file: received) == Int64(plain.count))
        #expect(try EncryptedAttachmentTests.bytes(at: decrypted) == plain)
        // A plain attachment's content has no file to hash.
        #expect(
            OutgoingAttachment.hashing(
                sha256, in: attachment.content(size: size, pixelSize: Optional<(width: Int, height: Int)>.none)) == nil)
    }

    @Test("HashingUpload hashes the body as it is read, in uneven pieces, without changing it; a rewind starts over")
    func hashingUpload() throws {
        let path = EncryptedAttachmentTests.path("body")
        defer { unlink(path) }
        let body = (0..<700_001).map { UInt8(truncatingIfNeeded: $0 &* 40_503 >> 3) }
        try Data(body).write(to: URL(fileURLWithPath: path))
        let expected = try EncryptedAttachment.sha256(of: path)
        let upload = HashingUpload(length: Int64(body.count))
        func feed(_ count: Int) -> Bool {
            var offset = 0
            var piece = 1
            while offset < count {
                let end = min(count, offset + piece * 4093)
                var chunk = Array(body[offset..<end])
                guard chunk.withUnsafeMutableBytes({ upload.transform($0) }), chunk == Array(body[offset..<end]) else {
                    return false
                }
                offset = end
                piece = piece % 7 + 1
            }
            return true
        }
        #expect(upload.restart())
        #expect(feed(300_000))
        #expect(upload.finish() == nil)  // not the whole body
        #expect(upload.restart())  // libcurl sends it again from the start
        #expect(feed(body.count))
        #expect(upload.finish() == expected)
    }
}
