"""Is the member in the room, and is an event in the room? Asked of the homeserver, never taken
from the client.

`SynapseAdminMembership` uses Synapse's admin API with the homeserver admin account the deployment
gives the services (`--homeserver-admin-file PATH`, see homeserver_admin.SynapseAdmin: one session,
device `SYMORVA_STUDIO`): `GET /_synapse/admin/v1/rooms/{roomId}/members` (the room's joined
members) and `GET /_synapse/admin/v1/rooms/{roomId}/context/{eventId}?limit=0` (the event as the
homeserver has it, only if it belongs to that room: its sender and `origin_server_ts`). Without
that file, `UnconfiguredMembership` refuses every check as unavailable (a grant is never issued
unchecked).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Protocol

from ...homeserver_admin import AdminUnavailable, SynapseAdmin


class MembershipUnavailable(Exception):
    """The homeserver could not be asked (not configured, unreachable, refused the admin)."""


@dataclass(frozen=True)
class RoomEvent:
    """An event of a room as the homeserver has it (never its content)."""

    event_id: str
    sender: str
    origin_server_ts: int


class MembershipChecker(Protocol):
    async def is_joined(self, room_id: str, user_id: str) -> bool:
        """Whether `user_id` is joined to `room_id` now; raises MembershipUnavailable."""
        ...

    async def event(self, room_id: str, event_id: str) -> RoomEvent | None:
        """The event if `room_id` has it (None when the room has no such event); raises
        MembershipUnavailable."""
        ...


class UnconfiguredMembership:
    async def is_joined(self, room_id: str, user_id: str) -> bool:
        raise MembershipUnavailable("no homeserver admin account is configured (--homeserver-admin-file)")

    async def event(self, room_id: str, event_id: str) -> RoomEvent | None:
        raise MembershipUnavailable("no homeserver admin account is configured (--homeserver-admin-file)")


class SynapseAdminMembership:
    def __init__(self, homeserver_url: str, credentials_file: str, timeout_s: float = 10.0,
                 admin: SynapseAdmin | None = None) -> None:
        self.admin = admin or SynapseAdmin(homeserver_url, credentials_file, device_id="SYMORVA_STUDIO",
                                           display_name="symorva services (studio)", timeout_s=timeout_s)

    async def _get(self, path: str, params: dict | None = None):
        try:
            return await self.admin.get(path, params)
        except AdminUnavailable as e:
            raise MembershipUnavailable(str(e)) from e

    async def is_joined(self, room_id: str, user_id: str) -> bool:
        resp = await self._get(f"/_synapse/admin/v1/rooms/{urllib.parse.quote(room_id, safe='')}/members")
        if resp.status_code in (400, 404):
            return False  # an unknown room has no members
        if resp.status_code != 200:
            raise MembershipUnavailable(f"homeserver answered {resp.status_code} to the members query")
        members = resp.json().get("members")
        if not isinstance(members, list):
            raise MembershipUnavailable("homeserver's members answer has no list")
        return user_id in members

    async def event(self, room_id: str, event_id: str) -> RoomEvent | None:
        room = urllib.parse.quote(room_id, safe="")
        resp = await self._get(f"/_synapse/admin/v1/rooms/{room}/context/{urllib.parse.quote(event_id, safe='')}",
                               {"limit": 0})
        if resp.status_code in (400, 404):
            return None
        if resp.status_code != 200:
            raise MembershipUnavailable(f"homeserver answered {resp.status_code} to the event query")
        event = resp.json().get("event")
        if not isinstance(event, dict) or event.get("room_id") != room_id or event.get("event_id") != event_id:
            return None
        sender, ts = event.get("sender"), event.get("origin_server_ts")
        if not isinstance(sender, str) or not isinstance(ts, int):
            raise MembershipUnavailable("homeserver's event answer lacks sender or origin_server_ts")
        return RoomEvent(event_id, sender, ts)
