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


def test_items_are_bound_to_the_grants_room_by_the_homeserver_and_membership_is_checked_on_use(http):
    """"Conversation since" is checked with Synapse, not with what the client says: an item of
    another room (however late its claimed timestamp), an earlier message with a forged timestamp,
    and anything after the member left the room are refused."""
    alice = member(http)
    rooms = []
    for _ in range(2):
        r = http.post(f"{HS}/_matrix/client/v3/createRoom", headers=alice["matrix"],
                      json={"preset": "private_chat"})
        assert r.status_code == 200, r.text
        rooms.append(r.json()["room_id"])
    here, elsewhere = rooms
    items = [send(http, alice, here, n, f"point {n}: the release needs the migration first") for n in range(4)]
    other = send(http, alice, elsewhere, 9, "a message of another conversation")
    scope = {"kind": "conversation_since", "since_event_id": items[1]["event_id"], "since_ts": 1_001}
    r = http.post(f"{SVC}{S}/grants", headers=alice["headers"],
                  json={"room_id": here, "scope": scope, "purpose": "summarize"})
    assert r.status_code == 200, r.text
    g = r.json()["grant_id"]

    def summarize(batch):
        return http.post(f"{SVC}{S}/summaries", headers=alice["headers"], json={"grant_id": g, "items": batch})

    assert summarize(items[1:]).status_code == 200
    late = 10**13
    r = summarize([items[2], {**other, "timestamp": late}])
    assert r.status_code == 400 and r.json()["errcode"] == "SY_OUT_OF_SCOPE", r.text
    assert r.json()["event_id"] == other["event_id"]
    r = summarize([{**items[0], "timestamp": late}])  # before the grant's first message, whatever it claims
    assert r.status_code == 400 and r.json()["event_id"] == items[0]["event_id"], r.text

    r = http.post(f"{HS}/_matrix/client/v3/rooms/{urllib.parse.quote(here, safe='')}/leave", headers=alice["matrix"],
                  json={})
    assert r.status_code == 200, r.text
    r = summarize(items[2:])
    assert r.status_code == 403 and r.json()["errcode"] == "SY_NOT_ROOM_MEMBER", r.text
