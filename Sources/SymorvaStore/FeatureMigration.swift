import CSQLite

/// Versioned schemas for features that share one account database.
///
/// `PRAGMA user_version` has room for one version per file, and the account database's main
/// list (``SQLiteDatabase/migrate(_:)``, owned by the chat store) uses it. A feature that adds
/// its own tables to the same file — the wallet's pending commands, for one — versions them
/// here instead: one row per feature in `symorva_feature_schema`, so that features migrate
/// independently and in any order, and none of them needs a slot in another's list.
///
/// The rules are those of ``Migration``: versions run 1, 2, 3, …; each step runs in its own
/// transaction together with its version bump; a file written by a newer SDK is refused.
extension SQLiteDatabase {
    /// The table that holds each feature's schema version.
    public static let featureSchemaTable = "symorva_feature_schema"

    /// The schema version of `feature`'s tables; `0` before its first migration.
    public func schemaVersion(feature: String) throws(StoreError) -> Int {
        try createFeatureSchemaTable()
        return try queryOne(
            "SELECT version FROM \(Self.featureSchemaTable) WHERE feature = ?", [.text(feature)]
        ) { $0.int(0) } ?? 0
    }

    /// Applies `feature`'s migrations above its current version, in order, one transaction each.
    ///
    /// - Throws: `.invalidMigrations` unless versions run 1, 2, 3, …; `.newerSchema` when the
    ///   feature's stored version is above the last migration; `.migration(version:code:)`
    ///   when a step fails (it is rolled back, and the feature stays at the previous version).
    public func migrate(feature: String, _ migrations: [Migration]) throws(StoreError) {
        guard migrations.enumerated().allSatisfy({ $0.element.version == $0.offset + 1 }) else {
            throw .invalidMigrations
        }
        let current = try schemaVersion(feature: feature)
        let supported = migrations.last?.version ?? 0
        guard current <= supported else { throw .newerSchema(found: current, supported: supported) }
        for migration in migrations where migration.version > current {
            do {
                try transaction { db throws(StoreError) in
                    try db.executeScript(migration.sql)
                    try db.execute(
                        """
                        INSERT INTO \(Self.featureSchemaTable)(feature, version) VALUES (?, ?)
                        ON CONFLICT(feature) DO UPDATE SET version = excluded.version
                        """,
                        [.text(feature), .int(migration.version)])
                }
            } catch {
                throw .migration(version: migration.version, code: Self.resultCode(of: error))
            }
        }
    }

    private func createFeatureSchemaTable() throws(StoreError) {
        try executeScript(
            """
            CREATE TABLE IF NOT EXISTS \(Self.featureSchemaTable) (
                feature TEXT PRIMARY KEY,
                version INTEGER NOT NULL
            )
            """)
    }

    private static func resultCode(of error: StoreError) -> Int32 {
        switch error {
        case .step(let code), .constraint(let code, _), .prepare(let code, _, _), .open(let code): code
        case .full: SQLITE_FULL
        case .corrupt: SQLITE_CORRUPT
        case .busy: SQLITE_BUSY
        default: SQLITE_ERROR
        }
    }
}
