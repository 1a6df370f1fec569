"""The one JSON error format of the community services API.

Every error response, including 404/405 for unknown routes and validation errors,
has the body ``{"errcode": "SY_...", "error": "human readable", "retry_after_ms": N?}``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("symorva_server")


class ErrorCode:
    MISSING_TOKEN = "SY_MISSING_TOKEN"  # 401: no bearer token sent
    UNKNOWN_TOKEN = "SY_UNKNOWN_TOKEN"  # 401: unknown, forged or expired token
    FORBIDDEN = "SY_FORBIDDEN"  # 401/403: token from a foreign server / not allowed
    NOT_FOUND = "SY_NOT_FOUND"  # 404
    METHOD_NOT_ALLOWED = "SY_METHOD_NOT_ALLOWED"  # 405
    BAD_JSON = "SY_BAD_JSON"  # 400: body is not JSON / not a JSON object
    MISSING_PARAM = "SY_MISSING_PARAM"  # 400: a required field is missing
    INVALID_PARAM = "SY_INVALID_PARAM"  # 400: a field has a wrong type or value
    TOO_LARGE = "SY_TOO_LARGE"  # 413: request body over the limit
    LIMIT_EXCEEDED = "SY_LIMIT_EXCEEDED"  # 429: rate limited (ratelimit.py), with retry_after_ms + Retry-After
    HOMESERVER_UNAVAILABLE = "SY_HOMESERVER_UNAVAILABLE"  # 502
    INJECTED_FAULT = "SY_INJECTED_FAULT"  # 5xx from the test fault injection
    # Wallet (modules/wallet/; docs/wallet.md "Server side")
    INVALID_AMOUNT = "SY_INVALID_AMOUNT"  # 400: not a positive decimal at the asset's precision
    UNKNOWN_ASSET = "SY_UNKNOWN_ASSET"  # 400: asset not configured
    INVALID_RECIPIENT = "SY_INVALID_RECIPIENT"  # 400: malformed, foreign server or the sender
    RECIPIENT_UNKNOWN = "SY_RECIPIENT_UNKNOWN"  # 404: member has no wallet
    INSUFFICIENT_FUNDS = "SY_INSUFFICIENT_FUNDS"  # 409: balance below amount + fee
    PIN_NOT_SET = "SY_PIN_NOT_SET"  # 409: set a wallet PIN first
    PIN_ALREADY_SET = "SY_PIN_ALREADY_SET"  # 409: changing needs the old PIN
    INVALID_PIN = "SY_INVALID_PIN"  # 400: PIN is not 4-12 ASCII digits
    WRONG_PIN = "SY_WRONG_PIN"  # 403: with attempts_left
    WALLET_LOCKED = "SY_WALLET_LOCKED"  # 403: too many wrong PINs
    BAD_SEALED_PAYLOAD = "SY_BAD_SEALED_PAYLOAD"  # 400: cannot open / wrong format / wrong binding
    WALLET_UNKNOWN = "SY_WALLET_UNKNOWN"  # 404: admin endpoints: the member has no wallet
    NOT_ADMIN = "SY_NOT_ADMIN"  # 403: the endpoint is for the community's admins (manifest services.admins)
    NOT_IN_DEVELOPMENT = "SY_NOT_IN_DEVELOPMENT"  # 403: development/test mode only (never in production)
    # Meetings (modules/meetings/; docs/meetings.md "Server side")
    NOT_ROOM_MEMBER = "SY_NOT_ROOM_MEMBER"  # 403: not joined to the meeting's Matrix room
    NOT_HOST = "SY_NOT_HOST"  # 403: host actions need the room power level hostPowerLevel
    MEETING_UNKNOWN = "SY_MEETING_UNKNOWN"  # 404
    ROOM_UNKNOWN = "SY_ROOM_UNKNOWN"  # 404: the homeserver has no such room
    MEETING_ENDED = "SY_MEETING_ENDED"  # 409
    NOT_PARTICIPANT = "SY_NOT_PARTICIPANT"  # 409: the caller or the target is not in the meeting
    WRONG_ROLE = "SY_WRONG_ROLE"  # 409: promote a stage member, demote a listener
    STAGE_FULL = "SY_STAGE_FULL"  # 409: the stage is at its capacity
    MEDIA_UNAVAILABLE = "SY_MEDIA_UNAVAILABLE"  # 503: the media server failed or is not configured
    # AI studio (modules/ai_studio/; docs/ai-studio.md "Server side")
    GRANT_UNKNOWN = "SY_GRANT_UNKNOWN"  # 404: no such grant
    GRANT_FORBIDDEN = "SY_GRANT_FORBIDDEN"  # 403: the grant belongs to another member
    GRANT_REVOKED = "SY_GRANT_REVOKED"  # 409: the grant was revoked (also while the summary was made)
    GRANT_EXPIRED = "SY_GRANT_EXPIRED"  # 409: the grant has expired
    OUT_OF_SCOPE = "SY_OUT_OF_SCOPE"  # 400: an item outside the grant's scope, with item_index and event_id
    SUMMARIZER_UNAVAILABLE = "SY_SUMMARIZER_UNAVAILABLE"  # 502: the summarizer backend failed
    UNKNOWN = "SY_UNKNOWN"  # 500: unexpected server error


class ErrorBody(BaseModel):
    """Body of every error response."""

    errcode: str = Field(description="Machine readable error code, SY_*.", examples=["SY_UNKNOWN_TOKEN"])
    error: str = Field(description="Human readable description.")
    retry_after_ms: int | None = Field(
        default=None, description="Present on 429 (and some 5xx): when to retry, in ms."
    )


class SymorvaError(Exception):
    """Raise from any handler or dependency to answer with the JSON error format."""

    def __init__(
        self,
        status: int,
        errcode: str,
        error: str,
        *,
        retry_after_ms: int | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{status} {errcode}: {error}")
        self.status = status
        self.errcode = errcode
        self.error = error
        self.retry_after_ms = retry_after_ms
        self.headers = headers or {}
        # Additional documented fields of specific errors (e.g. attempts_left).
        self.extra = extra or {}


def error_payload(errcode: str, error: str, retry_after_ms: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"errcode": errcode, "error": error}
    if retry_after_ms is not None:
        body["retry_after_ms"] = int(retry_after_ms)
    return body


def error_response(
    status: int,
    errcode: str,
    error: str,
    retry_after_ms: int | None = None,
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> JSONResponse:
    body = error_payload(errcode, error, retry_after_ms)
    if extra:
        body.update({k: v for k, v in extra.items() if k not in body})
    return JSONResponse(body, status_code=status, headers=headers)


def raw_error_response(status: int, errcode: str, error: str, extra_headers=(),
                       retry_after_ms: int | None = None) -> tuple[dict, bytes]:
    """(ASGI http.response.start message, body) for use in pure ASGI middleware."""
    body = json.dumps(error_payload(errcode, error, retry_after_ms)).encode()
    start = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *extra_headers,
        ],
    }
    return start, body


async def send_raw_error(send, status: int, errcode: str, error: str, extra_headers=(),
                         retry_after_ms: int | None = None) -> None:
    start, body = raw_error_response(status, errcode, error, extra_headers, retry_after_ms)
    await send(start)
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _loc_to_name(loc: tuple | list) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) if parts else "body"


def _is_json_content_type(value: str | None) -> bool:
    if not value:
        return False
    mime = value.split(";", 1)[0].strip().lower()
    return mime == "application/json" or mime.endswith("+json")


def validation_error(exc: RequestValidationError, content_type: str | None = None) -> SymorvaError:
    errors = exc.errors()
    if not _is_json_content_type(content_type) and any(
        tuple(e.get("loc", ()))[:1] == ("body",) for e in errors
    ):
        return SymorvaError(400, ErrorCode.BAD_JSON,
                            f"Request body must be JSON sent with Content-Type: application/json "
                            f"(got {repr(content_type) if content_type else 'none'})")
    for err in errors:
        etype = err.get("type", "")
        loc = tuple(err.get("loc", ()))
        if etype == "json_invalid":
            return SymorvaError(400, ErrorCode.BAD_JSON, "Request body is not valid JSON")
        if loc == ("body",) and etype in ("model_attributes_type", "dict_type", "missing"):
            if etype == "missing":
                return SymorvaError(400, ErrorCode.BAD_JSON, "Request body is missing: a JSON object is required")
            return SymorvaError(400, ErrorCode.BAD_JSON, "Request body must be a JSON object")
    first = errors[0] if errors else {}
    name = _loc_to_name(first.get("loc", ()))
    msg = first.get("msg", "invalid value")
    if first.get("type") == "missing":
        return SymorvaError(400, ErrorCode.MISSING_PARAM, f"Missing required parameter '{name}'")
    return SymorvaError(400, ErrorCode.INVALID_PARAM, f"Invalid parameter '{name}': {msg}")


_STATUS_CODES = {
    400: ErrorCode.INVALID_PARAM,
    401: ErrorCode.UNKNOWN_TOKEN,
    403: ErrorCode.FORBIDDEN,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    413: ErrorCode.TOO_LARGE,
    429: ErrorCode.LIMIT_EXCEEDED,
}


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SymorvaError)
    async def _symorva_error(request: Request, exc: SymorvaError) -> JSONResponse:
        return error_response(exc.status, exc.errcode, exc.error, exc.retry_after_ms, exc.headers,
                              exc.extra)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        err = validation_error(exc, request.headers.get("content-type"))
        return error_response(err.status, err.errcode, err.error)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _STATUS_CODES.get(exc.status_code, ErrorCode.UNKNOWN)
        if exc.status_code == 404:
            msg = f"No such endpoint: {request.method} {request.url.path}"
        elif exc.status_code == 405:
            msg = f"Method {request.method} is not allowed on {request.url.path}"
        else:
            msg = str(exc.detail)
        return error_response(exc.status_code, code, msg, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("Unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, ErrorCode.UNKNOWN, "Internal server error")
