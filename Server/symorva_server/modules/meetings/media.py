"""The media server side of meetings: Janus AudioBridge rooms, member tokens, and the
listeners' HLS playback stream.

`JanusMedia` talks to Janus's HTTP API (one long-lived control session with keepalives):

- `open_room` creates an AudioBridge room (with the plugin's admin key, a random room
  secret, an `allowed` token list enabled and no plain-RTP participants: nobody can aim Janus
  at an address), starts the HLS packager (`gst-launch-1.0`: udpsrc → jitter buffer → Opus
  depay/decode → AAC → `hlssink2`, 1 s segments) on a free loopback UDP port, RTP-forwards the
  room's mix to it (the one RTP stream the room sends, set up with the admin key) and joins the
  room itself as a muted participant without media ("symorva-playback", with a participant ID
  of its own), because AudioBridge mixes (and forwards) only while the room has a participant.
- `allow` / `revoke` add and remove a member's token in the room's `allowed` list, with the
  participant ID and display the services assigned to it. The services are authoritative about
  who is in the room: the roster is the relay plus the (ID, display) of every token allowed now,
  and `enforce` kicks every other participant (an ID the services did not assign, a display that
  is not the one assigned to that ID). It runs at once when Janus tells the relay that someone
  joined or changed (the relay's participant events) and on every watch tick. `revoke` kicks
  the token's participant by its ID at once.
- `close_room` stops the packager and destroys the room; `destroy_orphan` destroys a room an
  earlier services process left (its ID and secret were persisted by the meetings module).

Janus keeps its rooms in memory only. A watch task asks the control session every second
(`keepalive`); when Janus answers that the session is gone (it restarted, or the session
timed out) or cannot be reached and then answers again, `restore` puts every open room back
as it was: the same room ID and secret, the `allowed` list with the relay token and every
member token currently allowed (a revoked token is never put back), the RTP forwarder to the
same packager port (the packager keeps running, so the playlist goes on), and the relay
participant. Members' media sessions reconnect with the token they have; no new admission.

The admin key stays in this process; room secrets are persisted by the meetings module (to end
the rooms after a services restart); nothing here logs a token or a secret.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import shutil
import signal
import socket
from dataclasses import dataclass, field
from typing import Protocol

import httpx

log = logging.getLogger("symorva_server.meetings")

PLAYLIST = "live.m3u8"
SEGMENT_PATTERN = "seg%05d.ts"
SEGMENT_SECONDS = 1
RELAY_DISPLAY = "symorva-playback"
OPUS_PT = 100


class MediaError(Exception):
    """Janus or the packager failed; the message names the request, never a token."""


@dataclass
class MediaRoom:
    room: int
    secret: str
    playback_dir: str | None = None
    relay_token: str = ""
    # The relay participant's ID (assigned by the services, like every member's).
    relay_id: int = 0
    # The members' tokens the room allows now (what a restored room allows again), each with the
    # participant ID and display the services assigned to it: the only members tolerated in it.
    allowed: dict[str, tuple[int, str]] = field(default_factory=dict)
    # The media-server session the services made for each token's member (`connect`): destroyed
    # when the member connects again, so one connection per member holds the participant ID.
    sessions: dict[str, int] = field(default_factory=dict)
    # Participants the services kicked that Janus has not taken out yet (it does so asynchronously):
    # kicked again by the next pass if still there, but not counted as intruders.
    kicked: set[int] = field(default_factory=set)
    # The packager's UDP port, where the room's mix is RTP-forwarded.
    forward_port: int | None = None
    description: str = ""
    extra: dict = field(default_factory=dict)


    def roster(self) -> dict[int, str]:
        """Participant ID -> display of everyone the room may hold now."""
        out = {pid: display for pid, display in self.allowed.values()}
        out[self.relay_id] = RELAY_DISPLAY
        return out


class MediaBackend(Protocol):
    public_url: str

    async def open_room(self, meeting_id: str) -> MediaRoom: ...
    async def allow(self, room: MediaRoom, token: str, participant_id: int, display: str) -> None: ...
    async def revoke(self, room: MediaRoom, token: str) -> None: ...
    async def connect(self, room: MediaRoom, token: str) -> tuple[int, int]: ...
    async def close_room(self, room: MediaRoom) -> None: ...
    async def destroy_orphan(self, room: int, secret: str) -> None: ...


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JanusMedia:
    def __init__(self, janus_url: str, admin_key: str, media_dir: str, *, public_url: str | None = None,
                 gst_launch: str | None = None, watch_interval_s: float = 1.0) -> None:
        self.url = janus_url.rstrip("/")
        self.public_url = public_url or self.url
        self._admin_key = admin_key
        self.media_dir = media_dir
        self.gst_launch = gst_launch or shutil.which("gst-launch-1.0")
        self._session: int | None = None
        self._handle: int | None = None
        self._lock = asyncio.Lock()
        # The control session's events, read by one long poll: asynchronous answers (joins) go to
        # their waiter by transaction, everything else (participant notifications to the relay
        # handles) is dropped, so Janus's queue for the session never grows.
        self._events: asyncio.Task | None = None
        self._waiters: dict[str, asyncio.Future] = {}
        self._packagers: dict[int, asyncio.subprocess.Process] = {}
        # The open rooms (what `restore` puts back after Janus restarts). Room changes (create,
        # allow, revoke, close) and a restore hold `_rooms_lock`, so a restore never misses an
        # allow or puts back a token revoked while it ran.
        self._rooms: dict[int, MediaRoom] = {}
        self._rooms_lock = asyncio.Lock()
        self.watch_interval_s = watch_interval_s
        self._watch: asyncio.Task | None = None
        # How many times rooms were put back (for tests and the log).
        self.restores = 0
        self._stale = False
        # Rooms whose roster is being enforced (one pass at a time per room; a request for another
        # pass while one runs makes it run again).
        self._enforcing: dict[int, asyncio.Task] = {}
        self._enforce_again: set[int] = set()
        # How many participants `enforce` kicked (for tests and the log).
        self.intruders_kicked = 0
        self._client = httpx.AsyncClient(timeout=15, trust_env=False)

    # -- Janus API

    async def _post(self, path: str, body: dict) -> dict:
        body = {**body, "transaction": secrets.token_hex(8)}
        try:
            resp = await self._client.post(f"{self.url}{path}", json=body)
        except httpx.HTTPError as e:
            raise MediaError(f"Janus not reachable ({type(e).__name__})") from None
        if resp.status_code != 200:
            raise MediaError(f"Janus answered HTTP {resp.status_code}")
        data = resp.json()
        if data.get("janus") == "error":
            raise MediaError(f"Janus error {data.get('error', {}).get('code')}: {data.get('error', {}).get('reason')}")
        return data

    async def _control(self) -> tuple[int, int]:
        async with self._lock:
            if self._session is None or self._handle is None:
                self._session = (await self._post("", {"janus": "create"}))["data"]["id"]
                self._handle = await self._attach(self._session)
                loop = asyncio.get_running_loop()
                if self._watch is None or self._watch.done():
                    self._watch = loop.create_task(self._watch_janus())
                if self._events is not None:
                    self._events.cancel()
                self._events = loop.create_task(self._read_events(self._session))
            return self._session, self._handle

    async def _read_events(self, session: int) -> None:
        while self._session == session:
            try:
                resp = await self._client.get(f"{self.url}/{session}", params={"maxev": 20}, timeout=40)
                events = resp.json()
            except (httpx.HTTPError, ValueError):
                await asyncio.sleep(1)
                continue
            for event in events if isinstance(events, list) else [events]:
                if not isinstance(event, dict):
                    continue
                if event.get("janus") == "error" and event.get("error", {}).get("code") == 458:
                    self._drop_session(session)  # gone: the next request makes a new one
                    return
                waiter = self._waiters.pop(str(event.get("transaction")), None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(event)
                    continue
                # A participant notification to a relay (someone joined, or changed their display):
                # the room's roster is enforced at once.
                data = event.get("plugindata", {}).get("data", {})
                if isinstance(data, dict) and "participants" in data:
                    room = self._rooms.get(data.get("room"))  # type: ignore[arg-type]
                    if room is not None:
                        self.request_enforce(room)

    async def _attach(self, session: int) -> int:
        data = await self._post(f"/{session}", {"janus": "attach", "plugin": "janus.plugin.audiobridge"})
        return data["data"]["id"]

    def _drop_session(self, session: int | None) -> None:
        """Forgets the control session (Janus lost it, or a request on it failed): the next use
        makes a new one, and the watch task puts the rooms back."""
        if session is not None and self._session == session:
            self._session = self._handle = None
        self._stale = True

    async def _watch_janus(self) -> None:
        """Keeps the control session alive and notices when Janus lost it (a restart, a
        timeout): then the rooms are put back as soon as Janus answers again."""
        while True:
            await asyncio.sleep(self.watch_interval_s)
            if self._stale:
                if not self._rooms:
                    self._stale = False  # nothing to put back; the next use makes a new session
                    continue
                try:
                    await self.restore()
                except MediaError as e:
                    log.info("Janus not back yet (%s)", e)
                continue
            session = self._session
            if session is None:
                continue
            try:
                await self._post(f"/{session}", {"janus": "keepalive"})
            except MediaError as e:
                log.warning("Janus lost the control session (%s); the rooms are put back when it answers", e)
                self._drop_session(session)
                continue
            # The events are the prompt path; this pass catches anything they missed.
            for room in list(self._rooms.values()):
                self.request_enforce(room)

    async def restore(self) -> None:
        """Puts every open room back at Janus as it was (see the module's doc) on a new control
        session. A room Janus still has keeps its forwarder (added again if missing) and gets its
        relay participant back. Raises MediaError while Janus cannot be reached (the watch task
        tries again)."""
        async with self._rooms_lock:
            old = self._session
            self._session = self._handle = None
            if old is not None:
                try:
                    await self._post(f"/{old}", {"janus": "destroy"})
                except MediaError:
                    pass  # already gone with the Janus that had it
            await self._control()
            for room in list(self._rooms.values()):
                exists = (await self.request({"request": "exists", "room": room.room})).get("exists") is True
                if not exists:
                    await self._create(room)
                    log.info("AudioBridge room put back after Janus lost it (%d allowed)", len(room.allowed))
                if not await self._forwarding(room):
                    await self._forward(room)
                await self._join_relay(room)
            self._stale = False
            self.restores += 1

    async def _forwarding(self, room: MediaRoom) -> bool:
        """Whether the room's mix is RTP-forwarded to its packager."""
        listed = await self.request({"request": "listforwarders", "secret": room.secret, "room": room.room})
        return any(f.get("port") == room.forward_port for f in listed.get("rtp_forwarders", []))

    async def request(self, body: dict, *, handle: int | None = None) -> dict:
        """A synchronous AudioBridge request on the control handle; returns the plugin data.
        Raises MediaError on a Janus or plugin error."""
        session, control = await self._control()
        try:
            data = await self._post(f"/{session}/{handle or control}", {"janus": "message", "body": body})
        except MediaError:
            self._drop_session(session)
            raise
        plugin = data.get("plugindata", {}).get("data", {})
        if "error_code" in plugin:
            raise MediaError(f"AudioBridge {body.get('request')}: {plugin.get('error_code')} {plugin.get('error')}")
        return plugin

    async def _async_request(self, handle: int, body: dict) -> dict:
        """An asynchronous AudioBridge request (join): the answer comes as an event, which the
        control session's event reader hands over by transaction."""
        session, _ = await self._control()
        transaction = secrets.token_hex(8)
        waiter = asyncio.get_running_loop().create_future()
        self._waiters[transaction] = waiter
        try:
            try:
                resp = await self._client.post(f"{self.url}/{session}/{handle}", json={
                    "janus": "message", "body": body, "transaction": transaction})
                data = resp.json()
            except (httpx.HTTPError, ValueError) as e:
                raise MediaError(f"Janus not reachable ({type(e).__name__})") from None
            if data.get("janus") != "ack":
                raise MediaError(f"AudioBridge {body.get('request')}: unexpected answer {data.get('janus')}")
            try:
                event = await asyncio.wait_for(waiter, 20)
            except asyncio.TimeoutError:
                raise MediaError(f"AudioBridge {body.get('request')}: no answer") from None
        finally:
            self._waiters.pop(transaction, None)
        plugin = event.get("plugindata", {}).get("data", {})
        if "error_code" in plugin:
            raise MediaError(f"AudioBridge {body.get('request')}: {plugin.get('error_code')} {plugin.get('error')}")
        return plugin

    # -- rooms

    async def open_room(self, meeting_id: str) -> MediaRoom:
        room = MediaRoom(room=secrets.randbelow(2**52) + 1, secret=secrets.token_urlsafe(18),
                         relay_token=secrets.token_urlsafe(18), relay_id=secrets.randbelow(2**52) + 1,
                         description=f"meeting {meeting_id}")
        async with self._rooms_lock:
            await self._create(room)
            self._rooms[room.room] = room
            try:
                await self._start_playback(meeting_id, room)
            except (MediaError, OSError) as e:
                await self._close(room)
                raise MediaError(f"playback stream: {e}") from None
        return room

    async def _create(self, room: MediaRoom) -> None:
        """Creates the AudioBridge room with its `allowed` list (the relay and the members
        allowed now)."""
        allowed = [room.relay_token, *sorted(room.allowed)]
        await self.request({"request": "create", "admin_key": self._admin_key, "room": room.room,
                            "secret": room.secret, "description": room.description, "is_private": True,
                            "allowed": allowed, "allow_rtp_participants": False,
                            "sampling_rate": 48000, "audiolevel_event": False})
        await self.request({"request": "allowed", "secret": room.secret, "room": room.room,
                            "action": "enable", "allowed": allowed})

    async def _start_playback(self, meeting_id: str, room: MediaRoom) -> None:
        if not self.gst_launch:
            raise MediaError("gst-launch-1.0 not found (GStreamer tools are installed by the scripts)")
        folder = os.path.join(self.media_dir, meeting_id)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        port = free_udp_port()
        caps = f"application/x-rtp,media=audio,clock-rate=48000,encoding-name=OPUS,payload={OPUS_PT}"
        process = await asyncio.create_subprocess_exec(
            self.gst_launch, "-q", "udpsrc", "address=127.0.0.1", f"port={port}", f"caps={caps}",
            "!", "rtpjitterbuffer", "latency=60", "!", "rtpopusdepay", "!", "opusdec", "!", "audioconvert",
            "!", "audioresample", "!", "voaacenc", "bitrate=64000", "!", "aacparse", "!", "hlssink2",
            f"target-duration={SEGMENT_SECONDS}", "max-files=12", "playlist-length=6",
            f"location={os.path.join(folder, SEGMENT_PATTERN)}", f"playlist-location={os.path.join(folder, PLAYLIST)}",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL)
        self._packagers[room.room] = process
        room.playback_dir = folder
        room.forward_port = port
        await self._forward(room)
        await self._join_relay(room)

    async def _forward(self, room: MediaRoom) -> None:
        """RTP-forwards the room's mix to its packager."""
        forward = await self.request({"request": "rtp_forward", "admin_key": self._admin_key, "secret": room.secret,
                                      "room": room.room, "host": "127.0.0.1", "port": room.forward_port,
                                      "ptype": OPUS_PT})
        room.extra["stream_id"] = forward.get("stream_id")

    async def _join_relay(self, room: MediaRoom) -> None:
        """Joins the room as the muted participant without media that keeps its mixer running, on
        a new handle of the control session (whose events tell the services who joins)."""
        session, _ = await self._control()
        relay = await self._attach(session)
        room.extra["relay_handle"] = relay
        await self._async_request(relay, {"request": "join", "room": room.room, "token": room.relay_token,
                                          "id": room.relay_id, "display": RELAY_DISPLAY, "muted": True})

    async def allow(self, room: MediaRoom, token: str, participant_id: int, display: str) -> None:
        async with self._rooms_lock:
            # On the roster before Janus accepts the token, so that its participant is never taken
            # for an intruder.
            room.allowed[token] = (participant_id, display)
            try:
                await self.request({"request": "allowed", "secret": room.secret, "room": room.room,
                                    "action": "add", "allowed": [token]})
            except MediaError:
                room.allowed.pop(token, None)
                raise

    async def revoke(self, room: MediaRoom, token: str) -> None:
        """Removes the token from the room's `allowed` list and kicks its participant (by the ID the
        services assigned to it) at once; anyone else not on the roster goes with the next pass."""
        async with self._rooms_lock:
            # Forgotten first: a room put back after a failed request never allows it again, and
            # the next enforcement pass kicks its participant even if the kick below fails.
            assigned = room.allowed.pop(token, None)
            room.sessions.pop(token, None)
            await self.request({"request": "allowed", "secret": room.secret, "room": room.room,
                                "action": "remove", "allowed": [token]})
        if assigned is not None:
            room.kicked.add(assigned[0])
            await self._kick(room, assigned[0])
        self.request_enforce(room)

    async def connect(self, room: MediaRoom, token: str) -> tuple[int, int]:
        """Joins the member of `token` to the room on a new media-server session (muted, with the
        participant ID and display assigned to the token) and returns that session and its
        AudioBridge handle, which the member continues on: `configure` with their WebRTC offer,
        keep-alives, the session's event stream. Janus's HTTP sessions belong to no connection, so
        the member's requests on them work like the services' own. The member never sees the
        token. The session the services made for the token before is destroyed first (its
        participant leaves; the ID is free for this one)."""
        assigned = room.allowed.get(token)
        if assigned is None:
            raise MediaError("AudioBridge join: the token is not allowed in the room")
        participant_id, display = assigned
        old = room.sessions.pop(token, None)
        if old is not None:
            try:
                await self._post(f"/{old}", {"janus": "destroy"})
            except MediaError:
                pass  # gone already (timed out, Janus restarted, the member destroyed it)
        session = (await self._post("", {"janus": "create"}))["data"]["id"]
        try:
            handle = await self._attach(session)
            await self._join_on(session, handle, {"request": "join", "room": room.room, "token": token,
                                                  "id": participant_id, "display": display, "muted": True})
        except MediaError:
            try:
                await self._post(f"/{session}", {"janus": "destroy"})
            except MediaError:
                pass
            raise
        room.sessions[token] = session
        return session, handle

    async def _join_on(self, session: int, handle: int, body: dict) -> None:
        """An AudioBridge join on a member's session: its answer arrives on that session's event
        stream (not the control session's), read here before the member is handed the session."""
        transaction = secrets.token_hex(8)
        try:
            resp = await self._client.post(f"{self.url}/{session}/{handle}", json={
                "janus": "message", "body": body, "transaction": transaction})
            data = resp.json()
        except (httpx.HTTPError, ValueError) as e:
            raise MediaError(f"Janus not reachable ({type(e).__name__})") from None
        if data.get("janus") == "error":
            raise MediaError(f"Janus error {data.get('error', {}).get('code')}")
        event = data if data.get("janus") == "success" else None
        deadline = asyncio.get_running_loop().time() + 20
        while event is None:
            if asyncio.get_running_loop().time() > deadline:
                raise MediaError("AudioBridge join: no answer")
            try:
                resp = await self._client.get(f"{self.url}/{session}", params={"maxev": 5}, timeout=25)
                events = resp.json()
            except (httpx.HTTPError, ValueError) as e:
                raise MediaError(f"Janus not reachable ({type(e).__name__})") from None
            for e in events if isinstance(events, list) else [events]:
                if isinstance(e, dict) and e.get("transaction") == transaction:
                    event = e
        plugin = event.get("plugindata", {}).get("data", {})
        if "error_code" in plugin:
            raise MediaError(f"AudioBridge join: {plugin.get('error_code')} {plugin.get('error')}")

    async def participants(self, room: MediaRoom) -> list[dict]:
        return (await self.request({"request": "listparticipants", "room": room.room})).get("participants", [])

    async def _kick(self, room: MediaRoom, participant_id: int) -> bool:
        try:
            await self.request({"request": "kick", "secret": room.secret, "room": room.room, "id": participant_id})
            return True
        except MediaError as e:
            if "487" in str(e) or "No such user" in str(e):
                return False  # not in the room (never joined, or already gone)
            log.warning("kick of an AudioBridge participant failed: %s", e)
            return False

    def request_enforce(self, room: MediaRoom) -> None:
        """Runs `enforce` for the room soon (at most one pass at a time; a request while one runs
        makes it run once more)."""
        running = self._enforcing.get(room.room)
        if running is not None and not running.done():
            self._enforce_again.add(room.room)
            return

        async def passes() -> None:
            while True:
                self._enforce_again.discard(room.room)
                try:
                    await self.enforce(room)
                except MediaError as e:
                    log.info("roster check of an AudioBridge room failed (%s); the next tick tries again", e)
                if room.room not in self._enforce_again:
                    return

        try:
            self._enforcing[room.room] = asyncio.get_running_loop().create_task(passes())
        except RuntimeError:
            pass  # no event loop (a synchronous caller): the watch task's next tick enforces

    async def enforce(self, room: MediaRoom) -> list[int]:
        """Kicks every participant of the room that is not on its roster: an ID the services did not
        assign to a token allowed now (a client that chose its own, or kept joining after its token
        went), or an assigned ID under another display. Returns the kicked IDs."""
        if room.room not in self._rooms:
            return []
        roster = room.roster()
        kicked: list[int] = []
        listed = await self.participants(room)
        room.kicked &= {p.get("id") for p in listed}  # those Janus took out are done
        for p in listed:
            pid = p.get("id")
            if isinstance(pid, int) and roster.get(pid) == p.get("display"):
                continue
            if isinstance(pid, int) and room.room in self._rooms and await self._kick(room, pid):
                kicked.append(pid)
        intruders = [pid for pid in kicked if pid not in room.kicked]
        room.kicked.update(kicked)
        if intruders:
            self.intruders_kicked += len(intruders)
            log.warning("kicked %d AudioBridge participant(s) the services did not admit", len(intruders))
        return kicked

    async def close_room(self, room: MediaRoom) -> None:
        async with self._rooms_lock:
            await self._close(room)

    async def destroy_orphan(self, room: int, secret: str) -> None:
        """Destroys a room an earlier services process opened (everyone in it is dropped). A room
        Janus no longer has (it restarted meanwhile) is fine. Raises MediaError while Janus cannot be
        asked."""
        try:
            await self.request({"request": "destroy", "secret": secret, "room": room})
        except MediaError as e:
            if "485" not in str(e):  # 485: no such room
                raise

    async def _close(self, room: MediaRoom) -> None:
        self._rooms.pop(room.room, None)
        self._enforce_again.discard(room.room)
        task = self._enforcing.pop(room.room, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        process = self._packagers.pop(room.room, None)
        if process is not None and process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 5)
            except asyncio.TimeoutError:
                process.kill()
        try:
            await self.request({"request": "destroy", "secret": room.secret, "room": room.room})
        except MediaError as e:
            log.warning("AudioBridge destroy failed: %s", e)
        if room.playback_dir:
            shutil.rmtree(room.playback_dir, ignore_errors=True)
