"""The meetings module with a fake homeserver room directory and a fake media server:
admission, capacity, broadcast, hands, promotion rights, membership checks, leaving, ending,
the change feed and its cursor, typed errors."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from fastapi.testclient import TestClient

from symorva_server.app import create_app
from symorva_server.config import Settings
from symorva_server.ratelimit import profile

from symorva_server.config import default_manifest
from symorva_server.modules.meetings import MediaError, MediaRoom, RoomLookupError, RoomState

from .conftest import HOMESERVER, SERVER_NAME, assert_error, login

M = "/_symorva/v1/meetings"
ROOM = "!room:localhost"
HOST, BOB, CAROL, DAN = "@host:localhost", "@bob:localhost", "@carol:localhost", "@dan:localhost"


class FakeRooms:
    def __init__(self) -> None:
        self.rooms: dict[str, RoomState] = {}
        self.unavailable = False

    def set(self, room_id: str, members: list[str], levels: dict[str, int] | None = None) -> None:
        self.rooms[room_id] = RoomState({m: "join" for m in members}, levels or {}, 0)

    def leave(self, room_id: str, user_id: str) -> None:
        s = self.rooms[room_id]
        self.rooms[room_id] = RoomState({**s.memberships, user_id: "leave"}, s.user_levels, s.users_default)

    async def room_state(self, room_id: str) -> RoomState:
        if self.unavailable:
            raise RoomLookupError("connection refused")
        if room_id not in self.rooms:
            raise RoomLookupError("no such room", unknown_room=True)
        return self.rooms[room_id]


class FakeMedia:
    public_url = "http://janus.test/janus"

    def __init__(self) -> None:
        self.allowed: dict[int, set[str]] = {}
        self.assigned: dict[str, tuple[int, str]] = {}  # token -> (participant ID, display)
        self.kicked: list[str] = []
        self.joins: list[tuple[int, str, int, str]] = []  # (room, token, participant ID, display) the services joined
        self.closed: list[int] = []
        self.destroyed: list[tuple[int, str]] = []  # (room, secret) of rooms left by an earlier process
        self.fail = False
        self.next_room = 100
        # While set for a meeting's Matrix room... (see `hold_open`): open_room waits for `release`.
        self.hold: asyncio.Event | None = None
        self.holding = threading.Event()
        self.release = threading.Event()

    async def open_room(self, meeting_id: str) -> MediaRoom:
        if self.fail:
            raise MediaError("Janus not reachable")
        if self.hold is not None:
            self.hold = None
            self.holding.set()
            while not self.release.is_set():  # Janus is slow to create this room
                await asyncio.sleep(0.01)
        self.next_room += 1
        self.allowed[self.next_room] = set()
        return MediaRoom(room=self.next_room, secret=f"secret-{self.next_room}")

    async def allow(self, room: MediaRoom, token: str, participant_id: int = 0, display: str = "") -> None:
        if self.fail:
            raise MediaError("Janus not reachable")
        self.allowed[room.room].add(token)
        self.assigned[token] = (participant_id, display)

    async def revoke(self, room: MediaRoom, token: str) -> None:
        self.allowed[room.room].discard(token)
        if token in self.assigned:
            self.kicked.append(self.assigned.pop(token)[1])

    async def connect(self, room: MediaRoom, token: str) -> tuple[int, int]:
        if self.fail:
            raise MediaError("Janus not reachable")
        assert token in self.allowed[room.room]
        self.joins.append((room.room, token) + self.assigned[token])
        return 5000 + len(self.joins), 6000 + len(self.joins)

    def token_of(self, participant_id: int) -> str:
        """The token the services assigned `participant_id` (members never see it)."""
        return next(t for t, (pid, _) in self.assigned.items() if pid == participant_id)

    async def kick(self, room: MediaRoom, user_id: str, participant_id: int) -> None:
        pass  # (the revoke kicks by the assigned ID)

    async def close_room(self, room: MediaRoom) -> None:
        self.closed.append(room.room)

    async def destroy_orphan(self, room: int, secret: str) -> None:
        if self.fail:
            raise MediaError("Janus not reachable")
        self.destroyed.append((room, secret))


@pytest.fixture
def rooms() -> FakeRooms:
    r = FakeRooms()
    r.set(ROOM, [HOST, BOB, CAROL, DAN], {HOST: 100})
    return r


@pytest.fixture
def media() -> FakeMedia:
    return FakeMedia()


@pytest.fixture
def svc(make_client, rooms, media, verifier):
    def _make(capacity: int = 2, media_backend=media):
        manifest = default_manifest(HOMESERVER, SERVER_NAME, "http://127.0.0.1:9")
        manifest["modules"]["meetings"]["stageCapacity"] = capacity
        client = make_client(manifest=manifest)
        ctx = client.app.state.ctx
        ctx.meetings.rooms = rooms
        ctx.meetings.media = media_backend
        heads = {u: login(client, verifier, u)["headers"] for u in (HOST, BOB, CAROL, DAN)}
        return client, heads
    return _make


def join(client, headers, room=ROOM, **kw):
    r = client.post(f"{M}/join", headers=headers, json={"room_id": room, **kw})
    assert r.status_code == 200, r.text
    return r.json()


def test_admission_fills_the_stage_then_admits_listeners(svc, media):
    client, h = svc(capacity=2)
    a, b, c = join(client, h[HOST]), join(client, h[BOB]), join(client, h[CAROL])
    assert [a["role"], b["role"], c["role"]] == ["stage", "stage", "listener"]
    d = a["media"]
    assert d["server_url"] == media.public_url and d["plugin"] == "janus.plugin.audiobridge"
    assert "token" not in d and d["display"] == HOST and d["expires_at_ms"] > 0
    assert media.assigned[media.token_of(d["participant_id"])] == (d["participant_id"], HOST)
    assert media.token_of(d["participant_id"]) in media.allowed[d["room"]]
    assert c["media"] is None and c["playback"]["playlist_path"] == f"{M}/{a['meeting']['meeting_id']}/playback/live.m3u8"
    assert a["meeting"]["meeting_id"] == c["meeting"]["meeting_id"]
    assert [p["role"] for p in c["participants"]] == ["stage", "stage", "listener"]


def test_joining_again_keeps_the_role_and_the_participant_with_a_later_expiry(svc, media, clock):
    client, h = svc()
    first = join(client, h[HOST])
    clock.advance(60)
    again = join(client, h[HOST])
    assert again["role"] == "stage" and again["media"]["participant_id"] == first["media"]["participant_id"]
    assert again["media"]["expires_at_ms"] == first["media"]["expires_at_ms"] + 60_000
    assert media.allowed[first["media"]["room"]] == {media.token_of(first["media"]["participant_id"])}
    assert media.kicked == []  # a connected session goes on
    assert len(again["participants"]) == 1


def test_broadcast_only_hosts_start_on_stage_and_only_hosts_open_one(svc, rooms):
    client, h = svc(capacity=3)
    assert_error(client.post(f"{M}/join", headers=h[BOB], json={"room_id": ROOM, "broadcast": True}), 403, "SY_NOT_HOST")
    a = join(client, h[HOST], broadcast=True)
    assert a["meeting"]["mode"] == "broadcast" and a["role"] == "stage"
    assert join(client, h[BOB])["role"] == "listener"


def test_membership_is_checked_with_the_homeserver(svc, rooms):
    client, h = svc()
    rooms.leave(ROOM, DAN)
    assert_error(client.post(f"{M}/join", headers=h[DAN], json={"room_id": ROOM}), 403, "SY_NOT_ROOM_MEMBER")
    assert_error(client.post(f"{M}/join", headers=h[DAN], json={"room_id": "!nope:localhost"}), 404, "SY_ROOM_UNKNOWN")
    rooms.unavailable = True
    assert_error(client.post(f"{M}/join", headers=h[HOST], json={"room_id": ROOM}), 502, "SY_HOMESERVER_UNAVAILABLE")


def test_a_member_who_left_the_room_is_taken_out_of_the_meeting(svc, rooms, media):
    client, h = svc()
    a = join(client, h[HOST])
    join(client, h[BOB])
    mid = a["meeting"]["meeting_id"]
    rooms.leave(ROOM, BOB)
    assert_error(client.get(f"{M}/{mid}", headers=h[BOB]), 403, "SY_NOT_ROOM_MEMBER")
    view = client.get(f"{M}/{mid}", headers=h[HOST]).json()
    assert [p["user_id"] for p in view["participants"]] == [HOST]
    assert BOB in media.kicked


def test_hands_are_signals_and_show_in_the_feed(svc):
    client, h = svc(capacity=1)
    a = join(client, h[HOST])
    join(client, h[BOB])
    mid = a["meeting"]["meeting_id"]
    cursor = client.get(f"{M}/{mid}", headers=h[HOST]).json()["cursor"]
    r = client.post(f"{M}/{mid}/hand", headers=h[BOB], json={"raised": True})
    assert r.status_code == 200
    bob = [p for p in r.json()["participants"] if p["user_id"] == BOB][0]
    assert bob == {**bob, "role": "listener", "hand_raised": True}  # a hand never grants the stage
    feed = client.get(f"{M}/{mid}/changes", headers=h[HOST], params={"since": cursor}).json()
    assert [(c["kind"], c["user_id"], c["hand_raised"]) for c in feed["changes"]] == [("hand", BOB, True)]
    assert feed["cursor"] == cursor + 1
    # Raising it again changes nothing; lowering it is a change.
    client.post(f"{M}/{mid}/hand", headers=h[BOB], json={"raised": True})
    client.post(f"{M}/{mid}/hand", headers=h[BOB], json={"raised": False})
    feed = client.get(f"{M}/{mid}/changes", headers=h[HOST], params={"since": feed["cursor"]}).json()
    assert [(c["kind"], c["hand_raised"]) for c in feed["changes"]] == [("hand", False)]
    assert_error(client.post(f"{M}/{mid}/hand", headers=h[CAROL], json={"raised": True}), 409, "SY_NOT_PARTICIPANT")


def test_only_hosts_promote_demote_and_end(svc, media):
    client, h = svc(capacity=2)
    a = join(client, h[HOST])
    join(client, h[BOB])
    join(client, h[CAROL])
    mid = a["meeting"]["meeting_id"]
    for path in ("promote", "demote"):
        assert_error(client.post(f"{M}/{mid}/{path}", headers=h[BOB], json={"user_id": CAROL}), 403, "SY_NOT_HOST")
    assert_error(client.post(f"{M}/{mid}/end", headers=h[BOB]), 403, "SY_NOT_HOST")
    assert_error(client.post(f"{M}/{mid}/promote", headers=h[HOST], json={"user_id": CAROL}), 409, "SY_STAGE_FULL")
    assert_error(client.post(f"{M}/{mid}/promote", headers=h[HOST], json={"user_id": BOB}), 409, "SY_WRONG_ROLE")
    assert_error(client.post(f"{M}/{mid}/demote", headers=h[HOST], json={"user_id": CAROL}), 409, "SY_WRONG_ROLE")
    assert_error(client.post(f"{M}/{mid}/promote", headers=h[HOST], json={"user_id": DAN}), 409, "SY_NOT_PARTICIPANT")
    room = a["media"]["room"]
    tokens_before = set(media.allowed[room])
    r = client.post(f"{M}/{mid}/demote", headers=h[HOST], json={"user_id": BOB})
    assert r.status_code == 200 and BOB in media.kicked and len(media.allowed[room]) == len(tokens_before) - 1
    client.post(f"{M}/{mid}/hand", headers=h[CAROL], json={"raised": True})
    r = client.post(f"{M}/{mid}/promote", headers=h[HOST], json={"user_id": CAROL})
    assert r.status_code == 200
    roles = {p["user_id"]: (p["role"], p["hand_raised"]) for p in r.json()["participants"]}
    assert roles == {HOST: ("stage", False), BOB: ("listener", False), CAROL: ("stage", False)}
    d = client.post(f"{M}/{mid}/media", headers=h[CAROL]).json()
    assert "token" not in d and media.token_of(d["participant_id"]) in media.allowed[room]
    assert_error(client.post(f"{M}/{mid}/media", headers=h[BOB]), 409, "SY_WRONG_ROLE")
    end = client.post(f"{M}/{mid}/end", headers=h[HOST]).json()
    assert end["meeting"]["status"] == "ended" and end["meeting"]["end_reason"] == "ended_by_host"
    assert end["participants"] == [] and media.closed == [room]
    assert_error(client.post(f"{M}/{mid}/hand", headers=h[BOB], json={"raised": True}), 409, "SY_MEETING_ENDED")
    # A new join opens a new meeting in the same room.
    assert join(client, h[BOB])["meeting"]["meeting_id"] != mid


def test_leaving_updates_everyone_and_the_last_one_out_ends_it(svc, media):
    client, h = svc()
    a = join(client, h[HOST])
    join(client, h[BOB])
    mid = a["meeting"]["meeting_id"]
    cursor = client.get(f"{M}/{mid}", headers=h[HOST]).json()["cursor"]
    assert client.post(f"{M}/{mid}/leave", headers=h[BOB]).status_code == 200
    assert BOB in media.kicked
    feed = client.get(f"{M}/{mid}/changes", headers=h[HOST], params={"since": cursor}).json()
    assert [(c["kind"], c["user_id"]) for c in feed["changes"]] == [("left", BOB)]
    assert [p["user_id"] for p in feed["participants"]] == [HOST]
    assert_error(client.post(f"{M}/{mid}/leave", headers=h[BOB]), 409, "SY_NOT_PARTICIPANT")
    client.post(f"{M}/{mid}/leave", headers=h[HOST])
    view = client.get(f"{M}/{mid}", headers=h[HOST]).json()
    assert view["meeting"]["status"] == "ended" and view["meeting"]["end_reason"] == "empty"


def test_the_feed_resumes_from_its_cursor(svc):
    client, h = svc(capacity=1)
    a = join(client, h[HOST])
    mid = a["meeting"]["meeting_id"]
    first = client.get(f"{M}/{mid}/changes", headers=h[HOST], params={"since": 0}).json()
    assert [c["kind"] for c in first["changes"]] == ["opened", "joined"]
    join(client, h[BOB])
    client.post(f"{M}/{mid}/hand", headers=h[BOB], json={"raised": True})
    # A client that was away asks from its cursor and misses nothing.
    resumed = client.get(f"{M}/{mid}/changes", headers=h[HOST], params={"since": first["cursor"]}).json()
    assert [(c["kind"], c["user_id"]) for c in resumed["changes"]] == [("joined", BOB), ("hand", BOB)]
    idle = client.get(f"{M}/{mid}/changes", headers=h[HOST], params={"since": resumed["cursor"]}).json()
    assert idle["changes"] == [] and idle["cursor"] == resumed["cursor"]
    # A cursor from the future is clamped to the present.
    assert client.get(f"{M}/{mid}/changes", headers=h[HOST], params={"since": 999}).json()["cursor"] == resumed["cursor"]


def test_media_failures_and_bad_input_are_typed_errors(svc, media):
    client, h = svc()
    media.fail = True
    assert_error(client.post(f"{M}/join", headers=h[HOST], json={"room_id": ROOM}), 503, "SY_MEDIA_UNAVAILABLE")
    media.fail = False
    assert_error(client.post(f"{M}/join", headers=h[HOST], json={"room_id": "not a room"}), 400, "SY_INVALID_PARAM")
    assert_error(client.post(f"{M}/join", headers=h[HOST], json={}), 400, "SY_MISSING_PARAM")
    assert_error(client.get(f"{M}/mt_0123abcd", headers=h[HOST]), 404, "SY_MEETING_UNKNOWN")
    a = join(client, h[HOST])
    mid = a["meeting"]["meeting_id"]
    assert_error(client.get(f"{M}/{mid}/playback/..%2Fetc", headers=h[HOST]), 404, "SY_NOT_FOUND")
    assert_error(client.post(f"{M}/{mid}/promote", headers=h[HOST], json={"user_id": "bob"}), 400, "SY_INVALID_PARAM")


def test_no_media_server_configured_refuses_with_a_typed_error(svc):
    client, h = svc(media_backend=None)
    assert_error(client.post(f"{M}/join", headers=h[HOST], json={"room_id": ROOM}), 503, "SY_MEDIA_UNAVAILABLE")


def test_room_state_power_levels_and_creators():
    events = [{"type": "m.room.create", "sender": "@c:x", "content": {"room_version": "12"}, "state_key": ""},
              {"type": "m.room.power_levels", "content": {"users": {"@h:x": 50}, "users_default": 0}, "state_key": ""},
              {"type": "m.room.member", "state_key": "@h:x", "content": {"membership": "join"}},
              {"type": "m.room.member", "state_key": "@l:x", "content": {"membership": "leave"}}]
    s = RoomState.from_events(events)
    assert s.power_level("@c:x") > 100 and s.power_level("@h:x") == 50 and s.power_level("@o:x") == 0
    assert s.is_member("@h:x") and not s.is_member("@l:x")
    old = RoomState.from_events([{"type": "m.room.create", "sender": "@c:x", "content": {"room_version": "10"}}])
    assert old.power_level("@c:x") == 100


def test_served_playlists_carry_program_dates(tmp_path):
    import os

    from symorva_server.modules.meetings.routes import with_program_dates

    (tmp_path / "seg00001.ts").write_bytes(b"\x47")
    os.utime(tmp_path / "seg00001.ts", (1_800_000_001.5, 1_800_000_001.5))
    (tmp_path / "live.m3u8").write_text("#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:1\n#EXT-X-TARGETDURATION:1\n"
                                        "#EXTINF:1.0,\nseg00001.ts\n#EXTINF:1.0,\nseg00002.ts\n")
    text = with_program_dates(str(tmp_path / "live.m3u8")).decode()
    assert text.splitlines() == [
        "#EXTM3U", "#EXT-X-MEDIA-SEQUENCE:1", "#EXT-X-TARGETDURATION:1",
        "#EXT-X-PROGRAM-DATE-TIME:2027-01-15T08:00:00.500Z", "#EXTINF:1.0,", "seg00001.ts",
        "#EXTINF:1.0,", "seg00002.ts"]  # a segment not written yet gets no date


def test_a_participant_whose_client_vanished_times_out(svc, clock, media):
    client, h = svc()
    a = join(client, h[HOST])
    join(client, h[BOB])
    mid = a["meeting"]["meeting_id"]
    clock.advance(60)
    client.get(f"{M}/{mid}/changes", headers=h[HOST], params={"since": 0})  # the host's client polls
    assert len(client.get(f"{M}/{mid}", headers=h[HOST]).json()["participants"]) == 2
    clock.advance(45)  # Bob's client last spoke 105 s ago, the host's 45 s ago
    view = client.get(f"{M}/{mid}", headers=h[HOST]).json()
    assert [p["user_id"] for p in view["participants"]] == [HOST]
    assert BOB in media.kicked
    feed = client.get(f"{M}/{mid}/changes", headers=h[HOST], params={"since": view["cursor"] - 1}).json()
    assert [(c["kind"], c["user_id"]) for c in feed["changes"]] == [("left", BOB)]


def wait_for(predicate, seconds: float = 5.0, what: str = "condition"):
    """Waits for something that must happen (never to prove that nothing did)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        time.sleep(0.01)


