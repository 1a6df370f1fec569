"""Helpers of the meetings tests: Matrix accounts and rooms on the real Synapse, services
sessions, the services' media join, and a small Janus HTTP client on AudioBridge handles."""

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
    """A client of Janus's HTTP API on an AudioBridge handle: the one the services joined for a
    member (`JanusPeer.connected`, what a stage member's media session continues on), or one of its
    own (a modified client trying things). `join` and `changeroom` play a modified client: any
    participant ID, display or token, or a plain-RTP participant aimed at an address."""

    def __init__(self, http: httpx.Client, server_url: str, *, session: int | None = None,
                 handle: int | None = None) -> None:
        self.http = http
        self.url = server_url
        self.session = session or self._post(self.url, {"janus": "create"})["data"]["id"]
        self.handle = handle or self.attach()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))

    @classmethod
    def connected(cls, http: httpx.Client, answer: dict) -> "JanusPeer":
        """The session and handle the services joined for a member (`POST …/media/connect`)."""
        return cls(http, answer["server_url"], session=answer["session_id"], handle=answer["handle_id"])

    def attach(self) -> int:
        """A new AudioBridge handle in this peer's session."""
        return self._post(f"{self.url}/{self.session}", {"janus": "attach",
                                                         "plugin": "janus.plugin.audiobridge"})["data"]["id"]

    def _post(self, url: str, body: dict) -> dict:
        r = self.http.post(url, json={**body, "transaction": secrets.token_hex(6)})
        assert r.status_code == 200, r.text
        return r.json()

    def join(self, room: int, *, token: str | None = None, participant_id: int | None = None,
             display: str | None = None, rtp: bool = False, handle: int | None = None,
             request: str = "join") -> dict:
        """The AudioBridge answer to a join (or `changeroom`): {"audiobridge": "joined", ...} or an error."""
        body: dict = {"request": request, "room": room}
        for key, value in (("token", token), ("id", participant_id), ("display", display)):
            if value is not None:
                body[key] = value
        if rtp:
            body["rtp"] = {"ip": "127.0.0.1", "port": self.sock.getsockname()[1], "payload_type": 100}
        return self._answer(self._post(f"{self.url}/{self.session}/{handle or self.handle}",
                                       {"janus": "message", "body": body}))

    def configure(self, **body) -> dict:
        """The AudioBridge answer to a `configure` (e.g. `display=` to change the display name)."""
        return self._answer(self._post(f"{self.url}/{self.session}/{self.handle}", {
            "janus": "message", "body": {"request": "configure", **body}}))

    def _answer(self, ack: dict) -> dict:
        if ack.get("janus") == "success":
            return ack["plugindata"]["data"]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            events = self.http.get(f"{self.url}/{self.session}", params={"maxev": 5}, timeout=35).json()
            for e in events if isinstance(events, list) else [events]:
                if e.get("transaction") == ack["transaction"]:
                    return e["plugindata"]["data"]
        raise AssertionError("no answer to the AudioBridge request")

    def close(self) -> None:
        try:
            self.http.post(f"{self.url}/{self.session}", json={"janus": "destroy", "transaction": "t"})
        finally:
            self.sock.close()


def connect(http: httpx.Client, member: dict, meeting_id: str) -> httpx.Response:
    """`POST …/media/connect`: the services join the member to the media room."""
    return http.post(f"{SVC}{M}/{meeting_id}/media/connect", headers=member["headers"])


def listparticipants(http: httpx.Client, descriptor: dict) -> list[dict]:
    url = descriptor["server_url"]
    s = http.post(url, json={"janus": "create", "transaction": "t"}).json()["data"]["id"]
    h = http.post(f"{url}/{s}", json={"janus": "attach", "plugin": "janus.plugin.audiobridge",
                                      "transaction": "t"}).json()
    r = http.post(f"{url}/{s}/{h['data']['id']}", json={"janus": "message", "transaction": "t",
                                                         "body": {"request": "listparticipants",
                                                                  "room": descriptor["room"]}}).json()
    http.post(f"{url}/{s}", json={"janus": "destroy", "transaction": "t"})
    return r["plugindata"]["data"].get("participants", [])
