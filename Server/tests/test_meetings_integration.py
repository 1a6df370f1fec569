"""Meetings against the real dev environment: Synapse rooms and power levels, the services,
and Janus (AudioBridge tokens, kicks, the RTP-forwarded HLS playback stream)."""

from __future__ import annotations

import json
import os
import stat
import time

import httpx
import pytest

from .meetings_helpers import HS, JANUS, SVC, JanusPeer, M, account, connect, create_room, join_room, \
    leave_room, listparticipants

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

    assert "token" not in json.dumps([j_host, j_bob, j_carol])  # the services keep the tokens
    peers = []
    try:
        # The services join each stage member to the AudioBridge room as the participant they assigned.
        for member, j in ((host, j_host), (bob, j_bob)):
            c = connect(http, member, mid)
            assert c.status_code == 200, c.text
            assert (c.json()["participant_id"], c.json()["display"]) == (j["media"]["participant_id"], member["user_id"])
            peers.append(JanusPeer.connected(http, c.json()))
        listed = {p["id"]: p.get("display") for p in listparticipants(http, j_host["media"])}
        assert listed[j_host["media"]["participant_id"]] == host["user_id"]
        assert listed[j_bob["media"]["participant_id"]] == bob["user_id"]
        # A listener is joined to nothing.
        r = connect(http, carol, mid)
        assert r.status_code == 409 and r.json()["errcode"] == "SY_WRONG_ROLE"
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

        # Demoting Bob revokes his token at Janus and kicks him; the services join him no more.
        r = http.post(f"{SVC}{M}/{mid}/demote", headers=host["headers"], json={"user_id": bob["user_id"]})
        assert r.status_code == 200, r.text
        deadline = time.monotonic() + 5
        while True:  # AudioBridge removes a kicked plain-RTP participant asynchronously
            names = [p.get("display") for p in listparticipants(http, j_host["media"])]
            if bob["user_id"] not in names or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert bob["user_id"] not in names and host["user_id"] in names, names
        r = connect(http, bob, mid)
        assert r.status_code == 409 and r.json()["errcode"] == "SY_WRONG_ROLE"
        # On the handle he was handed, Bob cannot join again: he holds no token.
        refused = peers[1].join(j_host["media"]["room"], participant_id=j_bob["media"]["participant_id"],
                                display=bob["user_id"], handle=peers[1].attach())
        assert refused.get("error_code") == 489, refused

        # The host promotes Carol; her role becomes stage with a working descriptor.
        r = http.post(f"{SVC}{M}/{mid}/promote", headers=host["headers"], json={"user_id": carol["user_id"]})
        assert r.status_code == 200, r.text
        me = http.post(f"{SVC}{M}/{mid}/media", headers=carol["headers"])
        assert me.status_code == 200 and "token" not in me.json(), me.text
        c = connect(http, carol, mid)
        assert c.status_code == 200, c.text
        peers.append(JanusPeer.connected(http, c.json()))
        assert carol["user_id"] in [p.get("display") for p in listparticipants(http, j_host["media"])]
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


def test_a_stage_member_cannot_join_as_another_live_member(http):
    """An adversarial stage member (Bob) holds the Janus session and handle the services joined for
    him, and Janus shows every participant's ID. He tries to take the host's participant ID and
    display: joining again on his handle, moving there with `changeroom`, joining on a new handle of
    his session or of a session of his own, while the host is connected and while not. He holds no
    token (the services never hand one out), so the room refuses every one of them; renaming
    himself as the host on his own handle gets him kicked. Before the services made the join
    themselves, he could join with the host's ID and display while the host was not connected."""
    host, bob = account(http), account(http)
    room = create_room(http, host)
    join_room(http, bob, room)
    j_host = http.post(f"{SVC}{M}/join", headers=host["headers"], json={"room_id": room}).json()
    j_bob = http.post(f"{SVC}{M}/join", headers=bob["headers"], json={"room_id": room}).json()
    assert (j_host["role"], j_bob["role"]) == ("stage", "stage")
    mid = j_host["meeting"]["meeting_id"]
    audio_room = j_host["media"]["room"]
    host_id, bob_id = j_host["media"]["participant_id"], j_bob["media"]["participant_id"]
    answers = [connect(http, host, mid), connect(http, bob, mid)]
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    assert not any("token" in a.text for a in answers)
    honest, adversary = (JanusPeer.connected(http, a.json()) for a in answers)
    own = JanusPeer(http, answers[1].json()["server_url"])  # a session Bob makes himself
    pose = {"participant_id": host_id, "display": host["user_id"]}
    try:
        def attempts() -> list[dict]:
            return [
                adversary.join(audio_room, **pose),  # again, on the handle he was handed
                adversary.join(audio_room, request="changeroom", **pose),
                adversary.join(audio_room, handle=adversary.attach(), **pose),  # a new handle of his session
                own.join(audio_room, **pose),  # a session of his own
                own.join(audio_room, rtp=True, **pose),  # as a plain-RTP participant
            ]

        for answer in attempts():
            assert answer.get("audiobridge") != "joined" and answer.get("error_code"), answer
        listed = listparticipants(http, j_host["media"])
        assert [p["id"] for p in listed if p.get("display") == host["user_id"]] == [host_id], listed

        # The host not connected (their session gone): the ID is free, and still nobody else takes it.
        honest.close()
        listed = wait_until_gone(http, j_host["media"], host_id)
        for answer in attempts():
            assert answer.get("audiobridge") != "joined" and answer.get("error_code"), answer
        assert host_id not in [p["id"] for p in listparticipants(http, j_host["media"])]

        # Renaming himself as the host on his own handle (configure): kicked.
        assert adversary.configure(display=host["user_id"]).get("result") == "ok"
        wait_until_gone(http, j_host["media"], bob_id)
        # Joined again by the services (as assigned), then demoted: gone at once, and joined no more.
        again = connect(http, bob, mid)
        assert again.status_code == 200, again.text
        r = http.post(f"{SVC}{M}/{mid}/demote", headers=host["headers"], json={"user_id": bob["user_id"]})
        assert r.status_code == 200, r.text
        listed = wait_until_gone(http, j_host["media"], bob_id)
        assert bob["user_id"] not in [p.get("display") for p in listed], listed
        assert connect(http, bob, mid).json()["errcode"] == "SY_WRONG_ROLE"
    finally:
        for p in (adversary, own):
            p.close()
        http.post(f"{SVC}{M}/{mid}/end", headers=host["headers"])


def test_no_stage_member_can_make_janus_stream_to_an_address(http):
    """Rooms allow no plain-RTP participants, and members hold no token: a stage member who asks
    Janus to send the mix to an address of their choosing is refused, on the handle the services
    joined for them or on one of their own (only the services' own forwarder streams the mix)."""
    host = account(http)
    room = create_room(http, host)
    j = http.post(f"{SVC}{M}/join", headers=host["headers"], json={"room_id": room}).json()
    mid = j["meeting"]["meeting_id"]
    c = connect(http, host, mid)
    assert c.status_code == 200, c.text
    peer = JanusPeer.connected(http, c.json())
    try:
        for handle in (peer.handle, peer.attach()):
            answer = peer.join(j["media"]["room"], participant_id=j["media"]["participant_id"],
                               display=host["user_id"], rtp=True, handle=handle)
            assert answer.get("audiobridge") != "joined" and answer.get("error_code"), answer
    finally:
        peer.close()
        http.post(f"{SVC}{M}/{mid}/end", headers=host["headers"])
