import CSQLite

/// One step of a database schema: the SQL that takes version `version - 1` to `version`.
///
/// Versions start at 1 and increase by one. The schema version is SQLite's
/// `PRAGMA user_version`; each migration runs in its own transaction together with the
/// version bump, so a crash leaves the database at the previous version, never in between.
public struct Migration: Sendable, Hashable {
    /// The schema version this migration produces.
    public var version: Int
    /// A short name for logs (`create_timeline`).
    public var name: String
    /// The `;`-separated statements.
    public var sql: String

    /// Creates a migration.
    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}

extension SQLiteDatabase {
    /// The schema version (`PRAGMA user_version`).
    public func schemaVersion() throws(StoreError) -> Int {
        try queryOne("PRAGMA user_version") { $0.int(0) } ?? 0
    }

    /// Applies the migrations above the current schema version, in order, one transaction each.
    ///
    /// - Throws: `.invalidMigrations` unless versions run 1, 2, 3, …; `.newerSchema` when the
    ///   file's version is above the last migration (a newer SDK wrote it: refuse rather than
    ///   misread it); `.migration(version:code:)` when a step fails (it is rolled back).
    public func migrate(_ migrations: [Migration]) throws(StoreError) {
        guard migrations.enumerated().allSatisfy({ $0.element.version == $0.offset + 1 }) else {
            throw .invalidMigrations
        }
        let current = try schemaVersion()
        let supported = migrations.last?.version ?? 0
        guard current <= supported else { throw .newerSchema(found: current, supported: supported) }
        for migration in migrations where migration.version > current {
            do {
                try transaction { db throws(StoreError) in
                    try db.executeScript(migration.sql)
                    try db.executeScript("PRAGMA user_version = \(migration.version)")
                }
            } catch {
                throw .migration(version: migration.version, code: Self.code(of: error))
            }
        }
    }

    private static func code(of error: StoreError) -> Int32 {
        switch error {
        case .step(let code), .constraint(let code, _), .prepare(let code, _, _), .open(let code): code
        case .full: SQLITE_FULL
        case .corrupt: SQLITE_CORRUPT
        case .busy: SQLITE_BUSY
        default: SQLITE_ERROR
        }
    }
}
