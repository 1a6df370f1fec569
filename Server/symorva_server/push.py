"""The Push Gateway: what a Matrix homeserver's HTTP pushers post to.

`POST /_matrix/push/v1/notify` (Push Gateway API, spec v1.11) carries no credentials: the
homeserver calls it, not a member. This gateway accepts it only from the configured homeserver's
addresses (`--push-notify-from ADDR`, repeatable; by default what the `--homeserver` URL's host
resolves to) and answers anyone else 403 `SY_FORBIDDEN`; it is rate limited per address (route
class `notify`) and runs on the gateway's own database connection, so a notify never waits for
the services' database lock (SQLite's own write lock orders it with other writes).

A real gateway forwards to APNs or FCM; this reference gateway is for development and tests, so
it records every notification per pushkey instead, where the member that owns the pushkey reads
it back. A pushkey is known once a member has registered it (`POST /_symorva/v1/push/pushkeys`,
what an app does when the platform hands it a device token; a member keeps at most
MAX_PUSHKEYS_PER_MEMBER, registering another forgets the oldest); a notification for an unknown
(or removed) pushkey answers it in `rejected`, and the homeserver then deletes its pusher, as the
spec asks. Pushkeys travel in request bodies only, never in a URL path or query (the access log
writes those), and nothing here logs one.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from .auth import AUTH_ERRORS, AuthenticatedUser, require_user
from .errors import ErrorBody, ErrorCode, SymorvaError

if TYPE_CHECKING:
    from .context import ServerContext

log = logging.getLogger("symorva_server.push")

NOTIFY_PATH = "/_matrix/push/v1/notify"
PREFIX = "/_symorva/v1/push"
MAX_KEPT_PER_PUSHKEY = 1000
MAX_PUSHKEYS_PER_MEMBER = 20

MIGRATIONS = [
    """
    CREATE TABLE push_pushkeys (
        pushkey TEXT NOT NULL,
        app_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        registered_at_ms INTEGER NOT NULL,
        PRIMARY KEY (app_id, pushkey)
    );
    CREATE TABLE push_notifications (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        app_id TEXT NOT NULL,
        pushkey TEXT NOT NULL,
        received_at_ms INTEGER NOT NULL,
        event_id TEXT,
        room_id TEXT,
        type TEXT,
        sender TEXT,
        prio TEXT,
        unread INTEGER,
        missed_calls INTEGER,
        notification TEXT NOT NULL
    );
    CREATE INDEX push_notifications_key ON push_notifications(app_id, pushkey, seq);
    """,
]


class NotifyDevice(BaseModel):
    model_config = ConfigDict(extra="allow")
    app_id: str = Field(max_length=64)
    pushkey: str = Field(max_length=512)
    pushkey_ts: int | None = None
    data: dict[str, Any] | None = None
    tweaks: dict[str, Any] | None = None


class NotifyCounts(BaseModel):
    model_config = ConfigDict(extra="allow")
    unread: int | None = None
    missed_calls: int | None = None


class Notification(BaseModel):
    model_config = ConfigDict(extra="allow")
    event_id: str | None = None
    room_id: str | None = None
    type: str | None = None
    sender: str | None = None
    sender_display_name: str | None = None
    room_name: str | None = None
    room_alias: str | None = None
    user_is_target: bool | None = None
    prio: str | None = None
    content: dict[str, Any] | None = None
    counts: NotifyCounts | None = None
    devices: list[NotifyDevice] = Field(max_length=100)


class NotifyRequest(BaseModel):
    notification: Notification


class NotifyResponse(BaseModel):
    rejected: list[str] = Field(description="Pushkeys the gateway does not know: the homeserver removes their pushers.")


class PushkeyRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    pushkey: str = Field(min_length=1, max_length=512, description=(
        "The platform's device token. In the body, never in a URL path or query: access logs write those."))
    app_id: str = Field(min_length=1, max_length=64, description="The pusher's app_id (reverse DNS).")


class NotificationsRequest(PushkeyRequest):
    after: int = Field(default=0, ge=0, description="Only notifications with a greater `seq`.")
    limit: int = Field(default=100, ge=1, le=1000)


class PushkeyOut(BaseModel):
    pushkey: str
    app_id: str


class RecordedNotification(BaseModel):
    seq: int = Field(description="Increasing; pass the last one as `after` to read only newer ones.")
    app_id: str
    pushkey: str
    received_at_ms: int
    event_id: str | None
    room_id: str | None
    type: str | None
    sender: str | None
    prio: str | None
    unread: int | None = Field(description="counts.unread as the homeserver sent it.")
    missed_calls: int | None


class RecordedPage(BaseModel):
    notifications: list[RecordedNotification]


def _ctx(request: Request) -> ServerContext:
    return request.app.state.ctx


def notify_sources(homeserver_url: str) -> frozenset[str]:
    """The addresses the homeserver's host name resolves to (where its pushers post from, when the
    homeserver and the gateway talk directly, as in the dev environment)."""
    host = urlsplit(homeserver_url).hostname or ""
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        log.warning("push gateway: the homeserver's host does not resolve; notify is refused until configured")
        return frozenset()
    return frozenset(_normalised(info[4][0]) for info in infos)


def _normalised(address: str) -> str:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip)


gateway_router = APIRouter(tags=["push gateway"])
router = APIRouter(tags=["push"], responses=AUTH_ERRORS)


@gateway_router.post(NOTIFY_PATH, response_model=NotifyResponse,
                     responses={403: {"model": ErrorBody, "description": "SY_FORBIDDEN: not from the homeserver"}},
                     summary="Push Gateway API: a homeserver's pusher delivers a notification")
def push_notify(request: Request, body: NotifyRequest) -> Any:
    ctx = _ctx(request)
    peer = _normalised(request.client.host) if request.client else ""
    if peer not in ctx.push_notify_from:
        log.info("push gateway: refused a notify that did not come from the homeserver")
        raise SymorvaError(403, ErrorCode.FORBIDDEN, "Only the homeserver may deliver notifications here")
    now = int(ctx.clock() * 1000)
    n = body.notification
    # The event content may hold a message body: it is not kept, only the routing fields.
    kept = n.model_dump(exclude={"content", "devices"}, exclude_none=True)
    rejected: list[str] = []
    # The gateway's own connection: a notify never waits for the services' database lock.
    with ctx.push_db.transaction() as c:
        for device in n.devices:
            known = c.execute("SELECT 1 FROM push_pushkeys WHERE app_id = ? AND pushkey = ?",
                              (device.app_id, device.pushkey)).fetchone()
            if known is None:
                rejected.append(device.pushkey)
                continue
            counts = n.counts or NotifyCounts()
            c.execute(
                "INSERT INTO push_notifications (app_id, pushkey, received_at_ms, event_id, room_id, type, sender,"
                " prio, unread, missed_calls, notification) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (device.app_id, device.pushkey, now, n.event_id, n.room_id, n.type, n.sender, n.prio,
                 counts.unread, counts.missed_calls, json.dumps(kept)))
            c.execute("DELETE FROM push_notifications WHERE app_id = ? AND pushkey = ? AND seq <= ("
                      "SELECT seq FROM push_notifications WHERE app_id = ? AND pushkey = ?"
                      " ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                      (device.app_id, device.pushkey, device.app_id, device.pushkey, MAX_KEPT_PER_PUSHKEY))
    return {"rejected": rejected}


def _owned(ctx: ServerContext, user: AuthenticatedUser, app_id: str, pushkey: str) -> None:
    row = ctx.push_db.query_one("SELECT user_id FROM push_pushkeys WHERE app_id = ? AND pushkey = ?",
                                (app_id, pushkey))
    if row is None or row["user_id"] != user.user_id:
        raise SymorvaError(404, ErrorCode.NOT_FOUND, "No such pushkey registered by this member")


@router.post(f"{PREFIX}/pushkeys", response_model=PushkeyOut,
             responses={409: {"model": ErrorBody, "description": "SY_FORBIDDEN: another member's pushkey"}},
             summary="Register a pushkey with the gateway (an app's device token); a member keeps at most "
                     f"{MAX_PUSHKEYS_PER_MEMBER}, the oldest goes")
def push_register_pushkey(request: Request, body: PushkeyRequest,
                          user: AuthenticatedUser = Depends(require_user)) -> Any:
    ctx = _ctx(request)
    with ctx.push_db.transaction() as c:
        row = c.execute("SELECT user_id FROM push_pushkeys WHERE app_id = ? AND pushkey = ?",
                        (body.app_id, body.pushkey)).fetchone()
        if row is not None and row["user_id"] != user.user_id:
            raise SymorvaError(409, ErrorCode.FORBIDDEN, "This pushkey belongs to another member")
        if row is None:
            c.execute("INSERT INTO push_pushkeys (pushkey, app_id, user_id, registered_at_ms) VALUES (?, ?, ?, ?)",
                      (body.pushkey, body.app_id, user.user_id, int(ctx.clock() * 1000)))
            # The member's oldest pushkeys beyond the bound are forgotten (their notifications too).
            for old in c.execute("SELECT app_id, pushkey FROM push_pushkeys WHERE user_id = ?"
                                 " ORDER BY registered_at_ms DESC, rowid DESC LIMIT -1 OFFSET ?",
                                 (user.user_id, MAX_PUSHKEYS_PER_MEMBER)).fetchall():
                c.execute("DELETE FROM push_pushkeys WHERE app_id = ? AND pushkey = ?", (old[0], old[1]))
                c.execute("DELETE FROM push_notifications WHERE app_id = ? AND pushkey = ?", (old[0], old[1]))
    return {"pushkey": body.pushkey, "app_id": body.app_id}


@router.post(f"{PREFIX}/pushkeys/remove", response_model=PushkeyOut,
             responses={404: {"model": ErrorBody, "description": "SY_NOT_FOUND"}},
             summary="Forget a pushkey: later notifications for it are rejected")
def push_unregister_pushkey(request: Request, body: PushkeyRequest,
                            user: AuthenticatedUser = Depends(require_user)) -> Any:
    ctx = _ctx(request)
    _owned(ctx, user, body.app_id, body.pushkey)
    with ctx.push_db.transaction() as c:
        c.execute("DELETE FROM push_pushkeys WHERE app_id = ? AND pushkey = ?", (body.app_id, body.pushkey))
    return {"pushkey": body.pushkey, "app_id": body.app_id}


@router.post(f"{PREFIX}/pushkeys/notifications", response_model=RecordedPage,
             responses={404: {"model": ErrorBody, "description": "SY_NOT_FOUND"}},
             summary="The notifications the gateway received for one of the member's pushkeys")
def push_notifications(request: Request, body: NotificationsRequest,
                       user: AuthenticatedUser = Depends(require_user)) -> Any:
    ctx = _ctx(request)
    _owned(ctx, user, body.app_id, body.pushkey)
    rows = ctx.push_db.query(
        "SELECT seq, app_id, pushkey, received_at_ms, event_id, room_id, type, sender, prio, unread, missed_calls"
        " FROM push_notifications WHERE app_id = ? AND pushkey = ? AND seq > ? ORDER BY seq LIMIT ?",
        (body.app_id, body.pushkey, body.after, body.limit))
    return {"notifications": [dict(r) for r in rows]}
