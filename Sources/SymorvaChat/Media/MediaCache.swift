import Foundation
import SymorvaMachines
import SymorvaRuntime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One account's media on disk: downloads and thumbnails kept in a folder of the account's
/// folder, bounded in size, the least recently used going first.
///
/// - A file is named by what it holds (`<server>_<mediaID>`, a thumbnail with its size and
///   method), so a second request finds it; a hit refreshes its use time (the file's mtime).
/// - Concurrent requests for the same key join one download (a ``RequestCoalescer``).
/// - After each download the cache trims itself: files by oldest use time go until the total is
///   under the cap; the file just downloaded goes last (its caller is about to read it).
/// - Downloads land in a temporary name and are renamed when complete, so a half-written file is
///   never found; leftovers of a crash are removed when the cache opens.
/// - The folder is in the account's folder: wiping the account clears it.
package final class MediaCache: Sendable {
    /// The folder.
    package let directory: String
    /// The most bytes kept.
    package let capacity: Int64

    private let downloads = RequestCoalescer<String, String, MediaError>()
    private let trimLock = Lock(())
    /// The last use time given (ns since the epoch): each use gets a later one than the one
    /// before, even within the file system's timestamp granularity, so the order is exact.
    private let lastUse = Lock<Int64>(0)

    /// A cache in `directory` (created 0700) holding at most `capacity` bytes.
    package init(directory: String, capacity: Int64) {
        self.directory = directory
        self.capacity = max(0, capacity)
        _ = AttachmentFiles.makeDirectory(directory)
        Self.removeLeftovers(in: directory)
    }

    /// The file name for the original of `uri`.
    package static func key(for uri: MediaURI) -> String {
        // Server names are host names, IP literals and ports: `:` is the one character not
        // allowed in a file name here, and `_` never occurs in them, so the mapping is one to one.
        uri.serverName.replacingOccurrences(of: ":", with: "_") + "_" + uri.mediaID
    }

    /// The file name for a thumbnail of `uri`.
    package static func thumbnailKey(for uri: MediaURI, width: Int, height: Int, cropped: Bool) -> String {
        key(for: uri) + ".thumb-\(width)x\(height)" + (cropped ? "c" : "s")
    }

    /// The cached file for `key`, downloading it with `fetch` (into the path it is given) when
    /// absent; concurrent callers for one key share one download.
    package func file(
        for key: String, fetch: @escaping @Sendable (String) async throws(MediaError) -> Void
    ) async throws(MediaError) -> String {
        let path = directory + "/" + key
        if touch(path) { return path }
        let directory = self.directory
        let result = try await downloads.value(for: key) { () async throws(MediaError) -> String in
            if self.touch(path) { return path }
            _ = AttachmentFiles.makeDirectory(directory)
            try await fetch(path)
            _ = self.touch(path)
            return path
        }
        trim(keeping: result)
        return result
    }

    /// How many callers joined a download already running (tests wait on it).
    package var joinsForTesting: ObservableValue<Int> { downloads.joins }

    /// Bytes the cache holds now.
    package func size() -> Int64 {
        entries().reduce(0) { $0 + $1.size }
    }

    /// Removes every cached file.
    package func clear() {
        for entry in entries() { unlink(directory + "/" + entry.name) }
    }

    // MARK: Internals

    private struct Entry {
        var name: String
        var size: Int64
        var used: Int64
    }

    /// Whether `path` is there; gives it the next use time.
    private func touch(_ path: String) -> Bool {
        guard access(path, F_OK) == 0 else { return false }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let wall = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
        let use = lastUse.withLock { last in
            last = max(wall, last + 1000)
            return last
        }
        let stamp = timespec(tv_sec: Int(use / 1_000_000_000), tv_nsec: Int(use % 1_000_000_000))
        var times = [stamp, stamp]
        utimensat(AT_FDCWD, path, &times, 0)
        return true
    }

    private func entries() -> [Entry] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        return names.compactMap { name in
            guard !name.contains(".part-") else { return nil }
            var info = stat()
            guard stat(directory + "/" + name, &info) == 0 else { return nil }
            #if canImport(Darwin)
                let used = Int64(info.st_mtimespec.tv_sec) * 1_000_000_000 + Int64(info.st_mtimespec.tv_nsec)
            #else
                let used = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
            #endif
            return Entry(name: name, size: Int64(info.st_size), used: used)
        }
    }

    /// Evicts the least recently used files until the total fits; `kept` goes last (the caller
    /// is about to read it), and only if it alone is over the cap.
    private func trim(keeping kept: String) {
        trimLock.withLock { _ in
            var all = entries()
            var total = all.reduce(0) { $0 + $1.size }
            guard total > capacity else { return }
            let keptName = String(kept.split(separator: "/").last ?? "")
            all.sort { ($0.name == keptName ? 1 : 0, $0.used) < ($1.name == keptName ? 1 : 0, $1.used) }
            for entry in all where total > capacity {
                if entry.name == keptName { continue }
                unlink(directory + "/" + entry.name)
                total -= entry.size
            }
        }
    }

    private static func removeLeftovers(in directory: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for name in names where name.contains(".part-") { unlink(directory + "/" + name) }
    }
}
