import Foundation
import SymorvaCrypto
import SymorvaMachines
import SymorvaRuntime
import SymorvaStore

/// The schema migrations of every feature that keeps data in an account's database.
///
/// Each feature (session, chat, wallet, …) registers its own ordered list under its own name.
/// Versions are per feature and start at 1, so features never have to agree on a numbering:
/// they are applied with ``/SymorvaStore/SQLiteDatabase/migrate(feature:_:)``, which keeps one row
/// per feature in `symorva_feature_schema` and runs each migration in its own transaction
/// together with its feature's version bump. Table names are prefixed with the feature's name
/// (`session_…`, `wallet_…`) so that features cannot collide on names either. The file's
/// `user_version` stays free for the one list that uses ``/SymorvaStore/SQLiteDatabase/migrate(_:)``.
///
/// ```swift
/// var migrations = AccountMigrations.standard
/// migrations.register(feature: "wallet", [
///     Migration(version: 1, name: "pending_commands", sql: "CREATE TABLE wallet_pending(…)"),
/// ])
/// ```
public struct AccountMigrations: Sendable {
    /// One feature's migrations.
    public struct Feature: Sendable, Hashable {
        /// The feature's name: its key in `symorva_feature_schema` and the prefix of its tables.
        public var name: String
        /// Its migrations, versions 1, 2, 3, … in order.
        public var migrations: [Migration]

        /// A feature's migrations.
        public init(name: String, migrations: [Migration]) {
            self.name = name
            self.migrations = migrations
        }

        /// Brings this feature's tables in `database` up to its last version: what the account
        /// database does for every registered feature when it opens, so on such a database it
        /// changes nothing. A module's store calls it for a database the community did not open
        /// (tools, tests, benchmarks).
        ///
        /// - Throws: as ``AccountMigrations/apply(to:)``.
        package func apply(to database: SQLiteDatabase) async throws(StoreError) {
            try await database.run { db throws(StoreError) in
                try db.migrate(feature: name, migrations)
            }
        }
    }

    /// The database's main list, versioned by the file's `user_version`: chat's schema
    /// (`ChatSchema.migrations`), the largest and oldest user of the file. Applied first.
    public var main: [Migration]

    /// The registered features, in registration order (the order migrations are applied in).
    public private(set) var features: [Feature]

    /// A registry with the `main` list and `features`.
    public init(main: [Migration] = [], _ features: [Feature] = []) {
        self.main = main
        self.features = []
        for feature in features { register(feature: feature.name, feature.migrations) }
    }

    /// Adds a feature's migrations. Registering a name twice is a programming error and traps,
    /// naming the feature, because two features would otherwise fight over one version row.
    public mutating func register(feature name: String, _ migrations: [Migration]) {
        precondition(!features.contains { $0.name == name }, "account feature '\(name)' is registered twice")
        features.append(Feature(name: name, migrations: migrations))
    }

    /// Registers what every factory declares: the main list of the one factory that owns the
    /// file's `user_version` (chat), then each factory's feature migrations under its schema
    /// name, in factory order. A second factory declaring a main list is a programming error and
    /// traps, naming it.
    package mutating func register(modules factories: [AccountModuleFactory]) {
        for factory in factories {
            if !factory.mainMigrations.isEmpty {
                precondition(main.isEmpty, "module '\(factory.name)' declares the main migration list, which is taken")
                main = factory.mainMigrations
            }
            if !factory.migrations.isEmpty { register(feature: factory.schemaName, factory.migrations) }
        }
    }

    /// Brings every registered feature of `database` up to its last version.
    ///
    /// - Throws: `.invalidMigrations` when a feature's versions do not run 1, 2, 3, …;
    ///   `.newerSchema` when the file holds a newer version of a feature than this SDK knows (a
    ///   newer SDK wrote it: refuse rather than misread it); `.migration(version:code:)` when a
    ///   migration fails (that migration is rolled back, earlier ones stay).
    public func apply(to database: SQLiteDatabase) async throws(StoreError) {
        for feature in features { try await feature.apply(to: database) }
    }
}

/// One account's SQLite database: `<data>/accounts/<folder>/store.sqlite`, in WAL mode, on its
/// own store thread, migrated by every registered feature.
///
/// Features keep their per-account data here (the session row, the chat timeline, pending
/// wallet commands). Wiping the account deletes the whole folder.
public final class AccountDatabase: Sendable {
    /// The account the database belongs to.
    public let userID: UserID
    /// The account's folder.
    public let directory: String
    /// The database itself; features run their statements on it.
    public let database: SQLiteDatabase

    private init(userID: UserID, directory: String, database: SQLiteDatabase) {
        self.userID = userID
        self.directory = directory
        self.database = database
    }

    /// The file name of the database inside the account's folder.
    public static let fileName = "store.sqlite"

