import SymorvaMachines
import SymorvaRuntime
import SymorvaStore

/// The studio's part of the account database: the account's live grants, so that a restart
/// knows them (and their expiry) again.
///
/// What is stored is the grant's ID, conversation, scope (event IDs), purpose and expiry. Never
/// conversation content, never a summary. A grant is forgotten as soon as it is revoked (before
/// the service is told) or expires.
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
                """)
    ]

    let database: SQLiteDatabase
    let member: UserID

    static func open(on database: SQLiteDatabase, member: UserID) async throws(StoreError) -> StudioStore {
        try await database.migrate(feature: feature, migrations)
        return StudioStore(database: database, member: member)
    }

    func insert(_ grant: StudioGrant) async throws(StoreError) {
        let (kind, ids): (String, [EventID]) =
            switch grant.scope {
            case .selectedMessages(let ids): ("selected_messages", ids)
            case .conversation(let since): ("conversation_since", [since])
            }
        try await database.execute(
            """
            INSERT OR REPLACE INTO studio_grants(grant_id, room_id, purpose, scope_kind, scope_event_ids, since_ts,
                expires_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(grant.id.rawValue), .text(grant.roomID.rawValue), .text(grant.purpose.rawValue), .text(kind),
                .text(ids.map(\.rawValue).joined(separator: "\n")),
                grant.sinceTimestamp.map { .integer($0.rawValue) } ?? .null,
                .integer(grant.expiresAt.millisecondsSince1970),
            ])
    }

    func remove(_ id: GrantID) async throws(StoreError) {
        try await database.execute("DELETE FROM studio_grants WHERE grant_id = ?", [.text(id.rawValue)])
    }

    /// The stored grants, with their runtime-clock deadline computed from `wallNow` and `now`.
    func grants(wallNow: Timestamp, now: Duration) async throws(StoreError) -> [StudioGrant] {
        let member = self.member
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
