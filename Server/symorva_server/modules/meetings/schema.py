"""The meetings module's tables (applied as component "module:meetings")."""

MIGRATIONS = [
    """
    CREATE TABLE meetings (
        meeting_id TEXT PRIMARY KEY,
        room_id TEXT NOT NULL,
        mode TEXT NOT NULL,
        stage_capacity INTEGER NOT NULL,
        media_room INTEGER NOT NULL,
        status TEXT NOT NULL,
        created_by TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        ended_at_ms INTEGER,
        end_reason TEXT
    );
    CREATE UNIQUE INDEX meetings_active_room ON meetings(room_id) WHERE status = 'active';
    CREATE TABLE meeting_participants (
        meeting_id TEXT NOT NULL REFERENCES meetings(meeting_id),
        user_id TEXT NOT NULL,
        role TEXT NOT NULL,
        hand_raised INTEGER NOT NULL DEFAULT 0,
        joined_at_ms INTEGER NOT NULL,
        PRIMARY KEY (meeting_id, user_id)
    );
    CREATE TABLE meeting_media_tokens (
        meeting_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        token TEXT NOT NULL,
        participant_id INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        PRIMARY KEY (meeting_id, user_id)
    );
    CREATE TABLE meeting_changes (
        meeting_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        user_id TEXT,
        role TEXT,
        hand_raised INTEGER,
        at_ms INTEGER NOT NULL,
        PRIMARY KEY (meeting_id, seq)
    )
    """,
    # When each participant's client was last heard from (domain.Meetings.sweep_absent).
    """
    ALTER TABLE meeting_participants ADD COLUMN last_seen_ms INTEGER NOT NULL DEFAULT 0
    """,
    # The AudioBridge room of each meeting whose room may still exist at Janus: its ID and secret
    # (never logged), so that a later services process can end a room an earlier one left
    # (domain.Meetings.cleanup_orphans). A row goes when the room is destroyed.
    """
    CREATE TABLE meeting_media_rooms (
        meeting_id TEXT PRIMARY KEY,
        room INTEGER NOT NULL,
        secret TEXT NOT NULL
    )
    """,
]
