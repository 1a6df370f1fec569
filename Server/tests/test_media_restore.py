"""`JanusMedia` against a Janus of its own that is stopped and started again: the open rooms are
put back as they were (room ID, allowed tokens without the revoked ones, the RTP forwarder to
the same packager, the relay participant), and the playback stream goes on.

The test runs its own Janus (the dev environment's config writer, a free port, a temporary
folder), so restarting it never disturbs the dev environment's media server."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from symorva_server.modules.meetings.media import RELAY_DISPLAY, JanusMedia, MediaError

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGURE = os.path.join(HERE, "..", "mediaserver", "configure_janus.py")
JANUS = shutil.which("janus")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (JANUS and shutil.which("gst-launch-1.0")),
                       reason="janus and gst-launch-1.0 are installed by Scripts/test"),
]


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OwnJanus:
    """A Janus process on a free port, with the dev environment's configuration."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.port = free_tcp_port()
        self.url = f"http://127.0.0.1:{self.port}/janus"
        self.key_file = os.path.join(folder, "admin_key")
        subprocess.run([sys.executable, CONFIGURE, "--out", folder, "--port", str(self.port),
                        "--admin-key-file", self.key_file, "--debug-level", "3"], check=True)
        self.process: subprocess.Popen | None = None

    @property
    def admin_key(self) -> str:
        with open(self.key_file, encoding="utf-8") as f:
            return f.read().strip()

    def start(self) -> None:
        log = open(os.path.join(self.folder, "janus.log"), "ab")
        self.process = subprocess.Popen([JANUS, "-C", os.path.join(self.folder, "janus.jcfg"), "-F", self.folder,
                                         "-o"], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/info", timeout=1, trust_env=False).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert self.process.poll() is None, "janus exited while starting"
            time.sleep(0.1)
        raise AssertionError("janus did not answer in 30 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


@pytest.fixture()
def janus(tmp_path):
    j = OwnJanus(str(tmp_path / "janus"))
    j.start()
    yield j
    j.stop()


class RTPPeer:
    """An AudioBridge participant without media on its own Janus session (what a member's engine
    joins with before its WebRTC offer)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.AsyncClient(timeout=40, trust_env=False)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))

    async def _post(self, path: str, body: dict) -> dict:
        r = await self.http.post(f"{self.url}{path}", json={**body, "transaction": secrets.token_hex(6)})
        return r.json()

    async def join(self, room: int, token: str, participant_id: int | None = None) -> dict:
        session = (await self._post("", {"janus": "create"}))["data"]["id"]
        handle = (await self._post(f"/{session}", {"janus": "attach",
                                                    "plugin": "janus.plugin.audiobridge"}))["data"]["id"]
        ack = await self._post(f"/{session}/{handle}", {"janus": "message", "body": {
            "request": "join", "room": room, "token": token, "display": "member",
            **({"id": participant_id} if participant_id else {})}})
        deadline = time.monotonic() + 20
        try:
            while time.monotonic() < deadline:
                events = (await self.http.get(f"{self.url}/{session}", params={"maxev": 5})).json()
                for e in events if isinstance(events, list) else [events]:
                    if e.get("transaction") == ack["transaction"]:
                        return e["plugindata"]["data"]
            raise AssertionError("no answer to the AudioBridge join")
        finally:
            await self._post(f"/{session}", {"janus": "destroy"})

    async def close(self) -> None:
        await self.http.aclose()
        self.sock.close()


async def wait_for(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = await predicate()
        if value:
            return value
        await asyncio.sleep(0.2)
    raise AssertionError(f"{what}: not within {seconds} s")


def media_sequence(folder: str) -> int:
    try:
        with open(os.path.join(folder, "live.m3u8"), encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return -1
    m = re.search(r"#EXT-X-MEDIA-SEQUENCE:(\d+)", text)
    segments = text.count(".ts")
    return (int(m.group(1)) if m else 0) + segments


def test_rooms_come_back_after_janus_restarts(janus, tmp_path):
    async def run() -> None:
        media = JanusMedia(janus.url, janus.admin_key, str(tmp_path / "media"), watch_interval_s=0.2)
        peer = RTPPeer(janus.url)
        room = await media.open_room("mt_restore")
        try:
            kept, revoked, revoked_while_down = (secrets.token_urlsafe(16) for _ in range(3))
            for n, token in enumerate((kept, revoked, revoked_while_down), start=1):
                await media.allow(room, token, n, "member")
            await media.revoke(room, revoked)
            assert (await peer.join(room.room, kept, 1))["audiobridge"] == "joined"
            assert (await peer.join(room.room, revoked, 2)).get("error_code") in (489, 490)

            await wait_for(lambda: asyncio.sleep(0, media_sequence(room.playback_dir) > 0), 20, "first segment")

            janus.stop()
            # A revoke while Janus is down fails, and the token is never allowed again.
            with pytest.raises(MediaError):
                await media.revoke(room, revoked_while_down)
            janus.start()
            await wait_for(lambda: asyncio.sleep(0, media.restores >= 1), 20, "rooms put back")
            segments_after_restore = media_sequence(room.playback_dir)

            exists = await media.request({"request": "exists", "room": room.room})
            assert exists["exists"] is True
            assert (await peer.join(room.room, kept, 1))["audiobridge"] == "joined"
            for token in (revoked, revoked_while_down):
                answer = await peer.join(room.room, token)
                assert answer.get("error_code") in (489, 490), answer
            displays = [p.get("display") for p in await media.participants(room)]
            assert displays.count(RELAY_DISPLAY) == 1, displays
            assert await media._forwarding(room)
            # The packager kept running: the mix of the new Janus reaches the playlist again.
            await wait_for(lambda: asyncio.sleep(0, media_sequence(room.playback_dir) > segments_after_restore + 1),
                           20, "new segments after the restart")
        finally:
            await media.close_room(room)
            await peer.close()

    asyncio.run(run())


def test_a_lost_control_session_gets_the_relay_back(janus, tmp_path):
    """Janus keeps the room but the services' control session is gone (destroyed here, as a
    session timeout would): the relay participant, which keeps the mixer running, comes back."""

    async def run() -> None:
        media = JanusMedia(janus.url, janus.admin_key, str(tmp_path / "media"), watch_interval_s=0.2)
        room = await media.open_room("mt_session")
        try:
            session = media._session
            async with httpx.AsyncClient(trust_env=False) as http:
                await http.post(f"{janus.url}/{session}", json={"janus": "destroy", "transaction": "t"})
            await wait_for(lambda: asyncio.sleep(0, media.restores >= 1), 20, "relay back")
            displays = [p.get("display") for p in await media.participants(room)]
            assert displays.count(RELAY_DISPLAY) == 1, displays
            forwarders = await media.request({"request": "listforwarders", "secret": room.secret, "room": room.room})
            assert len(forwarders["rtp_forwarders"]) == 1, forwarders
        finally:
            await media.close_room(room)

    asyncio.run(run())


def test_a_restarted_services_process_destroys_the_room_the_earlier_one_left(janus, tmp_path):
    """The services process that opened a room is gone (its JanusMedia with it); a new one, knowing
    only the room's ID and secret (what the meetings module persists), destroys it: nobody stays
    connected to a room nobody can kick from any more."""

    async def run() -> None:
        earlier = JanusMedia(janus.url, janus.admin_key, str(tmp_path / "media1"), watch_interval_s=0.2)
        room = await earlier.open_room("mt_orphan")
        token = secrets.token_urlsafe(16)
        await earlier.allow(room, token, 7, "member")
        peer = RTPPeer(janus.url)
        try:
            assert (await peer.join(room.room, token, 7))["audiobridge"] == "joined"
            # The earlier process dies without closing anything (its packager with it).
            for task in (earlier._watch, earlier._events):
                if task is not None:
                    task.cancel()
            process = earlier._packagers.pop(room.room, None)
            if process is not None:
                process.kill()
            later = JanusMedia(janus.url, janus.admin_key, str(tmp_path / "media2"), watch_interval_s=0.2)
            assert (await later.request({"request": "exists", "room": room.room}))["exists"] is True
            await later.destroy_orphan(room.room, room.secret)
            assert (await later.request({"request": "exists", "room": room.room}))["exists"] is False
            await later.destroy_orphan(room.room, room.secret)  # already gone: fine
        finally:
            await peer.close()

    asyncio.run(run())
