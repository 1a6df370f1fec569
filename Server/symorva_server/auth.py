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

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import httpx
from fastapi import APIRouter, Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from .db import Database
from .errors import ErrorBody, ErrorCode, SymorvaError, send_raw_error

if TYPE_CHECKING:
    from .context import ServerContext

PUBLIC_PATHS = frozenset(
    {
        "/_symorva/v1/health",
        "/.well-known/symorva",
        "/_symorva/v1/auth/openid",
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
]

_WWW_AUTH = {"WWW-Authenticate": 'Bearer realm="symorva"'}


class OpenIdVerificationError(Exception):
    """The homeserver rejected the token (invalid=True) or could not be asked."""

    def __init__(self, message: str, *, invalid: bool) -> None:
        super().__init__(message)
        self.invalid = invalid


class OpenIdVerifier(Protocol):
    async def verify(self, openid_token: str) -> str:
        """Return the Matrix user id the token belongs to, or raise OpenIdVerificationError."""
        ...


class HomeserverOpenIdVerifier:
    """Asks the homeserver's federation OpenID userinfo endpoint."""

    def __init__(self, homeserver_url: str, timeout_s: float = 10.0) -> None:
        self.url = homeserver_url.rstrip("/") + "/_matrix/federation/v1/openid/userinfo"
        self.timeout_s = timeout_s

    async def verify(self, openid_token: str) -> str:
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
            sub = resp.json().get("sub")
        except ValueError:
            sub = None
        if not isinstance(sub, str) or not sub.startswith("@") or ":" not in sub:
            raise OpenIdVerificationError("homeserver userinfo has no valid 'sub'", invalid=False)
        return sub


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class AuthenticatedUser:
    user_id: str
    expires_at_ms: int


class TokenStore:
    """Issued bearer tokens (only their hashes are stored), on the server's clock."""

    def __init__(self, db: Database, clock: Callable[[], float], lifetime_s: int) -> None:
        self.db = db
        self.clock = clock
        self.lifetime_s = lifetime_s
        db.migrate("auth", MIGRATIONS)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def issue(self, user_id: str) -> tuple[str, int]:
        token = "sy_" + secrets.token_urlsafe(32)
        now = self.now_ms()
        lifetime_ms = self.lifetime_s * 1000
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM access_tokens WHERE expires_at_ms <= ?", (now,))
            conn.execute(
                "INSERT INTO access_tokens(token_hash, user_id, created_at_ms, expires_at_ms)"
                " VALUES (?, ?, ?, ?)",
                (hash_token(token), user_id, now, now + lifetime_ms),
            )
        return token, lifetime_ms

    def lookup(self, token: str) -> AuthenticatedUser:
        row = self.db.query_one(
            "SELECT user_id, expires_at_ms FROM access_tokens WHERE token_hash = ?",
            (hash_token(token),),
        )
        if row is None:
            raise SymorvaError(401, ErrorCode.UNKNOWN_TOKEN, "Unknown access token", headers=_WWW_AUTH)
        if row["expires_at_ms"] <= self.now_ms():
            raise SymorvaError(
                401, ErrorCode.UNKNOWN_TOKEN,
                "Access token has expired; exchange a new OpenID token",
                headers=_WWW_AUTH,
            )
        return AuthenticatedUser(row["user_id"], row["expires_at_ms"])


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


class OpenIdExchangeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    access_token: StrictStr = Field(min_length=1, max_length=4096,
                                    description="OpenID access token from the homeserver.")
    matrix_server_name: StrictStr = Field(min_length=1, max_length=255,
                                          description="Server name the token was issued by.")
    expires_in: StrictInt | None = Field(default=None, ge=0,
                                         description="Lifetime of the OpenID token in seconds, as the homeserver returned it.")
    token_type: StrictStr | None = Field(default=None, description="As returned by the homeserver ('Bearer').")


class TokenResponse(BaseModel):
    access_token: str = Field(description="Bearer token for the community services API.")
    token_type: str = Field(default="Bearer")
    expires_in_ms: int = Field(description="Milliseconds until the token expires.")
    user_id: str = Field(description="Matrix user id of the member.")


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
        user_id = await ctx.verifier.verify(body.access_token)
    except OpenIdVerificationError as e:
        if e.invalid:
            raise SymorvaError(401, ErrorCode.UNKNOWN_TOKEN,
                               "OpenID token was rejected by the homeserver (unknown or expired)") from e
        raise SymorvaError(502, ErrorCode.HOMESERVER_UNAVAILABLE,
                           f"Could not verify the OpenID token: {e}") from e
    if user_id.split(":", 1)[1] != server_name:
        raise SymorvaError(401, ErrorCode.FORBIDDEN,
                           f"User {user_id} does not belong to this community's homeserver '{server_name}'")
    token, lifetime_ms = ctx.tokens.issue(user_id)
    return TokenResponse(access_token=token, expires_in_ms=lifetime_ms, user_id=user_id)


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
