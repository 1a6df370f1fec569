"""The studio's tables (applied as component "module:aiStudio").

No table has a column for conversation content: bodies are summarized in memory and
forgotten. The audit keeps what was processed (grant, counts, event IDs), never a body.
"""

MIGRATIONS = [
    """
    CREATE TABLE studio_grants (
        grant_id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        room_id TEXT NOT NULL,
        purpose TEXT NOT NULL,
        scope_kind TEXT NOT NULL,
        scope_event_ids TEXT,
        scope_since_event_id TEXT,
        scope_since_ts INTEGER,
        created_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        revoked_at_ms INTEGER
    );
    CREATE INDEX studio_grants_user ON studio_grants(user_id, created_at_ms);
    CREATE TABLE studio_audit (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at_ms INTEGER NOT NULL,
        user_id TEXT NOT NULL,
        grant_id TEXT,
        action TEXT NOT NULL,
        outcome TEXT NOT NULL,
        item_count INTEGER NOT NULL,
        item_ids TEXT NOT NULL,
        cited_ids TEXT NOT NULL
    );
    CREATE INDEX studio_audit_user ON studio_audit(user_id, seq)
    """,
]
