"""Rate limiting: a token bucket per member (or client IP) and per route class.

Every request that reaches the application is sorted into one route class:

- ``openid``: ``POST /_symorva/v1/auth/openid``, keyed by the client's IP address (the
  request carries no member yet). The address is the TCP peer's: no forwarding header is
  trusted.
- ``writes``: an authenticated request with a method other than GET/HEAD/OPTIONS (wallet
  prepare, confirm and PIN today), keyed by the member.
- ``reads``: an authenticated GET/HEAD request (whoami, capabilities, balances, history,
  PIN state, command queries), keyed by the member.
- ``notify``: ``POST /_matrix/push/v1/notify`` (the push gateway; only the homeserver may
  call it, see push.py), keyed by the client's IP address.

Health, discovery and the ``--test`` endpoints (``/_symorva/v1/test/...``) are never limited.
Each (class, key) has its own bucket of ``burst`` tokens that refills at ``per_second``
tokens a second; a request takes one token. A request that finds less than one token is
answered ``429 SY_LIMIT_EXCEEDED`` with ``retry_after_ms`` (when the next token is there,
rounded up) and a ``Retry-After`` header (the same in whole seconds, rounded up), by
``RateLimitMiddleware``, which runs after authentication and before routing: a refused
request never reaches a handler, so nothing it asked for happened. In particular a
rate-limited wallet confirm is not recorded, its command ID is not spent, and a client may
treat the 429 as "not executed".

Limits come from a profile (``--rate-limit default|high|low``; the dev environment passes
``SYMORVA_SERVICES_RATE_LIMIT``) with optional per-class overrides
(``--rate-limit-bucket reads=20/2``).
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from .errors import ErrorCode, send_raw_error

log = logging.getLogger("symorva_server.ratelimit")

OPENID_PATH = "/_symorva/v1/auth/openid"
NOTIFY_PATH = "/_matrix/push/v1/notify"
API_PREFIX = "/_symorva/v1/"
EXEMPT_PREFIXES = ("/_symorva/v1/test/",)
EXEMPT_PATHS = frozenset({"/_symorva/v1/health", "/.well-known/symorva"})
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

ROUTE_CLASSES = ("openid", "writes", "reads", "notify")


@dataclass(frozen=True)
class Bucket:
    """A token bucket's shape: at most `burst` requests at once, `per_second` sustained."""

    burst: int
    per_second: float

    def __post_init__(self) -> None:
        if not isinstance(self.burst, int) or isinstance(self.burst, bool) or self.burst < 1:
            raise ValueError(f"burst must be an integer >= 1 (got {self.burst!r})")
        if not isinstance(self.per_second, (int, float)) or isinstance(self.per_second, bool) \
                or not math.isfinite(self.per_second) or self.per_second <= 0:
            raise ValueError(f"per_second must be a number > 0 (got {self.per_second!r})")

    def describe(self) -> str:
        return f"{self.burst}/{self.per_second:g}"


@dataclass(frozen=True)
class RateLimits:
    """The bucket of each route class."""

    openid: Bucket
    writes: Bucket
    reads: Bucket
    # The push gateway's notify (the homeserver's pushers), per client address.
    notify: Bucket = Bucket(200, 50.0)

    def bucket(self, route_class: str) -> Bucket:
        return getattr(self, route_class)

    def with_override(self, spec: str) -> RateLimits:
        """`CLASS=BURST/PER_SECOND`, e.g. `reads=20/2`; raises ValueError."""
        name, sep, value = spec.partition("=")
        name = name.strip()
        if not sep or name not in ROUTE_CLASSES:
            raise ValueError(f"expected CLASS=BURST/PER_SECOND with CLASS one of {', '.join(ROUTE_CLASSES)} "
                             f"(got {spec!r})")
        burst, sep, rate = value.partition("/")
        try:
            bucket = Bucket(int(burst), float(rate)) if sep else None
        except ValueError as e:
            raise ValueError(f"{spec!r}: {e}") from None
        if bucket is None:
            raise ValueError(f"expected CLASS=BURST/PER_SECOND (got {spec!r})")
        return replace(self, **{name: bucket})

    def describe(self) -> str:
        return ", ".join(f"{c} {self.bucket(c).describe()}" for c in ROUTE_CLASSES)