def test_an_expired_token_is_removed_and_kicked_without_anyone_joining(svc, clock, media):
    client, h = svc()
    with client:  # the app's lifespan runs the meetings' background task
        client.app.state.ctx.meetings.sweep_interval_s = 0.02
        a = join(client, h[HOST])
        token = media.token_of(a["media"]["participant_id"])
        assert token in media.allowed[a["media"]["room"]]
        clock.advance(3601)  # mediaTokenTtlSeconds (1 h) later; nobody asks for anything
        wait_for(lambda: token not in media.allowed[a["media"]["room"]], what="expired token revoked")
        assert media.kicked == [HOST]


def test_a_restart_destroys_the_media_rooms_the_earlier_process_left(svc, media, rooms, verifier, clock, tmp_path):
    client, h = svc()
    a = join(client, h[HOST])
    room, mid = a["media"]["room"], a["meeting"]["meeting_id"]
    db_path = client.app.state.ctx.db.path
    secret = client.app.state.ctx.db.query_one("SELECT secret FROM meeting_media_rooms")["secret"]
    assert secret == f"secret-{room}"

    # The services restart (the same database) while Janus keeps the room and its members.
    later = FakeMedia()
    settings = Settings(homeserver_url=HOMESERVER, server_name=SERVER_NAME, db_path=db_path,
                        rate_limits=profile("high"))
    app = create_app(settings, verifier=verifier, clock=clock,
                     manifest=default_manifest(HOMESERVER, SERVER_NAME, "http://127.0.0.1:9"),
                     meetings_rooms=rooms, meetings_media=later)
    with TestClient(app, base_url="http://127.0.0.1:9") as restarted:
        restarted.app.state.ctx.meetings.sweep_interval_s = 0.02
        wait_for(lambda: later.destroyed == [(room, secret)], what="orphaned room destroyed")
        view = restarted.get(f"{M}/{mid}", headers=login(restarted, verifier, HOST)["headers"]).json()
        assert view["meeting"]["status"] == "ended" and view["meeting"]["end_reason"] == "services_restarted"
        wait_for(lambda: app.state.ctx.db.query_one("SELECT COUNT(*) AS n FROM meeting_media_rooms")["n"] == 0,
                 what="row removed")
    app.state.ctx.db.close()


