"""Meetings module: a meeting per Matrix room, stage/listener admission, hands, host actions,
a change feed, Janus AudioBridge rooms with per-member tokens, and an HLS playback stream
for listeners. docs/meetings.md ("Server side") has the contract."""

from __future__ import annotations

from typing import Any

from .config import MeetingsConfig, parse_config
from .domain import Meetings, MeetingsErrorCode
from .media import JanusMedia, MediaBackend, MediaError, MediaRoom
from .rooms import RoomDirectory, RoomLookupError, RoomState, SynapseRoomDirectory
from .routes import PREFIX, capabilities, router
from .schema import MIGRATIONS

MODULE_ID = "meetings"


def create_state(options: dict[str, Any], *, db, clock, settings, rooms: RoomDirectory | None = None,
                 media: MediaBackend | None = None) -> Meetings:
    """The module's state. Without injected collaborators it uses the settings: Janus when
    `--janus-url` is given, Synapse's admin API when `--homeserver-admin-file` is."""
    config = parse_config(options)
    if media is None and settings.janus_url:
        key = ""
        if settings.janus_admin_key_file:
            with open(settings.janus_admin_key_file, encoding="utf-8") as f:
                key = f.read().strip()
        media = JanusMedia(settings.janus_url, key, settings.media_dir or "media")
    if rooms is None and settings.homeserver_admin_file:
        rooms = SynapseRoomDirectory(settings.homeserver_url, settings.homeserver_admin_file)
    return Meetings(config, db, clock, rooms, media)


__all__ = [
    "MIGRATIONS", "MODULE_ID", "PREFIX", "JanusMedia", "MediaBackend", "MediaError", "MediaRoom", "Meetings",
    "MeetingsConfig", "MeetingsErrorCode", "RoomDirectory", "RoomLookupError", "RoomState", "SynapseRoomDirectory",
    "capabilities", "create_state", "router",
]
