"""Meetings: admission, hands, host actions, the change feed (docs/meetings.md, "Server side").

A meeting belongs to a Matrix room; at most one is active per room. Every request checks
the caller with the homeserver (`RoomDirectory`): members of the room may join and watch,
hosts (power level >= `hostPowerLevel`) may also promote, demote and end. Admission:

- open meeting: stage while fewer than `stageCapacity` members are on it, else listener;
- broadcast meeting (opened by a host with `broadcast: true`): only hosts start on stage.

Stage members get a media-session descriptor (the Janus URL, the AudioBridge room, the
participant ID and display the services assigned them, the expiry of their token in the room's
`allowed` list, which stays here); the services join them to the room themselves on a media-server
session they hand over (`connect_media`). Moving them off stage (demote, leave, end, losing room
membership) removes the token and kicks them from the room. Every change
is a row of `meeting_changes` with a per-meeting sequence number, which is the feed's cursor.
The last participant leaving ends the meeting.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...db import Database
from ...errors import ErrorCode, SymorvaError
from .config import MAX_FEED_TIMEOUT_MS, MeetingsConfig
from .media import PLAYLIST, MediaBackend, MediaError, MediaRoom
from .rooms import RoomDirectory, RoomLookupError, RoomState

log = logging.getLogger("symorva_server.meetings")

STAGE, LISTENER = "stage", "listener"
# The change feed keeps this many changes per meeting (each answer carries the participants, so a
# client whose cursor fell behind the oldest kept change still sees the meeting as it is).
MAX_CHANGES_PER_MEETING = 1000
# An ended meeting's changes are kept this long (a client still polling reads `ended`), then go.
ENDED_CHANGES_KEPT_MS = 3600 * 1000


class MeetingsErrorCode:
    """The meetings' error codes (errors.ErrorCode has them with their statuses)."""

    NOT_ROOM_MEMBER = ErrorCode.NOT_ROOM_MEMBER
    NOT_HOST = ErrorCode.NOT_HOST
    MEETING_UNKNOWN = ErrorCode.MEETING_UNKNOWN
    MEETING_ENDED = ErrorCode.MEETING_ENDED
    NOT_PARTICIPANT = ErrorCode.NOT_PARTICIPANT
    STAGE_FULL = ErrorCode.STAGE_FULL
    WRONG_ROLE = ErrorCode.WRONG_ROLE
    ROOM_UNKNOWN = ErrorCode.ROOM_UNKNOWN
    MEDIA_UNAVAILABLE = ErrorCode.MEDIA_UNAVAILABLE


def _err(status: int, code: str, message: str) -> SymorvaError:
    return SymorvaError(status, code, message)


@dataclass
class Waiter:
    event: asyncio.Event


