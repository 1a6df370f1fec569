"""The meetings module's manifest options (docs/manifest.md, docs/meetings.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...config import ManifestError

DEFAULT_STAGE_CAPACITY = 3
DEFAULT_HOST_POWER_LEVEL = 50
DEFAULT_MEDIA_TOKEN_TTL_S = 3600
# A participant whose client sent nothing (feed polls included) for this long is taken out.
DEFAULT_PRESENCE_TIMEOUT_S = 90
MAX_FEED_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class MeetingsConfig:
    # How many members a meeting's stage holds (real-time media); later joiners listen.
    stage_capacity: int = DEFAULT_STAGE_CAPACITY
    # Room members at or above this power level are the meeting's hosts.
    host_power_level: int = DEFAULT_HOST_POWER_LEVEL
    # Lifetime of a stage member's AudioBridge token (the media-session descriptor's expiry).
    media_token_ttl_ms: int = DEFAULT_MEDIA_TOKEN_TTL_S * 1000
    # Longer than the feed's longest poll (MAX_FEED_TIMEOUT_MS), so a polling client stays in.
    presence_timeout_ms: int = DEFAULT_PRESENCE_TIMEOUT_S * 1000


def _int(options: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = options.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ManifestError(f"manifest.modules.meetings.{key}: must be an integer {low}..{high}")
    return value


def parse_config(options: dict[str, Any]) -> MeetingsConfig:
    """Raises ManifestError."""
    return MeetingsConfig(
        stage_capacity=_int(options, "stageCapacity", DEFAULT_STAGE_CAPACITY, 1, 100),
        host_power_level=_int(options, "hostPowerLevel", DEFAULT_HOST_POWER_LEVEL, 0, 100),
        media_token_ttl_ms=_int(options, "mediaTokenTtlSeconds", DEFAULT_MEDIA_TOKEN_TTL_S, 10, 86400) * 1000,
        presence_timeout_ms=_int(options, "presenceTimeoutSeconds", DEFAULT_PRESENCE_TIMEOUT_S, 45, 86400) * 1000,
    )
