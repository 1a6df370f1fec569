"""The AI studio against the real dev environment: membership asked of the real Synapse (its
admin API, with the dev environment's admin), grants, summaries, revoke, and the audit."""

from __future__ import annotations

import os
import urllib.parse

import httpx
import pytest

from .test_integration_synapse import HS, SVC, openid_token, register

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (HS and SVC), reason="SYMORVA_HOMESERVER_URL / SYMORVA_SERVICES_URL not set"),
]

S = "/_symorva/v1/studio"
CANARY = "studio-canary-51d0e2"


@pytest.fixture(scope="module")
def http():
    with httpx.Client(timeout=60, trust_env=False) as c:
        yield c


def member(http) -> dict:
    account = register(http)
    r = http.post(f"{SVC}/_symorva/v1/auth/openid", json=openid_token(http, account))
    assert r.status_code == 200, r.text
    account["headers"] = {"Authorization": f"Bearer {r.json()['access_token']}"}
    account["matrix"] = {"Authorization": f"Bearer {account['access_token']}"}
    return account


def send(http, account: dict, room_id: str, n: int, body: str) -> dict:
    room = urllib.parse.quote(room_id, safe="")
    r = http.put(f"{HS}/_matrix/client/v3/rooms/{room}/send/m.room.message/t{n}", headers=account["matrix"],
                 json={"msgtype": "m.text", "body": body})
    assert r.status_code == 200, r.text
    return {"event_id": r.json()["event_id"], "sender": account["user_id"], "timestamp": 1_000 + n, "body": body}


def test_grant_summary_and_revoke_with_membership_from_synapse(http):
    alice, outsider = member(http), member(http)
    r = http.post(f"{HS}/_matrix/client/v3/createRoom", headers=alice["matrix"], json={"preset": "private_chat"})
    assert r.status_code == 200, r.text
    room_id = r.json()["room_id"]
    items = [send(http, alice, room_id, n, f"{CANARY} point {n}: the release needs the migration first")
             for n in range(6)]
    selected = {"kind": "selected_messages", "event_ids": [i["event_id"] for i in items[:4]]}

    r = http.post(f"{SVC}{S}/grants", headers=outsider["headers"],
                  json={"room_id": room_id, "scope": selected, "purpose": "summarize"})
    assert r.status_code == 403 and r.json()["errcode"] == "SY_NOT_ROOM_MEMBER", r.text

    r = http.post(f"{SVC}{S}/grants", headers=alice["headers"],
                  json={"room_id": room_id, "scope": selected, "purpose": "summarize"})
    assert r.status_code == 200, r.text
    g = r.json()
    r = http.post(f"{SVC}{S}/summaries", headers=alice["headers"],
                  json={"grant_id": g["grant_id"], "items": items[:4], "max_points": 2})
    assert r.status_code == 200, r.text
    assert set(r.json()["cited_event_ids"]) <= set(selected["event_ids"])
    r = http.post(f"{SVC}{S}/summaries", headers=alice["headers"], json={"grant_id": g["grant_id"], "items": items})
    assert r.status_code == 400 and r.json()["event_id"] == items[4]["event_id"], r.text

    assert http.post(f"{SVC}{S}/grants/{g['grant_id']}/revoke", headers=alice["headers"]).json()["state"] == "revoked"
    r = http.post(f"{SVC}{S}/summaries", headers=alice["headers"], json={"grant_id": g["grant_id"], "items": items[:1]})
    assert r.status_code == 409 and r.json()["errcode"] == "SY_GRANT_REVOKED", r.text

    audit = http.get(f"{SVC}{S}/audit", headers=alice["headers"])
    assert audit.status_code == 200 and CANARY not in audit.text
    assert [e["action"] for e in audit.json()["entries"]] == ["summarize", "revoke", "summarize", "summarize", "grant"]
    log = os.environ.get("SERVICES_LOG")
    if log and os.path.exists(log):
        with open(log, encoding="utf-8", errors="replace") as f:
            assert CANARY not in f.read()
