"""The Push Gateway: what a Matrix homeserver's HTTP pushers post to.

`POST /_matrix/push/v1/notify` (Push Gateway API, spec v1.11) is public: the homeserver calls
it, not a member. A real gateway forwards to APNs or FCM; this reference gateway is for
development and tests, so it records every notification per pushkey instead, where the
member that owns the pushkey reads it back. A pushkey is known once a member has registered
it (`PUT /_symorva/v1/push/pushkeys/{pushkey}`, what an app does when the platform hands it a
device token); a notification for an unknown (or removed) pushkey answers it in `rejected`,
and the homeserver then deletes its pusher, as the spec asks.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from .auth import AUTH_ERRORS, AuthenticatedUser, require_user
from .errors import ErrorBody, ErrorCode, SymorvaError

if TYPE_CHECKING:
    from .context import ServerContext

NOTIFY_PATH = "/_matrix/push/v1/notify"
PREFIX = "/_symorva/v1/push"
MAX_KEPT_PER_PUSHKEY = 1000

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
    app_id: str = Field(min_length=1, max_length=64, description="The pusher's app_id (reverse DNS).")


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


gateway_router = APIRouter(tags=["push gateway"])
router = APIRouter(tags=["push"], responses=AUTH_ERRORS)


@gateway_router.post(NOTIFY_PATH, response_model=NotifyResponse,
                     summary="Push Gateway API: a homeserver's pusher delivers a notification")
def push_notify(request: Request, body: NotifyRequest) -> Any:
    ctx = _ctx(request)
    now = int(ctx.clock() * 1000)
    n = body.notification
    # The event content may hold a message body: it is not kept, only the routing fields.
    kept = n.model_dump(exclude={"content", "devices"}, exclude_none=True)
    rejected: list[str] = []
    with ctx.db.transaction() as c:
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
    row = ctx.db.query_one("SELECT user_id FROM push_pushkeys WHERE app_id = ? AND pushkey = ?", (app_id, pushkey))
    if row is None or row["user_id"] != user.user_id:
        raise SymorvaError(404, ErrorCode.NOT_FOUND, "No such pushkey registered by this member")


@router.put(f"{PREFIX}/pushkeys/{{pushkey}}", response_model=PushkeyOut,
            responses={409: {"model": ErrorBody, "description": "SY_FORBIDDEN: another member's pushkey"}},
            summary="Register a pushkey with the gateway (an app's device token)")
def push_register_pushkey(
    request: Request, body: PushkeyRequest, pushkey: str = Path(min_length=1, max_length=512),
    user: AuthenticatedUser = Depends(require_user),
) -> Any:
    ctx = _ctx(request)
    with ctx.db.transaction() as c:
        row = c.execute("SELECT user_id FROM push_pushkeys WHERE app_id = ? AND pushkey = ?",
                        (body.app_id, pushkey)).fetchone()
        if row is not None and row["user_id"] != user.user_id:
            raise SymorvaError(409, ErrorCode.FORBIDDEN, "This pushkey belongs to another member")
        if row is None:
            c.execute("INSERT INTO push_pushkeys (pushkey, app_id, user_id, registered_at_ms) VALUES (?, ?, ?, ?)",
                      (pushkey, body.app_id, user.user_id, int(ctx.clock() * 1000)))
    return {"pushkey": pushkey, "app_id": body.app_id}


@router.delete(f"{PREFIX}/pushkeys/{{pushkey}}", response_model=PushkeyOut,
               responses={404: {"model": ErrorBody, "description": "SY_NOT_FOUND"}},
               summary="Forget a pushkey: later notifications for it are rejected")
def push_unregister_pushkey(
    request: Request, pushkey: str = Path(min_length=1, max_length=512),
    app_id: str = Query(min_length=1, max_length=64), user: AuthenticatedUser = Depends(require_user),
) -> Any:
    ctx = _ctx(request)
    _owned(ctx, user, app_id, pushkey)
    with ctx.db.transaction() as c:
        c.execute("DELETE FROM push_pushkeys WHERE app_id = ? AND pushkey = ?", (app_id, pushkey))
    return {"pushkey": pushkey, "app_id": app_id}


@router.get(f"{PREFIX}/pushkeys/{{pushkey}}/notifications", response_model=RecordedPage,
            responses={404: {"model": ErrorBody, "description": "SY_NOT_FOUND"}},
            summary="The notifications the gateway received for one of the member's pushkeys")
def push_notifications(
    request: Request, pushkey: str = Path(min_length=1, max_length=512),
    app_id: str = Query(min_length=1, max_length=64), after: int = Query(default=0, ge=0),
    limit: int = Query(default=100, ge=1, le=1000), user: AuthenticatedUser = Depends(require_user),
) -> Any:
    ctx = _ctx(request)
    _owned(ctx, user, app_id, pushkey)
    rows = ctx.db.query(
        "SELECT seq, app_id, pushkey, received_at_ms, event_id, room_id, type, sender, prio, unread, missed_calls"
        " FROM push_notifications WHERE app_id = ? AND pushkey = ? AND seq > ? ORDER BY seq LIMIT ?",
        (app_id, pushkey, after, limit))
    return {"notifications": [dict(r) for r in rows]}
