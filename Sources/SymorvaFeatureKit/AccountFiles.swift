import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The few file operations account storage needs, with `errno`-typed failures.
package enum AccountFiles {
    /// `mkdir -p` with mode 0700 for every folder it creates.
    static func makeDirectory(_ path: String) throws(AccountStorageError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw .fileSystem(operation: "mkdir", errno: errno)
            }
        }
    }

    /// Refuses `path` when group or others have any permission on it: an account's data is its
    /// user's alone.
    static func requirePrivate(_ path: String) throws(AccountStorageError) {
        var info = stat()
        guard stat(path, &info) == 0 else { throw .fileSystem(operation: "stat", errno: errno) }
        let mode = UInt32(info.st_mode) & 0o777
        guard mode & 0o077 == 0 else { throw .insecureFolder(mode: mode) }
    }

    /// Creates `path` as an empty file for the user alone (0600), or takes every permission of
    /// group and others away from the file that is there.
    static func makePrivateFile(_ path: String) throws(AccountStorageError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .fileSystem(operation: "create", errno: errno) }
        defer { close(fd) }
        guard fchmod(fd, 0o600) == 0 else { throw .fileSystem(operation: "chmod", errno: errno) }
    }

    /// Writes `bytes` to `path` through a synced temporary file renamed into place.
    package static func writeAtomically(_ bytes: [UInt8], to path: String) throws(AccountStorageError) {
        let directory = parent(of: path)
        try makeDirectory(directory)
        let temporary = path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .fileSystem(operation: "create", errno: errno) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else {
                let failure = errno
                close(fd)
                unlink(temporary)
                throw .fileSystem(operation: "write", errno: failure)
            }
            offset += written
        }
        let synced = fsync(fd) == 0
        let failure = errno
        close(fd)
        guard synced else {
            unlink(temporary)
            throw .fileSystem(operation: "fsync", errno: failure)
        }
        guard rename(temporary, path) == 0 else {
            let failure = errno
            unlink(temporary)
            throw .fileSystem(operation: "rename", errno: failure)
        }
        syncDirectory(directory)
    }

    /// Deletes `path` and everything below it; a missing path is not an error.
    package static func removeTree(_ path: String) throws(AccountStorageError) {
        guard access(path, F_OK) == 0 else { return }
        do {
            try FileManager.default.removeItem(atPath: path)
        } catch {
            throw .fileSystem(operation: "remove", errno: errno == 0 ? EIO : errno)
        }
        syncDirectory(parent(of: path))
    }

    /// Deletes temporary files that a process killed during ``writeAtomically(_:to:)`` left
    /// next to `path`.
    package static func removeTemporaryFiles(of path: String) {
        let directory = parent(of: path)
        let prefix = (path.split(separator: "/").last.map(String.init) ?? path) + ".tmp-"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasPrefix(prefix) { unlink(directory + "/" + name) }
    }

    /// Whether something exists at `path`.
    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func syncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }
}
