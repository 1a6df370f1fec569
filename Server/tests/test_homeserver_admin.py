"""The services' homeserver admin session (homeserver_admin.SynapseAdmin): a refused admin token
does not make the services log the admin in on every request, and every login names the same
device (a new login replaces that device's token instead of creating a device)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from symorva_server.modules.ai_studio.membership import MembershipUnavailable, SynapseAdminMembership
from symorva_server.modules.meetings.rooms import RoomLookupError, SynapseRoomDirectory


class Homeserver:
    """Stands in for Synapse's login and admin endpoints (a unit test: no server runs)."""

    def __init__(self, refuse_tokens: bool) -> None:
        self.refuse_tokens = refuse_tokens
        self.logins: list[dict] = []
        self.requests: list[str] = []  # admin API paths, with `?type=` when asked

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/_matrix/client/v3/login":
            body = json.loads(request.content)
            self.logins.append(body)
            return httpx.Response(200, json={"access_token": f"tok{len(self.logins)}", "device_id": body.get("device_id")})
        if self.refuse_tokens:
            return httpx.Response(401, json={"errcode": "M_UNKNOWN_TOKEN", "error": "refused"})
        kind = request.url.params.get("type")
        self.requests.append(request.url.path + (f"?type={kind}" if kind else ""))
        if request.url.path.endswith("/members"):
            return httpx.Response(200, json={"members": ["@alice:localhost", "@host:localhost"], "total": 2})
        state = [
            {"type": "m.room.create", "state_key": "", "sender": "@host:localhost", "content": {"room_version": "10"}},
            {"type": "m.room.power_levels", "state_key": "", "content": {"users": {"@host:localhost": 100}}},
            {"type": "m.room.member", "state_key": "@alice:localhost", "content": {"membership": "join"}},
            {"type": "m.room.member", "state_key": "@host:localhost", "content": {"membership": "join"}},
            {"type": "m.room.member", "state_key": "@gone:localhost", "content": {"membership": "leave"}},
        ]
        return httpx.Response(200, json={"state": [e for e in state if kind is None or e["type"] == kind]})


@pytest.fixture
def homeserver(monkeypatch):
    """Every HTTP client the services make talks to this stand-in."""
    hs = Homeserver(refuse_tokens=False)
    real = httpx.AsyncClient

    def client(*args, **kwargs):
        kwargs["transport"] = httpx.MockTransport(hs.handle)
        return real(*args, **kwargs)

    monkeypatch.setattr(httpx, "AsyncClient", client)
    return hs


@pytest.fixture
def admin_file(tmp_path):
    path = tmp_path / "admin.json"
    path.write_text(json.dumps({"userId": "@admin:localhost", "password": "pw"}))
    return str(path)


def test_a_refused_admin_token_does_not_log_in_on_every_request(admin_file, homeserver):
    hs = homeserver
    hs.refuse_tokens = True
    rooms = SynapseRoomDirectory("http://hs.test", admin_file)
    studio = SynapseAdminMembership("http://hs.test", admin_file)

    async def run() -> None:
        for _ in range(5):
            with pytest.raises(RoomLookupError):
                await rooms.room_state("!r:localhost")
            with pytest.raises(MembershipUnavailable):
                await studio.is_joined("!r:localhost", "@alice:localhost")

    asyncio.run(run())
    # One login per component, not one per request.
    assert len(hs.logins) == 2, hs.logins


def test_every_admin_login_names_the_components_device(admin_file, homeserver):
    hs = homeserver
    rooms = SynapseRoomDirectory("http://hs.test", admin_file)
    studio = SynapseAdminMembership("http://hs.test", admin_file)

    async def run() -> None:
        await rooms.room_state("!r:localhost")
        assert await studio.is_joined("!r:localhost", "@alice:localhost")
        hs.refuse_tokens = True  # the tokens expire: each logs in again, to the same device
        with pytest.raises(RoomLookupError):
            await rooms.room_state("!r:localhost")

    asyncio.run(run())
    assert [login.get("device_id") for login in hs.logins] == ["SYMORVA_MEETINGS", "SYMORVA_STUDIO",
                                                              "SYMORVA_MEETINGS"]


def test_a_meeting_request_asks_for_what_it_needs_not_the_rooms_full_state(admin_file, homeserver):
    rooms = SynapseRoomDirectory("http://hs.test", admin_file)

    async def run() -> None:
        for _ in range(3):
            state = await rooms.room_state("!r:localhost")
            assert state.is_member("@alice:localhost") and not state.is_member("@gone:localhost")
            assert state.power_level("@host:localhost") == 100 and state.power_level("@alice:localhost") == 0

    asyncio.run(run())
    state_path = "/_synapse/admin/v1/rooms/!r:localhost/state"
    assert state_path not in homeserver.requests, homeserver.requests  # never the full state
    assert homeserver.requests.count(state_path + "?type=m.room.create") == 1  # immutable: asked once
