import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaStore

/// The studio's part of the account database: the account's live grants, so that a restart
/// knows them (and their expiry) again.
///
/// What is stored is the grant's ID, conversation, scope (event IDs), purpose and expiry. Never
/// conversation content, never a summary. A grant is forgotten as soon as it is revoked (before
/// the service is told) or expires.
///
/// Forgetting wins, whatever the order the writes land in: the machine's `persistGrant` and
/// `forgetGrant` (and ``AccountStudio/revoke(_:)``'s own removal) are concurrent effects, so a
/// member who revokes a grant right after it was issued can have its removal run before the
/// grant's insert. ``remove(_:)`` therefore leaves a tombstone in `studio_forgotten_grants`, and
/// ``insert(_:)`` never records a grant with a tombstone: a restart never brings a revoked grant
/// back. A tombstone is kept until the grant's expiry has passed (when nothing could restore it
/// anyway); one whose grant was never inserted carries no expiry and is kept (a few bytes). A
/// tombstone of a revoke the service has not confirmed stays until it is confirmed.
struct StudioStore: Sendable {
    /// The feature name under which the studio's schema version is kept.
    static let feature = "studio"

    /// The studio's migrations, in order.
    static let migrations: [Migration] = [
        Migration(
            version: 1, name: "studio_grants",
            sql: """
                CREATE TABLE studio_grants (
                    grant_id TEXT PRIMARY KEY,
                    room_id TEXT NOT NULL,
                    purpose TEXT NOT NULL,
                    scope_kind TEXT NOT NULL CHECK (scope_kind IN ('selected_messages', 'conversation_since')),
                    scope_event_ids TEXT NOT NULL,          -- event IDs, one per line (the since event alone)
                    since_ts INTEGER,                       -- conversation scope: its lower bound (ms)
                    expires_at_ms INTEGER NOT NULL          -- wall clock, Unix milliseconds
                ) STRICT;
                """),
        Migration(
            version: 2, name: "studio_forgotten_grants",
            sql: """
                CREATE TABLE studio_forgotten_grants (
                    grant_id TEXT PRIMARY KEY,
                    expires_at_ms INTEGER                   -- the grant's expiry once known (wall clock, ms)
                ) STRICT;
                """),
        Migration(
            version: 3, name: "studio_unconfirmed_revokes",
            sql: """
                -- 1 while the member's revoke of the grant is not confirmed by the service: sent again
                -- after a restart (AccountStudio.restoreGrants).
                ALTER TABLE studio_forgotten_grants ADD COLUMN revoke_unconfirmed INTEGER NOT NULL DEFAULT 0;
                """),
    ]

    /// The studio's tables as its module factory declares them (feature `studio`).
    static let schema = AccountMigrations.Feature(name: feature, migrations: migrations)

    let database: SQLiteDatabase
    let member: UserID

    /// The store on `database`. On an account database the ``schema`` is already applied; on
    /// one the community did not open (tools, tests) it is applied here, the same way.
    static func open(on database: SQLiteDatabase, member: UserID) async throws(StoreError) -> StudioStore {
        try await schema.apply(to: database)
        return StudioStore(database: database, member: member)
    }

    func insert(_ grant: StudioGrant) async throws(StoreError) {
        let (kind, ids): (String, [EventID]) =
            switch grant.scope {
            case .selectedMessages(let ids): ("selected_messages", ids)
            case .conversation(let since): ("conversation_since", [since])
            }
        let id = SQLiteValue.text(grant.id.rawValue)
        let expiry = SQLiteValue.integer(grant.expiresAt.millisecondsSince1970)
        let row: [SQLiteValue] = [
            id, .text(grant.roomID.rawValue), .text(grant.purpose.rawValue), .text(kind),
            .text(ids.map(\.rawValue).joined(separator: "\n")),
            grant.sinceTimestamp.map { .integer($0.rawValue) } ?? .null, expiry,
        ]
        try await database.transaction { database throws(StoreError) in
            // A grant already forgotten (revoked or expired before this insert ran) stays forgotten.
            try database.execute(
                """
                INSERT OR REPLACE INTO studio_grants(grant_id, room_id, purpose, scope_kind, scope_event_ids, since_ts,
                    expires_at_ms)
                SELECT ?, ?, ?, ?, ?, ?, ?
                WHERE NOT EXISTS (SELECT 1 FROM studio_forgotten_grants WHERE grant_id = ?)
                """, row + [id])
            try database.execute(
                "UPDATE studio_forgotten_grants SET expires_at_ms = ? WHERE grant_id = ?", [expiry, id])
        }
    }

