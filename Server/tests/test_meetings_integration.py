"""Meetings against the real dev environment: Synapse rooms and power levels, the services,
and Janus (AudioBridge tokens, kicks, the RTP-forwarded HLS playback stream)."""

from __future__ import annotations

import json
import os
import stat
import time

import httpx
import pytest

from .meetings_helpers import HS, JANUS, SVC, JanusPeer, M, account, create_room, join_room, leave_room, \
    listparticipants

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (HS and SVC and JANUS), reason="SYMORVA_HOMESERVER_URL / SERVICES_URL / JANUS_URL not set"),
]


@pytest.fixture(scope="module")
def http():
    with httpx.Client(timeout=40, trust_env=False) as c:
        yield c


def test_stage_listener_hand_promotion_demotion_and_end_over_janus(http):
    host, bob, carol = account(http), account(http), account(http)
    room = create_room(http, host)
    join_room(http, bob, room)
    join_room(http, carol, room)

    # Capacity 2 (the dev manifest's stageCapacity) : host and Bob on stage, Carol listens.
    j_host = http.post(f"{SVC}{M}/join", headers=host["headers"], json={"room_id": room})
    assert j_host.status_code == 200, j_host.text
    j_host = j_host.json()
    mid = j_host["meeting"]["meeting_id"]
    j_bob = http.post(f"{SVC}{M}/join", headers=bob["headers"], json={"room_id": room}).json()
    j_carol = http.post(f"{SVC}{M}/join", headers=carol["headers"], json={"room_id": room}).json()
    assert (j_host["role"], j_bob["role"], j_carol["role"]) == ("stage", "stage", "listener")
    assert j_carol["media"] is None and j_carol["playback"]["playlist_path"].endswith("live.m3u8")

    peers = [JanusPeer(http, j_host["media"]), JanusPeer(http, j_bob["media"])]
    try:
        for p in peers:
            assert p.join()["audiobridge"] == "joined"
        # The listener's playback stream has live segments.
        playlist = j_carol["playback"]["playlist_path"]
        deadline = time.monotonic() + 15
        text = ""
        while time.monotonic() < deadline:
            r = http.get(f"{SVC}{playlist}", headers=carol["headers"])
            if r.status_code == 200 and ".ts" in r.text:
                text = r.text
                break
            time.sleep(0.3)
        assert "#EXTM3U" in text and "#EXT-X-PROGRAM-DATE-TIME:" in text, text
        segment = [line for line in text.splitlines() if line.endswith(".ts")][-1]
        seg = http.get(f"{SVC}{M}/{mid}/playback/{segment}", headers=carol["headers"])
        assert seg.status_code == 200 and seg.content[:1] == b"\x47"  # MPEG-TS sync byte
        outsider = account(http)
        assert http.get(f"{SVC}{playlist}", headers=outsider["headers"]).json()["errcode"] == "SY_NOT_ROOM_MEMBER"

        # Carol raises her hand; the host's feed shows it.
        cursor = j_host["cursor"]
        assert http.post(f"{SVC}{M}/{mid}/hand", headers=carol["headers"], json={"raised": True}).status_code == 200
        feed = http.get(f"{SVC}{M}/{mid}/changes", headers=host["headers"],
                        params={"since": cursor, "timeout_ms": 5000}).json()
        assert any(c["kind"] == "hand" and c["user_id"] == carol["user_id"] and c["hand_raised"]
                   for c in feed["changes"]), feed
        # A non-host cannot promote; the stage is full anyway until Bob is demoted.
        r = http.post(f"{SVC}{M}/{mid}/promote", headers=bob["headers"], json={"user_id": carol["user_id"]})
        assert r.status_code == 403 and r.json()["errcode"] == "SY_NOT_HOST"
        r = http.post(f"{SVC}{M}/{mid}/promote", headers=host["headers"], json={"user_id": carol["user_id"]})
        assert r.status_code == 409 and r.json()["errcode"] == "SY_STAGE_FULL"

        # Demoting Bob revokes his token at Janus and kicks him.
        r = http.post(f"{SVC}{M}/{mid}/demote", headers=host["headers"], json={"user_id": bob["user_id"]})
        assert r.status_code == 200, r.text
        deadline = time.monotonic() + 5
        while True:  # AudioBridge removes a kicked plain-RTP participant asynchronously
            names = [p.get("display") for p in listparticipants(http, j_host["media"])]
            if bob["user_id"] not in names or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert bob["user_id"] not in names and host["user_id"] in names, names
        again = JanusPeer(http, j_bob["media"])
        try:
            refused = again.join()
            assert refused.get("error_code") == 489, refused  # not in the allowed list
        finally:
            again.close()
        # Bob's token is his own: the host's peer cannot reuse it after Bob is demoted (not with
        # the host's participant ID and display, not with one of its own).
        reuse = JanusPeer(http, j_host["media"])
        try:
            for who in ({}, {"participant_id": 424242, "display": host["user_id"]}):
                refused = reuse.join(j_bob["media"]["token"], **who)
                assert refused.get("error_code") == 489, (who, refused)
        finally:
            reuse.close()

        # The host promotes Carol; her role becomes stage with a working descriptor.
        r = http.post(f"{SVC}{M}/{mid}/promote", headers=host["headers"], json={"user_id": carol["user_id"]})
        assert r.status_code == 200, r.text
        me = http.post(f"{SVC}{M}/{mid}/media", headers=carol["headers"])
        assert me.status_code == 200, me.text
        carol_peer = JanusPeer(http, me.json())
        peers.append(carol_peer)
        assert carol_peer.join()["audiobridge"] == "joined"
        view = http.get(f"{SVC}{M}/{mid}", headers=bob["headers"]).json()
        roles = {p["user_id"]: (p["role"], p["hand_raised"]) for p in view["participants"]}
        assert roles == {host["user_id"]: ("stage", False), bob["user_id"]: ("listener", False),
                         carol["user_id"]: ("stage", False)}

        # Leaving the Matrix room takes Bob out of the meeting at his next request.
        leave_room(http, bob, room)
        r = http.get(f"{SVC}{M}/{mid}/changes", headers=bob["headers"], params={"since": 0})
        assert r.status_code == 403 and r.json()["errcode"] == "SY_NOT_ROOM_MEMBER"
        # Carol leaves; the host ends the meeting for everyone.
        assert http.post(f"{SVC}{M}/{mid}/leave", headers=carol["headers"]).status_code == 200
        view = http.get(f"{SVC}{M}/{mid}", headers=host["headers"]).json()
        assert [p["user_id"] for p in view["participants"]] == [host["user_id"]]
        end = http.post(f"{SVC}{M}/{mid}/end", headers=host["headers"])
        assert end.status_code == 200 and end.json()["meeting"]["status"] == "ended"
        feed = http.get(f"{SVC}{M}/{mid}/changes", headers=carol["headers"], params={"since": view["cursor"]}).json()
        assert [c["kind"] for c in feed["changes"]] == ["ended"] and feed["status"] == "ended"
    finally:
        for p in peers:
            p.close()


