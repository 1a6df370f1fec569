"""Member directory module: the community's members, their Matrix profiles and their roles.

What the server guarantees (docs/directory.md, "Server side", has the full contract):

- A member is listed once they have used the directory (any directory request registers the
  caller) or an admin has given them a role. Entries hold the Matrix display name and avatar
  URL, kept fresh from the homeserver's profile API
  (`GET /_matrix/client/v3/profile/{userId}`): an entry older than `profileTtlSeconds`
  (module option, default 300) is fetched again before it is returned, and a member refreshes
  their own entry at once with `POST .../profile/refresh` (after changing their Matrix
  profile). A profile the homeserver cannot give keeps its last known values.
- Roles (badges) are short labels (`moderator`, `steward`, ...) that only the community's
  admins (manifest `services.admins`) assign and remove.
- Listing and search are paged with an opaque `from` token, ordered by user ID; `q` matches
  the user ID or display name, case-insensitively.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, Field

from ..auth import AUTH_ERRORS, AuthenticatedUser, require_admin, require_user
from ..errors import ErrorBody, ErrorCode, SymorvaError

if TYPE_CHECKING:
    from ..db import Database

MODULE_ID = "directory"
PREFIX = "/_symorva/v1/directory"
DEFAULT_PROFILE_TTL_S = 300
ROLE_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
USER_ID_PATTERN = re.compile(r"^@[a-z0-9._=\-/+]+:[A-Za-z0-9.\-\[\]:]+$")

MIGRATIONS = [
    """
    CREATE TABLE directory_members (
        user_id TEXT PRIMARY KEY,
        display_name TEXT,
        avatar_url TEXT,
        joined_at_ms INTEGER NOT NULL,
        profile_fetched_at_ms INTEGER
    );
    CREATE TABLE directory_roles (
        user_id TEXT NOT NULL REFERENCES directory_members(user_id),
        role TEXT NOT NULL,
        assigned_by TEXT NOT NULL,
        assigned_at_ms INTEGER NOT NULL,
        PRIMARY KEY (user_id, role)
    );
    """,
]

# (display name, avatar URL) for a Matrix user, or None when the homeserver cannot say.
ProfileFetcher = Callable[[str], Awaitable[tuple[str | None, str | None] | None]]


def homeserver_profile_fetcher(homeserver_url: str, timeout_s: float = 5.0) -> ProfileFetcher:
    """Fetches profiles from the homeserver's client-server profile API (public in Synapse's
    default configuration)."""
    base = homeserver_url.rstrip("/") + "/_matrix/client/v3/profile/"

    async def fetch(user_id: str) -> tuple[str | None, str | None] | None:
        try:
            async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as client:
                resp = await client.get(base + quote(user_id, safe=""))
        except httpx.HTTPError:
            return None
        if resp.status_code != 200:
            return None
        try:
            body = resp.json()
        except ValueError:
            return None
        if not isinstance(body, dict):
            return None
        name = body.get("displayname")
        avatar = body.get("avatar_url")
        return (name if isinstance(name, str) else None, avatar if isinstance(avatar, str) else None)

    return fetch


@dataclass
class Directory:
    db: Database
    clock: Callable[[], float]
    profile_ttl_ms: int
    fetch_profile: ProfileFetcher

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def ensure_member(self, user_id: str) -> bool:
        """Lists `user_id`; True when the entry is new. (A listed member costs a lock-free read: the
        async routes call this on the event loop.)"""
        if self.db.query_one("SELECT 1 FROM directory_members WHERE user_id = ?", (user_id,)) is not None:
            return False
        with self.db.transaction() as c:
            cur = c.execute("INSERT OR IGNORE INTO directory_members (user_id, joined_at_ms) VALUES (?, ?)",
                            (user_id, self.now_ms()))
            return cur.rowcount == 1

    async def refresh(self, user_ids: list[str], *, force: bool = False) -> None:
        """Fetches the profiles of `user_ids` that are stale (all of them with `force`)."""
        now = self.now_ms()
        if not user_ids:
            return
        marks = ",".join("?" * len(user_ids))
        rows = self.db.query(
            f"SELECT user_id, profile_fetched_at_ms FROM directory_members WHERE user_id IN ({marks})", user_ids)
        stale = [r["user_id"] for r in rows
                 if force or r["profile_fetched_at_ms"] is None
                 or now - r["profile_fetched_at_ms"] >= self.profile_ttl_ms]
        if not stale:
            return
        profiles = await asyncio.gather(*(self.fetch_profile(u) for u in stale))

        def write(c) -> None:
            for user_id, profile in zip(stale, profiles):
                if profile is None:
                    continue  # keeps the last known values; tried again on the next read
                c.execute("UPDATE directory_members SET display_name = ?, avatar_url = ?, profile_fetched_at_ms = ?"
                          " WHERE user_id = ?", (profile[0], profile[1], now, user_id))

        # On a worker thread: waiting for the database's write lock never blocks the event loop.
        await self.db.run_transaction(write)

    def _roles(self, user_ids: list[str]) -> dict[str, list[str]]:
        if not user_ids:
            return {}
        marks = ",".join("?" * len(user_ids))
        out: dict[str, list[str]] = {u: [] for u in user_ids}
        for r in self.db.query(f"SELECT user_id, role FROM directory_roles WHERE user_id IN ({marks})"
                               " ORDER BY role", user_ids):
            out[r["user_id"]].append(r["role"])
        return out

    def _entries(self, rows: list[Any]) -> list[dict[str, Any]]:
        roles = self._roles([r["user_id"] for r in rows])
        return [{"user_id": r["user_id"], "display_name": r["display_name"], "avatar_url": r["avatar_url"],
                 "roles": roles[r["user_id"]]} for r in rows]

    def _filter(self, q: str | None, role: str | None) -> tuple[str, list[Any]]:
        clauses, params = [], []
        if q:
            like = "%" + q.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            clauses.append("(lower(user_id) LIKE ? ESCAPE '\\' OR lower(coalesce(display_name, '')) LIKE ? ESCAPE '\\')")
            params += [like, like]
        if role:
            clauses.append("user_id IN (SELECT user_id FROM directory_roles WHERE role = ?)")
            params.append(role)
        return (" AND ".join(clauses) or "1"), params

    async def page(self, q: str | None, role: str | None, from_: str | None, limit: int) -> dict[str, Any]:
        after = _decode_from(from_) if from_ else ""
        where, params = self._filter(q, role)
        query = f"SELECT * FROM directory_members WHERE user_id > ? AND {where} ORDER BY user_id LIMIT ?"
        rows = self.db.query(query, [after, *params, limit + 1])
        # The page's stale profiles are fetched before it is returned (the search itself runs on
        # the stored names; a member who renamed refreshes at once with POST .../profile/refresh).
        await self.refresh([r["user_id"] for r in rows])
        rows = self.db.query(query, [after, *params, limit + 1])
        more = len(rows) > limit
        rows = rows[:limit]
        total = self.db.query_one(f"SELECT count(*) AS n FROM directory_members WHERE {where}", params)["n"]
        return {"members": self._entries(rows),
                "next_from": _encode_from(rows[-1]["user_id"]) if more and rows else None,
                "total": total}

    async def member(self, user_id: str, *, force: bool = False) -> dict[str, Any]:
        if self.db.query_one("SELECT 1 FROM directory_members WHERE user_id = ?", (user_id,)) is None:
            raise SymorvaError(404, ErrorCode.NOT_FOUND, f"{user_id} is not in the community's directory")
        await self.refresh([user_id], force=force)
        return self._entries(self.db.query("SELECT * FROM directory_members WHERE user_id = ?", (user_id,)))[0]

    def assign(self, user_id: str, role: str, admin: str) -> bool:
        self.ensure_member(user_id)
        with self.db.transaction() as c:
            cur = c.execute("INSERT OR IGNORE INTO directory_roles (user_id, role, assigned_by, assigned_at_ms)"
                            " VALUES (?, ?, ?, ?)", (user_id, role, admin, self.now_ms()))
            return cur.rowcount == 1

    def remove(self, user_id: str, role: str) -> bool:
        with self.db.transaction() as c:
            return c.execute("DELETE FROM directory_roles WHERE user_id = ? AND role = ?",
                             (user_id, role)).rowcount == 1


def create_state(options: dict[str, Any], *, db: Database, clock: Callable[[], float],
                 homeserver_url: str) -> Directory:
    from ..config import ManifestError

    ttl = options.get("profileTtlSeconds", DEFAULT_PROFILE_TTL_S)
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 <= ttl <= 86_400:
        raise ManifestError("modules.directory.profileTtlSeconds must be an integer from 0 to 86400")
    return Directory(db=db, clock=clock, profile_ttl_ms=ttl * 1000,
                     fetch_profile=homeserver_profile_fetcher(homeserver_url))


def _encode_from(user_id: str) -> str:
    return "m1." + base64.urlsafe_b64encode(user_id.encode()).decode().rstrip("=")


def _decode_from(token: str) -> str:
    prefix, _, data = token.partition(".")
    try:
        if prefix != "m1":
            raise ValueError
        user_id = base64.b64decode(data + "=" * (-len(data) % 4), altchars=b"-_", validate=True).decode()
        if not USER_ID_PATTERN.match(user_id):
            raise ValueError
        return user_id
    except (ValueError, UnicodeDecodeError):
        raise SymorvaError(400, ErrorCode.INVALID_PARAM, "from: not a token from an earlier page") from None


# MARK: HTTP


class MemberOut(BaseModel):
    user_id: str = Field(examples=["@alice:localhost"])
    display_name: str | None = Field(description="The member's Matrix display name, as last fetched.")
    avatar_url: str | None = Field(description="The member's Matrix avatar (mxc://), as last fetched.")
    roles: list[str] = Field(description="Roles (badges) the community's admins gave the member, sorted.")


class MemberPage(BaseModel):
    members: list[MemberOut]
    next_from: str | None = Field(description="Pass as `from` for the next page; null on the last page.")
    total: int = Field(description="How many members match the query.")


class RoleChange(BaseModel):
    user_id: str
    role: str
    changed: bool = Field(description="False when the member already had (or did not have) the role.")


def _directory(request: Request) -> Directory:
    directory = request.app.state.ctx.directory
    assert directory is not None, "the directory's routes exist only when it is enabled"
    return directory


def _member(request: Request, user: AuthenticatedUser) -> Directory:
    directory = _directory(request)
    directory.ensure_member(user.user_id)
    return directory


def _check_user_id(user_id: str) -> str:
    if len(user_id) > 255 or not USER_ID_PATTERN.match(user_id):
        raise SymorvaError(400, ErrorCode.INVALID_PARAM, "user_id: not a Matrix user ID")
    return user_id


def _check_role(role: str) -> str:
    if not ROLE_PATTERN.match(role):
        raise SymorvaError(400, ErrorCode.INVALID_PARAM,
                           "role: 1-32 characters, lower-case letters, digits, '-' or '_', starting with a letter")
    return role


_E400 = {"model": ErrorBody, "description": "Invalid request (SY_INVALID_PARAM, ...)"}
_E404 = {"model": ErrorBody, "description": "SY_NOT_FOUND: not in the directory"}

router = APIRouter(tags=["directory"], responses=AUTH_ERRORS)


@router.get(f"{PREFIX}/members", response_model=MemberPage, responses={400: _E400},
            summary="List or search the community's members")
async def directory_members(
    request: Request,
    q: str | None = Query(default=None, max_length=256, description="Matches user ID or display name."),
    role: str | None = Query(default=None, max_length=32, description="Only members with this role."),
    from_: str | None = Query(default=None, alias="from", max_length=512,
                              description="next_from of the previous page."),
    limit: int = Query(default=20, ge=1, le=100),
    user: AuthenticatedUser = Depends(require_user),
) -> Any:
    return await _member(request, user).page(q.strip() if q else None, role, from_, limit)


@router.get(f"{PREFIX}/members/{{user_id}}", response_model=MemberOut, responses={400: _E400, 404: _E404},
            summary="One member's directory entry")
async def directory_member(
    request: Request, user_id: str = Path(max_length=255), user: AuthenticatedUser = Depends(require_user),
) -> Any:
    return await _member(request, user).member(_check_user_id(user_id))


@router.post(f"{PREFIX}/profile/refresh", response_model=MemberOut,
             summary="Fetch the caller's Matrix profile again now")
async def directory_refresh_profile(request: Request, user: AuthenticatedUser = Depends(require_user)) -> Any:
    return await _member(request, user).member(user.user_id, force=True)


@router.put(f"{PREFIX}/admin/members/{{user_id}}/roles/{{role}}", response_model=RoleChange,
            responses={400: _E400, 403: {"model": ErrorBody, "description": "SY_NOT_ADMIN"}},
            summary="Give a member a role (admins only)")
def directory_assign_role(
    request: Request, user_id: str = Path(max_length=255), role: str = Path(max_length=32),
    admin: AuthenticatedUser = Depends(require_admin),
) -> Any:
    changed = _directory(request).assign(_check_user_id(user_id), _check_role(role), admin.user_id)
    return {"user_id": user_id, "role": role, "changed": changed}


@router.delete(f"{PREFIX}/admin/members/{{user_id}}/roles/{{role}}", response_model=RoleChange,
               responses={400: _E400, 403: {"model": ErrorBody, "description": "SY_NOT_ADMIN"}},
               summary="Take a role from a member (admins only)")
def directory_remove_role(
    request: Request, user_id: str = Path(max_length=255), role: str = Path(max_length=32),
    admin: AuthenticatedUser = Depends(require_admin),
) -> Any:
    changed = _directory(request).remove(_check_user_id(user_id), _check_role(role))
    return {"user_id": user_id, "role": role, "changed": changed}
