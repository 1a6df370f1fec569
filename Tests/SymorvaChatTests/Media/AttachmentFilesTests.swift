import Foundation
import Testing

@testable import SymorvaChat

@Suite("The attachments folder: copies of no queued message are removed at start, once old enough")
struct AttachmentFilesTests {
    @Test("A queued message's copy, ciphertext and thumbnails stay; an old file of no message goes; a young one stays")
    func orphansRemoved() throws {
        let directory = NSTemporaryDirectory() + "symorva-attachments-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let now = Date()
        let old = now.addingTimeInterval(-3_600)
        // Transaction IDs may contain dots: names are matched whole, never split.
        let queued = "m1.queued"
        let plain = AttachmentFiles.path(in: directory, transactionID: queued)
        let kept = [
            plain, AttachmentFiles.encryptedPath(of: plain), OutgoingAttachment.thumbnailPath(of: plain),
            OutgoingAttachment.thumbnailPath(of: AttachmentFiles.encryptedPath(of: plain)),
        ]
        let orphaned = AttachmentFiles.path(in: directory, transactionID: "m0.sent")
        let orphanedThumbnail = OutgoingAttachment.thumbnailPath(of: orphaned)
        let young = AttachmentFiles.path(in: directory, transactionID: "m2.being-queued")
        for file in kept + [orphaned, orphanedThumbnail, young] {
            #expect(FileManager.default.createFile(atPath: file, contents: Data([1, 2, 3])))
        }
        for file in kept + [orphaned, orphanedThumbnail] {
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: file)
        }

        let removed = AttachmentFiles.removeOrphans(
            in: directory, keeping: [queued], writtenBefore: now.addingTimeInterval(-AccountChat.orphanedCopyAge))
        #expect(removed == 2)
        let left = Set(try FileManager.default.contentsOfDirectory(atPath: directory).map { directory + "/" + $0 })
        #expect(left == Set(kept + [young]))
        #expect(AttachmentFiles.removeOrphans(in: directory + "/missing", keeping: [], writtenBefore: now) == 0)
    }
}