PROFILES: dict[str, RateLimits] = {
    # Sane limits for a real community: a person never meets them, a runaway client does. The
    # OpenID exchange (once an hour per signed-in client) is per address, which many members
    # behind one NAT share.
    "default": RateLimits(openid=Bucket(60, 1.0), writes=Bucket(20, 1.0), reads=Bucket(120, 10.0)),
    # Development and the test suites: nothing a test does is ever throttled.
    "high": RateLimits(openid=Bucket(10_000, 1000.0), writes=Bucket(10_000, 1000.0),
                       reads=Bucket(10_000, 1000.0), notify=Bucket(10_000, 1000.0)),
    # Rate-limit tests against the dev servers: a quick burst of a member's requests meets the
    # limit within a few dozen requests, and waiting the hint (well under a second) is enough.
    # Sized so that the rest of a suite still passes: a member's dozen wallet calls, and one
    # OpenID exchange per test client, all from the same address.
    "low": RateLimits(openid=Bucket(30, 1.0), writes=Bucket(10, 2.0), reads=Bucket(20, 4.0),
                      notify=Bucket(60, 20.0)),
}
DEFAULT_PROFILE = "default"


def profile(name: str) -> RateLimits:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown rate limit profile {name!r} (expected {', '.join(PROFILES)})") from None


def route_class(method: str, path: str) -> str | None:
    """The route class of a request (or of an operation in the OpenAPI document), or None
    when it is not limited. `path` may be a template (`/commands/{command_id}`)."""
    if path in EXEMPT_PATHS or path.startswith(EXEMPT_PREFIXES):
        return None
    if path == OPENID_PATH:
        return "openid"
    if path == NOTIFY_PATH:
        return "notify"
    if not path.startswith(API_PREFIX):
        return None
    return "reads" if method.upper() in READ_METHODS else "writes"


class RateLimiter:
    """Token buckets keyed by (route class, member or address), on the server's clock.

    Memory is bounded: buckets are kept in least-recently-used order. Once there are more
    than PRUNE_AT, each request forgets the least recently used buckets that are full again
    (they carry no information), stopping at the first that is not: every bucket is
    forgotten at most once, so this is amortised O(1) per request. Beyond MAX_BUCKETS the
    least recently used bucket is forgotten even if it is not full (its key starts again
    with a full bucket); that takes more distinct members or addresses than a community has.
    A refused request stores nothing new (its bucket is unchanged)."""

    PRUNE_AT = 10_000
    MAX_BUCKETS = 100_000

    def __init__(self, limits: RateLimits, clock: Callable[[], float]) -> None:
        self.limits = limits
        self.clock = clock
        self._lock = threading.Lock()
        # (route class, key) -> (tokens, at), least recently used first.
        self._buckets: OrderedDict[tuple[str, str], tuple[float, float]] = OrderedDict()

    def take(self, route_class: str, key: str) -> int | None:
        """Takes a token. None when the request may go on, else milliseconds until it may."""
        spec = self.limits.bucket(route_class)
        now = self.clock()
        bucket_key = (route_class, key)
        with self._lock:
            state = self._buckets.get(bucket_key)
            tokens = self._tokens(spec, state, now)
            if tokens < 1.0:
                # state is not None here: a bucket never seen is full. Nothing to store; it
                # is only marked as recently used.
                self._buckets.move_to_end(bucket_key)
                return max(1, math.ceil((1.0 - tokens) / spec.per_second * 1000))
            self._buckets[bucket_key] = (tokens - 1.0, now)
            self._buckets.move_to_end(bucket_key)
            if len(self._buckets) > self.PRUNE_AT:
                self._prune(now)
        return None

    def __len__(self) -> int:
        """Buckets held (tests, diagnostics)."""
        with self._lock:
            return len(self._buckets)

    def tokens(self, route_class: str, key: str) -> float:
        """Tokens left now (tests, diagnostics)."""
        with self._lock:
            return self._tokens(self.limits.bucket(route_class), self._buckets.get((route_class, key)),
                                self.clock())

    @staticmethod
    def _tokens(spec: Bucket, state: tuple[float, float] | None, now: float) -> float:
        if state is None:
            return float(spec.burst)
        tokens, at = state
        return min(float(spec.burst), tokens + max(0.0, now - at) * spec.per_second)

    def _prune(self, now: float) -> None:
        """Forgets least recently used buckets that are full again, then any beyond the cap."""
        buckets = self._buckets
        while buckets:
            key, state = next(iter(buckets.items()))
            spec = self.limits.bucket(key[0])
            if self._tokens(spec, state, now) < spec.burst:
                break
            buckets.popitem(last=False)
        while len(buckets) > self.MAX_BUCKETS:
            buckets.popitem(last=False)