def test_the_lock_dictionaries_do_not_keep_ended_meetings(svc):
    client, h = svc()
    meetings = client.app.state.ctx.meetings
    for n in range(5):
        room = f"!r{n}:localhost"
        meetings.rooms.set(room, [HOST], {HOST: 100})
        mid = join(client, h[HOST], room=room)["meeting"]["meeting_id"]
        assert client.post(f"{M}/{mid}/end", headers=h[HOST]).status_code == 200
    assert len(meetings._locks) == 0 and len(meetings._create_locks) == 0 and not meetings._changed


def test_opening_a_meeting_holds_up_no_join_of_another_room(svc, rooms, media):
    client, h = svc()
    rooms.set("!other:localhost", [BOB], {BOB: 100})
    with client:
        media.hold = asyncio.Event()  # the next room Janus creates takes until released
        slow = threading.Thread(target=lambda: join(client, h[HOST]))
        slow.start()
        try:
            assert media.holding.wait(5)
            done = threading.Event()
            other = threading.Thread(target=lambda: (join(client, h[BOB], room="!other:localhost"), done.set()))
            other.start()
            # The other room's meeting opens while the first one's room is still being created.
            assert done.wait(5), "a join of another room waited for the first room's creation"
        finally:
            media.release.set()
            slow.join(10)
            other.join(10)


