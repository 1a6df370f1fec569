"""Against the real dev environment (Synapse + this server as started by
Scripts/dev-server). Skipped unless SYMORVA_HOMESERVER_URL and SYMORVA_SERVICES_URL
are set; Scripts/server-test sets them from the dev env file."""

from __future__ import annotations

import json
import os
import re
import secrets
import urllib.parse

import httpx
import pytest

HS = os.environ.get("SYMORVA_HOMESERVER_URL")
SVC = os.environ.get("SYMORVA_SERVICES_URL")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (HS and SVC), reason="SYMORVA_HOMESERVER_URL / SYMORVA_SERVICES_URL not set "
                                                "(run Scripts/server-test, or source the dev env file)"),
]

SERVER_NAME = os.environ.get("SYMORVA_SERVER_NAME", "localhost")


@pytest.fixture(scope="module")
def http():
    with httpx.Client(timeout=30, trust_env=False) as c:
        yield c


def register(http: httpx.Client) -> dict:
    username = "it_" + secrets.token_hex(6)
    r = http.post(f"{HS}/_matrix/client/v3/register", json={
        "username": username, "password": secrets.token_urlsafe(16),
        "auth": {"type": "m.login.dummy"}, "refresh_token": True,
        "initial_device_display_name": "server-test",
    })
    assert r.status_code == 200, r.text
    return r.json()


def openid_token(http: httpx.Client, account: dict) -> dict:
    user = urllib.parse.quote(account["user_id"], safe="")
    r = http.post(f"{HS}/_matrix/client/v3/user/{user}/openid/request_token", json={},
                  headers={"Authorization": f"Bearer {account['access_token']}"})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def member(http) -> dict:
    account = register(http)
    r = http.post(f"{SVC}/_symorva/v1/auth/openid", json=openid_token(http, account))
    assert r.status_code == 200, r.text
    session = r.json()
    assert session["user_id"] == account["user_id"]
    account["services_token"] = session["access_token"]
    account["headers"] = {"Authorization": f"Bearer {session['access_token']}"}
    return account


def test_both_servers_answer(http):
    assert http.get(f"{HS}/_matrix/client/versions").status_code == 200
    health = http.get(f"{SVC}/_symorva/v1/health").json()
    assert health["status"] == "ok"
    assert health["test_mode"] == (os.environ.get("SYMORVA_TEST_MODE") == "1")
    d = http.get(f"{SVC}/.well-known/symorva").json()
    assert d["homeserver"] == {"base_url": HS, "server_name": SERVER_NAME}
    assert d["services"]["base_url"] == SVC


def test_registration_gives_refresh_token_with_configured_lifetime(http):
    account = register(http)
    assert account["refresh_token"]
    lifetime = os.environ.get("SYMORVA_ACCESS_TOKEN_LIFETIME", "5m")
    m = re.fullmatch(r"(\d+)(ms|s|m|h)?", lifetime)
    scale = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, None: 1}[m.group(2)]
    expected = int(m.group(1)) * scale
    assert expected - 10_000 < account["expires_in_ms"] <= expected


def test_openid_exchange_and_whoami(http, member):
    r = http.get(f"{SVC}/_symorva/v1/whoami", headers=member["headers"])
    assert r.status_code == 200
    assert r.json()["user_id"] == member["user_id"]


def test_forged_openid_token_is_rejected_by_synapse(http):
    r = http.post(f"{SVC}/_symorva/v1/auth/openid",
                  json={"access_token": "forged-" + secrets.token_hex(8), "matrix_server_name": SERVER_NAME})
    assert r.status_code == 401 and r.json()["errcode"] == "SY_UNKNOWN_TOKEN"


def test_matrix_access_token_is_not_an_openid_token(http, member):
    r = http.post(f"{SVC}/_symorva/v1/auth/openid",
                  json={"access_token": member["access_token"], "matrix_server_name": SERVER_NAME})
    assert r.status_code == 401 and r.json()["errcode"] == "SY_UNKNOWN_TOKEN"


def test_foreign_server_is_rejected(http, member):
    token = openid_token(http, member)
    token["matrix_server_name"] = "matrix.example.org"
    r = http.post(f"{SVC}/_symorva/v1/auth/openid", json=token)
    assert r.status_code == 401 and r.json()["errcode"] == "SY_FORBIDDEN"


def test_synapse_userinfo_names_no_device(http):
    # Why services tokens are bound to a device the client declares: Synapse's userinfo
    # answers only the user (Matrix spec: `sub`).
    account = register(http)
    token = openid_token(http, account)
    r = http.get(f"{HS}/_matrix/federation/v1/openid/userinfo", params={"access_token": token["access_token"]})
    assert r.status_code == 200 and r.json() == {"sub": account["user_id"]}


