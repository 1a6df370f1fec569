import SymorvaMachines
import SymorvaMatrix
import SymorvaStore

/// The per-account chat database: its versioned migrations and the rules they follow.
///
/// One SQLite file per account holds what `/sync` delivered and what the user is sending.
/// Rooms are keyed by a small integer (`rooms.room_nid`) that every other table uses, so the
/// hot indexes hold integers rather than room IDs; `rooms.room_id` maps the Matrix ID.
///
/// **Timeline as linked chunks.** A room's timeline is a doubly linked list of
/// `timeline_chunks` (`prev_chunk_id` is older, `next_chunk_id` newer). A chunk either holds
/// events (`events.chunk_id`, ordered by `events.position`) or is a *gap*: it has a row in
/// `timeline_gaps` carrying the `prev_batch` token from which `/messages` fills it. A limited
/// sync appends a gap chunk and a fresh events chunk after the room's live chunk
/// (`rooms.live_chunk_id`, always the newest). Filling a gap replaces its chunk with an events
/// chunk (and maybe a new, older gap) without renumbering anything else.
///
/// **Raw content.** Event content is stored as the server's JSON bytes (`events.content`,
/// `room_state.content`); the few fields the store queries by are columns, among them the
/// relation of every event (`relates_to_event_id`, `rel_type`, `relation_key`,
/// `in_reply_to`), indexed from the start. A redaction's target is indexed the same way, with
/// the store's own `rel_type` `m.room.redaction`, so a redaction that arrives before its target
/// still applies.
///
/// **Rules for migrations.** Versions only grow; a released migration is never edited.
/// `send_queue` holds messages the user wrote and the server has not acknowledged: a migration
/// may add columns to it, or rebuild it by copying every row inside the migration's
/// transaction, but never drop it or delete from it (a test checks the SQL). Derived tables
/// (rooms, state, timeline) may be rebuilt by clearing `sync_state`, which makes the next
/// sync an initial one.
///
/// **End-to-end encryption.** The crypto module keeps its own tables (feature `e2ee`,
/// `SymorvaE2EE.CryptoStore`). Version 3 stores to-device events, device-list changes and
/// one-time-key counts raw, committed with the sync token, so none is lost before the crypto
/// module consumes them. Version 4 holds what this device decrypted: `decrypted_events` (the
/// plaintext type and the content, sealed by the crypto module, of an `m.room.encrypted`
/// event, with who sent it from which device) and `undecryptable_events` (why one cannot be decrypted, when it is not just a key
/// that has not arrived). Timeline reads show the decrypted type and content in place of the
/// ciphertext. Version 5 lets a queued message to an encrypted room keep its content sealed
/// (`send_queue.content_sealed`): what the user wrote there is never in the clear on disk either.
/// Version 6 keeps the encrypted events without an outcome in `pending_decryption` (filled by a
/// trigger on `events`), marked `waiting` once tried without their key, so that a decryption pass
/// reads only what it can act on, however many events are already decrypted. Version 7 lets the
/// remote echo of this device's own encrypted message show what was written at once: the ingest
/// that stores the echo moves the queued message's sealed content into `decrypted_events`, marked
/// with its `transaction_id` (sealed for the queue, opened as the queue's), until the decryption
/// pass replaces it with the decrypted event.
package enum ChatSchema {
    /// The schema version the current migrations produce.
    package static var currentVersion: Int { migrations.count }

    /// Every migration, in order.
    package static let migrations: [Migration] = [
        Migration(version: 1, name: "rooms_and_timeline", sql: roomsAndTimeline),
        Migration(version: 2, name: "send_queue", sql: sendQueue),
        Migration(version: 3, name: "device_sync", sql: deviceSync),
        Migration(version: 4, name: "decrypted_events", sql: decryptedEvents),
        Migration(version: 5, name: "sealed_outgoing", sql: sealedOutgoing),
        Migration(version: 6, name: "pending_decryption", sql: pendingDecryption),
        Migration(
            version: 7, name: "own_echo_plaintext",
            sql: "ALTER TABLE decrypted_events ADD COLUMN transaction_id TEXT;  -- sealed as the queue's"),
        Migration(version: 8, name: "device_inbox_handed_over", sql: deviceInboxHandedOver),
        Migration(version: 9, name: "sliding_sync_position", sql: slidingSyncPosition),
        Migration(version: 10, name: "queued_attachments", sql: queuedAttachments),
        Migration(version: 11, name: "device_counts", sql: deviceCounts),
        Migration(version: 12, name: "typing", sql: typing),
        Migration(version: 13, name: "counts_on_device", sql: countsOnDevice),
        Migration(version: 14, name: "sender_trust", sql: senderTrust),
        Migration(version: 15, name: "threads", sql: threads),
        Migration(version: 16, name: "server_thread_counts", sql: serverThreadCounts),
        Migration(version: 17, name: "member_lists", sql: memberLists),
        Migration(version: 18, name: "member_tracking", sql: memberTracking),
    ]

    /// Version 18: the encrypted rooms whose whole member list the crypto module waits for.
    /// `tracking_pending` is raised by the ingest that brings this account's join of an
    /// encrypted room (an invite accepted, a room rejoined, on v2 a room first seen joined
    /// after the first sync) or the `m.room.encryption` of a room it is joined to, in that
    /// ingest's transaction; chat then reads `/members` and hands the joined and invited
    /// members to the crypto module's tracking, and clears the flag only if it did not move
    /// meanwhile (``ChatStore/memberTrackingHandedOver(_:ticket:)``). A failure leaves it
    /// raised: the next commit, or the next run, tries again.
    static let memberTracking = """
        ALTER TABLE member_lists ADD COLUMN tracking_pending INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX member_lists_tracking ON member_lists(room_nid) WHERE tracking_pending > 0;
        """

    /// Version 17: which rooms have their whole member list stored (`GET /members` read since
    /// the room's last gap), so that a restart or a sliding sync window that re-sends a room does
    /// not read it again. `generation` is bumped (and `complete` cleared) by every ingest that
    /// may have skipped membership changes: a limited timeline that does not reach back to the
    /// newest stored event, or our own membership leaving `join`; a `/members` answer marks the
    /// room complete only if no such ingest committed since its request left. A room without a
    /// row is incomplete.
    static let memberLists = """
        CREATE TABLE member_lists (
            room_nid INTEGER PRIMARY KEY,
            complete INTEGER NOT NULL DEFAULT 0,
            generation INTEGER NOT NULL DEFAULT 0
        );
        """

    /// Version 16: the server's unread counts per thread (`unread_thread_notifications`, which
    /// the `/sync` v2 filter asks for), replaced with each update that carries the room's counts;
    /// `rooms.notification_count` / `highlight_count` stay the room's totals (main + threads).
    static let serverThreadCounts = """
        CREATE TABLE server_thread_counts (
            room_nid INTEGER NOT NULL,
            thread_id TEXT NOT NULL,                -- the thread's root event ID
            notification_count INTEGER NOT NULL,
            highlight_count INTEGER NOT NULL,
            PRIMARY KEY (room_nid, thread_id)
        ) WITHOUT ROWID;
        """

    /// Version 14: the sending device's trust level when this device decrypted the event
    /// (`verified`, `crossSigned`, `notCrossSigned`; NULL for rows decrypted before, and for this
    /// device's own echoes), so that messages from devices their owner has not cross-signed are
    /// marked in the timeline as they were when read.
    static let senderTrust = """
        ALTER TABLE decrypted_events ADD COLUMN sender_trust TEXT;
        """

    /// Version 15: threads (issue 27). `threads` is one row per thread root: its reply count
    /// and latest reply, kept by a trigger on `events` for every reply stored (synced,
    /// back-paginated or fetched for the thread) that is at least as new as the latest known,
    /// and overwritten by the server's bundled aggregation when the room's thread list is
    /// fetched (`GET /v1/rooms/{roomId}/threads`). `next_batch` / `fully_paginated` say where the
    /// thread's own pagination (`/relations/{root}/m.thread`) stands; any new gap in the room's
    /// timeline resets them, because replies may be missing from the store behind it. The
    /// triggers' statements are `OR IGNORE` and never abort, so an event insert needs no
    /// statement journal (`docs/benchmarks.md`, "Statement journals").
    ///
    /// `detached_chunks` names, per room, one timeline chunk that is linked to no other: it
    /// holds events fetched outside the room's timeline (a thread's replies, the roots and
    /// latest replies of the thread list). The timeline's walk never reaches it; a
    /// back-pagination that meets one of its events moves the event into the timeline.
    static let threads = """
        CREATE TABLE threads (
            room_nid INTEGER NOT NULL,
            root_event_id TEXT NOT NULL,
            reply_count INTEGER NOT NULL DEFAULT 0,
            latest_event_id TEXT,
            latest_sender TEXT,
            latest_ts INTEGER NOT NULL DEFAULT 0,
            participated INTEGER NOT NULL DEFAULT 0,  -- the server said the account replied
            next_batch TEXT,                        -- /relations continues here; NULL: from the newest
            fully_paginated INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (room_nid, root_event_id)
        ) WITHOUT ROWID;
        CREATE INDEX threads_by_activity ON threads(room_nid, latest_ts DESC);

        CREATE TABLE detached_chunks (
            room_nid INTEGER PRIMARY KEY,
            chunk_id INTEGER NOT NULL UNIQUE
        );

        INSERT INTO threads(room_nid, root_event_id, reply_count, latest_event_id, latest_sender, latest_ts)
            SELECT room_nid, relates_to_event_id, COUNT(*), event_id, sender, MAX(origin_server_ts) FROM events
            WHERE rel_type = 'm.thread' AND relates_to_event_id IS NOT NULL
            GROUP BY room_nid, relates_to_event_id;

        CREATE TRIGGER events_thread_reply AFTER INSERT ON events
            WHEN NEW.rel_type = 'm.thread' AND NEW.relates_to_event_id IS NOT NULL
        BEGIN
            INSERT OR IGNORE INTO threads(room_nid, root_event_id) VALUES (NEW.room_nid, NEW.relates_to_event_id);
            UPDATE OR IGNORE threads SET reply_count = reply_count + 1, latest_event_id = NEW.event_id,
                latest_sender = NEW.sender, latest_ts = NEW.origin_server_ts
            WHERE room_nid = NEW.room_nid AND root_event_id = NEW.relates_to_event_id
                AND latest_ts <= NEW.origin_server_ts;
        END;

        CREATE TRIGGER timeline_gap_resets_threads AFTER INSERT ON timeline_gaps
        BEGIN
            UPDATE OR IGNORE threads SET next_batch = NULL, fully_paginated = 0
            WHERE room_nid = (SELECT room_nid FROM timeline_chunks WHERE chunk_id = NEW.chunk_id);
        END;
        """

    /// Version 12: who is typing in a room (`m.typing`, ephemeral: each one replaces the list),
    /// user IDs one a line, written with the sync that brought it.
    /// Whether the room's unread counts are the device's whatever its encryption: set by the
    /// sync that last wrote the room — simplified sliding sync sends placeholder zeros (Synapse
    /// does not compute them there), `/sync` v2 the server's real counts.
    static let countsOnDevice = """
        ALTER TABLE rooms ADD COLUMN counts_on_device INTEGER NOT NULL DEFAULT 0;
        """

    static let typing = """
        ALTER TABLE rooms ADD COLUMN typing_users TEXT;
        """

    /// Version 11: unread counts computed on the device (issue 27). The homeserver cannot read
    /// an encrypted message, so its counts for encrypted rooms say only "something arrived";
    /// the device evaluates the account's push rules on each decrypted (or plaintext) event and
    /// keeps a row in `push_actions` for each one that notifies, with its thread. A room's
    /// device counts (`rooms.device_notification_count`, `device_highlight_count`) are those
    /// rows after the account's read receipts (unthreaded, or of the row's thread), recomputed
    /// when rows are added or receipts move. `push_evaluation` is how far the plaintext events
    /// have been evaluated (an `event_nid`); an existing database starts at its newest event,
    /// so history is not counted as new.
    static let deviceCounts = """
        CREATE TABLE push_actions (
            event_nid INTEGER PRIMARY KEY,          -- events.event_nid of an event that notifies
            room_nid INTEGER NOT NULL,
            thread_id TEXT NOT NULL,                -- 'main' or the thread's root event ID
            ts INTEGER NOT NULL,                    -- the event's origin_server_ts
            highlight INTEGER NOT NULL
        );
        CREATE INDEX push_actions_by_room ON push_actions(room_nid, ts);

        CREATE TABLE push_evaluation (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            evaluated_through INTEGER NOT NULL      -- the newest event_nid evaluated
        );
        INSERT INTO push_evaluation(id, evaluated_through) SELECT 1, COALESCE(MAX(event_nid), 0) FROM events;

        ALTER TABLE rooms ADD COLUMN device_notification_count INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE rooms ADD COLUMN device_highlight_count INTEGER NOT NULL DEFAULT 0;
        """

    /// Version 10: a queued message may carry a file (issue 25): its copy in the account's
    /// folder, type and size, and the two upload steps, each stored before the next begins:
    /// the reserved `mxc://` URI (the content naming it is stored with it) and whether the bytes
    /// are up. Columns are added; no row of the queue is touched.
    static let queuedAttachments = """
        ALTER TABLE send_queue ADD COLUMN attachment_path TEXT;
        ALTER TABLE send_queue ADD COLUMN attachment_type TEXT;
        ALTER TABLE send_queue ADD COLUMN attachment_size INTEGER;
        ALTER TABLE send_queue ADD COLUMN media_uri TEXT;
        ALTER TABLE send_queue ADD COLUMN media_uploaded INTEGER NOT NULL DEFAULT 0;
        """

    /// Version 9: the position of a simplified sliding sync connection, committed by
    /// ``SyncIngestor/ingest(sliding:)`` with what the response brought, apart from v2's
    /// `sync_state` (a `pos` is not a since-token: the two modes never read each other's), and
    /// the to-device extension's `next_batch`, committed with the to-device events it covers
    /// and kept when the connection is reset, so that no to-device message is skipped.
    static let slidingSyncPosition = """
        CREATE TABLE sliding_sync_state (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            pos TEXT,                               -- the connection's position
            to_device_since TEXT                    -- extensions.to_device.next_batch
        );
        """

    /// Version 8: encryption's share of each sync goes to the crypto module's own inbox
    /// (``SyncInboxWriter``, in the sync's transaction). The rows chat's ingest had stored for it
    /// move to that inbox (``SymorvaMatrix/SyncDeviceInbox/tables``, created here if the crypto
    /// module has not created it yet), so that an upgrade loses no room key whichever module
    /// migrates first; chat's tables go. Chat's only statement naming a crypto table, run once.
    static let deviceInboxHandedOver = """
        \(SyncDeviceInbox.tables)
        INSERT INTO e2ee_inbox_to_device(type, sender, raw) SELECT type, sender, raw FROM to_device_events ORDER BY id;
        INSERT OR REPLACE INTO e2ee_inbox_device_lists(user_id, change) SELECT user_id, change FROM device_list_changes;
        INSERT OR REPLACE INTO e2ee_inbox_key_counts(algorithm, count) SELECT algorithm, count FROM one_time_key_counts;
        DROP TABLE to_device_events;
        DROP TABLE device_list_changes;
        DROP TABLE one_time_key_counts;
        """

    /// Version 1: rooms, state, linked-chunk timeline, receipts, account data, sync position.
    static let roomsAndTimeline = """
        CREATE TABLE rooms (
            room_nid INTEGER PRIMARY KEY,
            room_id TEXT NOT NULL UNIQUE,
            membership INTEGER NOT NULL,            -- RoomMembership: 0 joined, 1 invited, 2 left, 3 knocked
            name TEXT,
            canonical_alias TEXT,
            heroes TEXT,                            -- one hero per line: user ID, tab, display name
            avatar_url TEXT,
            topic TEXT,
            is_encrypted INTEGER NOT NULL DEFAULT 0,
            joined_member_count INTEGER NOT NULL DEFAULT 0,
            invited_member_count INTEGER NOT NULL DEFAULT 0,
            notification_count INTEGER NOT NULL DEFAULT 0,
            highlight_count INTEGER NOT NULL DEFAULT 0,
            latest_activity_ts INTEGER NOT NULL DEFAULT 0,
            preview_event_id TEXT,                  -- the last message, denormalised so that the
            preview_sender TEXT,                    -- conversation list is one indexed scan of this
            preview_type TEXT,                      -- table (no join into events at cold start)
            preview_ts INTEGER NOT NULL DEFAULT 0,
            preview_body TEXT,                      -- content.body (latest edit), NULL if encrypted
            preview_msgtype TEXT,
            preview_redacted INTEGER NOT NULL DEFAULT 0,
            is_favourite INTEGER NOT NULL DEFAULT 0,
            is_low_priority INTEGER NOT NULL DEFAULT 0,
            is_pinned INTEGER NOT NULL DEFAULT 0,
            is_muted INTEGER NOT NULL DEFAULT 0,
            live_chunk_id INTEGER                   -- the newest timeline chunk
        );
        CREATE INDEX rooms_by_activity ON rooms(latest_activity_ts DESC);

        CREATE TABLE room_state (
            room_nid INTEGER NOT NULL REFERENCES rooms(room_nid) ON DELETE CASCADE,
            type TEXT NOT NULL,
            state_key TEXT NOT NULL,
            event_id TEXT,                          -- NULL for stripped state (invites, knocks)
            sender TEXT,
            origin_server_ts INTEGER NOT NULL DEFAULT 0,
            content BLOB NOT NULL,                  -- the event's content, raw JSON
            PRIMARY KEY (room_nid, type, state_key)
        ) WITHOUT ROWID;

        CREATE TABLE timeline_chunks (
            chunk_id INTEGER PRIMARY KEY,
            room_nid INTEGER NOT NULL REFERENCES rooms(room_nid) ON DELETE CASCADE,
            prev_chunk_id INTEGER,                  -- older neighbour
            next_chunk_id INTEGER                   -- newer neighbour
        );
        CREATE INDEX timeline_chunks_by_room ON timeline_chunks(room_nid);

        CREATE TABLE timeline_gaps (
            chunk_id INTEGER PRIMARY KEY REFERENCES timeline_chunks(chunk_id) ON DELETE CASCADE,
            prev_batch TEXT NOT NULL                -- /messages?dir=b&from= fills this gap
        );

        CREATE TABLE events (
            event_nid INTEGER PRIMARY KEY,
            room_nid INTEGER NOT NULL,
            chunk_id INTEGER NOT NULL,
            position INTEGER NOT NULL,
            event_id TEXT NOT NULL UNIQUE,
            type TEXT NOT NULL,
            sender TEXT NOT NULL,
            origin_server_ts INTEGER NOT NULL,
            state_key TEXT,
            txn_id TEXT,                            -- unsigned.transaction_id of our own echoes
            content BLOB NOT NULL,                  -- raw JSON
            relates_to_event_id TEXT,
            rel_type TEXT,                          -- m.replace, m.annotation, m.reference, m.thread,
                                                    -- or m.room.redaction for a redaction's target
            relation_key TEXT,                      -- the reaction key of an m.annotation
            in_reply_to TEXT,
            redacted_by TEXT
        );
        CREATE UNIQUE INDEX events_by_chunk ON events(chunk_id, position);
        CREATE INDEX events_by_relation ON events(relates_to_event_id, rel_type)
            WHERE relates_to_event_id IS NOT NULL;
        CREATE INDEX events_by_reply ON events(in_reply_to) WHERE in_reply_to IS NOT NULL;
        CREATE INDEX events_by_transaction ON events(txn_id) WHERE txn_id IS NOT NULL;

        CREATE TABLE receipts (
            room_nid INTEGER NOT NULL REFERENCES rooms(room_nid) ON DELETE CASCADE,
            receipt_type TEXT NOT NULL,             -- m.read, m.read.private
            thread_id TEXT NOT NULL DEFAULT '',     -- '' unthreaded, 'main' or a thread root
            user_id TEXT NOT NULL,
            event_id TEXT NOT NULL,
            ts INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (room_nid, receipt_type, thread_id, user_id)
        ) WITHOUT ROWID;

        CREATE TABLE account_data (
            room_nid INTEGER NOT NULL,              -- 0: global
            type TEXT NOT NULL,
            content BLOB NOT NULL,
            PRIMARY KEY (room_nid, type)
        ) WITHOUT ROWID;

        CREATE TABLE sync_state (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            since_token TEXT NOT NULL
        );

        CREATE TABLE malformed_events (
            id INTEGER PRIMARY KEY,
            since_token TEXT,                       -- the sync position before the response
            section TEXT NOT NULL,
            room_id TEXT,
            reason TEXT NOT NULL,
            raw BLOB NOT NULL
        );
        """

    /// Version 2: the persisted send queue (never dropped; see the type's rules).
    static let sendQueue = """
        CREATE TABLE send_queue (
            id INTEGER PRIMARY KEY,
            room_id TEXT NOT NULL,                  -- the Matrix ID: rows outlive any room rebuild
            txn_id TEXT NOT NULL UNIQUE,
            position INTEGER NOT NULL,              -- order within the room's queue
            event_type TEXT NOT NULL,
            content BLOB NOT NULL,                  -- raw JSON, as the user wrote it
            state TEXT NOT NULL DEFAULT 'queued',   -- queued, encrypting, sending, sent, failed, cancelled
            failure_reason TEXT,                    -- SendFailureReason storage code when failed
            sent_event_id TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            created_at INTEGER NOT NULL             -- milliseconds since 1970
        );
        CREATE UNIQUE INDEX send_queue_by_room ON send_queue(room_id, position);
        """

    /// Version 3: the raw inputs of end-to-end encryption, and the encrypted form of queued
    /// events (reused on retries).
    static let deviceSync = """
        ALTER TABLE send_queue ADD COLUMN encrypted_content BLOB;

        CREATE TABLE to_device_events (
            id INTEGER PRIMARY KEY,                 -- arrival order
            type TEXT NOT NULL,
            sender TEXT NOT NULL,
            raw BLOB NOT NULL                       -- the whole event, raw JSON
        );

        CREATE TABLE device_list_changes (
            user_id TEXT PRIMARY KEY,
            change INTEGER NOT NULL                 -- 1 changed, 2 left
        ) WITHOUT ROWID;

        CREATE TABLE one_time_key_counts (
            algorithm TEXT PRIMARY KEY,
            count INTEGER NOT NULL
        ) WITHOUT ROWID;
        """

    /// Version 4: what this device decrypted, and why some events cannot be.
    static let decryptedEvents = """
        CREATE TABLE decrypted_events (
            event_id TEXT PRIMARY KEY,
            type TEXT NOT NULL,                     -- the plaintext event's type
            content BLOB NOT NULL,                  -- the plaintext content, sealed (never in the clear)
            sender_key TEXT NOT NULL,               -- Curve25519 key of the sending device
            sender_device TEXT,                     -- its device ID, when known
            device_known INTEGER NOT NULL           -- the device is known and its keys unchanged
        ) WITHOUT ROWID;

        CREATE TABLE undecryptable_events (
            event_id TEXT PRIMARY KEY,
            reason TEXT NOT NULL                    -- replayed, unsupportedAlgorithm, mismatched
        ) WITHOUT ROWID;
        """

    /// Version 5: the content of a queued message to an encrypted room is stored sealed with the
    /// account's secrets-at-rest key (by the crypto module), never in the clear.
    static let sealedOutgoing = """
        ALTER TABLE send_queue ADD COLUMN content_sealed INTEGER NOT NULL DEFAULT 0;
        """

    /// Version 6: the encrypted events still to decrypt, kept by triggers on `events` (an event
    /// stored, redacted or deleted), so that no writer of `events` has to know.
    static let pendingDecryption = """
        CREATE TABLE pending_decryption (
            event_nid INTEGER PRIMARY KEY,          -- events.event_nid of an m.room.encrypted event
            waiting INTEGER NOT NULL DEFAULT 0      -- 1: tried, its key had not arrived
        );
        CREATE INDEX pending_decryption_ready ON pending_decryption(waiting, event_nid);

        INSERT INTO pending_decryption(event_nid)
            SELECT e.event_nid FROM events e
            WHERE e.type = 'm.room.encrypted' AND e.redacted_by IS NULL
              AND NOT EXISTS (SELECT 1 FROM decrypted_events d WHERE d.event_id = e.event_id)
              AND NOT EXISTS (SELECT 1 FROM undecryptable_events u WHERE u.event_id = e.event_id);

        CREATE TRIGGER events_pending_decryption AFTER INSERT ON events
            WHEN NEW.type = 'm.room.encrypted' AND NEW.redacted_by IS NULL
        BEGIN
            INSERT OR IGNORE INTO pending_decryption(event_nid) VALUES (NEW.event_nid);
        END;
        CREATE TRIGGER events_redacted_pending_decryption AFTER UPDATE OF redacted_by ON events
            WHEN NEW.redacted_by IS NOT NULL
        BEGIN
            DELETE FROM pending_decryption WHERE event_nid = NEW.event_nid;
        END;
        CREATE TRIGGER events_deleted_pending_decryption AFTER DELETE ON events
        BEGIN
            DELETE FROM pending_decryption WHERE event_nid = OLD.event_nid;
        END;
        """
}