def test_the_change_feed_keeps_a_bounded_history_per_meeting(svc):
    from symorva_server.modules.meetings.domain import MAX_CHANGES_PER_MEETING

    client, h = svc()
    a = join(client, h[HOST])
    mid = a["meeting"]["meeting_id"]
    for n in range(MAX_CHANGES_PER_MEETING + 10):
        assert client.post(f"{M}/{mid}/hand", headers=h[HOST], json={"raised": n % 2 == 0}).status_code == 200
    db = client.app.state.ctx.db
    kept = db.query_one("SELECT COUNT(*) AS n FROM meeting_changes WHERE meeting_id = ?", (mid,))["n"]
    assert kept <= MAX_CHANGES_PER_MEETING
    feed = client.get(f"{M}/{mid}/changes", headers=h[HOST], params={"since": 0}).json()
    # opened, joined and the hands: the oldest kept is the 1000th from the newest
    assert feed["changes"][0]["seq"] == MAX_CHANGES_PER_MEETING + 12 - MAX_CHANGES_PER_MEETING + 1


class ContendedLock:
    """The services' database lock, telling when another thread has to wait for it."""

    def __init__(self, lock) -> None:
        self._lock = lock
        self.contended = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        if not blocking:
            return False
        self.contended.set()
        return self._lock.acquire(True, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def test_a_slow_transaction_does_not_stall_the_event_loop(svc):
    client, h = svc()
    with client:
        a = join(client, h[HOST])
        mid = a["meeting"]["meeting_id"]
        db = client.app.state.ctx.db
        lock = db._lock = ContendedLock(db._lock)
        held, release = threading.Event(), threading.Event()

        def slow_transaction() -> None:
            with lock:
                held.set()
                release.wait(10)

        holder = threading.Thread(target=slow_transaction)
        holder.start()
        poll = threading.Thread(target=lambda: client.get(f"{M}/{mid}/changes", headers=h[HOST],
                                                          params={"since": a["cursor"], "timeout_ms": 500}))
        health = threading.Thread(target=lambda: client.get("/_symorva/v1/health") and answered.set())
        answered = threading.Event()
        try:
            assert held.wait(5)
            poll.start()
            assert lock.contended.wait(5)  # the long poll's write waits for the slow transaction...
            health.start()
            # ...and the event loop still answers everyone else meanwhile.
            assert answered.wait(5), "the event loop waited for the database lock"
        finally:
            release.set()
            holder.join(10)
            poll.join(10)
            health.join(10)


def test_the_services_join_a_stage_member_to_the_media_room_and_hand_over_only_the_session(svc, media):
    """`POST …/media/connect`: the services join the member's participant themselves (the token,
    assigned ID and display stay with them) and answer only what the member continues on."""
    client, h = svc(capacity=1)
    a = join(client, h[HOST])
    join(client, h[BOB])  # a listener
    mid = a["meeting"]["meeting_id"]
    r = client.post(f"{M}/{mid}/media/connect", headers=h[HOST])
    assert r.status_code == 200, r.text
    c = r.json()
    assert set(c) == {"server_url", "session_id", "handle_id", "room", "participant_id", "display", "expires_at_ms"}
    token = media.token_of(a["media"]["participant_id"])
    assert media.joins == [(a["media"]["room"], token, a["media"]["participant_id"], HOST)]
    assert token not in r.text and token not in json.dumps(a)
    assert (c["participant_id"], c["display"], c["room"]) == (a["media"]["participant_id"], HOST, a["media"]["room"])
    # Listeners, non-participants and an ended meeting get nothing.
    assert_error(client.post(f"{M}/{mid}/media/connect", headers=h[BOB]), 409, "SY_WRONG_ROLE")
    assert_error(client.post(f"{M}/{mid}/media/connect", headers=h[CAROL]), 409, "SY_NOT_PARTICIPANT")
    media.fail = True
    assert_error(client.post(f"{M}/{mid}/media/connect", headers=h[HOST]), 503, "SY_MEDIA_UNAVAILABLE")
    media.fail = False
    client.post(f"{M}/{mid}/end", headers=h[HOST])
    assert_error(client.post(f"{M}/{mid}/media/connect", headers=h[HOST]), 409, "SY_MEETING_ENDED")
