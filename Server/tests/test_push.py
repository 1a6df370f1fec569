"""The reference Push Gateway: notify records per pushkey, rejects unknown pushkeys, is accepted
from the homeserver only, rate limited, runs beside the services' database lock, and keeps
pushkeys out of URLs and logs."""

from __future__ import annotations

import logging
import threading

from symorva_server import push as gateway
from symorva_server.ratelimit import Bucket, profile

from .conftest import assert_error, login

NOTIFY = "/_matrix/push/v1/notify"
P = "/_symorva/v1/push"
APP = "org.symorva.ios.dev"


def notify(client, *pushkeys, body="secret body", app_id=APP):
    return client.post(NOTIFY, json={"notification": {
        "event_id": "$e1", "room_id": "!r:localhost", "type": "m.room.message", "sender": "@bob:localhost",
        "prio": "high", "content": {"msgtype": "m.text", "body": body}, "counts": {"unread": 2},
        "devices": [{"app_id": app_id, "pushkey": k, "pushkey_ts": 1, "data": {}} for k in pushkeys]}})


def register(client, headers, pushkey, app_id=APP):
    return client.post(f"{P}/pushkeys", json={"pushkey": pushkey, "app_id": app_id}, headers=headers)


def recorded(client, headers, pushkey, app_id=APP, after=0):
    return client.post(f"{P}/pushkeys/notifications", json={"pushkey": pushkey, "app_id": app_id, "after": after},
                       headers=headers)


def test_unknown_pushkeys_are_rejected(client):
    r = notify(client, "nobody")
    assert r.status_code == 200, r.text
    assert r.json() == {"rejected": ["nobody"]}


def test_notifications_are_recorded_per_registered_pushkey(client, verifier):
    alice = login(client, verifier, "@alice:localhost")["headers"]
    assert register(client, alice, "key-a").status_code == 200
    assert notify(client, "key-a", "key-x").json() == {"rejected": ["key-x"]}
    r = recorded(client, alice, "key-a")
    assert r.status_code == 200, r.text
    [n] = r.json()["notifications"]
    assert (n["event_id"], n["room_id"], n["sender"], n["unread"], n["prio"]) == \
        ("$e1", "!r:localhost", "@bob:localhost", 2, "high")
    after = n["seq"]
    notify(client, "key-a")
    newer = recorded(client, alice, "key-a", after=after)
    assert len(newer.json()["notifications"]) == 1


def test_message_bodies_are_not_kept(client, verifier):
    alice = login(client, verifier, "@alice:localhost")["headers"]
    register(client, alice, "key-a")
    notify(client, "key-a", body="canary-7c1e")
    rows = client.app.state.ctx.db.query("SELECT notification FROM push_notifications")
    assert rows and all("canary-7c1e" not in r["notification"] for r in rows)


def test_a_removed_pushkey_is_rejected_again(client, verifier):
    alice = login(client, verifier, "@alice:localhost")["headers"]
    register(client, alice, "key-a")
    assert client.post(f"{P}/pushkeys/remove", json={"pushkey": "key-a", "app_id": APP},
                       headers=alice).status_code == 200
    assert notify(client, "key-a").json() == {"rejected": ["key-a"]}


def test_pushkeys_belong_to_their_member(client, verifier):
    alice = login(client, verifier, "@alice:localhost")["headers"]
    bob = login(client, verifier, "@bob:localhost")["headers"]
    register(client, alice, "key-a")
    assert_error(register(client, bob, "key-a"), 409, "SY_FORBIDDEN")
    assert_error(recorded(client, bob, "key-a"), 404, "SY_NOT_FOUND")


def test_the_same_pushkey_under_another_app_is_another_device(client, verifier):
    alice = login(client, verifier, "@alice:localhost")["headers"]
    register(client, alice, "key-a")
    assert notify(client, "key-a", app_id="org.symorva.ios.prod").json() == {"rejected": ["key-a"]}


def test_notify_needs_no_token_but_a_valid_body(client):
    assert_error(client.post(NOTIFY, json={"notification": {}}), 400, "SY_MISSING_PARAM")


def test_notify_is_accepted_only_from_the_homeserver(make_client):
    # The homeserver is http://127.0.0.1:9: notify from any other address is refused.
    c = make_client(**({"push_notify_from": None} if hasattr(gateway, "notify_sources") else {}))
    assert_error(notify(c, "k"), 403, "SY_FORBIDDEN")
    assert c.app.state.ctx.push_notify_from == frozenset({"127.0.0.1"})


def test_notify_is_rate_limited_per_address(make_client):
    limits = profile("high")
    c = make_client(rate_limits=limits.with_override("notify=2/0.001") if hasattr(limits, "notify") else limits)
    assert notify(c, "k").status_code == 200 and notify(c, "k").status_code == 200
    assert_error(notify(c, "k"), 429, "SY_LIMIT_EXCEEDED")
    assert Bucket(2, 0.001).burst == 2


def test_notify_does_not_wait_for_the_services_database_lock(client, verifier):
    alice = login(client, verifier, "@alice:localhost")["headers"]
    register(client, alice, "key-a")
    lock = client.app.state.ctx.db._lock
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # a slow transaction of another request
        with lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(5)
        answered = threading.Event()
        caller = threading.Thread(target=lambda: (notify(client, "key-a"), answered.set()))
        caller.start()
        assert answered.wait(5), "notify waited for the services' database lock"
    finally:
        release.set()
        holder.join(10)
        caller.join(10)


def test_pushkeys_stay_out_of_url_paths_and_logs(client, verifier, caplog):
    canary = "pushkey-canary-5b7d"
    paths = [getattr(r, "path", "") for r in client.app.routes]
    assert not any("{pushkey}" in p for p in paths), paths
    with caplog.at_level(logging.DEBUG):
        alice = login(client, verifier, "@alice:localhost")["headers"]
        assert register(client, alice, canary).status_code == 200
        notify(client, canary)
        assert recorded(client, alice, canary).status_code == 200
        assert client.post(f"{P}/pushkeys/remove", json={"pushkey": canary, "app_id": APP},
                           headers=alice).status_code == 200
    assert canary not in caplog.text


def test_a_member_keeps_a_bounded_number_of_pushkeys(client, verifier):
    alice = login(client, verifier, "@alice:localhost")["headers"]
    bound = getattr(gateway, "MAX_PUSHKEYS_PER_MEMBER", 20)
    for n in range(bound + 3):
        assert register(client, alice, f"key-{n}").status_code == 200
    rows = client.app.state.ctx.db.query("SELECT COUNT(*) AS n FROM push_pushkeys WHERE user_id = ?",
                                         ("@alice:localhost",))
    assert rows[0]["n"] == bound
    # The oldest went: their notifications are rejected (the homeserver drops those pushers).
    assert notify(client, "key-0", f"key-{bound + 2}").json() == {"rejected": ["key-0"]}
