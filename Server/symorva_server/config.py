"""Server settings and the community manifest (symorva.config.json).

The manifest schema is documented in docs/manifest.md; `validate_manifest` enforces it.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .ratelimit import DEFAULT_PROFILE, RateLimits, profile

KNOWN_MODULES = ("meetings", "aiStudio", "wallet", "directory")

DEFAULT_TOKEN_LIFETIME_S = 3600
DEFAULT_MAX_BODY_BYTES = 64 * 1024


@dataclass
class Settings:
    homeserver_url: str
    server_name: str
    db_path: str = ":memory:"
    manifest_path: str | None = None
    host: str = "127.0.0.1"
    port: int = 0
    test_mode: bool = False
    token_lifetime_s: int = DEFAULT_TOKEN_LIFETIME_S
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    public_url: str | None = None
    manifest: dict[str, Any] = field(default_factory=dict)
    # Per route class and member (or client address): see ratelimit.py.
    rate_limits: RateLimits = field(default_factory=lambda: profile(DEFAULT_PROFILE))
    # Meetings: the Janus HTTP API, the file with the AudioBridge admin key, where the HLS
    # packagers write, and the homeserver admin's credentials (room membership and power levels; the studio's
    # membership checks too, modules/ai_studio/membership.py).
    janus_url: str | None = None
    janus_admin_key_file: str | None = None
    media_dir: str | None = None
    homeserver_admin_file: str | None = None
    # Push gateway: the addresses `notify` is accepted from (None: the homeserver URL's host's).
    push_notify_from: tuple[str, ...] | None = None


class ManifestError(ValueError):
    pass


_ASSET_CODE = re.compile(r"^[A-Z0-9]{2,12}$")
_URL = re.compile(r"^https?://[^\s/]+(/[^\s]*)?$")
_USER_ID = re.compile(r"@[^:\s]+:\S+")


def is_loopback_host(host: str) -> bool:
    """`localhost`, `::1` or an IPv4 address in 127.0.0.0/8 (the SDK's HomeserverURL rule)."""
    host = host.lower().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_transport_url(url: Any, where: str) -> str:
    """An absolute `https` URL, or plain `http` to a loopback host only (anything else would carry
    what is sent there in clear); raises ManifestError naming `where`."""
    if not isinstance(url, str) or not _URL.match(url):
        raise ManifestError(f"{where}: required http(s) URL")
    parts = urlsplit(url)
    if parts.scheme == "http" and not is_loopback_host(parts.hostname or ""):
        raise ManifestError(f"{where}: plain http is only allowed for loopback hosts (127.0.0.0/8, ::1, "
                            "localhost); use https")
    return url


def admins(manifest: dict[str, Any]) -> frozenset[str]:
    """The community's admins: Matrix user IDs in `services.admins` (server side only: the
    capabilities do not publish them)."""
    return frozenset(manifest.get("services", {}).get("admins", []))


def development(manifest: dict[str, Any], settings: Settings) -> bool:
    """Development mode: `services.development: true` in the manifest (the dev environment's,
    see write_manifest.py) or test mode (--test). Never otherwise: a production community
    has neither."""
    return settings.test_mode or manifest.get("services", {}).get("development") is True


def default_manifest(homeserver_url: str, server_name: str, services_url: str) -> dict[str, Any]:
    """The manifest written for the development environment (write_manifest.py adds the
    development flag and the admin)."""
    return {
        "version": 1,
        "community": {"name": "Orbit Dev"},
        "homeserver": {"url": homeserver_url, "serverName": server_name},
        "services": {"url": services_url},
        "modules": {
            "meetings": {"enabled": True},
            "aiStudio": {"enabled": True},
            "wallet": {"enabled": True, "assets": [{"code": "ORB", "precision": 2}]},
            "directory": {"enabled": True},
        },
        "encryption": {"defaultEnabled": False},
    }


def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise ManifestError(msg)


def validate_manifest(m: Any) -> dict[str, Any]:
    """Check a parsed manifest against the schema in docs/manifest.md. Returns it."""
    _require(isinstance(m, dict), "manifest: must be a JSON object")
    _require(m.get("version") == 1, "manifest.version: must be the integer 1")
    community = m.get("community")
    _require(isinstance(community, dict), "manifest.community: required object")
    name = community.get("name")
    _require(isinstance(name, str) and 0 < len(name.strip()) <= 100,
             "manifest.community.name: required non-empty string (max 100 chars)")
    for opt in ("description", "avatarUrl"):
        if opt in community:
            _require(isinstance(community[opt], str), f"manifest.community.{opt}: must be a string")
    if "space" in community:
        space = community["space"]
        _require(isinstance(space, str) and space[:1] in ("!", "#") and ":" in space,
                 "manifest.community.space: a room ID (!…:server) or alias (#…:server)")
    hs = m.get("homeserver")
    _require(isinstance(hs, dict), "manifest.homeserver: required object")
    _require(isinstance(hs.get("url"), str) and bool(_URL.match(hs["url"])),
             "manifest.homeserver.url: required http(s) URL")
    _require(isinstance(hs.get("serverName"), str) and hs["serverName"] != "",
             "manifest.homeserver.serverName: required string")
    services = m.get("services")
    _require(isinstance(services, dict), "manifest.services: required object")
    _require(isinstance(services.get("url"), str) and bool(_URL.match(services["url"])),
             "manifest.services.url: required http(s) URL")
    if "admins" in services:
        admins = services["admins"]
        _require(isinstance(admins, list) and all(isinstance(a, str) and _USER_ID.fullmatch(a) for a in admins),
                 "manifest.services.admins: must be an array of Matrix user IDs (@name:server)")
    if "development" in services:
        _require(isinstance(services["development"], bool), "manifest.services.development: must be a boolean")
    modules = m.get("modules", {})
    _require(isinstance(modules, dict), "manifest.modules: must be an object")
    for mod_name, mod in modules.items():
        _require(isinstance(mod, dict), f"manifest.modules.{mod_name}: must be an object")
        _require(isinstance(mod.get("enabled"), bool),
                 f"manifest.modules.{mod_name}.enabled: required boolean")
    wallet = modules.get("wallet")
    if isinstance(wallet, dict) and "assets" in wallet:
        assets = wallet["assets"]
        _require(isinstance(assets, list), "manifest.modules.wallet.assets: must be an array")
        seen = set()
        for i, a in enumerate(assets):
            where = f"manifest.modules.wallet.assets[{i}]"
            _require(isinstance(a, dict), f"{where}: must be an object")
            _require(isinstance(a.get("code"), str) and bool(_ASSET_CODE.match(a["code"])),
                     f"{where}.code: required, 2-12 characters A-Z 0-9")
            _require(a["code"] not in seen, f"{where}.code: duplicate asset code {a['code']}")
            seen.add(a["code"])
            p = a.get("precision")
            _require(isinstance(p, int) and not isinstance(p, bool) and 0 <= p <= 18,
                     f"{where}.precision: required integer 0..18")
    enc = m.get("encryption", {})
    _require(isinstance(enc, dict), "manifest.encryption: must be an object")
    if "defaultEnabled" in enc:
        _require(isinstance(enc["defaultEnabled"], bool),
                 "manifest.encryption.defaultEnabled: must be a boolean")
    if "roomKeySharing" in enc:
        _require(enc["roomKeySharing"] in ("crossSignedOnly", "crossSignedWhenAvailable", "allDevices"),
                 "manifest.encryption.roomKeySharing: must be crossSignedOnly, crossSignedWhenAvailable "
                 "or allDevices")
    if "crossSigningBootstrap" in enc:
        _require(enc["crossSigningBootstrap"] in ("automatic", "manual"),
                 "manifest.encryption.crossSigningBootstrap: must be automatic or manual")
    return m


def load_manifest(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ManifestError(f"manifest file not found: {path}") from None
    except json.JSONDecodeError as e:
        raise ManifestError(f"manifest {path} is not valid JSON: {e}") from None
    return validate_manifest(data)
