import CSQLite
import SymorvaRuntime

/// Why a store operation failed.
///
/// No case carries a bound value, a row or a secret: statements are summarised by their first
/// words, and SQLite's own messages name schema objects only. Every case is safe to log.
public enum StoreError: Error, Sendable, Hashable {
    /// The database file could not be opened or configured (SQLite result code).
    case open(code: Int32)
    /// A statement did not compile: SQLite's code, the statement's first words and its message.
    case prepare(code: Int32, statement: String, message: String)
    /// A parameter could not be bound (index out of range, value too big).
    case bind(code: Int32)
    /// Running a statement failed with this extended result code.
    case step(code: Int32)
    /// A UNIQUE, FOREIGN KEY, NOT NULL or CHECK constraint was violated (extended code, message).
    case constraint(code: Int32, message: String)
    /// The disk is full, or the database reached its page limit (`SQLITE_FULL`).
    case full
    /// The file is corrupt or is not a database (`SQLITE_CORRUPT`, `SQLITE_NOTADB`).
    case corrupt
    /// Another connection held a lock for longer than the busy timeout.
    case busy
    /// The migration to this schema version failed and was rolled back.
    case migration(version: Int, code: Int32)
    /// The migration list is not strictly increasing from version 1 (a programming error).
    case invalidMigrations
    /// The database was written by a newer SDK: its schema version is above the supported one.
    case newerSchema(found: Int, supported: Int)
    /// The transaction body gave up; everything it wrote was rolled back.
    case aborted
}

extension StoreError: CustomStringConvertible, LogSafe {
    /// The case and its codes.
    public var description: String {
        switch self {
        case .open(let code): "open(code: \(code))"
        case .prepare(let code, let statement, let message): "prepare(code: \(code), \(statement)…: \(message))"
        case .bind(let code): "bind(code: \(code))"
        case .step(let code): "step(code: \(code))"
        case .constraint(let code, let message): "constraint(code: \(code), \(message))"
        case .full: "full"
        case .corrupt: "corrupt"
        case .busy: "busy"
        case .migration(let version, let code): "migration(version: \(version), code: \(code))"
        case .invalidMigrations: "invalidMigrations"
        case .newerSchema(let found, let supported): "newerSchema(found: \(found), supported: \(supported))"
        case .aborted: "aborted"
        }
    }

    /// Same as ``description``: no case carries user data.
    public var logDescription: String { description }

    /// Maps a failing SQLite result code; `connection` supplies the message for constraints.
    static func sqlite(_ code: Int32, connection: OpaquePointer?) -> StoreError {
        switch code & 0xFF {
        case SQLITE_FULL: .full
        case SQLITE_CORRUPT, SQLITE_NOTADB: .corrupt
        case SQLITE_BUSY, SQLITE_LOCKED: .busy
        case SQLITE_CONSTRAINT: .constraint(code: code, message: message(connection))
        default: .step(code: code)
        }
    }

    /// A constraint violation found by the caller rather than reported by SQLite: a statement
    /// with `OR IGNORE` skipped a row for a reason other than the one it expected.
    package static func constraintViolated(_ message: String) -> StoreError {
        .constraint(code: SQLITE_CONSTRAINT, message: message)
    }

    static func message(_ connection: OpaquePointer?) -> String {
        guard let connection, let text = sqlite3_errmsg(connection) else { return "" }
        return String(cString: text)
    }

    /// The first words of a statement, enough to find it in the code.
    static func summary(_ sql: String) -> String {
        String(sql.split(whereSeparator: \.isWhitespace).prefix(4).joined(separator: " ").prefix(60))
    }
}