    /// Opens (creating the folder and file if needed) the database of `userID` under
    /// `dataDirectory` and applies `migrations`. The account's folder is 0700 and its files
    /// 0600; a folder that other users can read or enter is refused (`.insecureFolder`).
    ///
    /// The file is opened by `openFile(path:migrations:executor:logger:)`, with the account
    /// settings (``/SymorvaStore/SQLiteDatabase/Configuration/account``): 8 KB pages for a new
    /// file, a 16 MB page cache and no automatic checkpoint (the chat sync loop checkpoints
    /// after each committed response).
    public static func open(
        userID: UserID, dataDirectory: String, migrations: AccountMigrations,
        logger: Logger = Logger(category: "store")
    ) async throws(AccountStorageError) -> AccountDatabase {
        let directory = Self.directory(for: userID, in: dataDirectory)
        try AccountFiles.makeDirectory(directory)
        try AccountFiles.requirePrivate(AccountFiles.parent(of: directory))
        try AccountFiles.requirePrivate(directory)
        let path = directory + "/" + fileName
        // SQLite would create the file (and give its -wal and -shm files the same mode) under the
        // umask, 0644 on most systems: the file is made, or tightened, for the user alone first.
        try AccountFiles.makePrivateFile(path)
        for companion in ["-wal", "-shm"] where AccountFiles.exists(path + companion) {
            try AccountFiles.makePrivateFile(path + companion)
        }
        do {
            let database = try await openFile(path: path, migrations: migrations, logger: logger)
            return AccountDatabase(userID: userID, directory: directory, database: database)
        } catch {
            throw .store(error)
        }
    }

    /// The one way an account database file is opened: with the account settings
    /// (``SymorvaStore/SQLiteDatabase/Configuration/account``), the main migration list, then
    /// every registered feature's. ``open(userID:dataDirectory:migrations:logger:)`` uses it,
    /// and so do the benchmarks, so that what they measure is what an account gets.
    package static func openFile(
        path: String, migrations: AccountMigrations, executor: StoreExecutor = StoreExecutor(),
        logger: Logger = Logger(category: "store")
    ) async throws(StoreError) -> SQLiteDatabase {
        let database = try await SQLiteDatabase.open(
            path: path, migrations: migrations.main, configuration: .account, executor: executor, logger: logger)
        try await migrations.apply(to: database)
        return database
    }

    /// `<dataDirectory>/accounts/<folder name>`.
    public static func directory(for userID: UserID, in dataDirectory: String) -> String {
        dataDirectory + "/accounts/" + folderName(for: userID)
    }

    /// A file-system-safe, stable folder name for a user ID: a readable part (lower-cased
    /// localpart and server name, other characters replaced by `_`) and a 64-bit FNV-1a hash
    /// of the exact ID, so that IDs differing only in case or in replaced characters never
    /// share a folder, even on case-insensitive file systems.
    public static func folderName(for userID: UserID) -> String {
        var readable = ""
        for scalar in (userID.localpart + "_" + userID.serverName).lowercased().unicodeScalars {
            let isSafe = ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar) || scalar == "." || scalar == "-"
            readable.unicodeScalars.append(isSafe ? scalar : "_")
        }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in userID.rawValue.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        let padding = String(repeating: "0", count: 16 - hex.count)
        return String(readable.prefix(48)) + "-" + padding + hex
    }
}

/// Why an account's local data could not be read, written or removed.
///
/// Every case is safe to log: paths are never included, only codes.
public enum AccountStorageError: Error, Sendable, Hashable, CustomStringConvertible, LogSafe {
    /// The database failed.
    case store(StoreError)
    /// A secret at rest could not be sealed or opened (tampered or undecryptable secrets are
    /// `.secrets(.decryptionFailed)`), or its key could not be read.
    case secrets(SecretsError)
    /// A file-system call on the data folder failed (`errno`).
    case fileSystem(operation: String, errno: Int32)
    /// An account's folder (or the `accounts` folder) lets other users read or enter it (its
    /// mode): the SDK creates them 0700 and refuses to keep an account's data where others can
    /// read it.
    case insecureFolder(mode: UInt32)
    /// `accounts.json` exists but cannot be read as an account list.
    case unreadableRegistry(reason: String)
    /// The account is not known on this device.
    case unknownAccount

    /// The case and its codes.
    public var description: String {
        switch self {
        case .store(let error): "store(\(error))"
        case .secrets(let error): "secrets(\(error))"
        case .fileSystem(let operation, let errno): "fileSystem(\(operation), errno: \(errno))"
        case .insecureFolder(let mode): "insecureFolder(mode: \(String(mode, radix: 8)))"
        case .unreadableRegistry(let reason): "unreadableRegistry(\(reason))"
        case .unknownAccount: "unknownAccount"
        }
    }

    /// Same as ``description``: no case carries a path or user data.
    public var logDescription: String { description }
}

extension AccountStorageError {
    /// The machines' view of the failure (``SymorvaMachines/StoreFailure``).
    package var storeFailure: StoreFailure {
        switch self {
        case .store(let error): error.storeFailure
        case .secrets: .secrets
        case .fileSystem, .insecureFolder: .fileSystem
        case .unreadableRegistry: .unreadable
        case .unknownAccount: .unknownAccount
        }
    }
}

extension StoreError {
    /// The machines' view of the failure (``SymorvaMachines/StoreFailure``).
    package var storeFailure: StoreFailure {
        switch self {
        case .full: .full
        case .busy: .busy
        case .corrupt: .corrupt
        case .newerSchema: .newerSchema
        case .open, .prepare, .bind, .step, .constraint, .migration, .invalidMigrations, .aborted: .database
        }
    }
}
