"""Write the development homeserver.yaml for Synapse.

Run with the Synapse virtual environment's python (it needs PyYAML, which Synapse
depends on). Reads the config generated once by
`python -m synapse.app.homeserver --generate-config` (secrets, signing key path) and
writes a complete config with the development settings on top of it:

    python configure_synapse.py --base homeserver.base.yaml --out homeserver.yaml \
        --state-dir DIR --port N --shared-secret-file FILE \
        [--rate-limit high|low|synapse] [--access-token-lifetime 5m] [--log-level INFO]

Prints a JSON object with the registration shared secret and the effective settings.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import sys

import yaml

# Rate limit profiles. "high" is for the test suite and day-to-day development:
# nothing a test does should ever be throttled. "low" is for rate-limit tests:
# a handful of requests per key, then M_LIMIT_EXCEEDED with retry_after_ms.
# "synapse" leaves Synapse's own defaults alone.
_HIGH = {"per_second": 1000, "burst_count": 10000}
_LOW = {"per_second": 0.5, "burst_count": 3}

_RATE_LIMIT_KEYS = {
    # top-level key -> None (flat setting) or list of sub-keys
    "rc_message": None,
    "rc_registration": None,
    "rc_registration_token_validity": None,
    "rc_login": ["address", "account", "failed_attempts"],
    "rc_admin_redaction": None,
    "rc_joins": ["local", "remote"],
    "rc_joins_per_room": None,
    "rc_invites": ["per_room", "per_user", "per_issuer"],
    "rc_third_party_invite": None,
    "rc_3pid_validation": None,
    "rc_key_requests": None,
    "rc_media_create": None,
    "rc_presence": ["per_user"],
    "rc_delayed_event_mgmt": None,
    "rc_room_creation": None,
    "rc_reports": None,
    "rc_user_directory": None,
    "rc_profile": None,
}


def rate_limit_settings(profile: str) -> dict:
    if profile == "synapse":
        return {}
    if profile not in ("high", "low"):
        raise SystemExit(
            f"configure_synapse: unknown rate limit profile {profile!r} "
            "(expected high, low or synapse)"
        )
    values = _HIGH if profile == "high" else _LOW
    out: dict = {}
    for key, subkeys in _RATE_LIMIT_KEYS.items():
        if subkeys is None:
            out[key] = dict(values)
        else:
            out[key] = {sub: dict(values) for sub in subkeys}
    if profile == "high":
        # Federation is not used, but keep it from ever getting in the way.
        out["rc_federation"] = {
            "window_size": 1000,
            "sleep_limit": 1000,
            "sleep_delay": 1,
            "reject_limit": 10000,
            "concurrent": 100,
        }
    return out


_DURATION = re.compile(r"^\d+(ms|s|m|h|d|w|y)?$")


def log_config(level: str) -> dict:
    # Everything to stderr: the dev-server script redirects it into one log file.
    return {
        "version": 1,
        "formatters": {
            "precise": {
                "format": "%(asctime)s - %(name)s - %(lineno)d - %(levelname)s"
                " - %(request)s - %(message)s"
            }
        },
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": "precise"}
        },
        "loggers": {"synapse.storage.SQL": {"level": "INFO"}},
        "root": {"level": level, "handlers": ["console"]},
        "disable_existing_loggers": False,
    }


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--state-dir", required=True, help="Synapse data directory")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--rate-limit", default="high")
    p.add_argument("--access-token-lifetime", default="5m")
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--shared-secret-file", required=True,
                   help="registration shared secret; created (URL-safe random) if missing")
    args = p.parse_args()

    if not _DURATION.match(args.access_token_lifetime):
        raise SystemExit(
            "configure_synapse: SYMORVA_ACCESS_TOKEN_LIFETIME must be a Synapse "
            f"duration like 20s, 5m or 1h, got {args.access_token_lifetime!r}"
        )

    with open(args.base, encoding="utf-8") as f:
        cfg = yaml.safe_load(f)

    data = os.path.abspath(args.state_dir)
    log_config_path = os.path.join(data, "log.config.yaml")
    with open(log_config_path, "w", encoding="utf-8") as f:
        yaml.safe_dump(log_config(args.log_level.upper()), f, sort_keys=False)

    # A URL-safe secret (the generated one has shell-unfriendly symbols), so that it
    # can be written bare into the env file.
    if not os.path.exists(args.shared_secret_file):
        fd = os.open(args.shared_secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32))
    with open(args.shared_secret_file, encoding="utf-8") as f:
        shared_secret = f.read().strip()

    base_url = f"http://127.0.0.1:{args.port}"
    cfg.update(
        {
            "registration_shared_secret": shared_secret,
            "public_baseurl": base_url + "/",
            "pid_file": os.path.join(data, "homeserver.pid"),
            "listeners": [
                {
                    "port": args.port,
                    "bind_addresses": ["127.0.0.1"],
                    "type": "http",
                    "tls": False,
                    "x_forwarded": False,
                    # "openid" serves /_matrix/federation/v1/openid/userinfo, which the
                    # community services use to verify members' OpenID tokens. The full
                    # "federation" resource is not needed: no federation in dev.
                    "resources": [{"names": ["client", "openid"], "compress": False}],
                }
            ],
            "database": {
                "name": "sqlite3",
                "args": {"database": os.path.join(data, "homeserver.db")},
            },
            "log_config": log_config_path,
            "media_store_path": os.path.join(data, "media_store"),
            # Synapse's default is 50M; the SDK's media tests and `symorva-bench media-upload`
            # send 100 MB files (issue 25).
            "max_upload_size": "128M",
            "signing_key_path": cfg.get("signing_key_path")
            or os.path.join(data, "localhost.signing.key"),
            "report_stats": False,
            "enable_metrics": False,
            "trusted_key_servers": [],
            "suppress_key_server_warning": True,
            # Nothing leaves this machine: no outbound federation at all.
            "federation_domain_whitelist": [],
            "enable_registration": True,
            "enable_registration_without_verification": True,
            # A homeserver on loopback for development and tests: the password hash's cost
            # (Synapse's default, 12 bcrypt rounds) is a quarter second of CPU on every
            # registration and password login, hundreds of them in a test run. 4 rounds, bcrypt's
            # minimum, is still bcrypt (a wrong password is refused the same way; hashes made
            # with more rounds still verify).
            "bcrypt_rounds": 4,
            # Refresh tokens are on (clients opt in with "refresh_token": true at
            # login/registration); tests can shorten the access token lifetime.
            "refreshable_access_token_lifetime": args.access_token_lifetime,
            "user_directory": {"enabled": True, "search_all_users": True},
            "room_list_publication_rules": [{"action": "allow"}],
            # The room directory is readable signed out (GET /publicRooms), and searchable as
            # a guest (POST /publicRooms needs a token; the SDK registers a guest for it).
            "allow_public_rooms_without_auth": True,
            "allow_guest_access": True,
            # Simplified sliding sync (MSC4186) lives behind this flag; in this
            # Synapse version it defaults to on, set explicitly for clarity.
            "experimental_features": {"msc3575_enabled": True},
            "url_preview_enabled": False,
            "presence": {"enabled": True},
            # Pushers may reach the community services' Push Gateway on loopback: Synapse's
            # outbound requests (push gateways among them) refuse private addresses by
            # default (ip_range_blacklist); the whitelist lets loopback through and nothing else.
            "ip_range_whitelist": ["127.0.0.1/32", "::1/128"],
        }
    )
    # Drop any rate limit keys from a previous profile, then apply the new one.
    for key in list(cfg):
        if key.startswith("rc_"):
            del cfg[key]
    cfg.update(rate_limit_settings(args.rate_limit))

    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("# Generated by Scripts/dev-server from homeserver.base.yaml; edits are lost.\n")
        yaml.safe_dump(cfg, f, sort_keys=True)
    os.replace(tmp, args.out)

    json.dump(
        {
            "registration_shared_secret": cfg["registration_shared_secret"],
            "server_name": cfg["server_name"],
            "url": base_url,
            "rate_limit": args.rate_limit,
            "access_token_lifetime": args.access_token_lifetime,
        },
        sys.stdout,
    )
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
