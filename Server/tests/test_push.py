"""The reference Push Gateway: notify records per pushkey, rejects unknown pushkeys."""

from __future__ import annotations

from .conftest import assert_error, login

NOTIFY = "/_matrix/push/v1/notify"
P = "/_symorva/v1/push"
APP = "org.symorva.ios.dev"


def notify(client, *pushkeys, body="secret body", app_id=APP):
    return client.post(NOTIFY, json={"notification": {
        "event_id": "$e1", "room_id": "!r:localhost", "type": "m.room.message", "sender": "@bob:localhost",
        "prio": "high", "content": {"msgtype": "m.text", "body": body}, "counts": {"unread": 2},
        "devices": [{"app_id": app_id, "pushkey": k, "pushkey_ts": 1, "data": {}} for k in pushkeys]}})


def test_unknown_pushkeys_are_rejected(client):
    r = notify(client, "nobody")
    assert r.status_code == 200, r.text
    assert r.json() == {"rejected": ["nobody"]}


def test_notifications_are_recorded_per_registered_pushkey(client, verifier):
    alice = login(client, verifier, "@alice:localhost")["headers"]
    assert client.put(f"{P}/pushkeys/key-a", json={"app_id": APP}, headers=alice).status_code == 200
    assert notify(client, "key-a", "key-x").json() == {"rejected": ["key-x"]}
    r = client.get(f"{P}/pushkeys/key-a/notifications", params={"app_id": APP}, headers=alice)
    assert r.status_code == 200, r.text
    [n] = r.json()["notifications"]
    assert (n["event_id"], n["room_id"], n["sender"], n["unread"], n["prio"]) == \
        ("$e1", "!r:localhost", "@bob:localhost", 2, "high")
    after = n["seq"]
    notify(client, "key-a")
    newer = client.get(f"{P}/pushkeys/key-a/notifications", params={"app_id": APP, "after": after}, headers=alice)
    assert len(newer.json()["notifications"]) == 1


def test_message_bodies_are_not_kept(client, verifier):
    alice = login(client, verifier, "@alice:localhost")["headers"]
    client.put(f"{P}/pushkeys/key-a", json={"app_id": APP}, headers=alice)
    notify(client, "key-a", body="canary-7c1e")
    rows = client.app.state.ctx.db.query("SELECT notification FROM push_notifications")
    assert rows and all("canary-7c1e" not in r["notification"] for r in rows)


def test_a_removed_pushkey_is_rejected_again(client, verifier):
    alice = login(client, verifier, "@alice:localhost")["headers"]
    client.put(f"{P}/pushkeys/key-a", json={"app_id": APP}, headers=alice)
    assert client.delete(f"{P}/pushkeys/key-a", params={"app_id": APP}, headers=alice).status_code == 200
    assert notify(client, "key-a").json() == {"rejected": ["key-a"]}


def test_pushkeys_belong_to_their_member(client, verifier):
    alice = login(client, verifier, "@alice:localhost")["headers"]
    bob = login(client, verifier, "@bob:localhost")["headers"]
    client.put(f"{P}/pushkeys/key-a", json={"app_id": APP}, headers=alice)
    assert_error(client.put(f"{P}/pushkeys/key-a", json={"app_id": APP}, headers=bob), 409, "SY_FORBIDDEN")
    assert_error(client.get(f"{P}/pushkeys/key-a/notifications", params={"app_id": APP}, headers=bob), 404,
                 "SY_NOT_FOUND")


def test_the_same_pushkey_under_another_app_is_another_device(client, verifier):
    alice = login(client, verifier, "@alice:localhost")["headers"]
    client.put(f"{P}/pushkeys/key-a", json={"app_id": APP}, headers=alice)
    assert notify(client, "key-a", app_id="org.symorva.ios.prod").json() == {"rejected": ["key-a"]}


def test_notify_needs_no_token_but_a_valid_body(client):
    assert_error(client.post(NOTIFY, json={"notification": {}}), 400, "SY_MISSING_PARAM")
