from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from symorva_server.app import create_app  # noqa: E402
from symorva_server.auth import OpenIdIdentity, OpenIdVerificationError  # noqa: E402
from symorva_server.config import Settings, default_manifest  # noqa: E402
from symorva_server.ratelimit import profile  # noqa: E402

SERVER_NAME = "localhost"
HOMESERVER = "http://127.0.0.1:9"


class FakeVerifier:
    """Stands in for the homeserver's OpenID userinfo endpoint."""

    def __init__(self) -> None:
        self.tokens: dict[str, str] = {}
        self.devices: dict[str, str] = {}  # token -> device ID the "homeserver" names
        self.unavailable = False
        self.calls: list[str] = []

    def issue(self, user_id: str) -> str:
        token = f"oid-{len(self.tokens)}-{user_id}"
        self.tokens[token] = user_id
        return token

    async def verify(self, openid_token: str) -> str | OpenIdIdentity:
        self.calls.append(openid_token)
        if self.unavailable:
            raise OpenIdVerificationError("connection refused", invalid=False)
        try:
            user_id = self.tokens[openid_token]
        except KeyError:
            raise OpenIdVerificationError("unknown", invalid=True) from None
        device_id = self.devices.get(openid_token)
        return OpenIdIdentity(user_id, device_id) if device_id else user_id


class FakeClock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def verifier() -> FakeVerifier:
    return FakeVerifier()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_client(verifier, clock, tmp_path):
    clients = []

    def _make(test_mode: bool = False, manifest=None, **settings_kw) -> TestClient:
        # The fake clock stands still, so buckets never refill: tests that are not about rate
        # limits run with the "high" profile, like the dev environment (test_ratelimit.py
        # passes its own).
        settings_kw.setdefault("rate_limits", profile("high"))
        # The push gateway accepts notify from the homeserver only; here the test client plays it.
        if "push_notify_from" in Settings.__dataclass_fields__:
            settings_kw.setdefault("push_notify_from", ("testclient",))
        settings = Settings(homeserver_url=HOMESERVER, server_name=SERVER_NAME,
                            db_path=str(tmp_path / f"services{len(clients)}.db"),
                            test_mode=test_mode, **settings_kw)
        if manifest is None:
            manifest = default_manifest(HOMESERVER, SERVER_NAME, "http://127.0.0.1:9")
        app = create_app(settings, verifier=verifier, clock=clock, manifest=manifest)
        c = TestClient(app, base_url="http://127.0.0.1:9")
        clients.append(c)
        return c

    yield _make
    for c in clients:
        c.close()
        c.app.state.ctx.db.close()


@pytest.fixture
def client(make_client) -> TestClient:
    return make_client()


@pytest.fixture
def test_client(make_client) -> TestClient:
    return make_client(test_mode=True)


def login(client: TestClient, verifier: FakeVerifier, user_id: str = "@alice:localhost") -> dict:
    r = client.post("/_symorva/v1/auth/openid", json={
        "access_token": verifier.issue(user_id),
        "matrix_server_name": SERVER_NAME,
        "expires_in": 3600,
        "token_type": "Bearer",
    })
    assert r.status_code == 200, r.text
    body = r.json()
    body["headers"] = {"Authorization": f"Bearer {body['access_token']}"}
    return body


def assert_error(resp, status: int, errcode: str) -> dict:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert body["errcode"] == errcode, body
    assert isinstance(body["error"], str) and body["error"]
    return body
