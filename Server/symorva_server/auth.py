"""Member authentication: Matrix OpenID token -> community services bearer token.

Flow: the client asks its homeserver for an OpenID token
(`POST /_matrix/client/v3/user/{userId}/openid/request_token`) and posts it to
`POST /_symorva/v1/auth/openid`. The server checks `matrix_server_name` is the
configured homeserver's name, verifies the token with the homeserver's
`GET /_matrix/federation/v1/openid/userinfo`, and returns its own opaque bearer
token with an expiry. Every other endpoint (except health and discovery) needs
`Authorization: Bearer <token>`; the check happens in `AuthMiddleware`, before
routing or body parsing, so nothing else answers an unauthenticated request.
"""

from __future__ import annotations

import anyio

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import httpx
from fastapi import APIRouter, Body, Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from .db import Database
from .errors import ErrorBody, ErrorCode, SymorvaError, send_raw_error

if TYPE_CHECKING:
    from .context import ServerContext

PUBLIC_PATHS = frozenset(
    {
        "/_symorva/v1/health",
        "/.well-known/symorva",
        "/_symorva/v1/auth/openid",
        "/_matrix/push/v1/notify",  # the Push Gateway API: the homeserver calls it (push.py)
    }
)

MIGRATIONS = [
    """
    CREATE TABLE access_tokens (
        token_hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL
    );
    CREATE INDEX access_tokens_expiry ON access_tokens(expires_at_ms);
    """,
    # The Matrix device a token was issued for (see exchange_openid), for sign-out.
    """
    ALTER TABLE access_tokens ADD COLUMN device_id TEXT;
    CREATE INDEX access_tokens_user_device ON access_tokens(user_id, device_id);
    """,
]

_WWW_AUTH = {"WWW-Authenticate": 'Bearer realm="symorva"'}


class OpenIdVerificationError(Exception):
    """The homeserver rejected the token (invalid=True) or could not be asked."""

    def __init__(self, message: str, *, invalid: bool) -> None:
        super().__init__(message)
        self.invalid = invalid


@dataclass(frozen=True)
class OpenIdIdentity:
    """Who an OpenID token belongs to, as the homeserver says."""

    user_id: str
    # The Matrix device the token was requested from, if the homeserver tells (the Matrix
    # spec's userinfo has only `sub`, and Synapse gives nothing more).
    device_id: str | None = None


class OpenIdVerifier(Protocol):
    async def verify(self, openid_token: str) -> str | OpenIdIdentity:
        """Return the Matrix user id the token belongs to (or an OpenIdIdentity), or raise
        OpenIdVerificationError."""
        ...


class HomeserverOpenIdVerifier:
    """Asks the homeserver's federation OpenID userinfo endpoint."""

    def __init__(self, homeserver_url: str, timeout_s: float = 10.0) -> None:
        self.url = homeserver_url.rstrip("/") + "/_matrix/federation/v1/openid/userinfo"
        self.timeout_s = timeout_s

    async def verify(self, openid_token: str) -> OpenIdIdentity:
        try:
            # trust_env=False: never send tokens through a proxy from the environment.
            async with httpx.AsyncClient(timeout=self.timeout_s, trust_env=False) as client:
                resp = await client.get(self.url, params={"access_token": openid_token})
        except httpx.HTTPError as e:
            raise OpenIdVerificationError(f"homeserver not reachable: {e}", invalid=False) from e
        if resp.status_code in (401, 403, 404):
            raise OpenIdVerificationError("OpenID token unknown or expired", invalid=True)
        if resp.status_code != 200:
            raise OpenIdVerificationError(
                f"homeserver answered {resp.status_code} to userinfo", invalid=False
            )
        try:
            info = resp.json()
        except ValueError:
            info = None
        sub = info.get("sub") if isinstance(info, dict) else None
        if not isinstance(sub, str) or not sub.startswith("@") or ":" not in sub:
            raise OpenIdVerificationError("homeserver userinfo has no valid 'sub'", invalid=False)
        device_id = info.get("device_id")
        return OpenIdIdentity(sub, device_id if isinstance(device_id, str) and device_id else None)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class AuthenticatedUser:
    user_id: str
    expires_at_ms: int
    device_id: str | None = None  # the Matrix device the token is bound to, if known
    token_hash: str | None = None  # of the bearer token presented