    /// Forgets the grant for good: removes it and leaves a tombstone, so that an insert of it
    /// that is still on its way never records it again. With `revokeUnconfirmed`, the tombstone
    /// also says the member revoked it and the service has not confirmed that yet
    /// (``confirmRevoke(_:)`` clears it; ``unconfirmedRevokes()`` lists them after a restart).
    func remove(_ id: GrantID, revokeUnconfirmed: Bool = false) async throws(StoreError) {
        let id = SQLiteValue.text(id.rawValue)
        let pending = SQLiteValue.integer(revokeUnconfirmed ? 1 : 0)
        try await database.transaction { database throws(StoreError) in
            try database.execute(
                """
                INSERT INTO studio_forgotten_grants(grant_id, expires_at_ms, revoke_unconfirmed)
                VALUES (?, (SELECT expires_at_ms FROM studio_grants WHERE grant_id = ?), ?)
                ON CONFLICT(grant_id) DO UPDATE SET
                    revoke_unconfirmed = MAX(revoke_unconfirmed, excluded.revoke_unconfirmed)
                """, [id, id, pending])
            try database.execute("DELETE FROM studio_grants WHERE grant_id = ?", [id])
        }
    }

    /// The service confirmed the member's revoke of `id` (or says the grant is gone anyway).
    func confirmRevoke(_ id: GrantID) async throws(StoreError) {
        try await database.execute(
            "UPDATE studio_forgotten_grants SET revoke_unconfirmed = 0 WHERE grant_id = ?", [.text(id.rawValue)])
    }

    /// The grants the member revoked without the service confirming it (to send again).
    func unconfirmedRevokes() async throws(StoreError) -> [GrantID] {
        try await database.queryAll(
            "SELECT grant_id FROM studio_forgotten_grants WHERE revoke_unconfirmed = 1 ORDER BY grant_id"
        ) { row throws(StoreError) -> GrantID in GrantID(row.string(0)) }
    }

    /// The stored grants, with their runtime-clock deadline computed from `wallNow` and `now`.
    func grants(wallNow: Timestamp, now: Duration) async throws(StoreError) -> [StudioGrant] {
        let member = self.member
        // Tombstones of grants past their expiry guard nothing any more.
        try await database.execute(
            "DELETE FROM studio_forgotten_grants WHERE expires_at_ms <= ? AND revoke_unconfirmed = 0",
            [.integer(wallNow.millisecondsSince1970)])
        let rows = try await database.queryAll(
            """
            SELECT grant_id, room_id, purpose, scope_kind, scope_event_ids, since_ts, expires_at_ms
            FROM studio_grants ORDER BY expires_at_ms, grant_id
            """
        ) { row throws(StoreError) -> StudioGrant? in
            guard let purpose = GrantPurpose(rawValue: row.string(2)) else { return nil }
            let ids = row.string(4).split(separator: "\n").map { EventID(String($0)) }
            let scope: GrantScope
            switch row.string(3) {
            case "selected_messages": scope = .selectedMessages(ids)
            case "conversation_since":
                guard let first = ids.first else { return nil }
                scope = .conversation(since: first)
            default: return nil
            }
            let expiresAt = Timestamp(millisecondsSince1970: row.int64(6))
            return StudioGrant(
                id: GrantID(row.string(0)), member: member, roomID: RoomID(row.string(1)), scope: scope,
                sinceTimestamp: row.optionalInt64(5).map(MatrixTimestamp.init(milliseconds:)), purpose: purpose,
                expiresAt: expiresAt, expiryDeadline: now + expiresAt.duration(since: wallNow))
        }
        return rows.compactMap { $0 }
    }
}
