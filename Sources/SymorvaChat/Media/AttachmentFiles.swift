import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The copies of queued attachments in the account's folder: one file per transaction ID,
/// written through a bounded buffer and synced before the queue row that names it.
enum AttachmentFiles {
    /// Bytes copied per read.
    static let chunkBytes = 1 << 20

    /// Why a copy failed.
    enum CopyFailure: Error {
        /// The source cannot be opened or read.
        case unreadable
        /// The destination cannot be created or written (no folder, disk full).
        case unwritable
    }

    /// The copy of `transactionID`'s file in `directory`.
    static func path(in directory: String, transactionID: String) -> String {
        directory + "/" + transactionID
    }

    /// Copies `source` to `destination` (mode 0600) in 1 MiB chunks, syncs it, and returns its
    /// size and first bytes (for a PNG's size); nothing is left at `destination` on failure.
    static func copy(_ source: String, to destination: String) throws(CopyFailure) -> (size: Int64, header: [UInt8]) {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw .unreadable }
        defer { close(input) }
        var info = stat()
        guard fstat(input, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { throw .unreadable }
        let output = open(destination, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw .unwritable }
        var buffer = [UInt8](repeating: 0, count: chunkBytes)
        var total: Int64 = 0
        var header: [UInt8] = []
        var failure: CopyFailure?
        copying: while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count < 0 {
                failure = .unreadable
                break
            }
            if count == 0 { break }
            if header.count < 24 { header += buffer[0..<min(count, 24 - header.count)] }
            var offset = 0
            while offset < count {
                let written = buffer.withUnsafeBytes { write(output, $0.baseAddress! + offset, count - offset) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else {
                    failure = .unwritable
                    break copying
                }
                offset += written
            }
            total += Int64(count)
        }
        if failure == nil, fsync(output) != 0 { failure = .unwritable }
        close(output)
        if let failure {
            unlink(destination)
            throw failure
        }
        return (total, header)
    }

    /// The first 24 bytes of the regular file at `path` (fewer for a shorter file), for a PNG's
    /// size; `nil` when it cannot be read.
    static func header(of path: String) -> [UInt8]? {
        let input = open(path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { return nil }
        defer { close(input) }
        var info = stat()
        guard fstat(input, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        var header = [UInt8](repeating: 0, count: 24)
        var filled = 0
        while filled < header.count {
            let count = header.withUnsafeMutableBytes { read(input, $0.baseAddress! + filled, $0.count - filled) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            filled += count
        }
        return Array(header[0..<filled])
    }

    /// Makes `directory` (0700) if it is not there.
    static func makeDirectory(_ directory: String) -> Bool {
        if mkdir(directory, 0o700) == 0 || errno == EEXIST { return true }
        return
            (try? FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])) != nil
    }

    /// Where a plain copy's ciphertext goes when its room became encrypted before the upload
    /// (next to the plain copy, which is removed once the queue row names the ciphertext).
    static func encryptedPath(of plainCopy: String) -> String {
        plainCopy + ".enc"
    }

    /// Removes the file at `path`, if there is one.
    static func removeFile(_ path: String) {
        unlink(path)
    }

    /// Removes `transactionID`'s copy (plain or encrypted) and its thumbnail's, if there are.
    static func remove(in directory: String, transactionID: String) {
        let plain = path(in: directory, transactionID: transactionID)
        for copy in [plain, encryptedPath(of: plain)] {
            unlink(copy)
            unlink(OutgoingAttachment.thumbnailPath(of: copy))
        }
    }

    /// Removes the files in `directory` that belong to no queued message (`transactionIDs`: a
    /// message's copy, its ciphertext and their thumbnails) and were last written before
    /// `cutoff`; returns how many. They are what a process left when it ended between a
    /// message's completion and its copy's removal (the remote echo can complete a message,
    /// and empty the outbox, a moment before the effect that removes its copy runs), or when
    /// it died writing a copy. A younger file may be the copy of a send whose queue row is
    /// being written (the copy is synced first): it stays.
    @discardableResult
    static func removeOrphans(in directory: String, keeping transactionIDs: [String], writtenBefore cutoff: Date)
        -> Int
    {
        let files = FileManager.default
        guard let names = try? files.contentsOfDirectory(atPath: directory) else { return 0 }
        var kept: Set<String> = []
        for transactionID in transactionIDs {
            let plain = path(in: directory, transactionID: transactionID)
            for copy in [plain, encryptedPath(of: plain)] {
                kept.insert(copy)
                kept.insert(OutgoingAttachment.thumbnailPath(of: copy))
            }
        }
        var removed = 0
        for name in names {
            let file = directory + "/" + name
            guard !kept.contains(file),
                let written = (try? files.attributesOfItem(atPath: file))?[.modificationDate] as? Date,
                written < cutoff
            else { continue }
            if unlink(file) == 0 { removed += 1 }
        }
        return removed
    }

    /// A file that lives in memory only, for a reader that takes a path (the thumbnailer) to
    /// read what must never be on disk in the clear (an encrypted room's attachment): a POSIX
    /// shared-memory object (tmpfs) unlinked as soon as it is open, so it goes with its
    /// descriptor (closed by the caller) and with the process, reached through
    /// `/proc/self/fd/<descriptor>`. `nil` where there is no `/proc` (Apple platforms) or it
    /// cannot be made.
    static func memoryFile() -> (descriptor: Int32, path: String)? {
        #if os(Linux)
            for _ in 0..<4 {
                let name = "/symorva-\(UInt64.random(in: 0 ... .max))"
                let descriptor = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
                guard descriptor >= 0 else {
                    if errno == EEXIST { continue }
                    return nil
                }
                shm_unlink(name)
                return (descriptor, "/proc/self/fd/\(descriptor)")
            }
            return nil
        #else
            return nil
        #endif
    }

    /// Closes a ``memoryFile()``: its bytes go.
    static func closeMemoryFile(_ descriptor: Int32) {
        close(descriptor)
    }

    /// Writes `bytes` to a new file at `path` (mode 0600) and syncs it; nothing is left there
    /// on failure.
    static func writeSynced(_ bytes: [UInt8], to path: String) -> Bool {
        let output = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard output >= 0 else { return false }
        var offset = 0
        var failed = false
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(output, $0.baseAddress! + offset, bytes.count - offset) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else {
                failed = true
                break
            }
            offset += written
        }
        if !failed, fsync(output) != 0 { failed = true }
        close(output)
        if failed { unlink(path) }
        return !failed
    }
}
