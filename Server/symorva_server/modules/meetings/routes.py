"""The meetings HTTP API (docs/meetings.md, "Server side")."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import FileResponse, Response

from ...auth import AUTH_ERRORS, AuthenticatedUser, require_user
from ...errors import ErrorBody
from .domain import Meetings
from .media import PLAYLIST
from .models import ChangesOut, HandRequest, JoinOut, JoinRequest, MediaConnectOut, MediaSessionOut, SnapshotOut, \
    TargetRequest

PREFIX = "/_symorva/v1/meetings"


def capabilities(ctx: Any, options: dict[str, Any]) -> dict[str, Any]:
    m = _enabled(ctx)
    return {"stage_capacity": m.config.stage_capacity, "host_power_level": m.config.host_power_level,
            "media_server": m.media is not None}


def _enabled(ctx: Any) -> Meetings:
    assert ctx.meetings is not None, "the meetings routes exist only when the module is enabled"
    return ctx.meetings


def _meetings(request: Request) -> Meetings:
    return _enabled(request.app.state.ctx)


def _e(description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


_ID = Path(max_length=40, pattern=r"^mt_[0-9a-f]+$")
_MEMBER = _e("SY_NOT_ROOM_MEMBER (not joined to the meeting's room)")
_HOST = _e("SY_NOT_ROOM_MEMBER, SY_NOT_HOST (power level below hostPowerLevel)")
_STATE = _e("SY_MEETING_ENDED, SY_NOT_PARTICIPANT, SY_WRONG_ROLE, SY_STAGE_FULL")
_404 = _e("SY_MEETING_UNKNOWN")
_5XX = {502: _e("SY_HOMESERVER_UNAVAILABLE"), 503: _e("SY_MEDIA_UNAVAILABLE")}

router = APIRouter(tags=["meetings"], responses=AUTH_ERRORS)


@router.post(f"{PREFIX}/join", response_model=JoinOut,
             responses={403: _e("SY_NOT_ROOM_MEMBER; SY_NOT_HOST (opening a broadcast)"),
                        404: _e("SY_ROOM_UNKNOWN"), 409: _STATE, **_5XX},
             summary="Join (or open) the meeting of a Matrix room: answers the admitted role")
async def meetings_join(body: JoinRequest, request: Request, user: AuthenticatedUser = Depends(require_user)) -> Any:
    return await _meetings(request).join(user.user_id, body.room_id, body.broadcast)


@router.get(f"{PREFIX}/{{meeting_id}}", response_model=SnapshotOut, responses={403: _MEMBER, 404: _404, **_5XX},
            summary="The meeting, its participants (roles, hands) and the feed cursor")
async def meetings_get(request: Request, meeting_id: str = _ID, user: AuthenticatedUser = Depends(require_user)) -> Any:
    return await _meetings(request).view(meeting_id, user.user_id)


@router.get(f"{PREFIX}/{{meeting_id}}/changes", response_model=ChangesOut,
            responses={403: _MEMBER, 404: _404, **_5XX},
            summary="The change feed: changes after `since`, waiting up to `timeout_ms` for one (long poll)")
async def meetings_changes(request: Request, meeting_id: str = _ID,
                           since: int = Query(default=0, ge=0), timeout_ms: int = Query(default=0, ge=0, le=30000),
                           user: AuthenticatedUser = Depends(require_user)) -> Any:
    return await _meetings(request).changes(meeting_id, user.user_id, since, timeout_ms)


@router.post(f"{PREFIX}/{{meeting_id}}/hand", response_model=SnapshotOut,
             responses={403: _MEMBER, 404: _404, 409: _STATE, **_5XX},
             summary="Raise or lower the caller's hand (a signal to hosts; never grants the stage)")
async def meetings_hand(body: HandRequest, request: Request, meeting_id: str = _ID,
                        user: AuthenticatedUser = Depends(require_user)) -> Any:
    return await _meetings(request).hand(meeting_id, user.user_id, body.raised)


@router.post(f"{PREFIX}/{{meeting_id}}/promote", response_model=SnapshotOut,
             responses={403: _HOST, 404: _404, 409: _STATE, **_5XX},
             summary="Hosts: move a listener to the stage (they get a media session)")
async def meetings_promote(body: TargetRequest, request: Request, meeting_id: str = _ID,
                           user: AuthenticatedUser = Depends(require_user)) -> Any:
    return await _meetings(request).promote(meeting_id, user.user_id, body.user_id)


@router.post(f"{PREFIX}/{{meeting_id}}/demote", response_model=SnapshotOut,
             responses={403: _HOST, 404: _404, 409: _STATE, **_5XX},
             summary="Hosts: move a stage member back to listener (their token is revoked, they are kicked)")
async def meetings_demote(body: TargetRequest, request: Request, meeting_id: str = _ID,
                          user: AuthenticatedUser = Depends(require_user)) -> Any:
    return await _meetings(request).demote(meeting_id, user.user_id, body.user_id)


@router.post(f"{PREFIX}/{{meeting_id}}/media", response_model=MediaSessionOut,
             responses={403: _MEMBER, 404: _404, 409: _STATE, **_5XX},
             summary="A stage member's media-session descriptor, renewed (same participant, later expiry)")
async def meetings_media(request: Request, meeting_id: str = _ID,
                         user: AuthenticatedUser = Depends(require_user)) -> Any:
    return await _meetings(request).media_session(meeting_id, user.user_id)


@router.post(f"{PREFIX}/{{meeting_id}}/media/connect", response_model=MediaConnectOut,
             responses={403: _MEMBER, 404: _404, 409: _STATE, **_5XX},
             summary="Stage members: the services join the member to the AudioBridge room and hand over the "
                     "Janus session and handle to continue on (the token never leaves the services)")
async def meetings_media_connect(request: Request, meeting_id: str = _ID,
                                 user: AuthenticatedUser = Depends(require_user)) -> Any:
    return await _meetings(request).connect_media(meeting_id, user.user_id)


@router.post(f"{PREFIX}/{{meeting_id}}/leave", response_model=SnapshotOut, responses={404: _404, 409: _STATE},
             summary="Leave the meeting (the last one out ends it)")
async def meetings_leave(request: Request, meeting_id: str = _ID,
                         user: AuthenticatedUser = Depends(require_user)) -> Any:
    return await _meetings(request).leave(meeting_id, user.user_id)


@router.post(f"{PREFIX}/{{meeting_id}}/end", response_model=SnapshotOut,
             responses={403: _HOST, 404: _404, 409: _STATE, **_5XX},
             summary="Hosts: end the meeting for everyone")
async def meetings_end(request: Request, meeting_id: str = _ID,
                       user: AuthenticatedUser = Depends(require_user)) -> Any:
    return await _meetings(request).end(meeting_id, user.user_id)


@router.get(f"{PREFIX}/{{meeting_id}}/playback/{{name}}", response_class=FileResponse,
            responses={200: {"content": {"application/vnd.apple.mpegurl": {}, "video/mp2t": {}},
                             "description": f"The live playlist ({PLAYLIST}) or one of its segments"},
                       403: _MEMBER, 404: _e("SY_MEETING_UNKNOWN, SY_NOT_FOUND"), 409: _STATE, **_5XX},
            summary="The listeners' HLS playback stream (participants of the meeting only)")
async def meetings_playback(request: Request, meeting_id: str = _ID,
                            name: str = Path(max_length=32, pattern=r"^[a-z0-9]+\.(m3u8|ts)$"),
                            user: AuthenticatedUser = Depends(require_user)) -> Any:
    path = await _meetings(request).playback_file(meeting_id, user.user_id, name)
    if name.endswith(".m3u8"):
        return Response(with_program_dates(path), media_type="application/vnd.apple.mpegurl",
                        headers={"Cache-Control": "no-store"})
    return FileResponse(path, media_type="video/mp2t", headers={"Cache-Control": "no-store"})


def with_program_dates(playlist_path: str) -> bytes:
    """The packager's playlist with `#EXT-X-PROGRAM-DATE-TIME` before each segment: when its
    first sample was captured (the segment file was finished at its last one, so its end is the
    file's modification time), which is how a listener measures its live latency."""
    folder = os.path.dirname(playlist_path)
    with open(playlist_path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    out: list[str] = []
    duration = 0.0
    pending: str | None = None
    for line in lines:
        if line.startswith("#EXTINF:"):
            try:
                duration = float(line[len("#EXTINF:"):].split(",", 1)[0])
            except ValueError:
                duration = 0.0
            pending = line
            continue
        if line and not line.startswith("#") and "/" not in line:
            try:
                end = os.stat(os.path.join(folder, line)).st_mtime
            except OSError:
                end = None
            if end is not None:
                start = datetime.fromtimestamp(end - duration, tz=timezone.utc)
                out.append("#EXT-X-PROGRAM-DATE-TIME:" + start.strftime("%Y-%m-%dT%H:%M:%S.") +
                           f"{start.microsecond // 1000:03d}Z")
        if pending is not None:
            out.append(pending)
            pending = None
        out.append(line)
    return ("\n".join(out) + "\n").encode()
