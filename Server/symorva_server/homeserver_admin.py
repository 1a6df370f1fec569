"""The services' homeserver admin session: Synapse's admin API as the admin account the
deployment gives the services (`--homeserver-admin-file PATH`: `{"userId", "password"}` or
`{"accessToken"}`; the dev environment passes its admin.json).

One session per component (`device_id` names it, e.g. `SYMORVA_MEETINGS`): the password login
always names that device, so logging in again replaces the device's token instead of creating a
device each time. A token the homeserver refuses (401) is dropped and the admin logs in once
more; if the new token is refused too, no further login is tried for `relogin_backoff_s` (the
requests fail as unavailable meanwhile), so a misconfigured or demoted admin account never makes
the services log in on every request. Tokens and the password never reach a log.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx


class AdminUnavailable(Exception):
    """The homeserver could not be asked as the admin (unreadable credentials, unreachable, the
    login or the token refused)."""


class SynapseAdmin:
    def __init__(self, homeserver_url: str, credentials_file: str, *, device_id: str, display_name: str,
                 timeout_s: float = 10.0, relogin_backoff_s: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.base = homeserver_url.rstrip("/")
        self.credentials_file = credentials_file
        self.device_id = device_id
        self.display_name = display_name
        self.timeout_s = timeout_s
        self.relogin_backoff_s = relogin_backoff_s
        self._transport = transport
        self._monotonic = monotonic
        self._token: str | None = None
        self._login_lock = asyncio.Lock()
        self._no_login_until = 0.0
        # How many password logins this session made (tests, diagnostics).
        self.logins = 0
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            # trust_env=False: never send the admin's token through a proxy from the environment.
            self._client = httpx.AsyncClient(timeout=self.timeout_s, trust_env=False, transport=self._transport)
        return self._client

    def _credentials(self) -> dict[str, Any]:
        try:
            with open(self.credentials_file, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise AdminUnavailable(f"homeserver admin credentials unreadable ({type(e).__name__})") from None
        if not isinstance(data, dict):
            raise AdminUnavailable("homeserver admin file is not a JSON object")
        return data

    async def _login(self, refused: str | None) -> str:
        async with self._login_lock:
            if self._token is not None and self._token != refused:
                return self._token  # another request logged in meanwhile
            creds = self._credentials()
            if isinstance(creds.get("accessToken"), str):
                self._token = creds["accessToken"]
                return self._token
            if self._monotonic() < self._no_login_until:
                raise AdminUnavailable("the homeserver refused the admin's token; not logging in again yet")
            user, password = creds.get("userId"), creds.get("password")
            if not isinstance(user, str) or not isinstance(password, str):
                raise AdminUnavailable("homeserver admin file needs userId and password (or accessToken)")
            self.logins += 1
            # Until this token proves itself, a refusal of it starts the backoff.
            self._no_login_until = self._monotonic() + self.relogin_backoff_s
            resp = await self._http().post(f"{self.base}/_matrix/client/v3/login", json={
                "type": "m.login.password", "identifier": {"type": "m.id.user", "user": user},
                "password": password, "device_id": self.device_id,
                "initial_device_display_name": self.display_name})
            if resp.status_code != 200:
                raise AdminUnavailable(f"homeserver refused the admin login ({resp.status_code})")
            self._token = resp.json()["access_token"]
            return self._token

    async def get(self, path: str, params: dict[str, Any] | None = None) -> httpx.Response:
        """GET `path` as the admin; a refused token gets one new login (see the module doc).
        Raises AdminUnavailable."""
        try:
            token = self._token or await self._login(None)
            resp = await self._http().get(self.base + path, params=params,
                                          headers={"Authorization": f"Bearer {token}"})
            if resp.status_code == 401:
                self._token = None
                token = await self._login(token)
                resp = await self._http().get(self.base + path, params=params,
                                              headers={"Authorization": f"Bearer {token}"})
                if resp.status_code == 401:
                    self._token = None
                    raise AdminUnavailable("the homeserver refused the admin's token")
            if resp.status_code != 401 and self._token is not None:
                self._no_login_until = 0.0  # the token works: a later refusal may log in at once
        except httpx.HTTPError as e:
            raise AdminUnavailable(f"homeserver not reachable ({type(e).__name__})") from None
        return resp
