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

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/_matrix/client/v3/login":
            body = json.loads(request.content)
            self.logins.append(body)
            return httpx.Response(200, json={"access_token": f"tok{len(self.logins)}", "device_id": body.get("device_id")})
        if self.refuse_tokens:
            return httpx.Response(401, json={"errcode": "M_UNKNOWN_TOKEN", "error": "refused"})
        if request.url.path.endswith("/members"):
            return httpx.Response(200, json={"members": ["@alice:localhost"]})
        return httpx.Response(200, json={"state": []})


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
