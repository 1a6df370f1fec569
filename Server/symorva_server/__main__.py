"""python -m symorva_server --host 127.0.0.1 --port N --db PATH --manifest PATH
--homeserver URL --server-name NAME [--test]"""

from __future__ import annotations

import argparse
import logging
import sys

import uvicorn

from .app import create_app
from .config import DEFAULT_MAX_BODY_BYTES, DEFAULT_TOKEN_LIFETIME_S, ManifestError, Settings
from .ratelimit import DEFAULT_PROFILE, PROFILES, RateLimits, profile


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m symorva_server",
                                description="Reference Symorva community services server")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--db", required=True, help="SQLite database file")
    p.add_argument("--manifest", required=True, help="symorva.config.json")
    p.add_argument("--homeserver", required=True, help="Homeserver base URL, e.g. http://127.0.0.1:8008")
    p.add_argument("--server-name", required=True, help="The homeserver's server name, e.g. localhost")
    p.add_argument("--test", action="store_true",
                   help="Test mode: enables fault injection and the /_symorva/v1/test/ endpoints")
    p.add_argument("--token-lifetime", type=int, default=DEFAULT_TOKEN_LIFETIME_S,
                   help="Lifetime of issued bearer tokens in seconds (default %(default)s)")
    p.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES)
    p.add_argument("--public-url", default=None, help="Base URL to advertise in discovery")
    p.add_argument("--rate-limit", choices=sorted(PROFILES), default=DEFAULT_PROFILE,
                   help="Rate limit profile (default %(default)s; the dev environment passes "
                        "SYMORVA_SERVICES_RATE_LIMIT)")
    p.add_argument("--rate-limit-bucket", action="append", default=[], metavar="CLASS=BURST/PER_SECOND",
                   help="Override one route class's bucket, e.g. reads=20/2 (repeatable; classes: "
                        "openid, writes, reads)")
    p.add_argument("--janus-url", default=None, help="Meetings: the Janus HTTP API, e.g. http://127.0.0.1:8088/janus")
    p.add_argument("--janus-admin-key-file", default=None, help="Meetings: file holding the AudioBridge admin key")
    p.add_argument("--media-dir", default=None, help="Meetings: folder for the HLS playback streams")
    p.add_argument("--homeserver-admin-file", default=None, metavar="PATH",
                   help="JSON {userId, password} or {accessToken} of a homeserver admin: meetings and the AI studio "
                        "ask the homeserver (Synapse admin API) about room membership and power levels")
    p.add_argument("--push-notify-from", action="append", default=None, metavar="ADDR",
                   help="Push gateway: an address notify is accepted from (repeatable; default: the addresses the "
                        "--homeserver URL's host resolves to)")
    p.add_argument("--log-level", default="info")
    return p.parse_args(argv)


def rate_limits(args: argparse.Namespace) -> RateLimits:
    """The profile with the overrides applied; raises ValueError."""
    limits = profile(args.rate_limit)
    for spec in args.rate_limit_bucket:
        limits = limits.with_override(spec)
    return limits



def quiet_http_client_logs() -> None:
    """The HTTP client's INFO lines name each request URL with its query string, and the OpenID
    userinfo check carries the member's OpenID token there: keep those loggers at WARNING so that
    no token reaches the services log, whatever --log-level says."""
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)

def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        limits = rate_limits(args)
    except ValueError as e:
        print(f"symorva_server: --rate-limit-bucket: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_http_client_logs()
    settings = Settings(
        homeserver_url=args.homeserver.rstrip("/"),
        server_name=args.server_name,
        db_path=args.db,
        manifest_path=args.manifest,
        host=args.host,
        port=args.port,
        test_mode=args.test,
        token_lifetime_s=args.token_lifetime,
        max_body_bytes=args.max_body_bytes,
        public_url=args.public_url,
        rate_limits=limits,
        janus_url=args.janus_url,
        janus_admin_key_file=args.janus_admin_key_file,
        media_dir=args.media_dir,
        homeserver_admin_file=args.homeserver_admin_file,
        push_notify_from=tuple(args.push_notify_from) if args.push_notify_from else None,
    )
    try:
        app = create_app(settings)
    except ManifestError as e:
        print(f"symorva_server: {e}", file=sys.stderr)
        return 2
    if args.test:
        logging.getLogger("symorva_server").warning("TEST MODE: fault injection enabled")
    logging.getLogger("symorva_server").info("rate limits (%s): %s (burst/per second)", args.rate_limit,
                                             limits.describe())
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level.lower(),
                http="h11", loop="asyncio", lifespan="on", access_log=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