class TokenStore:
    """Issued bearer tokens (only their hashes are stored), on the server's clock."""

    def __init__(self, db: Database, clock: Callable[[], float], lifetime_s: int) -> None:
        self.db = db
        self.clock = clock
        self.lifetime_s = lifetime_s
        db.migrate("auth", MIGRATIONS)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def issue(self, user_id: str, device_id: str | None = None) -> tuple[str, int]:
        token = "sy_" + secrets.token_urlsafe(32)
        now = self.now_ms()
        lifetime_ms = self.lifetime_s * 1000
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM access_tokens WHERE expires_at_ms <= ?", (now,))
            conn.execute(
                "INSERT INTO access_tokens(token_hash, user_id, created_at_ms, expires_at_ms, device_id)"
                " VALUES (?, ?, ?, ?, ?)",
                (hash_token(token), user_id, now, now + lifetime_ms, device_id),
            )
        return token, lifetime_ms

    def revoke(self, user: AuthenticatedUser, *, all_devices: bool = False) -> int:
        """Sign-out: deletes the presented token and every other token of the member for the
        same Matrix device (only the presented one when its device is not known), or with
        `all_devices` every token of the member. Returns how many were revoked."""
        with self.db.transaction() as conn:
            if all_devices:
                cur = conn.execute("DELETE FROM access_tokens WHERE user_id = ?", (user.user_id,))
            elif user.device_id is not None:
                cur = conn.execute("DELETE FROM access_tokens WHERE user_id = ? AND (device_id = ? OR token_hash = ?)",
                                   (user.user_id, user.device_id, user.token_hash))
            else:
                cur = conn.execute("DELETE FROM access_tokens WHERE token_hash = ?", (user.token_hash,))
            return cur.rowcount

    def lookup(self, token: str) -> AuthenticatedUser:
        token_hash = hash_token(token)
        row = self.db.query_one(
            "SELECT user_id, expires_at_ms, device_id FROM access_tokens WHERE token_hash = ?",
            (token_hash,),
        )
        if row is None:
            raise SymorvaError(401, ErrorCode.UNKNOWN_TOKEN, "Unknown access token", headers=_WWW_AUTH)
        if row["expires_at_ms"] <= self.now_ms():
            raise SymorvaError(
                401, ErrorCode.UNKNOWN_TOKEN,
                "Access token has expired; exchange a new OpenID token",
                headers=_WWW_AUTH,
            )
        return AuthenticatedUser(row["user_id"], row["expires_at_ms"], row["device_id"], token_hash)


def bearer_token(headers: list[tuple[bytes, bytes]]) -> str | None:
    for k, v in headers:
        if k.lower() == b"authorization":
            value = v.decode("latin-1").strip()
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return ""
    return None


class AuthMiddleware:
    """Rejects every request without a valid bearer token, except PUBLIC_PATHS."""

    def __init__(self, app, ctx: ServerContext) -> None:
        self.app = app
        self.ctx = ctx

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        token = bearer_token(scope.get("headers", []))
        if token is None:
            await send_raw_error(
                send, 401, ErrorCode.MISSING_TOKEN,
                "Missing access token: send 'Authorization: Bearer <token>'",
                [(b"www-authenticate", b'Bearer realm="symorva"')],
            )
            return
        try:
            user = self.ctx.tokens.lookup(token)
        except SymorvaError as e:
            await send_raw_error(send, e.status, e.errcode, e.error,
                                 [(b"www-authenticate", b'Bearer realm="symorva"')])
            return
        scope.setdefault("state", {})["symorva_user"] = user
        await self.app(scope, receive, send)


_bearer_scheme = HTTPBearer(auto_error=False, description="Token from POST /_symorva/v1/auth/openid")


def require_user(
    request: Request,
    _creds: HTTPAuthorizationCredentials | None = Depends(_bearer_scheme),
) -> AuthenticatedUser:
    """FastAPI dependency: the member the (already checked) bearer token belongs to."""
    user = request.scope.get("state", {}).get("symorva_user")
    if user is None:
        raise SymorvaError(401, ErrorCode.MISSING_TOKEN, "Missing access token", headers=_WWW_AUTH)
    return user


def require_admin(request: Request, user: AuthenticatedUser = Depends(require_user)) -> AuthenticatedUser:
    """FastAPI dependency: the member, who must be one of the community's admins (manifest
    `services.admins`); else 403 SY_NOT_ADMIN."""
    ctx: ServerContext = request.app.state.ctx
    if user.user_id not in ctx.admins:
        raise SymorvaError(403, ErrorCode.NOT_ADMIN,
                           f"{user.user_id} is not an admin of this community (manifest services.admins)")
    return user


def require_development(request: Request) -> None:
    """FastAPI dependency: refuses (403 SY_NOT_IN_DEVELOPMENT) unless the server runs in
    development mode (manifest services.development, or --test)."""
    ctx: ServerContext = request.app.state.ctx
    if not ctx.development:
        raise SymorvaError(403, ErrorCode.NOT_IN_DEVELOPMENT,
                           "Only in development mode (manifest services.development or --test); "
                           "this community runs in production mode")


class OpenIdExchangeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    access_token: StrictStr = Field(min_length=1, max_length=4096,
                                    description="OpenID access token from the homeserver.")
    matrix_server_name: StrictStr = Field(min_length=1, max_length=255,
                                          description="Server name the token was issued by.")
    expires_in: StrictInt | None = Field(default=None, ge=0,
                                         description="Lifetime of the OpenID token in seconds, as the homeserver returned it.")
    token_type: StrictStr | None = Field(default=None, description="As returned by the homeserver ('Bearer').")
    device_id: StrictStr | None = Field(
        default=None, min_length=1, max_length=255,
        description="The Matrix device ID of the client (as its homeserver login returned it). The "
                    "services token is bound to it, so that a sign-out on this device "
                    "(POST /_symorva/v1/auth/logout) revokes every services token it was issued. "
                    "Declared by the client: the homeserver's userinfo does not confirm it (when a "
                    "homeserver does return a device, a different one is refused).")


class TokenResponse(BaseModel):
    access_token: str = Field(description="Bearer token for the community services API.")
    token_type: str = Field(default="Bearer")
    expires_in_ms: int = Field(description="Milliseconds until the token expires.")
    user_id: str = Field(description="Matrix user id of the member.")


class LogoutRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    all_devices: StrictBool = Field(
        default=False,
        description="Revoke every services token of the member, not only those of this token's device.")


class LogoutResponse(BaseModel):
    revoked: int = Field(description="How many services tokens were revoked (the presented one included).")


class WhoamiResponse(BaseModel):
    user_id: str
    expires_in_ms: int = Field(description="Milliseconds until the current token expires.")


AUTH_ERRORS = {
    401: {"model": ErrorBody, "description": "Missing, unknown, forged or expired token"},
}

router = APIRouter(tags=["auth"])


@router.post(
    "/_symorva/v1/auth/openid",
    response_model=TokenResponse,
    responses={
        400: {"model": ErrorBody, "description": "Malformed request"},
        401: {"model": ErrorBody, "description": "OpenID token invalid/expired (SY_UNKNOWN_TOKEN) or from a foreign server (SY_FORBIDDEN)"},
        502: {"model": ErrorBody, "description": "Homeserver could not be asked"},
    },
    summary="Exchange a Matrix OpenID token for a community services token",
)
async def exchange_openid(body: OpenIdExchangeRequest, request: Request) -> TokenResponse:
    ctx: ServerContext = request.app.state.ctx
    server_name = ctx.settings.server_name
    if body.matrix_server_name != server_name:
        raise SymorvaError(
            401, ErrorCode.FORBIDDEN,
            f"OpenID tokens from '{body.matrix_server_name}' are not accepted; "
            f"this community's homeserver is '{server_name}'",
        )
    try:
        identity = await ctx.verifier.verify(body.access_token)
    except OpenIdVerificationError as e:
        if e.invalid:
            raise SymorvaError(401, ErrorCode.UNKNOWN_TOKEN,
                               "OpenID token was rejected by the homeserver (unknown or expired)") from e
        raise SymorvaError(502, ErrorCode.HOMESERVER_UNAVAILABLE,
                           f"Could not verify the OpenID token: {e}") from e
    if isinstance(identity, str):
        identity = OpenIdIdentity(identity)
    user_id = identity.user_id
    if user_id.split(":", 1)[1] != server_name:
        raise SymorvaError(401, ErrorCode.FORBIDDEN,
                           f"User {user_id} does not belong to this community's homeserver '{server_name}'")
    device_id = identity.device_id or body.device_id
    if identity.device_id is not None and body.device_id not in (None, identity.device_id):
        raise SymorvaError(401, ErrorCode.FORBIDDEN,
                           "The OpenID token was issued to another device than the one declared")
    # On a worker thread: waiting for the database's write lock never blocks the event loop.
    token, lifetime_ms = await anyio.to_thread.run_sync(ctx.tokens.issue, user_id, device_id)
    return TokenResponse(access_token=token, expires_in_ms=lifetime_ms, user_id=user_id)


@router.post(
    "/_symorva/v1/auth/logout",
    response_model=LogoutResponse,
    responses={**AUTH_ERRORS, 400: {"model": ErrorBody, "description": "Malformed request"}},
    summary="Sign out: revoke this device's services tokens (or all the member's)",
)
def logout(request: Request, body: LogoutRequest | None = Body(default=None),
           user: AuthenticatedUser = Depends(require_user)) -> LogoutResponse:
    """Call it when the member signs out of Matrix on this device: the presented token, and
    every other services token issued for the same Matrix device (the `device_id` of the
    exchange), stop working at once (401 SY_UNKNOWN_TOKEN). With `all_devices` every services
    token of the member is revoked. The body is optional."""
    ctx: ServerContext = request.app.state.ctx
    return LogoutResponse(revoked=ctx.tokens.revoke(user, all_devices=bool(body and body.all_devices)))


@router.get(
    "/_symorva/v1/whoami",
    response_model=WhoamiResponse,
    responses=AUTH_ERRORS,
    summary="The member the bearer token belongs to",
)
def whoami(request: Request, user: AuthenticatedUser = Depends(require_user)) -> WhoamiResponse:
    ctx: ServerContext = request.app.state.ctx
    return WhoamiResponse(user_id=user.user_id,
                          expires_in_ms=max(0, user.expires_at_ms - ctx.tokens.now_ms()))
