import CSQLite
import Foundation

/// The crash image of a device's folder: what a `SIGKILL` at one instant leaves on disk, taken
/// while the dead process's other tasks still write.
///
/// A real kill stops every writer at once; a file-by-file copy does not, and a plain copy can make
/// a state no kill makes. The one that matters is a checkpoint between two copies: the database
/// file copied first, then the dead process backfills its WAL and, at its next write, restarts the
/// WAL from its first frame (a new salt) — the copied WAL's old frames no longer count and the
/// copied database lacks them, so committed rows vanish from the image.
///
/// So the copy holds a read transaction on every database of the folder while it copies: a
/// reader whose snapshot uses the WAL stops any writer from restarting it, so the WAL only grows
/// (a transaction cut mid-append is dropped at recovery, as after a real kill) and a checkpoint
/// only writes pages that the WAL still holds. The `-shm` files are left out: the first
/// connection of the new process rebuilds the WAL index from the WAL, as after a reboot.
enum CrashImage {
    /// Copies `source` to `destination` as a crash image (whatever `destination` held goes first).
    static func copy(from source: String, to destination: String) {
        let files = FileManager.default
        try? files.removeItem(atPath: destination)
        let paths = (files.enumerator(atPath: source)?.allObjects as? [String] ?? []).sorted()
        let readers = paths.filter { isDatabase(source + "/" + $0) }.compactMap { snapshot(source + "/" + $0) }
        defer { for reader in readers { end(reader) } }
        try? files.createDirectory(atPath: destination, withIntermediateDirectories: true, attributes: mode(of: source))
        for path in paths where !path.hasSuffix("-shm") {
            let from = source + "/" + path
            let to = destination + "/" + path
            var isDirectory: ObjCBool = false
            guard files.fileExists(atPath: from, isDirectory: &isDirectory) else { continue }
            // The folders and files keep their modes: the account refuses a folder others can read.
            if isDirectory.boolValue {
                try? files.createDirectory(atPath: to, withIntermediateDirectories: true, attributes: mode(of: from))
            } else if let data = files.contents(atPath: from) {
                _ = files.createFile(atPath: to, contents: data, attributes: mode(of: from))
            }
        }
    }

    /// The POSIX permissions of the file at `path`, as attributes to create its copy with.
    private static func mode(of path: String) -> [FileAttributeKey: Any]? {
        guard let mode = try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] else { return nil }
        return [.posixPermissions: mode]
    }

    /// Whether the file at `path` starts with SQLite's header.
    private static func isDatabase(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        let header = (try? handle.read(upToCount: 16)) ?? Data()
        return header == Data("SQLite format 3\u{0}".utf8)
    }

    /// A connection holding a read transaction on the database at `path`, or `nil`.
    private static func snapshot(_ path: String) -> OpaquePointer? {
        var handle: OpaquePointer?
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK,
            let handle
        else {
            if let handle { sqlite3_close_v2(handle) }
            return nil
        }
        sqlite3_busy_timeout(handle, 5_000)
        // BEGIN is deferred: the read transaction (and its WAL read mark) starts at the first read.
        guard sqlite3_exec(handle, "BEGIN; SELECT count(*) FROM sqlite_master;", nil, nil, nil) == SQLITE_OK else {
            sqlite3_close_v2(handle)
            return nil
        }
        return handle
    }

    private static func end(_ handle: OpaquePointer) {
        sqlite3_exec(handle, "ROLLBACK", nil, nil, nil)
        sqlite3_close_v2(handle)
    }
}
