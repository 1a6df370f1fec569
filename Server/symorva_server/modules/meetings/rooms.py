"""What the homeserver says about a Matrix room: who is joined, and their power levels.

The meetings module never trusts the client for either. `SynapseRoomDirectory` asks
Synapse's admin API for what a request needs — the joined members, the power levels event and
(once per room) the create event, never the room's full state — as the homeserver admin
(homeserver_admin.SynapseAdmin: one session, a fixed device, no login storm when a token is
refused). The token and password never reach a log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import quote

from ...homeserver_admin import AdminUnavailable, SynapseAdmin


# Room versions whose creators have "infinite" power (MSC4289): they are never listed in
# m.room.power_levels, so they count as above any threshold.
PRIVILEGED_CREATOR_VERSIONS = frozenset({"12", "org.matrix.hydra.11"})
CREATOR_POWER = 2**53


class RoomLookupError(Exception):
    """The homeserver could not be asked (`unknown_room=False`) or has no such room."""

    def __init__(self, message: str, *, unknown_room: bool = False) -> None:
        super().__init__(message)
        self.unknown_room = unknown_room


@dataclass(frozen=True)
class RoomState:
    """A room's membership and power levels, as the homeserver has them now."""

    memberships: dict[str, str] = field(default_factory=dict)  # user ID -> membership
    user_levels: dict[str, int] = field(default_factory=dict)
    users_default: int = 0

    def is_member(self, user_id: str) -> bool:
        return self.memberships.get(user_id) == "join"

    def power_level(self, user_id: str) -> int:
        return self.user_levels.get(user_id, self.users_default)

    @staticmethod
    def from_events(events: list[dict]) -> RoomState:
        memberships: dict[str, str] = {}
        levels: dict[str, int] = {}
        users_default = 0
        creator: str | None = None
        creators: set[str] = set()
        have_power_levels = False
        for event in events:
            kind, content = event.get("type"), event.get("content") or {}
            if kind == "m.room.member" and isinstance(event.get("state_key"), str):
                membership = content.get("membership")
                if isinstance(membership, str):
                    memberships[event["state_key"]] = membership
            elif kind == "m.room.power_levels":
                have_power_levels = True
                users = content.get("users") or {}
                if isinstance(users, dict):
                    levels = {u: int(v) for u, v in users.items() if isinstance(v, int) and not isinstance(v, bool)}
                default = content.get("users_default", 0)
                users_default = default if isinstance(default, int) and not isinstance(default, bool) else 0
            elif kind == "m.room.create":
                creator = event.get("sender")
                if str(content.get("room_version")) in PRIVILEGED_CREATOR_VERSIONS:
                    extra = content.get("additional_creators") or []
                    creators = {creator, *[c for c in extra if isinstance(c, str)]} - {None}
        if not have_power_levels and creator:
            # Matrix: without a power levels event the creator has 100 and everyone else 0.
            levels = {creator: 100}
        # Room version 12: creators outrank every power level and are not in the event.
        for c in creators:
            levels[c] = CREATOR_POWER
        return RoomState(memberships, levels, users_default)


class RoomDirectory(Protocol):
    async def room_state(self, room_id: str) -> RoomState:
        """The room's current state; raises RoomLookupError."""
        ...


class SynapseRoomDirectory:
    def __init__(self, homeserver_url: str, admin_file: str, timeout_s: float = 10.0,
                 admin: SynapseAdmin | None = None) -> None:
        self.homeserver_url = homeserver_url.rstrip("/")
        # One admin session (device SYMORVA_MEETINGS), so that the room state queries of every
        # request reuse a connection and a refused token never logs the admin in on each request.
        self.admin = admin or SynapseAdmin(homeserver_url, admin_file, device_id="SYMORVA_MEETINGS",
                                           display_name="symorva-services meetings", timeout_s=timeout_s)
        # Each room's create event (immutable), oldest first, at most 10 000 rooms.
        self._creates: dict[str, list[dict]] = {}

    async def room_state(self, room_id: str) -> RoomState:
        """What a meeting request needs, without the room's full state: the joined members (their
        IDs: `GET …/rooms/{roomId}/members`), the power levels (`…/state?type=m.room.power_levels`,
        one event, asked every time: a host's rights change at once) and the create event (asked
        once per room: it never changes)."""
        room = quote(room_id, safe="")
        create = self._creates.get(room_id)
        if create is None:
            create = await self._state_events(room, "m.room.create")
            if create:
                if len(self._creates) >= 10_000:
                    self._creates.pop(next(iter(self._creates)))
                self._creates[room_id] = create
        power_levels = await self._state_events(room, "m.room.power_levels")
        members = await self._get(f"/_synapse/admin/v1/rooms/{room}/members")
        joined = members.get("members")
        if not isinstance(joined, list):
            raise RoomLookupError("homeserver's members answer has no list")
        state = RoomState.from_events([*create, *power_levels])
        return RoomState({u: "join" for u in joined if isinstance(u, str)}, state.user_levels, state.users_default)

    async def _state_events(self, room: str, event_type: str) -> list[dict]:
        state = (await self._get(f"/_synapse/admin/v1/rooms/{room}/state", {"type": event_type})).get("state")
        if not isinstance(state, list):
            raise RoomLookupError("homeserver room state has no 'state' list")
        return [e for e in state if isinstance(e, dict) and e.get("type") == event_type]

    async def _get(self, path: str, params: dict | None = None) -> dict:
        try:
            resp = await self.admin.get(path, params)
        except AdminUnavailable as e:
            raise RoomLookupError(str(e)) from None
        if resp.status_code in (400, 404):
            raise RoomLookupError("the homeserver has no such room", unknown_room=True)
        if resp.status_code != 200:
            raise RoomLookupError(f"homeserver answered {resp.status_code} to a room query")
        body = resp.json()
        if not isinstance(body, dict):
            raise RoomLookupError("homeserver's room answer is not an object")
        return body