def test_broadcast_puts_only_hosts_on_stage_and_checks_power_levels_with_synapse(http):
    owner, cohost, member = account(http), account(http), account(http)
    room = create_room(http, owner, hosts=[cohost])
    join_room(http, cohost, room)
    join_room(http, member, room)
    r = http.post(f"{SVC}{M}/join", headers=member["headers"], json={"room_id": room, "broadcast": True})
    assert r.status_code == 403 and r.json()["errcode"] == "SY_NOT_HOST"
    j = http.post(f"{SVC}{M}/join", headers=cohost["headers"], json={"room_id": room, "broadcast": True}).json()
    assert j["meeting"]["mode"] == "broadcast" and j["role"] == "stage"
    mid = j["meeting"]["meeting_id"]
    assert http.post(f"{SVC}{M}/join", headers=member["headers"], json={"room_id": room}).json()["role"] == "listener"
    # A co-host at power level 50 may end it.
    assert http.post(f"{SVC}{M}/{mid}/end", headers=cohost["headers"]).json()["meeting"]["status"] == "ended"


def test_a_non_member_of_the_room_cannot_join(http):
    owner, stranger = account(http), account(http)
    room = create_room(http, owner)
    r = http.post(f"{SVC}{M}/join", headers=stranger["headers"], json={"room_id": room})
    assert r.status_code == 403 and r.json()["errcode"] == "SY_NOT_ROOM_MEMBER"


