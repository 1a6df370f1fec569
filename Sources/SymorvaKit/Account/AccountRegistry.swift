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

/// One account known on this device, as `accounts.json` lists it.
public struct StoredAccount: Sendable, Hashable, Codable {
    /// The account's Matrix user ID.
    public var userID: UserID
    /// Its device on this installation.
    public var deviceID: DeviceID
    /// The homeserver the account lives on.
    public var homeserverURL: HomeserverURL
    /// Set before the account's folder is deleted: an account marked so is never restored, and
    /// its wipe is finished at the next launch if the process died half-way.
    public var isPendingWipe: Bool

    /// A stored account.
    public init(userID: UserID, deviceID: DeviceID, homeserverURL: HomeserverURL, isPendingWipe: Bool = false) {
        self.userID = userID
        self.deviceID = deviceID
        self.homeserverURL = homeserverURL
        self.isPendingWipe = isPendingWipe
    }

    /// The local account ID.
    public var accountID: AccountID { AccountID(userID) }
}

/// The accounts known on this device and which one is active: `<data>/accounts.json`.
///
/// A plain value read and written whole; ``AccountRegistryFile`` does the file work. Every write
/// goes to a temporary file that is synced and renamed over the old one, so a crash leaves
/// either the old or the new list, never a torn one.
public struct AccountRegistry: Sendable, Hashable, Codable {
    /// The file format version.
    public var version: Int
    /// Every account, in the order they were added (including those pending a wipe).
    public var accounts: [StoredAccount]
    /// The account that was active last.
    public var active: UserID?

    /// An empty registry.
    public init(accounts: [StoredAccount] = [], active: UserID? = nil) {
        self.version = 1
        self.accounts = accounts
        self.active = active
    }

    /// The accounts that can be restored (not pending a wipe).
    public var restorable: [StoredAccount] { accounts.filter { !$0.isPendingWipe } }

    /// The entry of `userID`.
    public func account(_ userID: UserID) -> StoredAccount? { accounts.first { $0.userID == userID } }

    /// Adds the account at the end, or updates it in place (keeping its position).
    public mutating func upsert(_ account: StoredAccount) {
        if let index = accounts.firstIndex(where: { $0.userID == account.userID }) {
            accounts[index] = account
        } else {
            accounts.append(account)
        }
    }

    /// Removes the account (and clears `active` if it was the active one).
    public mutating func remove(_ userID: UserID) {
        accounts.removeAll { $0.userID == userID }
        if active == userID { active = nil }
    }

    /// What the app flow restores: every restorable account and the last active one.
    public var restoredAccounts: RestoredAccounts {
        RestoredAccounts(accounts: restorable.map(\.accountID), active: active.map(AccountID.init))
    }
}

/// Reads and writes `accounts.json` atomically.
public struct AccountRegistryFile: Sendable {
    /// The file's path.
    public let path: String

    /// The registry file at `path`.
    public init(path: String) { self.path = path }

    /// The registry, or an empty one when the file does not exist yet.
    public func read() throws(AccountStorageError) -> AccountRegistry {
        guard let data = FileManager.default.contents(atPath: path) else {
            if access(path, F_OK) != 0 && errno == ENOENT { return AccountRegistry() }
            throw .fileSystem(operation: "read accounts.json", errno: errno)
        }
        do {
            let registry = try JSONDecoder().decode(AccountRegistry.self, from: data)
            guard registry.version == 1 else { throw AccountStorageError.unreadableRegistry(reason: "version") }
            return registry
        } catch let error as AccountStorageError {
            throw error
        } catch {
            throw .unreadableRegistry(reason: "not an account list")
        }
    }

    /// Replaces the file with `registry`: temporary file, `fsync`, `rename`, `fsync` of the folder.
    public func write(_ registry: AccountRegistry) throws(AccountStorageError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do { data = try encoder.encode(registry) } catch { throw .unreadableRegistry(reason: "encoding") }
        try AccountFiles.writeAtomically(Array(data), to: path)
    }
}

/// The few file operations account storage needs, with `errno`-typed failures.
enum AccountFiles {
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

    /// Writes `bytes` to `path` through a synced temporary file renamed into place.
    static func writeAtomically(_ bytes: [UInt8], to path: String) throws(AccountStorageError) {
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
    static func removeTree(_ path: String) throws(AccountStorageError) {
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
    static func removeTemporaryFiles(of path: String) {
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
