"""Core endpoints: health, discovery (both public) and capabilities."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from . import API_VERSIONS, __version__, modules
from .auth import AUTH_ERRORS, AuthenticatedUser, require_user

if TYPE_CHECKING:
    from .context import ServerContext

router = APIRouter()


class HealthResponse(BaseModel):
    status: str = Field(examples=["ok"])
    version: str = Field(description="Server implementation version.")
    test_mode: bool = Field(description="True when started with --test (fault injection on).")


class DiscoveryServices(BaseModel):
    base_url: str
    api_versions: list[str]


class DiscoveryHomeserver(BaseModel):
    base_url: str
    server_name: str


class DiscoveryResponse(BaseModel):
    services: DiscoveryServices
    homeserver: DiscoveryHomeserver


class CapabilitiesResponse(BaseModel):
    api_versions: list[str]
    community: dict[str, Any] = Field(description="The manifest's community object (name, ...).")
    homeserver: DiscoveryHomeserver
    encryption: dict[str, Any] = Field(description="The manifest's encryption object.")
    modules: dict[str, dict[str, Any]] = Field(
        description="Per module id: {enabled, options (from the manifest), ...server-provided fields}."
    )


def _ctx(request: Request) -> ServerContext:
    return request.app.state.ctx


def services_base_url(request: Request) -> str:
    ctx = _ctx(request)
    if ctx.settings.public_url:
        return ctx.settings.public_url.rstrip("/")
    return str(request.base_url).rstrip("/")


@router.get("/_symorva/v1/health", response_model=HealthResponse, tags=["core"],
            summary="Liveness check (no auth)")
def health(request: Request) -> HealthResponse:
    return HealthResponse(status="ok", version=__version__, test_mode=_ctx(request).settings.test_mode)


@router.get("/.well-known/symorva", response_model=DiscoveryResponse, tags=["core"],
            summary="Discovery document (no auth)")
def discovery(request: Request) -> DiscoveryResponse:
    s = _ctx(request).settings
    return DiscoveryResponse(
        services=DiscoveryServices(base_url=services_base_url(request), api_versions=API_VERSIONS),
        homeserver=DiscoveryHomeserver(base_url=s.homeserver_url, server_name=s.server_name),
    )


@router.get("/_symorva/v1/capabilities", response_model=CapabilitiesResponse, tags=["core"],
            responses=AUTH_ERRORS, summary="Enabled modules and their options")
def capabilities(request: Request, _user: AuthenticatedUser = Depends(require_user)) -> CapabilitiesResponse:
    ctx = _ctx(request)
    m = ctx.manifest
    return CapabilitiesResponse(
        api_versions=API_VERSIONS,
        community=m.get("community", {}),
        homeserver=DiscoveryHomeserver(base_url=ctx.settings.homeserver_url,
                                       server_name=ctx.settings.server_name),
        encryption=m.get("encryption", {"defaultEnabled": False}),
        modules=modules.capabilities(ctx),
    )