@pytest.mark.skipif(not os.environ.get("SYMORVA_STATE_DIR"), reason="SYMORVA_STATE_DIR not set")
def test_the_janus_admin_key_is_private_and_never_logged(http):
    state = os.environ["SYMORVA_STATE_DIR"]
    key_file = os.path.join(state, "janus", "admin_key")
    key = open(key_file, encoding="utf-8").read().strip()
    assert len(key) >= 24 and stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    # A meeting was opened (room created with the key, RTP forwarder added) before the logs are read.
    owner = account(http)
    room = create_room(http, owner)
    j = http.post(f"{SVC}{M}/join", headers=owner["headers"], json={"room_id": room}).json()
    http.post(f"{SVC}{M}/{j['meeting']['meeting_id']}/end", headers=owner["headers"])
    logs = os.path.join(state, "logs")
    for name in os.listdir(logs):
        with open(os.path.join(logs, name), encoding="utf-8", errors="replace") as f:
            assert key not in f.read(), name
    caps = http.get(f"{SVC}/_symorva/v1/capabilities", headers=owner["headers"]).text
    assert key not in caps and key not in json.dumps(j)


def wait_until_gone(http, descriptor: dict, participant_id: int, seconds: float = 5) -> list[dict]:
    """The room's participants once `participant_id` is no longer among them (AudioBridge takes a
    kicked participant out asynchronously); fails after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        listed = listparticipants(http, descriptor)
        if participant_id not in [p.get("id") for p in listed]:
            return listed
        assert time.monotonic() < deadline, f"participant still in the room: {listed}"
        time.sleep(0.1)


def test_a_modified_client_cannot_stay_in_the_audio_under_its_own_id_or_display(http):
    """An adversarial stage member joins with their valid token but a participant ID and display of
    their own choosing (posing as the host): the services kick it at once, and after the member's
    demotion nothing of theirs stays in the room, whatever ID or display it used."""
    host, bob = account(http), account(http)
    room = create_room(http, host)
    join_room(http, bob, room)
    j_host = http.post(f"{SVC}{M}/join", headers=host["headers"], json={"room_id": room}).json()
    j_bob = http.post(f"{SVC}{M}/join", headers=bob["headers"], json={"room_id": room}).json()
    assert (j_host["role"], j_bob["role"]) == ("stage", "stage")
    mid = j_host["meeting"]["meeting_id"]
    honest, posing, renamed = (JanusPeer(http, j) for j in (j_host["media"], j_bob["media"], j_bob["media"]))
    try:
        assert honest.join()["audiobridge"] == "joined"
        chosen = 987654321
        answer = posing.join(participant_id=chosen, display=host["user_id"])
        assert answer.get("audiobridge") == "joined", answer  # Janus itself lets the token in
        listed = wait_until_gone(http, j_host["media"], chosen)
        assert [p["id"] for p in listed if p.get("display") == host["user_id"]] == [j_host["media"]["participant_id"]]

        # With the assigned ID but another display later (configure): kicked too.
        assert renamed.join()["audiobridge"] == "joined"
        assert renamed.configure(display=host["user_id"]).get("result") == "ok"
        wait_until_gone(http, j_host["media"], j_bob["media"]["participant_id"])

        # Back as assigned, then demoted: gone at once.
        again = JanusPeer(http, j_bob["media"])
        try:
            assert again.join()["audiobridge"] == "joined"
            r = http.post(f"{SVC}{M}/{mid}/demote", headers=host["headers"], json={"user_id": bob["user_id"]})
            assert r.status_code == 200, r.text
            listed = wait_until_gone(http, j_host["media"], j_bob["media"]["participant_id"])
            assert bob["user_id"] not in [p.get("display") for p in listed], listed
        finally:
            again.close()
    finally:
        for p in (honest, posing, renamed):
            p.close()
        http.post(f"{SVC}{M}/{mid}/end", headers=host["headers"])


def test_no_stage_member_can_make_janus_stream_to_an_address(http):
    """Rooms allow no plain-RTP participants: a stage member who asks Janus to send the mix to an
    address of their choosing is refused (only the services' own forwarder streams the mix)."""
    host = account(http)
    room = create_room(http, host)
    j = http.post(f"{SVC}{M}/join", headers=host["headers"], json={"room_id": room}).json()
    peer = JanusPeer(http, j["media"])
    try:
        answer = peer.join(rtp=True)
        assert answer.get("audiobridge") != "joined" and answer.get("error_code"), answer
    finally:
        peer.close()
        http.post(f"{SVC}{M}/{j['meeting']['meeting_id']}/end", headers=host["headers"])
