"""AI studio (modules/ai_studio/): grants, scopes, summaries, revoke, expiry, audit."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from symorva_server.app import create_app
from symorva_server.config import ManifestError, Settings, default_manifest
from symorva_server.modules.ai_studio import MembershipUnavailable, StudioConfig
from symorva_server.modules.ai_studio.membership import RoomEvent
from symorva_server.modules.ai_studio.summarizer import (ExtractiveSummarizer, Item, OpenAICompatibleSummarizer,
                                                         SummarizerError)
from symorva_server.ratelimit import profile

from .conftest import HOMESERVER, SERVER_NAME, assert_error, login

S = "/_symorva/v1/studio"
ROOM = "!room:localhost"
CANARY = "canary-body-7f3a9c"


class FakeMembership:
    """The homeserver's answers: who is joined where, and the events of each room (by default
    `$e<n>` of ROOM, sent by Bob at 1000 + n, as `item(n)` describes them)."""

    def __init__(self) -> None:
        self.rooms: dict[str, set[str]] = {}
        self.events: dict[tuple[str, str], RoomEvent] = {
            (ROOM, f"$e{n}"): RoomEvent(f"$e{n}", "@bob:localhost", 1000 + n) for n in range(100)}
        self.unavailable = False
        self.calls: list[tuple[str, str]] = []

    async def is_joined(self, room_id: str, user_id: str) -> bool:
        self.calls.append((room_id, user_id))
        if self.unavailable:
            raise MembershipUnavailable("homeserver not reachable")
        return user_id in self.rooms.get(room_id, set())

    async def event(self, room_id: str, event_id: str) -> RoomEvent | None:
        if self.unavailable:
            raise MembershipUnavailable("homeserver not reachable")
        return self.events.get((room_id, event_id))


@pytest.fixture
def membership() -> FakeMembership:
    m = FakeMembership()
    m.rooms[ROOM] = {"@alice:localhost", "@bob:localhost"}
    return m


@pytest.fixture
def make_studio(verifier, clock, tmp_path, membership):
    clients = []

    def _make(test_mode: bool = False, studio_options: dict | None = None) -> TestClient:
        manifest = default_manifest(HOMESERVER, SERVER_NAME, "http://127.0.0.1:9")
        if studio_options is not None:
            manifest["modules"]["aiStudio"].update(studio_options)
        settings = Settings(homeserver_url=HOMESERVER, server_name=SERVER_NAME, rate_limits=profile("high"),
                            db_path=str(tmp_path / f"studio{len(clients)}.db"), test_mode=test_mode)
        c = TestClient(create_app(settings, verifier=verifier, clock=clock, manifest=manifest, membership=membership),
                       base_url="http://127.0.0.1:9")
        clients.append(c)
        return c

    yield _make
    for c in clients:
        c.close()
        c.app.state.ctx.db.close()


@pytest.fixture
def studio(make_studio) -> TestClient:
    return make_studio()


def item(n: int, body: str | None = None, ts: int | None = None) -> dict:
    return {"event_id": f"$e{n}", "sender": "@bob:localhost", "timestamp": ts if ts is not None else 1000 + n,
            "body": body or f"Message number {n} about the database migration and the deploy plan."}


def grant(c: TestClient, headers: dict, scope: dict, **kw) -> dict:
    r = c.post(f"{S}/grants", headers=headers, json={"room_id": ROOM, "scope": scope, "purpose": "summarize", **kw})
    assert r.status_code == 200, r.text
    return r.json()


def selected(*ns: int) -> dict:
    return {"kind": "selected_messages", "event_ids": [f"$e{n}" for n in ns]}


def test_grant_for_selected_messages_is_active_with_the_default_expiry(studio, verifier, clock):
    a = login(studio, verifier)["headers"]
    g = grant(studio, a, selected(1, 2))
    assert g["state"] == "active" and g["user_id"] == "@alice:localhost" and g["room_id"] == ROOM
    assert g["purpose"] == "summarize" and g["scope"] == selected(1, 2)
    assert g["expires_at_ms"] - g["created_at_ms"] == 3_600_000
    assert g["expires_in_ms"] == 3_600_000  # on the service's clock
    assert studio.get(f"{S}/grants/{g['grant_id']}", headers=a).json() == g
    assert studio.get(f"{S}/grants", headers=a).json() == {"grants": [g]}


def test_requested_lifetime_is_capped_by_the_community(make_studio, verifier):
    c = make_studio(studio_options={"grantTtlSeconds": 60, "maxGrantTtlSeconds": 120})
    a = login(c, verifier)["headers"]
    g = grant(c, a, selected(1), expires_in_ms=10_000_000)
    assert g["expires_at_ms"] - g["created_at_ms"] == 120_000
    assert grant(c, a, selected(1))["expires_at_ms"] - g["created_at_ms"] == 60_000
    caps = c.get("/_symorva/v1/capabilities", headers=a).json()["modules"]["aiStudio"]
    assert caps["grant_ttl_ms"] == 60_000 and caps["summarizer"] == "extractive-lexrank"


def test_a_member_outside_the_room_gets_no_grant(studio, verifier, membership):
    c = login(studio, verifier, "@carol:localhost")["headers"]
    r = studio.post(f"{S}/grants", headers=c, json={"room_id": ROOM, "scope": selected(1), "purpose": "summarize"})
    assert_error(r, 403, "SY_NOT_ROOM_MEMBER")
    assert membership.calls[-1] == (ROOM, "@carol:localhost")
    assert studio.get(f"{S}/grants", headers=c).json() == {"grants": []}


def test_membership_that_cannot_be_checked_refuses_the_grant(studio, verifier, membership):
    membership.unavailable = True
    a = login(studio, verifier)["headers"]
    r = studio.post(f"{S}/grants", headers=a, json={"room_id": ROOM, "scope": selected(1), "purpose": "summarize"})
    assert_error(r, 502, "SY_HOMESERVER_UNAVAILABLE")


@pytest.mark.parametrize("body", [
    {"room_id": "not-a-room", "scope": selected(1), "purpose": "summarize"},
    {"room_id": ROOM, "scope": {"kind": "selected_messages", "event_ids": []}, "purpose": "summarize"},
    {"room_id": ROOM, "scope": selected(1, 1), "purpose": "summarize"},
    {"room_id": ROOM, "scope": {"kind": "everything"}, "purpose": "summarize"},
    {"room_id": ROOM, "scope": selected(1), "purpose": "advertising"},
])
def test_malformed_grant_requests_are_refused(studio, verifier, body):
    a = login(studio, verifier)["headers"]
    r = studio.post(f"{S}/grants", headers=a, json=body)
    assert r.status_code == 400 and r.json()["errcode"] in ("SY_INVALID_PARAM", "SY_MISSING_PARAM"), r.text


def test_summary_of_selected_messages_cites_only_them(studio, verifier):
    a = login(studio, verifier)["headers"]
    g = grant(studio, a, selected(*range(1, 11)))
    r = studio.post(f"{S}/summaries", headers=a,
                    json={"grant_id": g["grant_id"], "items": [item(n) for n in range(1, 11)], "max_points": 3})
    assert r.status_code == 200, r.text
    s = r.json()
    assert s["item_count"] == 10 and s["backend"] == "extractive-lexrank" and len(s["points"]) == 3
    assert set(s["cited_event_ids"]) <= {f"$e{n}" for n in range(1, 11)}
    assert s["cited_event_ids"] == [e for p in s["points"] for e in p["event_ids"]]


def test_an_item_outside_the_selection_refuses_the_whole_request_naming_it(studio, verifier):
    a = login(studio, verifier)["headers"]
    g = grant(studio, a, selected(1, 2))
    r = studio.post(f"{S}/summaries", headers=a,
                    json={"grant_id": g["grant_id"], "items": [item(1), item(3), item(4)]})
    body = assert_error(r, 400, "SY_OUT_OF_SCOPE")
    assert body["item_index"] == 1 and body["event_id"] == "$e3"


def test_conversation_since_covers_that_message_and_later_ones(studio, verifier):
    a = login(studio, verifier)["headers"]
    g = grant(studio, a, {"kind": "conversation_since", "since_event_id": "$e5", "since_ts": 1005})
    ok = studio.post(f"{S}/summaries", headers=a, json={"grant_id": g["grant_id"], "items": [item(5), item(9)]})
    assert ok.status_code == 200, ok.text
    r = studio.post(f"{S}/summaries", headers=a, json={"grant_id": g["grant_id"], "items": [item(6), item(4)]})
    assert assert_error(r, 400, "SY_OUT_OF_SCOPE")["event_id"] == "$e4"


def test_revoked_grant_cannot_summarize(studio, verifier):
    a = login(studio, verifier)["headers"]
    g = grant(studio, a, selected(1))
    r = studio.post(f"{S}/grants/{g['grant_id']}/revoke", headers=a)
    assert r.status_code == 200 and r.json()["state"] == "revoked" and r.json()["revoked_at_ms"] is not None
    again = studio.post(f"{S}/grants/{g['grant_id']}/revoke", headers=a)
    assert again.json() == r.json()  # idempotent
    r = studio.post(f"{S}/summaries", headers=a, json={"grant_id": g["grant_id"], "items": [item(1)]})
    assert_error(r, 409, "SY_GRANT_REVOKED")


def test_expired_grant_cannot_summarize(studio, verifier, clock):
    a = login(studio, verifier)["headers"]
    g = grant(studio, a, selected(1), expires_in_ms=60_000)
    clock.advance(60)
    assert studio.get(f"{S}/grants/{g['grant_id']}", headers=a).json()["state"] == "expired"
    r = studio.post(f"{S}/summaries", headers=a, json={"grant_id": g["grant_id"], "items": [item(1)]})
    assert_error(r, 409, "SY_GRANT_EXPIRED")


def test_another_members_grant_is_unusable(studio, verifier):
    a = login(studio, verifier)["headers"]
    b = login(studio, verifier, "@bob:localhost")["headers"]
    g = grant(studio, a, selected(1))
    r = studio.post(f"{S}/summaries", headers=b, json={"grant_id": g["grant_id"], "items": [item(1)]})
    assert_error(r, 403, "SY_GRANT_FORBIDDEN")
    assert_error(studio.post(f"{S}/grants/{g['grant_id']}/revoke", headers=b), 403, "SY_GRANT_FORBIDDEN")
    assert_error(studio.get(f"{S}/grants/{g['grant_id']}", headers=b), 403, "SY_GRANT_FORBIDDEN")
    assert studio.get(f"{S}/grants/{g['grant_id']}", headers=a).json()["state"] == "active"
    assert_error(studio.post(f"{S}/summaries", headers=b, json={"grant_id": "gr_nope", "items": [item(1)]}),
                 404, "SY_GRANT_UNKNOWN")


def test_a_revoke_while_the_summary_is_made_fails_it(studio, verifier):
    a = login(studio, verifier)["headers"]
    g = grant(studio, a, selected(1, 2))
    ctx = studio.app.state.ctx
    real = ctx.ai_studio.summarizer

    class RevokingSummarizer:
        name = real.name

        def summarize(self, items, max_points):
            ctx.ai_studio.revoke("@alice:localhost", g["grant_id"])  # lands while the summary is made
            return real.summarize(items, max_points)

    ctx.ai_studio.summarizer = RevokingSummarizer()
    r = studio.post(f"{S}/summaries", headers=a, json={"grant_id": g["grant_id"], "items": [item(1), item(2)]})
    assert_error(r, 409, "SY_GRANT_REVOKED")
    assert studio.get(f"{S}/audit", headers=a).json()["entries"][0]["outcome"] == "SY_GRANT_REVOKED"


def test_expiry_while_the_summary_is_made_fails_it(studio, verifier, clock):
    a = login(studio, verifier)["headers"]
    g = grant(studio, a, selected(1), expires_in_ms=1000)
    ctx = studio.app.state.ctx
    real = ctx.ai_studio.summarizer

    class SlowSummarizer:
        name = real.name

        def summarize(self, items, max_points):
            clock.advance(2)
            return real.summarize(items, max_points)

    ctx.ai_studio.summarizer = SlowSummarizer()
    r = studio.post(f"{S}/summaries", headers=a, json={"grant_id": g["grant_id"], "items": [item(1)]})
    assert_error(r, 409, "SY_GRANT_EXPIRED")


def test_the_audit_records_ids_and_counts_never_bodies(studio, verifier, tmp_path, caplog):
    caplog.set_level("DEBUG")
    a = login(studio, verifier)["headers"]
    g = grant(studio, a, selected(1, 2, 3))
    items = [item(n, body=f"{CANARY} number {n} says the deploy failed") for n in (1, 2, 3)]
    assert studio.post(f"{S}/summaries", headers=a, json={"grant_id": g["grant_id"], "items": items}).status_code == 200
    studio.post(f"{S}/summaries", headers=a, json={"grant_id": g["grant_id"], "items": [*items, item(4, CANARY)]})
    entries = studio.get(f"{S}/audit", headers=a).json()["entries"]
    assert [(e["action"], e["outcome"], e["item_count"]) for e in entries] == [
        ("summarize", "SY_OUT_OF_SCOPE", 4), ("summarize", "ok", 3), ("grant", "ok", 0)]
    assert entries[1]["item_ids"] == ["$e1", "$e2", "$e3"] and entries[1]["cited_event_ids"]
    assert CANARY not in json.dumps(entries)
    assert CANARY not in caplog.text
    db = studio.app.state.ctx.db
    for table in ("studio_audit", "studio_grants"):
        assert CANARY not in json.dumps([dict(r) for r in db.query(f"SELECT * FROM {table}")])
    # The database file keeps no body either (WAL included).
    for f in tmp_path.iterdir():
        assert CANARY.encode() not in f.read_bytes(), f


def test_stats_count_the_callers_studio_requests(make_studio, verifier):
    c = make_studio(test_mode=True)
    a = login(c, verifier)["headers"]
    assert c.get("/_symorva/v1/test/studio/stats", headers=a).json() == {"requests": 0}
    grant(c, a, selected(1))
    c.get(f"{S}/grants", headers=a)
    assert c.get("/_symorva/v1/test/studio/stats", headers=a).json() == {"requests": 2}


def test_studio_routes_are_absent_when_the_module_is_disabled(make_studio, verifier):
    c = make_studio(studio_options={"enabled": False})
    a = login(c, verifier)["headers"]
    assert_error(c.get(f"{S}/grants", headers=a), 404, "SY_NOT_FOUND")


@pytest.mark.parametrize("options", [
    {"grantTtlSeconds": 0}, {"grantTtlSeconds": 100, "maxGrantTtlSeconds": 50},
    {"summarizer": {"backend": "magic"}}, {"summarizer": {"backend": "openai", "url": "http://x"}},
    # plain http to a host that is not loopback: the conversation would travel in clear
    {"summarizer": {"backend": "openai", "url": "http://summarizer.example.org/v1", "model": "m"}},
    {"summarizer": {"backend": "openai", "url": "http://10.0.0.5:8000/v1", "model": "m"}},
    {"summarizer": {"backend": "openai", "url": "ftp://127.0.0.1/v1", "model": "m"}},
    {"summarizer": {"algorithm": "lsa"}},
])
def test_invalid_studio_options_are_manifest_errors(options):
    with pytest.raises(ManifestError):
        StudioConfig.from_options(options)


def test_extractive_summarizer_picks_central_messages_in_order():
    s = ExtractiveSummarizer("lexrank")
    items = [Item(f"$m{n}", "@a:x", n, body) for n, body in enumerate([
        "The deploy failed because the database migration timed out.",
        "Lunch is at noon.",
        "We should rerun the database migration with a longer timeout.",
        "The database migration needs an index before the deploy.",
        "Has anyone seen my keys?",
        "The migration timed out on the large table again.",
    ])]
    points = s.summarize(items, 2)
    assert len(points) == 2
    cited = [p.event_ids[0] for p in points]
    assert cited == sorted(cited, key=lambda e: int(e[2:]))
    assert all(p.text == next(i.body for i in items if i.event_id == p.event_ids[0]) for p in points)
    assert ExtractiveSummarizer("textrank").summarize(items, 3)[0].event_ids


def test_openai_backend_builds_a_request_and_rejects_invented_citations():
    s = OpenAICompatibleSummarizer("http://127.0.0.1:9/v1", "small-model")
    items = [Item("$a", "@a:x", 1, "hello"), Item("$b", "@b:x", 2, "world")]
    body = s.request_body(items, 2)
    assert body["model"] == "small-model" and "[$a] @a:x: hello" in body["messages"][1]["content"]
    answer = {"choices": [{"message": {"content": json.dumps({"points": [{"text": "hi", "event_ids": ["$a"]}]})}}]}
    assert [p.event_ids for p in s.parse(answer, items, 2)] == [("$a",)]
    bad = {"choices": [{"message": {"content": json.dumps({"points": [{"text": "x", "event_ids": ["$zzz"]}]})}}]}
    with pytest.raises(SummarizerError):
        s.parse(bad, items, 2)
    with pytest.raises(SummarizerError):
        s.summarize(items, 2)  # nothing listens on port 9


def test_the_openai_backend_is_selected_by_configuration(make_studio, verifier):
    c = make_studio(studio_options={"summarizer": {"backend": "openai", "url": "http://127.0.0.1:9/v1",
                                                   "model": "small-model", "apiKeyEnv": "STUDIO_KEY"}})
    a = login(c, verifier)["headers"]
    caps = c.get("/_symorva/v1/capabilities", headers=a).json()["modules"]["aiStudio"]
    assert caps["summarizer"] == "openai-compatible:small-model"
    g = grant(c, a, selected(1))
    # Nothing listens there: the summary fails typed, and nothing is stored.
    r = c.post(f"{S}/summaries", headers=a, json={"grant_id": g["grant_id"], "items": [item(1)]})
    assert_error(r, 502, "SY_SUMMARIZER_UNAVAILABLE")


def test_a_members_audit_is_bounded(studio, verifier):
    from symorva_server.modules.ai_studio import domain

    bound = getattr(domain, "MAX_AUDIT_PER_MEMBER", 1000)
    a = login(studio, verifier)["headers"]
    g = grant(studio, a, selected(1))
    for _ in range(bound + 5):
        studio.app.state.ctx.ai_studio._audit("@alice:localhost", g["grant_id"], "revoke", "ok", [])
    db = studio.app.state.ctx.db
    assert db.query_one("SELECT COUNT(*) AS n FROM studio_audit WHERE user_id = ?", ("@alice:localhost",))["n"] == bound
    newest = studio.get(f"{S}/audit", headers=a, params={"limit": 1}).json()["entries"][0]
    assert newest["action"] == "revoke"
