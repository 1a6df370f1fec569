"""The media server side of meetings: Janus AudioBridge rooms, member tokens, and the
listeners' HLS playback stream.

`JanusMedia` talks to Janus's HTTP API (one long-lived control session with keepalives):

- `open_room` creates an AudioBridge room (with the plugin's admin key, a random room
  secret, an `allowed` token list enabled and plain-RTP participants allowed), starts the
  HLS packager (`gst-launch-1.0`: udpsrc → jitter buffer → Opus depay/decode → AAC →
  `hlssink2`, 1 s segments) on a free loopback UDP port, RTP-forwards the room's mix to it
  and joins the room itself as a muted plain-RTP participant ("symorva-playback"), because
  AudioBridge mixes (and forwards) only while the room has a participant.
- `allow` / `revoke` add and remove a member's token in the room's `allowed` list;
  `kick` removes the member's AudioBridge participant (by the participant ID of their
  descriptor, and any participant whose display is their user ID).
- `close_room` stops the packager and destroys the room.

Janus keeps its rooms in memory only. A watch task asks the control session every second
(`keepalive`); when Janus answers that the session is gone (it restarted, or the session
timed out) or cannot be reached and then answers again, `restore` puts every open room back
as it was: the same room ID and secret, the `allowed` list with the relay token and every
member token currently allowed (a revoked token is never put back), the RTP forwarder to the
same packager port (the packager keeps running, so the playlist goes on), and the relay
participant. Members' media sessions reconnect with the token they have; no new admission.

The admin key and the room secrets stay in this process; nothing here logs a token.
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
    # The members' tokens the room allows now (what a restored room allows again).
    allowed: set[str] = field(default_factory=set)
    # The packager's UDP port, where the room's mix is RTP-forwarded.
    forward_port: int | None = None
    description: str = ""
    extra: dict = field(default_factory=dict)


class MediaBackend(Protocol):
    public_url: str

    async def open_room(self, meeting_id: str) -> MediaRoom: ...
    async def allow(self, room: MediaRoom, token: str) -> None: ...
    async def revoke(self, room: MediaRoom, token: str) -> None: ...
    async def kick(self, room: MediaRoom, user_id: str, participant_id: int) -> None: ...
    async def close_room(self, room: MediaRoom) -> None: ...


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
                         relay_token=secrets.token_urlsafe(18), description=f"meeting {meeting_id}")
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
                            "allowed": allowed, "allow_rtp_participants": True,
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
        """Joins the room as the muted plain-RTP participant that keeps its mixer running, on a
        new handle of the control session."""
        session, _ = await self._control()
        relay = await self._attach(session)
        room.extra["relay_handle"] = relay
        await self._async_request(relay, {"request": "join", "room": room.room, "token": room.relay_token,
                                          "display": RELAY_DISPLAY, "muted": True,
                                          "rtp": {"ip": "127.0.0.1", "port": free_udp_port(),
                                                  "payload_type": OPUS_PT}})

    async def allow(self, room: MediaRoom, token: str) -> None:
        async with self._rooms_lock:
            await self.request({"request": "allowed", "secret": room.secret, "room": room.room,
                                "action": "add", "allowed": [token]})
            room.allowed.add(token)

    async def revoke(self, room: MediaRoom, token: str) -> None:
        async with self._rooms_lock:
            # Forgotten first: a room put back after a failed request never allows it again.
            room.allowed.discard(token)
            await self.request({"request": "allowed", "secret": room.secret, "room": room.room,
                                "action": "remove", "allowed": [token]})

    async def participants(self, room: MediaRoom) -> list[dict]:
        return (await self.request({"request": "listparticipants", "room": room.room})).get("participants", [])

    async def kick(self, room: MediaRoom, user_id: str, participant_id: int) -> None:
        ids = {p["id"] for p in await self.participants(room)
               if p.get("id") == participant_id or p.get("display") == user_id}
        for pid in ids:
            try:
                await self.request({"request": "kick", "secret": room.secret, "room": room.room, "id": pid})
            except MediaError as e:
                log.warning("kick of an AudioBridge participant failed: %s", e)

    async def close_room(self, room: MediaRoom) -> None:
        async with self._rooms_lock:
            await self._close(room)

    async def _close(self, room: MediaRoom) -> None:
        self._rooms.pop(room.room, None)
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
