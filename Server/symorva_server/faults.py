"""Fault injection, only present when the server runs with --test.

`POST /_symorva/v1/test/faults` arms a fault for requests whose path starts with
`path_prefix` (optionally only one HTTP method), for `count` requests (or until
cleared when count is null):

- ``delay``: wait `delay_ms`, then handle the request normally.
- ``error5xx``: answer `status` (default 503) with errcode SY_INJECTED_FAULT without
  running the handler.
- ``commit_then_drop``: run the handler (so its transaction commits), discard its
  response and close the connection: the client sees an empty reply / connection
  error and cannot know the outcome. Used to test idempotent retries.
- ``commit_then_error5xx``: run the handler (so its transaction commits), discard its
  response and answer `status` (default 503) with errcode SY_INJECTED_FAULT instead:
  a 5xx that hides a committed outcome.
- ``drop``: close the connection without running the handler.

Without --test none of this is mounted: the /_symorva/v1/test/ routes are 404s and
no fault middleware runs. The test routes also include a tiny key/value store
(`PUT/GET /_symorva/v1/test/kv/{key}`) that commits to the database, for checking
commit_then_drop end to end.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from .auth import AUTH_ERRORS, AuthenticatedUser, require_user
from .errors import ErrorBody, ErrorCode, SymorvaError, send_raw_error

if TYPE_CHECKING:
    from .context import ServerContext

log = logging.getLogger("symorva_server.faults")

TEST_PREFIX = "/_symorva/v1/test/"
FAULTS_PATH = "/_symorva/v1/test/faults"

FaultMode = Literal["delay", "error5xx", "commit_then_drop", "commit_then_error5xx", "drop"]


class ConnectionDropped(Exception):
    """Raised when the connection cannot be aborted directly (e.g. in-process test clients)."""


@dataclass
class Fault:
    fault_id: str
    path_prefix: str
    mode: str
    method: str | None
    delay_ms: int
    status: int
    retry_after_ms: int | None
    remaining: int | None  # None = until cleared
    hits: int = 0


class FaultRegistry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._ids = itertools.count(1)
        # Hits per fault ID, also of faults used up; notified on every hit (wait_hit).
        self._hits: dict[str, int] = {}
        self._hit = threading.Condition(self._lock)

    def add(self, spec: FaultSpec) -> Fault:
        with self._lock:
            f = Fault(
                fault_id=f"f{next(self._ids)}",
                path_prefix=spec.path_prefix,
                mode=spec.mode,
                method=spec.method.upper() if spec.method else None,
                delay_ms=spec.delay_ms,
                status=spec.status,
                retry_after_ms=spec.retry_after_ms,
                remaining=spec.count,
            )
            self._faults.append(f)
            return f

    def list(self) -> list[Fault]:
        with self._lock:
            return [Fault(**asdict(f)) for f in self._faults]

    def clear(self) -> int:
        with self._lock:
            n = len(self._faults)
            self._faults.clear()
            return n

    def remove(self, fault_id: str) -> bool:
        with self._lock:
            before = len(self._faults)
            self._faults = [f for f in self._faults if f.fault_id != fault_id]
            return len(self._faults) != before

    def wait_hit(self, fault_id: str, timeout: float, hits: int = 1) -> bool:
        """Blocks until the fault has hit `hits` requests (in-process tests: "the request
        has reached the server"); False on timeout."""
        with self._hit:
            return self._hit.wait_for(lambda: self._hits.get(fault_id, 0) >= hits, timeout)

    def take(self, method: str, path: str) -> Fault | None:
        """The first armed fault matching the request, consuming one of its count."""
        if path == FAULTS_PATH or path.startswith(FAULTS_PATH + "/"):
            return None  # never lock ourselves out of the switch
        with self._lock:
            for f in self._faults:
                if not path.startswith(f.path_prefix):
                    continue
                if f.method and f.method != method.upper():
                    continue
                f.hits += 1
                self._hits[f.fault_id] = f.hits
                self._hit.notify_all()
                if f.remaining is not None:
                    f.remaining -= 1
                    if f.remaining <= 0:
                        self._faults.remove(f)
                return Fault(**asdict(f))
        return None


async def abort_connection(receive) -> bool:
    """Close the client connection without a response. True if it was done.

    uvicorn's receive callable is a bound method of its per-request cycle object,
    which holds the asyncio transport. Aborting the transport makes uvicorn's
    connection_lost() mark the cycle disconnected, after which uvicorn sends nothing.
    """
    cycle = getattr(receive, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if transport is None or not hasattr(transport, "abort"):
        return False
    transport.abort()
    for _ in range(50):
        if getattr(cycle, "disconnected", False):
            break
        await asyncio.sleep(0)
    return True


class FaultMiddleware:
    def __init__(self, app, registry: FaultRegistry) -> None:
        self.app = app
        self.registry = registry

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        fault = self.registry.take(scope["method"], scope["path"])
        if fault is None:
            await self.app(scope, receive, send)
            return
        log.warning("injecting fault %s (%s) into %s %s", fault.fault_id, fault.mode,
                    scope["method"], scope["path"])
        if fault.mode == "delay":
            await asyncio.sleep(fault.delay_ms / 1000)
            await self.app(scope, receive, send)
        elif fault.mode in ("error5xx", "commit_then_error5xx"):
            if fault.mode == "commit_then_error5xx":
                async def swallow_response(message):  # the handler's answer is replaced
                    return None
                await self.app(scope, receive, swallow_response)
            headers = []
            if fault.retry_after_ms is not None:
                headers.append((b"retry-after", str(max(1, fault.retry_after_ms // 1000)).encode()))
            body = {"errcode": ErrorCode.INJECTED_FAULT,
                    "error": f"Injected fault {fault.fault_id} ({fault.mode}) on {scope['path']}"}
            if fault.retry_after_ms is not None:
                body["retry_after_ms"] = fault.retry_after_ms
            raw = json.dumps(body).encode()
            await send({"type": "http.response.start", "status": fault.status,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(raw)).encode()), *headers]})
            await send({"type": "http.response.body", "body": raw, "more_body": False})
        elif fault.mode in ("commit_then_drop", "drop"):
            if fault.mode == "commit_then_drop":
                async def swallow(message):  # the handler's response never leaves
                    return None
                await self.app(scope, receive, swallow)
            if not await abort_connection(receive):
                raise ConnectionDropped(f"fault {fault.fault_id}: {fault.mode} on {scope['path']}")
        else:  # pragma: no cover - validated by FaultSpec
            await self.app(scope, receive, send)


class FaultSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path_prefix: StrictStr = Field(pattern=r"^/", max_length=512,
                                   description="Requests whose path starts with this are affected.")
    mode: FaultMode
    method: StrictStr | None = Field(default=None, pattern=r"^[A-Za-z]+$",
                                     description="Only this HTTP method (default: any).")
    delay_ms: int = Field(default=0, ge=0, le=60000, description="For mode=delay.")
    status: int = Field(default=503, ge=500, le=599, description="For mode=error5xx and commit_then_error5xx.")
    retry_after_ms: int | None = Field(default=None, ge=0,
                                       description="For mode=error5xx and commit_then_error5xx: adds retry_after_ms.")
    count: int | None = Field(default=1, ge=1, description="How many requests to affect; null = until cleared.")


class FaultOut(BaseModel):
    fault_id: str
    path_prefix: str
    mode: str
    method: str | None
    delay_ms: int
    status: int
    retry_after_ms: int | None
    remaining: int | None
    hits: int


class FaultList(BaseModel):
    faults: list[FaultOut]


class ClearedOut(BaseModel):
    cleared: int


class KvValue(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: Any = Field(description="Any JSON value.")


class KvOut(BaseModel):
    key: str
    value: Any
    writes: int = Field(description="How many times the key was written.")


KV_MIGRATIONS = [
    """
    CREATE TABLE test_kv (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        writes INTEGER NOT NULL
    )
    """,
]

_TEST_DOC = " Only exists when the server runs with --test."

router = APIRouter(tags=["testing"], responses=AUTH_ERRORS)


def _ctx(request: Request) -> ServerContext:
    return request.app.state.ctx


@router.post("/_symorva/v1/test/faults", response_model=FaultOut,
             responses={400: {"model": ErrorBody}},
             summary="Arm a fault." + _TEST_DOC)
def add_fault(spec: FaultSpec, request: Request,
              _user: AuthenticatedUser = Depends(require_user)) -> FaultOut:
    f = _ctx(request).faults.add(spec)
    return FaultOut(**asdict(f))


@router.get("/_symorva/v1/test/faults", response_model=FaultList,
            summary="List armed faults." + _TEST_DOC)
def list_faults(request: Request, _user: AuthenticatedUser = Depends(require_user)) -> FaultList:
    return FaultList(faults=[FaultOut(**asdict(f)) for f in _ctx(request).faults.list()])


@router.delete("/_symorva/v1/test/faults", response_model=ClearedOut,
               summary="Disarm all faults." + _TEST_DOC)
def clear_faults(request: Request, _user: AuthenticatedUser = Depends(require_user)) -> ClearedOut:
    return ClearedOut(cleared=_ctx(request).faults.clear())


@router.delete("/_symorva/v1/test/faults/{fault_id}", response_model=ClearedOut,
               responses={404: {"model": ErrorBody}},
               summary="Disarm one fault." + _TEST_DOC)
def remove_fault(request: Request, fault_id: str = Path(max_length=64),
                 _user: AuthenticatedUser = Depends(require_user)) -> ClearedOut:
    if not _ctx(request).faults.remove(fault_id):
        raise SymorvaError(404, ErrorCode.NOT_FOUND, f"No armed fault {fault_id}")
    return ClearedOut(cleared=1)


_KEY = Path(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._~-]+$")


@router.put("/_symorva/v1/test/kv/{key}", response_model=KvOut,
            responses={400: {"model": ErrorBody}},
            summary="Write a value (commits to the database)." + _TEST_DOC)
def kv_put(body: KvValue, request: Request, key: str = _KEY,
           _user: AuthenticatedUser = Depends(require_user)) -> KvOut:
    raw = json.dumps(body.value)
    with _ctx(request).db.transaction() as conn:
        conn.execute(
            "INSERT INTO test_kv(key, value, writes) VALUES (?, ?, 1)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value, writes = writes + 1",
            (key, raw),
        )
        row = conn.execute("SELECT writes FROM test_kv WHERE key = ?", (key,)).fetchone()
    return KvOut(key=key, value=body.value, writes=row[0])


@router.get("/_symorva/v1/test/kv/{key}", response_model=KvOut,
            responses={404: {"model": ErrorBody}},
            summary="Read a value." + _TEST_DOC)
def kv_get(request: Request, key: str = _KEY,
           _user: AuthenticatedUser = Depends(require_user)) -> KvOut:
    row = _ctx(request).db.query_one("SELECT value, writes FROM test_kv WHERE key = ?", (key,))
    if row is None:
        raise SymorvaError(404, ErrorCode.NOT_FOUND, f"No value for key '{key}'")
    return KvOut(key=key, value=json.loads(row["value"]), writes=row["writes"])