def test_logout_revokes_the_devices_services_tokens(http):
    account = register(http)
    sessions = []
    for _ in range(2):
        body = {**openid_token(http, account), "device_id": account["device_id"]}
        r = http.post(f"{SVC}/_symorva/v1/auth/openid", json=body)
        assert r.status_code == 200, r.text
        sessions.append({"Authorization": f"Bearer {r.json()['access_token']}"})
    r = http.post(f"{SVC}/_symorva/v1/auth/logout", headers=sessions[0])
    assert r.status_code == 200 and r.json() == {"revoked": 2}
    for headers in sessions:
        r = http.get(f"{SVC}/_symorva/v1/whoami", headers=headers)
        assert r.status_code == 401 and r.json()["errcode"] == "SY_UNKNOWN_TOKEN"


def test_forged_services_token(http):
    r = http.get(f"{SVC}/_symorva/v1/whoami", headers={"Authorization": "Bearer sy_forged"})
    assert r.status_code == 401 and r.json()["errcode"] == "SY_UNKNOWN_TOKEN"
    r = http.get(f"{SVC}/_symorva/v1/capabilities")
    assert r.status_code == 401 and r.json()["errcode"] == "SY_MISSING_TOKEN"


def test_capabilities_match_manifest(http, member):
    caps = http.get(f"{SVC}/_symorva/v1/capabilities", headers=member["headers"]).json()
    manifest_path = os.environ.get("SYMORVA_MANIFEST")
    if manifest_path:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
        assert caps["community"] == manifest["community"]
        assert manifest["homeserver"]["url"] == HS
        assert manifest["services"]["url"] == SVC
        for name, entry in manifest["modules"].items():
            assert caps["modules"][name]["enabled"] == entry["enabled"]
    assert len(caps["modules"]["wallet"]["sealing_key"]["public_key"]) == 44


def test_admin_credentials_from_env(http):
    user, password = os.environ.get("SYMORVA_ADMIN_USER"), os.environ.get("SYMORVA_ADMIN_PASSWORD")
    if not (user and password):
        pytest.skip("admin credentials not in the environment")
    r = http.post(f"{HS}/_matrix/client/v3/login", json={
        "type": "m.login.password", "identifier": {"type": "m.id.user", "user": user}, "password": password})
    assert r.status_code == 200, r.text
    token = r.json()["access_token"]
    quoted = urllib.parse.quote(user, safe="")
    r = http.get(f"{HS}/_synapse/admin/v1/users/{quoted}/admin", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200 and r.json() == {"admin": True}


def test_fault_injection_matches_mode(http, member):
    faults = f"{SVC}/_symorva/v1/test/faults"
    if os.environ.get("SYMORVA_TEST_MODE") != "1":
        r = http.get(faults, headers=member["headers"])
        assert r.status_code == 404 and r.json()["errcode"] == "SY_NOT_FOUND"
        return
    key = "it-" + secrets.token_hex(4)
    r = http.post(faults, headers=member["headers"], json={
        "path_prefix": f"/_symorva/v1/test/kv/{key}", "mode": "commit_then_drop"})
    assert r.status_code == 200, r.text
    with pytest.raises(httpx.RemoteProtocolError):
        http.put(f"{SVC}/_symorva/v1/test/kv/{key}", headers=member["headers"], json={"value": "x"})
    r = http.get(f"{SVC}/_symorva/v1/test/kv/{key}", headers=member["headers"])
    assert r.json()["writes"] == 1


def test_the_admin_credits_a_newcomer_in_the_dev_environment(http):
    # The dev manifest is development with the Synapse admin as the community's admin.
    user, password = os.environ.get("SYMORVA_ADMIN_USER"), os.environ.get("SYMORVA_ADMIN_PASSWORD")
    if not (user and password):
        pytest.skip("admin credentials not in the environment")
    r = http.post(f"{HS}/_matrix/client/v3/login", json={
        "type": "m.login.password", "identifier": {"type": "m.id.user", "user": user}, "password": password})
    assert r.status_code == 200, r.text
    admin = r.json()
    r = http.post(f"{SVC}/_symorva/v1/auth/openid", json=openid_token(http, admin))
    assert r.status_code == 200, r.text
    admin_headers = {"Authorization": f"Bearer {r.json()['access_token']}"}
    newcomer = register(http)
    r = http.post(f"{SVC}/_symorva/v1/wallet/admin/credit", headers=admin_headers,
                  json={"user_id": newcomer["user_id"], "asset": "ORB", "amount": "25.00"})
    assert r.status_code == 200, r.text
    assert r.json()["balance"] == "25.00"
