"""The studio's HTTP API (docs/ai-studio.md) and its capabilities entry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, Path, Query, Request

from ...auth import AUTH_ERRORS, AuthenticatedUser, require_user
from ...errors import ErrorBody
from .domain import Studio
from .models import AuditPage, GrantList, GrantOut, GrantRequest, StudioStatsOut, SummarizeRequest, SummaryOut

if TYPE_CHECKING:
    from ...context import ServerContext

PREFIX = "/_symorva/v1/studio"
TEST_PREFIX = "/_symorva/v1/test/studio"


def capabilities(ctx: ServerContext, options: dict[str, Any]) -> dict[str, Any]:
    s = _enabled(ctx)
    return {"scopes": ["selected_messages", "conversation_since"], "purposes": ["summarize"],
            "grant_ttl_ms": s.config.grant_ttl_ms, "max_grant_ttl_ms": s.config.max_grant_ttl_ms,
            "summarizer": s.summarizer.name}


def _enabled(ctx: ServerContext) -> Studio:
    assert ctx.ai_studio is not None, "the studio's routes and capabilities exist only when it is enabled"
    return ctx.ai_studio


def _studio(request: Request) -> Studio:
    return _enabled(request.app.state.ctx)


def _counted(request: Request, user: AuthenticatedUser = Depends(require_user)) -> AuthenticatedUser:
    """Every studio request is counted per member (what the test stats report)."""
    _studio(request).requests[user.user_id] += 1
    return user


_GRANT_ERRORS = {
    403: {"model": ErrorBody, "description": "SY_GRANT_FORBIDDEN: the grant belongs to another member"},
    404: {"model": ErrorBody, "description": "SY_GRANT_UNKNOWN"},
}

router = APIRouter(tags=["aiStudio"], responses=AUTH_ERRORS)


@router.post(
    f"{PREFIX}/grants", response_model=GrantOut,
    responses={400: {"model": ErrorBody, "description": "SY_INVALID_PARAM, SY_MISSING_PARAM, ..."},
               403: {"model": ErrorBody, "description": "SY_NOT_ROOM_MEMBER: the homeserver says the member is not "
                                                        "joined to the room"},
               502: {"model": ErrorBody, "description": "SY_HOMESERVER_UNAVAILABLE: membership could not be checked"}},
    summary="Grant the assistant access to part of one conversation, for one purpose, until it expires")
async def studio_create_grant(body: GrantRequest, request: Request,
                              user: AuthenticatedUser = Depends(_counted)) -> Any:
    return await _studio(request).create_grant(user.user_id, body)


@router.get(f"{PREFIX}/grants", response_model=GrantList, summary="The member's grants, newest first")
def studio_list_grants(request: Request, user: AuthenticatedUser = Depends(_counted)) -> Any:
    return _studio(request).list_grants(user.user_id)


@router.get(f"{PREFIX}/grants/{{grant_id}}", response_model=GrantOut, responses=_GRANT_ERRORS,
            summary="One of the member's grants, with its state")
def studio_get_grant(request: Request, grant_id: str = Path(max_length=64),
                     user: AuthenticatedUser = Depends(_counted)) -> Any:
    return _studio(request).get_grant(user.user_id, grant_id)


@router.post(f"{PREFIX}/grants/{{grant_id}}/revoke", response_model=GrantOut, responses=_GRANT_ERRORS,
             summary="Revoke a grant at once (idempotent); a summary in flight for it fails")
def studio_revoke_grant(request: Request, grant_id: str = Path(max_length=64),
                        user: AuthenticatedUser = Depends(_counted)) -> Any:
    return _studio(request).revoke(user.user_id, grant_id)


@router.post(
    f"{PREFIX}/summaries", response_model=SummaryOut,
    responses={
        400: {"model": ErrorBody, "description": "SY_OUT_OF_SCOPE (with item_index and event_id of the first item "
                                                 "outside the grant), SY_INVALID_PARAM, ..."},
        **_GRANT_ERRORS,
        409: {"model": ErrorBody, "description": "SY_GRANT_REVOKED, SY_GRANT_EXPIRED (also when it happened while "
                                                 "the summary was being made)"},
        502: {"model": ErrorBody, "description": "SY_SUMMARIZER_UNAVAILABLE"},
    },
    summary="Summarize messages under a grant; nothing is stored but the audit (IDs and counts, never bodies)")
async def studio_summarize(body: SummarizeRequest, request: Request,
                           user: AuthenticatedUser = Depends(_counted)) -> Any:
    return await _studio(request).summarize(user.user_id, body)


@router.get(f"{PREFIX}/audit", response_model=AuditPage, summary="The member's studio audit, newest first")
def studio_audit(request: Request, limit: int = Query(default=50, ge=1, le=500),
                 user: AuthenticatedUser = Depends(_counted)) -> Any:
    return _studio(request).audit(user.user_id, limit)


test_router = APIRouter(tags=["testing"], responses=AUTH_ERRORS)


@test_router.get(f"{TEST_PREFIX}/stats", response_model=StudioStatsOut,
                 summary="How many studio requests the caller sent. Only exists when the server runs with --test.")
def studio_test_stats(request: Request, user: AuthenticatedUser = Depends(require_user)) -> Any:
    return {"requests": _studio(request).requests[user.user_id]}
