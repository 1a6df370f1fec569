"""Helpers of the meetings tests: Matrix accounts and rooms on the real Synapse, services
sessions, and a small Janus HTTP client that joins AudioBridge rooms with a descriptor."""

from __future__ import annotations

import os
import secrets
import socket
import time
import urllib.parse

import httpx

HS = os.environ.get("SYMORVA_HOMESERVER_URL")
SVC = os.environ.get("SYMORVA_SERVICES_URL")
JANUS = os.environ.get("SYMORVA_JANUS_URL")
M = "/_symorva/v1/meetings"


def account(http: httpx.Client) -> dict:
    """A Matrix account (non-expiring access token) with a services session."""
    username = "mt_" + secrets.token_hex(6)
    r = http.post(f"{HS}/_matrix/client/v3/register", json={
        "username": username, "password": secrets.token_urlsafe(16), "auth": {"type": "m.login.dummy"}})
    assert r.status_code == 200, r.text
    a = r.json()
    a["matrix"] = {"Authorization": f"Bearer {a['access_token']}"}
    user = urllib.parse.quote(a["user_id"], safe="")
    oid = http.post(f"{HS}/_matrix/client/v3/user/{user}/openid/request_token", json={}, headers=a["matrix"])
    assert oid.status_code == 200, oid.text
    s = http.post(f"{SVC}/_symorva/v1/auth/openid", json=oid.json())
    assert s.status_code == 200, s.text
    a["headers"] = {"Authorization": f"Bearer {s.json()['access_token']}"}
    return a


def create_room(http: httpx.Client, host: dict, *, hosts: list[dict] = ()) -> str:
    """A room created by `host` (power 100); `hosts` are given power level 50."""
    body: dict = {"preset": "public_chat"}
    if hosts:
        # (room version 12: the creator outranks everyone and must not be listed)
        body["power_level_content_override"] = {"users": {h["user_id"]: 50 for h in hosts}}
    r = http.post(f"{HS}/_matrix/client/v3/createRoom", json=body, headers=host["matrix"])
    assert r.status_code == 200, r.text
    return r.json()["room_id"]


def join_room(http: httpx.Client, member: dict, room_id: str) -> None:
    r = http.post(f"{HS}/_matrix/client/v3/join/{urllib.parse.quote(room_id, safe='')}", json={},
                  headers=member["matrix"])
    assert r.status_code == 200, r.text


def leave_room(http: httpx.Client, member: dict, room_id: str) -> None:
    r = http.post(f"{HS}/_matrix/client/v3/rooms/{urllib.parse.quote(room_id, safe='')}/leave", json={},
                  headers=member["matrix"])
    assert r.status_code == 200, r.text


class JanusPeer:
    """Joins an AudioBridge room with a media-session descriptor, as a participant without media
    (what a stage member's media engine does before its WebRTC offer). `join` can also play a
    modified client: another participant ID or display than the descriptor's, or a plain-RTP
    participant aimed at an address of its choosing."""

    def __init__(self, http: httpx.Client, descriptor: dict) -> None:
        self.http = http
        self.d = descriptor
        self.url = descriptor["server_url"]
        self.session = self._post(self.url, {"janus": "create"})["data"]["id"]
        self.handle = self._post(f"{self.url}/{self.session}", {"janus": "attach",
                                                                 "plugin": descriptor["plugin"]})["data"]["id"]
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))

    def _post(self, url: str, body: dict) -> dict:
        r = self.http.post(url, json={**body, "transaction": secrets.token_hex(6)})
        assert r.status_code == 200, r.text
        return r.json()

    def join(self, token: str | None = None, *, participant_id: int | None = None, display: str | None = None,
             rtp: bool = False) -> dict:
        """The AudioBridge answer to a join: {"audiobridge": "joined", ...} or an error."""
        body = {"request": "join", "room": self.d["room"], "token": token or self.d["token"],
                "id": participant_id or self.d["participant_id"], "display": display or self.d["display"]}
        if rtp:
            body["rtp"] = {"ip": "127.0.0.1", "port": self.sock.getsockname()[1], "payload_type": 100}
        return self._answer(self._post(f"{self.url}/{self.session}/{self.handle}", {"janus": "message", "body": body}))

    def configure(self, **body) -> dict:
        """The AudioBridge answer to a `configure` (e.g. `display=` to change the display name)."""
        return self._answer(self._post(f"{self.url}/{self.session}/{self.handle}", {
            "janus": "message", "body": {"request": "configure", **body}}))

    def _answer(self, ack: dict) -> dict:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            events = self.http.get(f"{self.url}/{self.session}", params={"maxev": 5}, timeout=35).json()
            for e in events if isinstance(events, list) else [events]:
                if e.get("transaction") == ack["transaction"]:
                    return e["plugindata"]["data"]
        raise AssertionError("no answer to the AudioBridge join")

    def events(self) -> list[dict]:
        events = self.http.get(f"{self.url}/{self.session}", params={"maxev": 10}, timeout=35).json()
        return events if isinstance(events, list) else [events]

    def close(self) -> None:
        try:
            self._post(f"{self.url}/{self.session}", {"janus": "destroy"})
        finally:
            self.sock.close()


def listparticipants(http: httpx.Client, descriptor: dict) -> list[dict]:
    url = descriptor["server_url"]
    s = http.post(url, json={"janus": "create", "transaction": "t"}).json()["data"]["id"]
    h = http.post(f"{url}/{s}", json={"janus": "attach", "plugin": descriptor["plugin"], "transaction": "t"}).json()
    r = http.post(f"{url}/{s}/{h['data']['id']}", json={"janus": "message", "transaction": "t",
                                                         "body": {"request": "listparticipants",
                                                                  "room": descriptor["room"]}}).json()
    http.post(f"{url}/{s}", json={"janus": "destroy", "transaction": "t"})
    return r["plugindata"]["data"].get("participants", [])