class Meetings:
    def __init__(self, config: MeetingsConfig, db: Database, clock: Callable[[], float],
                 rooms: RoomDirectory | None, media: MediaBackend | None) -> None:
        self.config = config
        self.db = db
        self.clock = clock
        self.rooms = rooms
        self.media = media
        self._media_rooms: dict[str, MediaRoom] = {}
        # Per meeting and per Matrix room: a lock lives while someone holds or waits for it, so
        # neither dictionary grows with the meetings ever held.
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._create_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._changed: dict[str, asyncio.Event] = {}
        # The background task (`start`): token expiry and rooms left by an earlier process.
        self.sweep_interval_s = 1.0
        self._sweeper: asyncio.Task | None = None
        self._end_stale_meetings()

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _end_stale_meetings(self) -> None:
        """Meetings still active from an earlier run end (`services_restarted`); their media rooms,
        which Janus still has, are destroyed by the background task (`cleanup_orphans`) with the
        persisted room secrets, so nobody stays connected."""
        for row in self.db.query("SELECT meeting_id FROM meetings WHERE status = 'active'"):
            with self.db.transaction() as conn:
                self._finish(conn, row["meeting_id"], "services_restarted")

    # -- checks

    async def _room_state(self, room_id: str) -> RoomState:
        if self.rooms is None:
            raise _err(503, ErrorCode.HOMESERVER_UNAVAILABLE, "No homeserver room directory is configured")
        try:
            return await self.rooms.room_state(room_id)
        except RoomLookupError as e:
            if e.unknown_room:
                raise _err(404, MeetingsErrorCode.ROOM_UNKNOWN, f"The homeserver has no room {room_id}") from None
            raise _err(502, ErrorCode.HOMESERVER_UNAVAILABLE, f"Could not ask the homeserver: {e}") from None

    async def _member(self, room_id: str, user_id: str) -> RoomState:
        state = await self._room_state(room_id)
        if not state.is_member(user_id):
            raise _err(403, MeetingsErrorCode.NOT_ROOM_MEMBER, f"{user_id} is not joined to the room {room_id}")
        return state

    def _is_host(self, state: RoomState, user_id: str) -> bool:
        return state.is_member(user_id) and state.power_level(user_id) >= self.config.host_power_level

    def _meeting(self, meeting_id: str) -> Any:
        row = self.db.query_one("SELECT * FROM meetings WHERE meeting_id = ?", (meeting_id,))
        if row is None:
            raise _err(404, MeetingsErrorCode.MEETING_UNKNOWN, f"No meeting {meeting_id}")
        return row

    def _active(self, meeting_id: str) -> Any:
        row = self._meeting(meeting_id)
        if row["status"] != "active":
            raise _err(409, MeetingsErrorCode.MEETING_ENDED, f"The meeting {meeting_id} has ended")
        return row

    def _lock(self, meeting_id: str) -> asyncio.Lock:
        lock = self._locks.get(meeting_id)
        if lock is None:
            lock = self._locks[meeting_id] = asyncio.Lock()
        return lock

    def _create_lock(self, room_id: str) -> asyncio.Lock:
        """Serialises opening the meeting of one Matrix room (joins of other rooms go on)."""
        lock = self._create_locks.get(room_id)
        if lock is None:
            lock = self._create_locks[room_id] = asyncio.Lock()
        return lock

    def _participant(self, meeting_id: str, user_id: str) -> Any:
        return self.db.query_one("SELECT * FROM meeting_participants WHERE meeting_id = ? AND user_id = ?",
                                 (meeting_id, user_id))

    def _stage_count(self, meeting_id: str) -> int:
        row = self.db.query_one("SELECT COUNT(*) AS n FROM meeting_participants WHERE meeting_id = ? AND role = ?",
                                (meeting_id, STAGE))
        return int(row["n"]) if row else 0

    # -- changes

    def _append(self, conn, meeting_id: str, kind: str, user_id: str | None = None, role: str | None = None,
                hand: bool | None = None) -> None:
        row = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM meeting_changes WHERE meeting_id = ?",
                           (meeting_id,)).fetchone()
        conn.execute("INSERT INTO meeting_changes(meeting_id, seq, kind, user_id, role, hand_raised, at_ms)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (meeting_id, row[0] + 1, kind, user_id, role, None if hand is None else int(hand),
                      self.now_ms()))
        conn.execute("DELETE FROM meeting_changes WHERE meeting_id = ? AND seq <= ?",
                     (meeting_id, row[0] + 1 - MAX_CHANGES_PER_MEETING))

    def _notify(self, meeting_id: str) -> None:
        event = self._changed.pop(meeting_id, None)
        if event is not None:
            event.set()

    def cursor(self, meeting_id: str) -> int:
        row = self.db.query_one("SELECT COALESCE(MAX(seq), 0) AS c FROM meeting_changes WHERE meeting_id = ?",
                                (meeting_id,))
        return int(row["c"]) if row else 0

    def _finish(self, conn, meeting_id: str, reason: str) -> None:
        conn.execute("UPDATE meetings SET status = 'ended', ended_at_ms = ?, end_reason = ? WHERE meeting_id = ?",
                     (self.now_ms(), reason, meeting_id))
        conn.execute("DELETE FROM meeting_participants WHERE meeting_id = ?", (meeting_id,))
        conn.execute("DELETE FROM meeting_media_tokens WHERE meeting_id = ?", (meeting_id,))
        self._append(conn, meeting_id, "ended")

    # -- media

    async def _media_room(self, meeting_id: str) -> MediaRoom:
        room = self._media_rooms.get(meeting_id)
        if room is None:
            raise _err(503, MeetingsErrorCode.MEDIA_UNAVAILABLE, "The meeting's media room is gone")
        return room

    async def _issue_descriptor(self, meeting_id: str, user_id: str) -> dict[str, Any]:
        """The member's media-session descriptor: what they need to know about the media room (its
        server, room, the participant ID and display the services assigned to them, the expiry).
        A member who holds a token keeps it (and its participant ID) with a later expiry; one who
        holds none gets a new one. The token itself never leaves the services: they join the member
        themselves (`connect_media`)."""
        if self.media is None:
            raise _err(503, MeetingsErrorCode.MEDIA_UNAVAILABLE, "No media server is configured")
        room = await self._media_room(meeting_id)
        old = self.db.query_one("SELECT token, participant_id FROM meeting_media_tokens"
                                " WHERE meeting_id = ? AND user_id = ?", (meeting_id, user_id))
        expires = self.now_ms() + self.config.media_token_ttl_ms
        if old is not None:
            token, participant_id = old["token"], old["participant_id"]
        else:
            token, participant_id = secrets.token_urlsafe(24), secrets.randbelow(2**52) + 1
            try:
                await self.media.allow(room, token, participant_id, user_id)
            except MediaError as e:
                raise _err(503, MeetingsErrorCode.MEDIA_UNAVAILABLE, f"The media server failed: {e}") from None
        def write(conn) -> None:
            conn.execute("INSERT INTO meeting_media_tokens(meeting_id, user_id, token, participant_id, expires_at_ms)"
                         " VALUES (?, ?, ?, ?, ?) ON CONFLICT(meeting_id, user_id) DO UPDATE SET"
                         " token = excluded.token, participant_id = excluded.participant_id,"
                         " expires_at_ms = excluded.expires_at_ms",
                         (meeting_id, user_id, token, participant_id, expires))
        await self.db.run_transaction(write)
        return {"server_url": self.media.public_url, "plugin": "janus.plugin.audiobridge", "room": room.room,
                "participant_id": participant_id, "display": user_id, "expires_at_ms": expires}

    async def _revoke_media(self, meeting_id: str, user_id: str) -> None:
        row = self.db.query_one("SELECT token, participant_id FROM meeting_media_tokens"
                                " WHERE meeting_id = ? AND user_id = ?", (meeting_id, user_id))
        if row is None:
            return
        def write(conn) -> None:
            conn.execute("DELETE FROM meeting_media_tokens WHERE meeting_id = ? AND user_id = ?",
                         (meeting_id, user_id))
        await self.db.run_transaction(write)
        room = self._media_rooms.get(meeting_id)
        if self.media is None or room is None:
            return
        try:
            await self.media.revoke(room, row["token"])  # kicks its participant by the assigned ID
        except MediaError as e:
            log.warning("revoking a member's media token failed: %s", e)

    async def expire_tokens(self, meeting_id: str) -> None:
        """Removes expired tokens from the room and kicks their participants (on a join, and every
        second from the background task, `sweep_expired`)."""
        now = self.now_ms()
        for row in self.db.query("SELECT user_id FROM meeting_media_tokens WHERE meeting_id = ? AND expires_at_ms <= ?",
                                 (meeting_id, now)):
            await self._revoke_media(meeting_id, row["user_id"])

    def _playback(self, meeting_id: str) -> dict[str, Any]:
        return {"playlist_path": f"/_symorva/v1/meetings/{meeting_id}/playback/{PLAYLIST}",
                "segment_seconds": 1}

    # -- views

    def participants(self, meeting_id: str) -> list[dict[str, Any]]:
        rows = self.db.query("SELECT user_id, role, hand_raised, joined_at_ms FROM meeting_participants"
                             " WHERE meeting_id = ? ORDER BY joined_at_ms, rowid", (meeting_id,))
        return [{"user_id": r["user_id"], "role": r["role"], "hand_raised": bool(r["hand_raised"]),
                 "joined_at_ms": r["joined_at_ms"]} for r in rows]

    def _meeting_out(self, row: Any) -> dict[str, Any]:
        return {"meeting_id": row["meeting_id"], "room_id": row["room_id"], "mode": row["mode"],
                "stage_capacity": row["stage_capacity"], "status": row["status"],
                "end_reason": row["end_reason"]}

    def snapshot(self, row: Any) -> dict[str, Any]:
        mid = row["meeting_id"]
        return {"meeting": self._meeting_out(row), "participants": self.participants(mid), "cursor": self.cursor(mid)}

    async def _admission(self, meeting: Any, user_id: str, is_host: bool) -> dict[str, Any]:
        mid = meeting["meeting_id"]
        existing = self._participant(mid, user_id)
        if existing is not None:
            role = existing["role"]
        else:
            stage_open = self._stage_count(mid) < meeting["stage_capacity"]
            role = STAGE if stage_open and (meeting["mode"] == "open" or is_host) else LISTENER
            def write(conn) -> None:
                conn.execute("INSERT INTO meeting_participants(meeting_id, user_id, role, hand_raised, joined_at_ms,"
                             " last_seen_ms) VALUES (?, ?, ?, 0, ?, ?)",
                             (mid, user_id, role, self.now_ms(), self.now_ms()))
                self._append(conn, mid, "joined", user_id, role, False)
            await self.db.run_transaction(write)
        out = {**self.snapshot(self._meeting(mid)), "role": role, "media": None, "playback": None}
        try:
            if role == STAGE:
                out["media"] = await self._issue_descriptor(mid, user_id)
            else:
                out["playback"] = self._playback(mid)
        except SymorvaError:
            if existing is None:
                def write(conn) -> None:
                    conn.execute("DELETE FROM meeting_participants WHERE meeting_id = ? AND user_id = ?",
                                 (mid, user_id))
                    self._append(conn, mid, "left", user_id)
                await self.db.run_transaction(write)
            self._notify(mid)
            raise
        self._notify(mid)
        return out

    # -- operations

    async def join(self, user_id: str, room_id: str, broadcast: bool) -> dict[str, Any]:
        state = await self._member(room_id, user_id)
        is_host = self._is_host(state, user_id)
        async with self._create_lock(room_id):
            meeting = self.db.query_one("SELECT * FROM meetings WHERE room_id = ? AND status = 'active'", (room_id,))
            if meeting is None:
                if broadcast and not is_host:
                    raise _err(403, MeetingsErrorCode.NOT_HOST, "Only a host can open a broadcast")
                meeting = await self._create(room_id, user_id, "broadcast" if broadcast else "open")
        async with self._lock(meeting["meeting_id"]):
            meeting = self._active(meeting["meeting_id"])
            await self.expire_tokens(meeting["meeting_id"])
            return await self._admission(meeting, user_id, is_host)

    async def _create(self, room_id: str, user_id: str, mode: str) -> Any:
        if self.media is None:
            raise _err(503, MeetingsErrorCode.MEDIA_UNAVAILABLE, "No media server is configured")
        meeting_id = "mt_" + secrets.token_hex(8)
        try:
            room = await self.media.open_room(meeting_id)
        except MediaError as e:
            raise _err(503, MeetingsErrorCode.MEDIA_UNAVAILABLE, f"The media server failed: {e}") from None
        self._media_rooms[meeting_id] = room
        def write(conn) -> None:
            conn.execute("INSERT INTO meeting_media_rooms(meeting_id, room, secret) VALUES (?, ?, ?)",
                         (meeting_id, room.room, room.secret))
            conn.execute("INSERT INTO meetings(meeting_id, room_id, mode, stage_capacity, media_room, status,"
                         " created_by, created_at_ms) VALUES (?, ?, ?, ?, ?, 'active', ?, ?)",
                         (meeting_id, room_id, mode, self.config.stage_capacity, room.room, user_id, self.now_ms()))
            self._append(conn, meeting_id, "opened")
        await self.db.run_transaction(write)
        return self._meeting(meeting_id)

    async def _caller(self, meeting_id: str, user_id: str, *, host: bool = False) -> tuple[Any, RoomState]:
        meeting = self._active(meeting_id)
        await self.touch(meeting_id, user_id)
        await self.sweep_absent(meeting_id)
        meeting = self._active(meeting_id)
        state = await self._room_state(meeting["room_id"])
        if not state.is_member(user_id):
            if self._participant(meeting_id, user_id) is not None:
                await self._remove(meeting_id, user_id, "left")
            raise _err(403, MeetingsErrorCode.NOT_ROOM_MEMBER, f"{user_id} is not joined to the room {meeting['room_id']}")
        if host and not self._is_host(state, user_id):
            raise _err(403, MeetingsErrorCode.NOT_HOST,
                       f"Only hosts (power level >= {self.config.host_power_level}) may do this")
        return meeting, state

    async def touch(self, meeting_id: str, user_id: str) -> None:
        """The member's client was heard from (any request of theirs for the meeting)."""
        def write(conn) -> None:
            conn.execute("UPDATE meeting_participants SET last_seen_ms = ? WHERE meeting_id = ? AND user_id = ?",
                         (self.now_ms(), meeting_id, user_id))
        await self.db.run_transaction(write)

    async def sweep_absent(self, meeting_id: str) -> None:
        """Takes out the participants whose client was not heard from for `presenceTimeoutSeconds`
        (a client that vanished without leaving: crashed, offline, signed out without a leave),
        revoking and kicking stage members. Runs on every request for the meeting."""
        cutoff = self.now_ms() - self.config.presence_timeout_ms
        for row in self.db.query("SELECT user_id FROM meeting_participants WHERE meeting_id = ? AND last_seen_ms < ?",
                                 (meeting_id, cutoff)):
            if self._meeting(meeting_id)["status"] != "active":
                return
            log.info("a meeting participant timed out")
            await self._remove(meeting_id, row["user_id"], "left")

    def _require_participant(self, meeting_id: str, user_id: str) -> Any:
        row = self._participant(meeting_id, user_id)
        if row is None:
            raise _err(409, MeetingsErrorCode.NOT_PARTICIPANT, f"{user_id} is not in the meeting")
        return row

    async def view(self, meeting_id: str, user_id: str) -> dict[str, Any]:
        meeting = self._meeting(meeting_id)
        if meeting["status"] == "active":
            await self._caller(meeting_id, user_id)
        else:
            await self._member(meeting["room_id"], user_id)
        return self.snapshot(self._meeting(meeting_id))

    async def hand(self, meeting_id: str, user_id: str, raised: bool) -> dict[str, Any]:
        async with self._lock(meeting_id):
            await self._caller(meeting_id, user_id)
            row = self._require_participant(meeting_id, user_id)
            if bool(row["hand_raised"]) != raised:
                def write(conn) -> None:
                    conn.execute("UPDATE meeting_participants SET hand_raised = ? WHERE meeting_id = ? AND user_id = ?",
                                 (int(raised), meeting_id, user_id))
                    self._append(conn, meeting_id, "hand", user_id, row["role"], raised)
                await self.db.run_transaction(write)
                self._notify(meeting_id)
            return self.snapshot(self._meeting(meeting_id))

    async def promote(self, meeting_id: str, host_id: str, target: str) -> dict[str, Any]:
        async with self._lock(meeting_id):
            meeting, state = await self._caller(meeting_id, host_id, host=True)
            row = self._target(meeting_id, target)
            if not state.is_member(target):
                await self._remove(meeting_id, target, "left")
                raise _err(409, MeetingsErrorCode.NOT_PARTICIPANT, f"{target} has left the room")
            if row["role"] == STAGE:
                raise _err(409, MeetingsErrorCode.WRONG_ROLE, f"{target} is already on stage")
            if self._stage_count(meeting_id) >= meeting["stage_capacity"]:
                raise _err(409, MeetingsErrorCode.STAGE_FULL, f"The stage is full ({meeting['stage_capacity']})")
            await self._issue_descriptor(meeting_id, target)
            def write(conn) -> None:
                conn.execute("UPDATE meeting_participants SET role = ?, hand_raised = 0"
                             " WHERE meeting_id = ? AND user_id = ?", (STAGE, meeting_id, target))
                self._append(conn, meeting_id, "role", target, STAGE, False)
            await self.db.run_transaction(write)
            self._notify(meeting_id)
            return self.snapshot(self._meeting(meeting_id))

    def _target(self, meeting_id: str, target: str) -> Any:
        row = self._participant(meeting_id, target)
        if row is None:
            raise _err(409, MeetingsErrorCode.NOT_PARTICIPANT, f"{target} is not in the meeting")
        return row

    async def demote(self, meeting_id: str, host_id: str, target: str) -> dict[str, Any]:
        async with self._lock(meeting_id):
            await self._caller(meeting_id, host_id, host=True)
            row = self._target(meeting_id, target)
            if row["role"] != STAGE:
                raise _err(409, MeetingsErrorCode.WRONG_ROLE, f"{target} is not on stage")
            await self._revoke_media(meeting_id, target)
            def write(conn) -> None:
                conn.execute("UPDATE meeting_participants SET role = ? WHERE meeting_id = ? AND user_id = ?",
                             (LISTENER, meeting_id, target))
                self._append(conn, meeting_id, "role", target, LISTENER, bool(row["hand_raised"]))
            await self.db.run_transaction(write)
            self._notify(meeting_id)
            return self.snapshot(self._meeting(meeting_id))

    async def media_session(self, meeting_id: str, user_id: str) -> dict[str, Any]:
        """A stage member's descriptor with a later expiry (the renewal; their token and participant
        ID stay, so a connected session goes on)."""
        async with self._lock(meeting_id):
            await self._caller(meeting_id, user_id)
            row = self._require_participant(meeting_id, user_id)
            if row["role"] != STAGE:
                raise _err(409, MeetingsErrorCode.WRONG_ROLE, f"{user_id} is not on stage")
            return await self._issue_descriptor(meeting_id, user_id)

    async def connect_media(self, meeting_id: str, user_id: str) -> dict[str, Any]:
        """Joins a stage member's participant to the meeting's AudioBridge room on a new media-server
        session, with the participant ID, display and token the services assigned, and hands the
        member only that session and its handle: they continue there (`configure` with their offer,
        keep-alives, the event stream). The token never reaches the member, so no client can join the
        room as anyone else. The member's previous session made here is destroyed first (one live
        connection per member; its participant ID is free again)."""
        async with self._lock(meeting_id):
            await self._caller(meeting_id, user_id)
            row = self._require_participant(meeting_id, user_id)
            if row["role"] != STAGE:
                raise _err(409, MeetingsErrorCode.WRONG_ROLE, f"{user_id} is not on stage")
            await self.expire_tokens(meeting_id)
            held = self.db.query_one("SELECT token FROM meeting_media_tokens WHERE meeting_id = ? AND user_id = ?",
                                     (meeting_id, user_id))
            if held is None:  # expired (and swept) while on stage: a new token
                await self._issue_descriptor(meeting_id, user_id)
            token = self.db.query_one("SELECT token, participant_id, expires_at_ms FROM meeting_media_tokens"
                                      " WHERE meeting_id = ? AND user_id = ?", (meeting_id, user_id))
            room = await self._media_room(meeting_id)
            assert self.media is not None and token is not None
            try:
                session, handle = await self.media.connect(room, token["token"])
            except MediaError as e:
                raise _err(503, MeetingsErrorCode.MEDIA_UNAVAILABLE, f"The media server failed: {e}") from None
            out = {"server_url": self.media.public_url, "session_id": session, "handle_id": handle,
                   "room": room.room, "participant_id": token["participant_id"], "display": user_id,
                   "expires_at_ms": token["expires_at_ms"]}
            return out

    async def _remove(self, meeting_id: str, user_id: str, kind: str) -> None:
        if self._participant(meeting_id, user_id) is None:
            return  # already out (two requests found them gone at once)
        await self._revoke_media(meeting_id, user_id)
        def write(conn) -> None:
            conn.execute("DELETE FROM meeting_participants WHERE meeting_id = ? AND user_id = ?",
                         (meeting_id, user_id))
            self._append(conn, meeting_id, kind, user_id)
        await self.db.run_transaction(write)
        self._notify(meeting_id)
        left = self.db.query_one("SELECT COUNT(*) AS n FROM meeting_participants WHERE meeting_id = ?", (meeting_id,))
        if left is not None and left["n"] == 0:
            await self._end(meeting_id, "empty")

    async def leave(self, meeting_id: str, user_id: str) -> dict[str, Any]:
        async with self._lock(meeting_id):
            self._active(meeting_id)
            self._require_participant(meeting_id, user_id)
            await self._remove(meeting_id, user_id, "left")
            return self.snapshot(self._meeting(meeting_id))

    async def end(self, meeting_id: str, host_id: str) -> dict[str, Any]:
        async with self._lock(meeting_id):
            await self._caller(meeting_id, host_id, host=True)
            await self._end(meeting_id, "ended_by_host")
            return self.snapshot(self._meeting(meeting_id))

    async def _end(self, meeting_id: str, reason: str) -> None:
        def write(conn) -> None:
            self._finish(conn, meeting_id, reason)
        await self.db.run_transaction(write)
        room = self._media_rooms.pop(meeting_id, None)
        if room is not None and self.media is not None:
            try:
                await self.media.close_room(room)
            except MediaError as e:
                # The row stays: the background task destroys the room when Janus answers.
                log.warning("closing a meeting's media room failed: %s", e)
            else:
                def write(conn) -> None:
                    conn.execute("DELETE FROM meeting_media_rooms WHERE meeting_id = ?", (meeting_id,))
                await self.db.run_transaction(write)
        self._notify(meeting_id)
        self._changed.pop(meeting_id, None)

    # -- the background task

    def start(self) -> None:
        """Starts the background task in the running event loop (the app's lifespan): every
        `sweep_interval_s` it removes expired tokens and their participants, and destroys media
        rooms that no meeting of this process owns (left by an earlier process, or whose closing
        failed)."""
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            try:
                await self._sweeper
            except (asyncio.CancelledError, Exception):
                pass
            self._sweeper = None

    async def _sweep_forever(self) -> None:
        while True:
            try:
                await self.cleanup_orphans()
                await self.sweep_expired()
                await self.forget_ended_changes()
            except Exception:  # noqa: BLE001 - the task must outlive one bad pass
                log.exception("meetings background pass failed")
            await asyncio.sleep(self.sweep_interval_s)

    async def forget_ended_changes(self) -> None:
        """Drops the change feeds of meetings that ended more than an hour ago."""
        def write(conn) -> None:
            conn.execute("DELETE FROM meeting_changes WHERE meeting_id IN (SELECT meeting_id FROM meetings"
                         " WHERE status = 'ended' AND ended_at_ms < ?)", (self.now_ms() - ENDED_CHANGES_KEPT_MS,))
        await self.db.run_transaction(write)

    async def sweep_expired(self) -> None:
        """Removes every expired token of every active meeting, kicking its participant, whether
        or not anyone joins."""
        rows = self.db.query("SELECT DISTINCT t.meeting_id FROM meeting_media_tokens t JOIN meetings m"
                             " ON m.meeting_id = t.meeting_id WHERE m.status = 'active' AND t.expires_at_ms <= ?",
                             (self.now_ms(),))
        for row in rows:
            async with self._lock(row["meeting_id"]):
                await self.expire_tokens(row["meeting_id"])

    async def cleanup_orphans(self) -> None:
        """Destroys the media rooms that no meeting of this process owns: those of meetings an
        earlier services process left active (ended as `services_restarted` at start), and those
        whose closing failed. A room stays listed while Janus cannot be asked."""
        if self.media is None:
            return
        owned = {room.room for room in self._media_rooms.values()}
        for row in self.db.query("SELECT meeting_id, room, secret FROM meeting_media_rooms"):
            if row["room"] in owned:
                continue
            try:
                await self.media.destroy_orphan(row["room"], row["secret"])
            except MediaError as e:
                log.info("a media room left by an earlier process is not destroyed yet (%s)", e)
                continue
            def write(conn) -> None:
                conn.execute("DELETE FROM meeting_media_rooms WHERE meeting_id = ?", (row["meeting_id"],))
            await self.db.run_transaction(write)
            log.info("destroyed a media room an earlier services process left")

    async def changes(self, meeting_id: str, user_id: str, since: int, timeout_ms: int) -> dict[str, Any]:
        meeting = self._meeting(meeting_id)
        if meeting["status"] == "active":
            await self._caller(meeting_id, user_id)
        else:
            await self._member(meeting["room_id"], user_id)
        deadline = time.monotonic() + min(timeout_ms, MAX_FEED_TIMEOUT_MS) / 1000
        try:
            return await self._wait_for_changes(meeting_id, since, deadline)
        finally:
            if self._meeting(meeting_id)["status"] == "active":
                await self.touch(meeting_id, user_id)

    async def _wait_for_changes(self, meeting_id: str, since: int, deadline: float) -> dict[str, Any]:
        while True:
            rows = self.db.query("SELECT * FROM meeting_changes WHERE meeting_id = ? AND seq > ? ORDER BY seq LIMIT 500",
                                 (meeting_id, since))
            remaining = deadline - time.monotonic()
            if rows or remaining <= 0 or self._meeting(meeting_id)["status"] != "active":
                break
            event = self._changed.setdefault(meeting_id, asyncio.Event())
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except asyncio.TimeoutError:
                pass
        changes = [{"seq": r["seq"], "kind": r["kind"], "user_id": r["user_id"], "role": r["role"],
                    "hand_raised": None if r["hand_raised"] is None else bool(r["hand_raised"]),
                    "at_ms": r["at_ms"]} for r in rows]
        meeting = self._meeting(meeting_id)
        cursor = changes[-1]["seq"] if changes else min(max(since, 0), self.cursor(meeting_id))
        return {"changes": changes, "cursor": cursor, "status": meeting["status"],
                "participants": self.participants(meeting_id)}

    async def playback_file(self, meeting_id: str, user_id: str, name: str) -> str:
        await self._caller(meeting_id, user_id)
        self._require_participant(meeting_id, user_id)
        room = self._media_rooms.get(meeting_id)
        if room is None or room.playback_dir is None:
            raise _err(503, MeetingsErrorCode.MEDIA_UNAVAILABLE, "The meeting has no playback stream")
        if name != PLAYLIST and not (name.startswith("seg") and name.endswith(".ts") and name[3:-3].isdigit()):
            raise _err(404, ErrorCode.NOT_FOUND, f"No playback file {name}")
        path = os.path.join(room.playback_dir, name)
        if not os.path.isfile(path):
            raise _err(404, ErrorCode.NOT_FOUND, f"No playback file {name} (yet)")
        return path
