"""Is the member in the room? Asked of the homeserver, never taken from the client.

`SynapseAdminMembership` uses Synapse's admin API (`GET /_synapse/admin/v1/rooms/{roomId}/members`,
the room's joined members) with a homeserver admin account the deployment gives the services:
`--homeserver-admin-file PATH`, a JSON file `{"userId", "password"}` or `{"accessToken"}` (the dev
environment passes its admin.json). It logs in lazily, keeps the access token in memory and logs in
again once when the token is refused. Without that file, `UnconfiguredMembership` refuses every
check as unavailable (a grant is never issued unchecked).
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Protocol

import httpx


class MembershipUnavailable(Exception):
    """The homeserver could not be asked (not configured, unreachable, refused the admin)."""


class MembershipChecker(Protocol):
    async def is_joined(self, room_id: str, user_id: str) -> bool:
        """Whether `user_id` is joined to `room_id` now; raises MembershipUnavailable."""
        ...


class UnconfiguredMembership:
    async def is_joined(self, room_id: str, user_id: str) -> bool:
        raise MembershipUnavailable("no homeserver admin account is configured (--homeserver-admin-file)")


class SynapseAdminMembership:
    def __init__(self, homeserver_url: str, credentials_file: str, timeout_s: float = 10.0) -> None:
        self.base = homeserver_url.rstrip("/")
        self.credentials_file = credentials_file
        self.timeout_s = timeout_s
        self._token: str | None = None

    def _credentials(self) -> dict:
        try:
            with open(self.credentials_file, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise MembershipUnavailable(f"homeserver admin file unreadable: {type(e).__name__}") from e
        if not isinstance(data, dict):
            raise MembershipUnavailable("homeserver admin file is not a JSON object")
        return data

    async def _login(self, client: httpx.AsyncClient) -> str:
        creds = self._credentials()
        if isinstance(creds.get("accessToken"), str):
            return creds["accessToken"]
        user, password = creds.get("userId"), creds.get("password")
        if not isinstance(user, str) or not isinstance(password, str):
            raise MembershipUnavailable("homeserver admin file needs userId and password (or accessToken)")
        resp = await client.post(f"{self.base}/_matrix/client/v3/login", json={
            "type": "m.login.password", "identifier": {"type": "m.id.user", "user": user},
            "password": password, "initial_device_display_name": "symorva services (studio)"})
        if resp.status_code != 200:
            raise MembershipUnavailable(f"homeserver refused the admin login ({resp.status_code})")
        return resp.json()["access_token"]

    async def is_joined(self, room_id: str, user_id: str) -> bool:
        path = f"/_synapse/admin/v1/rooms/{urllib.parse.quote(room_id, safe='')}/members"
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s, trust_env=False) as client:
                for attempt in (1, 2):
                    if self._token is None:
                        self._token = await self._login(client)
                    resp = await client.get(self.base + path, headers={"Authorization": f"Bearer {self._token}"})
                    if resp.status_code == 401 and attempt == 1:
                        self._token = None
                        continue
                    break
        except httpx.HTTPError as e:
            raise MembershipUnavailable(f"homeserver not reachable: {type(e).__name__}") from e
        if resp.status_code in (400, 404):
            return False  # an unknown room has no members
        if resp.status_code != 200:
            raise MembershipUnavailable(f"homeserver answered {resp.status_code} to the members query")
        members = resp.json().get("members")
        if not isinstance(members, list):
            raise MembershipUnavailable("homeserver's members answer has no list")
        return user_id in members
