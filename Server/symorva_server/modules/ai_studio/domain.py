"""Grants, summaries, revocation and the audit (docs/ai-studio.md, "Server side").

A grant is for one member, one room, one scope and one purpose, with an expiry; its state
(`active`, `revoked`, `expired`) is computed on the server's clock. A summarize request is
checked as a whole before anything is summarized: the grant must be the caller's and active,
and every item inside its scope, else the request is refused naming the first offending item.
The grant is checked again after the summarizer ran, so that a revoke (or the expiry) that
lands while a summary is being made fails that summary. Bodies are never stored or logged:
the audit keeps grant, action, outcome, counts and event IDs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio

from ...config import ManifestError, check_transport_url
from ...errors import ErrorCode, SymorvaError
from ...db import Database
from .membership import MembershipChecker, MembershipUnavailable, RoomEvent
from .models import ConversationSinceScope, GrantRequest, SelectedMessagesScope, SummarizeRequest
from .summarizer import DEFAULT_MAX_POINTS, Item, Summarizer, SummarizerError, create_summarizer

log = logging.getLogger("symorva_server.studio")

DEFAULT_GRANT_TTL_S = 3600
# A member's audit keeps this many entries (the newest).
MAX_AUDIT_PER_MEMBER = 1000
DEFAULT_MAX_GRANT_TTL_S = 86_400


@dataclass(frozen=True)
class StudioConfig:
    grant_ttl_ms: int
    max_grant_ttl_ms: int
    summarizer: dict[str, Any]

    @staticmethod
    def from_options(options: dict[str, Any]) -> StudioConfig:
        def seconds(key: str, default: int) -> int:
            value = options.get(key, default)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 30 * 86_400:
                raise ManifestError(f"manifest.modules.aiStudio.{key}: integer seconds 1..2592000")
            return value

        ttl = seconds("grantTtlSeconds", DEFAULT_GRANT_TTL_S)
        cap = seconds("maxGrantTtlSeconds", max(ttl, DEFAULT_MAX_GRANT_TTL_S))
        if ttl > cap:
            raise ManifestError("manifest.modules.aiStudio.grantTtlSeconds: above maxGrantTtlSeconds")
        summarizer = options.get("summarizer", {"backend": "extractive"})
        where = "manifest.modules.aiStudio.summarizer"
        if not isinstance(summarizer, dict):
            raise ManifestError(f"{where}: must be an object")
        backend = summarizer.get("backend", "extractive")
        if backend == "extractive":
            if summarizer.get("algorithm", "lexrank") not in ("lexrank", "textrank"):
                raise ManifestError(f"{where}.algorithm: lexrank or textrank")
        elif backend == "openai":
            for key in ("url", "model"):
                if not isinstance(summarizer.get(key), str) or not summarizer[key]:
                    raise ManifestError(f"{where}.{key}: required string for the openai backend")
            # Conversation content goes there: https, or plain http to a loopback host only.
            check_transport_url(summarizer["url"], f"{where}.url")
        else:
            raise ManifestError(f"{where}.backend: extractive or openai")
        return StudioConfig(ttl * 1000, cap * 1000, summarizer)


def _scope_json(row: Any) -> dict[str, Any]:
    if row["scope_kind"] == "selected_messages":
        return {"kind": "selected_messages", "event_ids": json.loads(row["scope_event_ids"])}
    return {"kind": "conversation_since", "since_event_id": row["scope_since_event_id"],
            "since_ts": row["scope_since_ts"]}


class Studio:
    def __init__(self, config: StudioConfig, db: Database, clock: Callable[[], float],
                 membership: MembershipChecker, summarizer: Summarizer) -> None:
        self.config = config
        self.db = db
        self.clock = clock
        self.membership = membership
        self.summarizer = summarizer
        # Studio requests received per member (GET /_symorva/v1/test/studio/stats).
        self.requests: Counter[str] = Counter()

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # MARK: grants

    def _state(self, row: Any, now: int) -> str:
        if row["revoked_at_ms"] is not None:
            return "revoked"
        return "expired" if now >= row["expires_at_ms"] else "active"

    def _grant_out(self, row: Any, now: int) -> dict[str, Any]:
        return {"grant_id": row["grant_id"], "user_id": row["user_id"], "room_id": row["room_id"],
                "purpose": row["purpose"], "scope": _scope_json(row), "state": self._state(row, now),
                "created_at_ms": row["created_at_ms"], "expires_at_ms": row["expires_at_ms"],
                "expires_in_ms": max(0, row["expires_at_ms"] - now), "revoked_at_ms": row["revoked_at_ms"]}

    async def create_grant(self, user_id: str, body: GrantRequest) -> dict[str, Any]:
        scope = body.scope
        if isinstance(scope, SelectedMessagesScope) and len(set(scope.event_ids)) != len(scope.event_ids):
            raise SymorvaError(400, ErrorCode.INVALID_PARAM, "scope.event_ids: duplicate event ID")
        try:
            joined = await self.membership.is_joined(body.room_id, user_id)
        except MembershipUnavailable as e:
            raise SymorvaError(502, ErrorCode.HOMESERVER_UNAVAILABLE,
                               f"Could not check room membership with the homeserver: {e}") from e
        if not joined:
            await self._audit_async(user_id, None, "grant", ErrorCode.NOT_ROOM_MEMBER, [])
            raise SymorvaError(403, ErrorCode.NOT_ROOM_MEMBER, f"{user_id} is not joined to {body.room_id}")
        since = scope if isinstance(scope, ConversationSinceScope) else None
        since_ts = None
        if since is not None:
            # The scope's lower bound is the homeserver's timestamp of its first message, which must
            # be a message of this room (the client's `since_ts` is not trusted).
            first = await self._homeserver_event(body.room_id, since.since_event_id)
            if first is None:
                await self._audit_async(user_id, None, "grant", ErrorCode.INVALID_PARAM, [])
                raise SymorvaError(400, ErrorCode.INVALID_PARAM,
                                   f"scope.since_event_id: {since.since_event_id} is not an event of {body.room_id}")
            since_ts = first.origin_server_ts
        now = self.now_ms()
        ttl = min(body.expires_in_ms or self.config.grant_ttl_ms, self.config.max_grant_ttl_ms)
        grant_id = "gr_" + secrets.token_urlsafe(12)
        selected = json.dumps(scope.event_ids) if isinstance(scope, SelectedMessagesScope) else None
        await self.db.run_transaction(lambda conn: conn.execute(
            "INSERT INTO studio_grants(grant_id, user_id, room_id, purpose, scope_kind, scope_event_ids,"
            " scope_since_event_id, scope_since_ts, created_at_ms, expires_at_ms)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (grant_id, user_id, body.room_id, body.purpose, scope.kind, selected,
             since.since_event_id if since else None, since_ts, now, now + ttl)))
        await self._audit_async(user_id, grant_id, "grant", "ok", [])
        return self.get_grant(user_id, grant_id)

    def _row(self, user_id: str, grant_id: str) -> Any:
        row = self.db.query_one("SELECT * FROM studio_grants WHERE grant_id = ?", (grant_id,))
        if row is None:
            raise SymorvaError(404, ErrorCode.GRANT_UNKNOWN, f"No grant {grant_id}")
        if row["user_id"] != user_id:
            raise SymorvaError(403, ErrorCode.GRANT_FORBIDDEN, f"Grant {grant_id} belongs to another member")
        return row

    def get_grant(self, user_id: str, grant_id: str) -> dict[str, Any]:
        return self._grant_out(self._row(user_id, grant_id), self.now_ms())

    def list_grants(self, user_id: str) -> dict[str, Any]:
        now = self.now_ms()
        rows = self.db.query("SELECT * FROM studio_grants WHERE user_id = ? ORDER BY created_at_ms DESC, rowid DESC",
                             (user_id,))
        return {"grants": [self._grant_out(r, now) for r in rows]}

    def revoke(self, user_id: str, grant_id: str) -> dict[str, Any]:
        """Immediate and idempotent: revoking a revoked or expired grant answers its state."""
        row = self._row(user_id, grant_id)
        now = self.now_ms()
        if row["revoked_at_ms"] is None:
            with self.db.transaction() as conn:
                conn.execute("UPDATE studio_grants SET revoked_at_ms = ? WHERE grant_id = ? AND revoked_at_ms IS NULL",
                             (now, grant_id))
            self._audit(user_id, grant_id, "revoke", "ok", [])
        return self.get_grant(user_id, grant_id)

    # MARK: summaries

    def _check_usable(self, row: Any) -> None:
        state = self._state(row, self.now_ms())
        if state == "revoked":
            raise SymorvaError(409, ErrorCode.GRANT_REVOKED, f"Grant {row['grant_id']} was revoked")
        if state == "expired":
            raise SymorvaError(409, ErrorCode.GRANT_EXPIRED, f"Grant {row['grant_id']} has expired")

    async def _homeserver_event(self, room_id: str, event_id: str) -> RoomEvent | None:
        try:
            return await self.membership.event(room_id, event_id)
        except MembershipUnavailable as e:
            raise SymorvaError(502, ErrorCode.HOMESERVER_UNAVAILABLE,
                               f"Could not check the conversation with the homeserver: {e}") from e

    async def _check_scope(self, row: Any, user_id: str, body: SummarizeRequest) -> list[Item]:
        """Checks the request against the grant with the homeserver, never the client's word: the
        member is still joined to the grant's room; every item is an event of that room (asked of
        the homeserver), inside the scope by its ID or, for a conversation, by the homeserver's
        `origin_server_ts`. Returns the items with the homeserver's sender and timestamp."""
        try:
            joined = await self.membership.is_joined(row["room_id"], user_id)
        except MembershipUnavailable as e:
            raise SymorvaError(502, ErrorCode.HOMESERVER_UNAVAILABLE,
                               f"Could not check room membership with the homeserver: {e}") from e
        if not joined:
            raise SymorvaError(403, ErrorCode.NOT_ROOM_MEMBER, f"{user_id} is no longer joined to {row['room_id']}")
        selected = set(json.loads(row["scope_event_ids"])) if row["scope_kind"] == "selected_messages" else None
        seen: set[str] = set()

        def outside(index: int, event_id: str) -> SymorvaError:
            return SymorvaError(400, ErrorCode.OUT_OF_SCOPE,
                                f"items[{index}] ({event_id}) is outside grant {row['grant_id']}'s scope",
                                extra={"item_index": index, "event_id": event_id})

        for index, item in enumerate(body.items):
            if item.event_id in seen:
                raise SymorvaError(400, ErrorCode.INVALID_PARAM, f"items[{index}]: duplicate event {item.event_id}",
                                   extra={"item_index": index, "event_id": item.event_id})
            seen.add(item.event_id)
            if selected is not None and item.event_id not in selected:
                raise outside(index, item.event_id)
        gate = asyncio.Semaphore(8)

        async def lookup(event_id: str) -> RoomEvent | None:
            async with gate:
                return await self._homeserver_event(row["room_id"], event_id)

        events = await asyncio.gather(*(lookup(i.event_id) for i in body.items))
        items: list[Item] = []
        for index, (item, event) in enumerate(zip(body.items, events)):
            if event is None:
                raise outside(index, item.event_id)  # not an event of the grant's room
            if selected is None and not (event.origin_server_ts >= row["scope_since_ts"]
                                         or item.event_id == row["scope_since_event_id"]):
                raise outside(index, item.event_id)
            items.append(Item(item.event_id, event.sender, event.origin_server_ts, item.body))
        return items

    async def summarize(self, user_id: str, body: SummarizeRequest) -> dict[str, Any]:
        ids = [i.event_id for i in body.items]
        try:
            row = self._row(user_id, body.grant_id)
            self._check_usable(row)
            items = await self._check_scope(row, user_id, body)
            max_points = body.max_points or DEFAULT_MAX_POINTS
            try:
                points = await anyio.to_thread.run_sync(self.summarizer.summarize, items, max_points)
            except SummarizerError as e:
                raise SymorvaError(502, ErrorCode.SUMMARIZER_UNAVAILABLE, str(e)) from e
            # A revoke or the expiry that landed meanwhile fails this summary.
            self._check_usable(self._row(user_id, body.grant_id))
        except SymorvaError as e:
            await self._audit_async(user_id, body.grant_id, "summarize", e.errcode, ids)
            raise
        ordered = sorted(items, key=lambda i: (i.timestamp, i.event_id))
        order = {i.event_id: n for n, i in enumerate(ordered)}
        cited = sorted({e for p in points for e in p.event_ids}, key=lambda e: order.get(e, len(order)))
        await self._audit_async(user_id, body.grant_id, "summarize", "ok", ids, cited)
        log.info("studio summary grant=%s items=%d points=%d backend=%s", body.grant_id, len(ids), len(points),
                 self.summarizer.name)
        return {"grant_id": body.grant_id, "backend": self.summarizer.name, "item_count": len(ids),
                "points": [{"text": p.text, "event_ids": list(p.event_ids)} for p in points],
                "cited_event_ids": cited}

    # MARK: audit

    async def _audit_async(self, user_id: str, grant_id: str | None, action: str, outcome: str,
                           item_ids: list[str], cited: list[str] | None = None) -> None:
        """`_audit` from async code: on a worker thread, never waiting for the lock on the event loop."""
        await anyio.to_thread.run_sync(lambda: self._audit(user_id, grant_id, action, outcome, item_ids, cited))

    def _audit(self, user_id: str, grant_id: str | None, action: str, outcome: str, item_ids: list[str],
               cited: list[str] | None = None) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO studio_audit(at_ms, user_id, grant_id, action, outcome, item_count, item_ids, cited_ids)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (self.now_ms(), user_id, grant_id, action, outcome, len(item_ids), json.dumps(item_ids),
                 json.dumps(cited or [])))
            conn.execute("DELETE FROM studio_audit WHERE user_id = ? AND seq <= (SELECT seq FROM studio_audit"
                         " WHERE user_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                         (user_id, user_id, MAX_AUDIT_PER_MEMBER))

    def audit(self, user_id: str, limit: int) -> dict[str, Any]:
        rows = self.db.query("SELECT * FROM studio_audit WHERE user_id = ? ORDER BY seq DESC LIMIT ?",
                             (user_id, limit))
        return {"entries": [{"seq": r["seq"], "at_ms": r["at_ms"], "grant_id": r["grant_id"], "action": r["action"],
                             "outcome": r["outcome"], "item_count": r["item_count"],
                             "item_ids": json.loads(r["item_ids"]), "cited_event_ids": json.loads(r["cited_ids"])}
                            for r in rows]}


def create_state(options: dict[str, Any], *, db: Database, clock: Callable[[], float],
                 membership: MembershipChecker, summarizer: Summarizer | None = None) -> Studio:
    config = StudioConfig.from_options(options)
    return Studio(config, db, clock, membership, summarizer or create_summarizer(config.summarizer))
