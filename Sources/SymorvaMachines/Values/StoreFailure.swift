import SymorvaRuntime

/// Why the local store failed, as a feature's machine and its callers see it: what an app can
/// tell the user or act on, without the store adapter's codes (machines cannot see
/// `SymorvaStore`). The product layer maps the store's errors into these cases.
public enum StoreFailure: Sendable, Hashable, LogSafe, CustomStringConvertible {
    /// The disk is full: nothing was written; free space and retry.
    case full
    /// Another connection kept the database locked past the busy timeout: retry later.
    case busy
    /// The database file is damaged or is not a database.
    case corrupt
    /// The database was written by a newer version of the SDK, which this one cannot read.
    case newerSchema
    /// A secret at rest could not be opened (tampered, or sealed under another key), or its
    /// key could not be read.
    case secrets
    /// A file-system call on the data folder failed (permissions, a missing folder).
    case fileSystem
    /// Stored data cannot be read as what it should be (the account list, a stored ID).
    case unreadable
    /// The account is not known on this device.
    case unknownAccount
    /// Any other database failure: opening, a statement, a constraint, a migration.
    case database

    /// The case name.
    public var description: String {
        switch self {
        case .full: "full"
        case .busy: "busy"
        case .corrupt: "corrupt"
        case .newerSchema: "newerSchema"
        case .secrets: "secrets"
        case .fileSystem: "fileSystem"
        case .unreadable: "unreadable"
        case .unknownAccount: "unknownAccount"
        case .database: "database"
        }
    }

    /// Same as ``description``.
    public var logDescription: String { description }
}