def retry_after_header(retry_after_ms: int) -> bytes:
    """`Retry-After` in whole seconds, rounded up (at least 1)."""
    return str(max(1, math.ceil(retry_after_ms / 1000))).encode()


class RateLimitMiddleware:
    """Refuses a request whose bucket is empty with 429 SY_LIMIT_EXCEEDED, before routing.

    Runs inside AuthMiddleware, so the member of an authenticated request is known; the
    OpenID exchange (public) is keyed by the client's address."""

    def __init__(self, app, limiter: RateLimiter) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = route_class(scope["method"], scope["path"])
        key = self._key(scope, route) if route else None
        if key is None:
            await self.app(scope, receive, send)
            return
        retry_after_ms = self.limiter.take(route, key)
        if retry_after_ms is None:
            await self.app(scope, receive, send)
            return
        log.info("rate limited: %s %s (%s of %s), retry after %d ms", scope["method"], scope["path"],
                 route, key, retry_after_ms)
        await send_raw_error(
            send, 429, ErrorCode.LIMIT_EXCEEDED,
            f"Too many requests ({route}); retry after {retry_after_ms} ms",
            [(b"retry-after", retry_after_header(retry_after_ms))],
            retry_after_ms=retry_after_ms,
        )

    @staticmethod
    def _key(scope: dict[str, Any], route: str) -> str | None:
        if route in ("openid", "notify"):
            client = scope.get("client")
            return f"ip:{client[0]}" if client else "ip:unknown"
        user = scope.get("state", {}).get("symorva_user")
        # No member: AuthMiddleware has already answered 401 for anything but public paths.
        return user.user_id if user is not None else None


def document_rate_limits(doc: dict[str, Any], limits: RateLimits) -> None:
    """Adds the 429 answer to every limited operation of an OpenAPI document."""
    for path, ops in doc.get("paths", {}).items():
        for method, op in ops.items():
            route = route_class(method, path)
            if route is None:
                continue
            who = "client address" if route in ("openid", "notify") else "member"
            responses = op.setdefault("responses", {})
            description = (
                f"SY_LIMIT_EXCEEDED: rate limited (route class `{route}`, per {who}). Refused before "
                "the request is handled: nothing it asked for happened. Retry after `retry_after_ms`."
            )
            if "429" in responses:  # the route says what the refusal means for it
                description += " " + responses["429"]["description"]
            responses["429"] = {
                "description": description,
                "headers": {
                    "Retry-After": {
                        "description": "Seconds to wait, rounded up (the body's retry_after_ms is exact).",
                        "schema": {"type": "integer", "minimum": 1},
                    }
                },
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
            }
