"""Application factory for the reference community services server."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from . import __version__, auth, core, faults, modules, push
from .auth import AuthMiddleware, HomeserverOpenIdVerifier, OpenIdVerifier
from .config import Settings, default_manifest, load_manifest, validate_manifest
from .context import build_context
from .errors import install_error_handlers
from .faults import FaultMiddleware
from .limits import BodySizeLimitMiddleware
from .modules.ai_studio import MembershipChecker
from .ratelimit import RateLimitMiddleware, document_rate_limits

log = logging.getLogger("symorva_server")


def create_app(
    settings: Settings,
    *,
    verifier: OpenIdVerifier | None = None,
    clock: Callable[[], float] = time.time,
    manifest: dict[str, Any] | None = None,
    meetings_rooms: Any = None,
    meetings_media: Any = None,
    membership: MembershipChecker | None = None,
) -> FastAPI:
    """Build the app. Tests inject a fake `verifier`, a `clock` and/or a `manifest` (and the
    meetings' room directory and media server, the studio's room `membership` checker)."""
    if manifest is None:
        if settings.manifest_path:
            manifest = load_manifest(settings.manifest_path)
        else:
            manifest = default_manifest(settings.homeserver_url, settings.server_name,
                                        settings.public_url or "http://127.0.0.1")
    manifest = validate_manifest(manifest)
    if manifest["homeserver"]["serverName"] != settings.server_name:
        log.warning("manifest homeserver.serverName %r differs from --server-name %r",
                    manifest["homeserver"]["serverName"], settings.server_name)

    ctx = build_context(settings, manifest,
                        verifier=verifier or HomeserverOpenIdVerifier(settings.homeserver_url), clock=clock,
                        meetings_rooms=meetings_rooms, meetings_media=meetings_media, membership=membership)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Background work that must not wait for a request: the meetings' token expiry and the
        # media rooms an earlier process left.
        if ctx.meetings is not None:
            ctx.meetings.start()
        try:
            yield
        finally:
            if ctx.meetings is not None:
                await ctx.meetings.stop()

    app = FastAPI(
        lifespan=lifespan,
        title="Symorva community services",
        version=__version__,
        description=(
            "Reference implementation of the Symorva community services API "
            "(for development and tests). Every endpoint except health and discovery "
            "needs `Authorization: Bearer <token>` from `POST /_symorva/v1/auth/openid`. "
            "Errors are always `{errcode, error, retry_after_ms?}`. Requests are rate limited "
            "per member (per client address for the OpenID exchange) and route class "
            "(`openid`, `writes`, `reads`): a refused request gets 429 `SY_LIMIT_EXCEEDED` "
            "with `retry_after_ms` and `Retry-After`, before it is handled, so nothing it asked "
            "for happened. Endpoints tagged `testing` exist only when the server runs with "
            "`--test` and are never rate limited."
        ),
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        # Stable, readable operation ids (the handler function names).
        generate_unique_id_function=lambda route: route.name,
    )
    app.state.ctx = ctx
    install_error_handlers(app)

    app.include_router(core.router)
    app.include_router(auth.router)
    if settings.test_mode:
        app.include_router(faults.router)
    modules.include_routers(app, ctx)
    app.include_router(push.gateway_router)
    app.include_router(push.router)

    _document_error_format(app, settings)

    # Middleware: the last added is the outermost. Rate limiting runs after authentication
    # (it needs the member) and before routing (a refused request never reaches a handler).
    app.add_middleware(RateLimitMiddleware, limiter=ctx.rate_limiter)
    app.add_middleware(AuthMiddleware, ctx=ctx)
    app.add_middleware(BodySizeLimitMiddleware, max_body_bytes=settings.max_body_bytes)
    if settings.test_mode:
        app.add_middleware(FaultMiddleware, registry=ctx.faults)
    return app


def _document_error_format(app: FastAPI, settings: Settings) -> None:
    """Make the OpenAPI document match what the server does: validation errors are 400
    with the SY error body (not FastAPI's 422 HTTPValidationError), and every rate-limited
    operation may answer 429."""
    original = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        doc = original()
        for ops in doc.get("paths", {}).values():
            for op in ops.values():
                responses = op.get("responses", {})
                if responses.pop("422", None) is not None and "400" not in responses:
                    responses["400"] = {
                        "description": "Invalid request (SY_BAD_JSON, SY_MISSING_PARAM, SY_INVALID_PARAM)",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
                    }
        document_rate_limits(doc, settings.rate_limits)
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
        if "ErrorBody" not in schemas:
            from .errors import ErrorBody

            schemas["ErrorBody"] = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
        app.openapi_schema = doc
        return doc

    app.openapi = openapi  # type: ignore[method-assign]
