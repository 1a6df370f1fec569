"""Rate limiting (ratelimit.py): token buckets per member or client address and route class."""

from __future__ import annotations

import nacl.pwhash.argon2id as argon2id
import pytest

from symorva_server.modules.wallet import pin as wallet_pin
from symorva_server.openapi_export import openapi_document
from symorva_server.ratelimit import (PROFILES, Bucket, RateLimiter, RateLimits, profile, retry_after_header,
                                      route_class)

from .conftest import HOMESERVER, SERVER_NAME, FakeClock, assert_error
from .wallet_helpers import TW, W, Member, new_command_id

ALICE, BOB = "@alice:localhost", "@bob:localhost"
PIN = "4321"

# Small buckets: 3 reads at once then 1 a second, 2 writes then 1 every 2 s, 2 exchanges then 1 a second.
SMALL = RateLimits(openid=Bucket(2, 1.0), writes=Bucket(2, 0.5), reads=Bucket(3, 1.0))


@pytest.fixture(autouse=True)
def fast_pin_hash(monkeypatch):
    monkeypatch.setattr(wallet_pin, "PIN_OPSLIMIT", argon2id.OPSLIMIT_MIN)
    monkeypatch.setattr(wallet_pin, "PIN_MEMLIMIT", argon2id.MEMLIMIT_MIN)


@pytest.fixture
def limited(make_client):
    return make_client(test_mode=True, rate_limits=SMALL)


def limiter(bucket: Bucket, clock: FakeClock) -> RateLimiter:
    return RateLimiter(RateLimits(openid=bucket, writes=bucket, reads=bucket), clock)


# ----------------------------------------------------------------------------- the bucket


def test_bucket_allows_a_burst_then_refills_at_its_rate():
    clock = FakeClock()
    rl = limiter(Bucket(3, 2.0), clock)
    assert [rl.take("reads", "a") for _ in range(3)] == [None, None, None]
    assert rl.take("reads", "a") == 500  # one token comes back every 500 ms
    clock.advance(0.2)
    assert rl.take("reads", "a") == 300  # refused requests take nothing
    clock.advance(0.3)
    assert rl.take("reads", "a") is None
    assert rl.take("reads", "a") == 500


def test_bucket_refills_no_further_than_its_burst():
    clock = FakeClock()
    rl = limiter(Bucket(3, 2.0), clock)
    assert rl.take("reads", "a") is None
    clock.advance(3600)
    assert rl.tokens("reads", "a") == 3.0
    assert [rl.take("reads", "a") for _ in range(4)] == [None, None, None, 500]


def test_retry_after_is_rounded_up_to_the_millisecond():
    clock = FakeClock()
    rl = limiter(Bucket(1, 3.0), clock)
    assert rl.take("writes", "a") is None
    assert rl.take("writes", "a") == 334  # 333.33… ms


def test_buckets_are_per_key_and_per_route_class():
    clock = FakeClock()
    rl = limiter(Bucket(1, 1.0), clock)
    assert rl.take("writes", "@alice:localhost") is None
    assert rl.take("writes", "@alice:localhost") == 1000
    assert rl.take("writes", "@bob:localhost") is None
    assert rl.take("reads", "@alice:localhost") is None


def test_full_buckets_are_forgotten_when_there_are_many(monkeypatch):
    clock = FakeClock()
    rl = limiter(Bucket(2, 1.0), clock)
    monkeypatch.setattr(RateLimiter, "PRUNE_AT", 10)
    for i in range(10):
        rl.take("reads", f"m{i}")
    clock.advance(5)
    rl.take("reads", "last")
    assert len(rl._buckets) == 1


def test_many_distinct_keys_do_not_grow_the_limiter_beyond_its_cap(monkeypatch):
    # The clock stands still, so no bucket is ever full again: only the cap bounds memory.
    clock = FakeClock()
    rl = limiter(Bucket(2, 1.0), clock)
    monkeypatch.setattr(RateLimiter, "PRUNE_AT", 50)
    monkeypatch.setattr(RateLimiter, "MAX_BUCKETS", 100)
    for i in range(5000):
        assert rl.take("reads", f"m{i}") is None
        assert len(rl) <= 100
    assert len(rl) == 100
    # The most recently used keys are kept: m4999 still has its 1 token left, m0 starts afresh.
    assert rl.tokens("reads", "m4999") == 1.0 and rl.tokens("reads", "m0") == 2.0


def test_refused_requests_store_nothing_and_keep_their_bucket(monkeypatch):
    clock = FakeClock()
    rl = limiter(Bucket(1, 1.0), clock)
    monkeypatch.setattr(RateLimiter, "PRUNE_AT", 2)
    monkeypatch.setattr(RateLimiter, "MAX_BUCKETS", 3)
    assert rl.take("writes", "greedy") is None
    for i in range(3):
        rl.take("writes", f"other{i}")
        # The refused member is the most recently used: never the one evicted.
        assert rl.take("writes", "greedy") == 1000
    assert len(rl) == 3 and rl.tokens("writes", "greedy") == 0.0


def test_retry_after_header_is_whole_seconds_rounded_up():
    assert [retry_after_header(ms) for ms in (1, 999, 1000, 1001, 2500)] == [b"1", b"1", b"1", b"2", b"3"]


def test_route_classes():
    assert route_class("POST", "/_symorva/v1/auth/openid") == "openid"
    assert route_class("GET", "/_symorva/v1/wallet/balances") == "reads"
    assert route_class("GET", "/_symorva/v1/wallet/commands/{command_id}") == "reads"
    assert route_class("POST", "/_symorva/v1/wallet/transfers/prepare") == "writes"
    assert route_class("POST", "/_symorva/v1/wallet/transfers/confirm") == "writes"
    assert route_class("POST", "/_symorva/v1/wallet/pin") == "writes"
    assert route_class("GET", "/_symorva/v1/health") is None
    assert route_class("GET", "/.well-known/symorva") is None
    assert route_class("POST", "/_symorva/v1/test/wallet/credit") is None
    assert route_class("POST", "/_symorva/v1/test/faults") is None


def test_profiles_and_overrides():
    assert set(PROFILES) == {"default", "high", "low"}
    low, high = profile("low"), profile("high")
    for c in ("openid", "writes", "reads"):
        assert low.bucket(c).burst < profile("default").bucket(c).burst < high.bucket(c).burst
    assert low.with_override("reads=5/0.5").reads == Bucket(5, 0.5)
    assert low.with_override("reads=5/0.5").writes == low.writes
    for bad in ["reads", "reads=5", "reads=x/1", "reads=0/1", "reads=5/0", "nope=5/1", "reads=5/-1", "reads=5/nan"]:
        with pytest.raises(ValueError):
            low.with_override(bad)
    with pytest.raises(ValueError):
        profile("medium")


# ----------------------------------------------------------------------------- over HTTP


def test_429_shape_and_retry_after_header(limited, verifier):
    alice = Member(limited, verifier, ALICE)
    for _ in range(3):
        assert alice.get("/_symorva/v1/whoami").status_code == 200
    r = alice.get("/_symorva/v1/whoami")
    body = assert_error(r, 429, "SY_LIMIT_EXCEEDED")
    assert body["retry_after_ms"] == 1000
    assert r.headers["retry-after"] == "1"
    assert set(body) == {"errcode", "error", "retry_after_ms"}
    assert "reads" in body["error"]


def test_waiting_the_hint_is_enough(limited, verifier, clock):
    alice = Member(limited, verifier, ALICE)
    for _ in range(3):
        alice.get("/_symorva/v1/whoami")
    r = alice.get("/_symorva/v1/whoami")
    assert r.status_code == 429
    clock.advance(r.json()["retry_after_ms"] / 1000)
    assert alice.get("/_symorva/v1/whoami").status_code == 200
    assert alice.get("/_symorva/v1/whoami").status_code == 429


def test_members_do_not_share_buckets(limited, verifier):
    alice, bob = Member(limited, verifier, ALICE), Member(limited, verifier, BOB)
    for _ in range(3):
        alice.get("/_symorva/v1/whoami")
    assert alice.get("/_symorva/v1/whoami").status_code == 429
    assert [bob.get("/_symorva/v1/whoami").status_code for _ in range(4)] == [200, 200, 200, 429]


def test_reads_and_writes_have_separate_buckets(limited, verifier):
    alice, bob = Member(limited, verifier, ALICE), Member(limited, verifier, BOB)
    bob.get(f"{W}/balances")  # Bob has a wallet
    alice.set_pin(PIN)  # one write (and one read for the key)
    alice.credit(ALICE, "10.00")  # test endpoint: not limited
    assert alice.prepare(BOB, "1.00").status_code == 200
    assert_error(alice.prepare(BOB, "1.00"), 429, "SY_LIMIT_EXCEEDED")
    # Reads are not affected: a member out of writes can still see balances and query commands.
    assert alice.get(f"{W}/balances").status_code == 200
    assert alice.query(new_command_id()).json()["status"] == "unknown_command"


def test_openid_exchange_is_limited_per_client_address(limited, verifier):
    def exchange(user_id):
        return limited.post("/_symorva/v1/auth/openid", json={
            "access_token": verifier.issue(user_id), "matrix_server_name": SERVER_NAME})

    assert [exchange(ALICE).status_code, exchange(BOB).status_code] == [200, 200]
    r = exchange("@carol:localhost")
    assert_error(r, 429, "SY_LIMIT_EXCEEDED")
    assert r.headers["retry-after"] == "1"
    # Refused before the homeserver was asked.
    assert len(verifier.calls) == 2


def test_unauthenticated_requests_take_no_member_token(limited, verifier):
    for _ in range(5):
        assert_error(limited.get("/_symorva/v1/whoami"), 401, "SY_MISSING_TOKEN")
    alice = Member(limited, verifier, ALICE)
    assert alice.get("/_symorva/v1/whoami").status_code == 200


def test_health_discovery_and_test_endpoints_are_never_limited(limited, verifier):
    alice = Member(limited, verifier, ALICE)
    for _ in range(10):
        assert limited.get("/_symorva/v1/health").status_code == 200
        assert limited.get("/.well-known/symorva").status_code == 200
        assert alice.post(f"{TW}/credit", {"user_id": ALICE, "asset": "ORB", "amount": "1.00"}).status_code == 200
        assert alice.get("/_symorva/v1/test/faults").status_code == 200


# ----------------------------------------------------------------------------- wallet confirm


def test_rate_limited_confirm_is_refused_before_anything_is_committed(limited, verifier, clock):
    c = limited
    alice, bob = Member(c, verifier, ALICE), Member(c, verifier, BOB)
    bob.get(f"{W}/balances")
    assert alice.set_pin(PIN).status_code == 200  # write 1
    alice.credit(ALICE, "100.00")
    draft = alice.draft(BOB, "25.00")  # write 2: the bucket is empty now
    command_id = new_command_id()

    r = alice.confirm(draft, PIN, command_id)
    body = assert_error(r, 429, "SY_LIMIT_EXCEEDED")
    db = c.app.state.ctx.db
    # Nothing recorded: no command, no ledger entry, no balance change, the draft still open.
    assert db.query_one("SELECT COUNT(*) AS n FROM wallet_commands")["n"] == 0
    assert db.query_one("SELECT COUNT(*) AS n FROM wallet_transfers WHERE kind = 'transfer'")["n"] == 0
    assert db.query_one("SELECT transfer_id FROM wallet_drafts WHERE draft_id = ?",
                        (draft["draft_id"],))["transfer_id"] is None
    assert alice.balances() == {"ORB": "100.00"}
    # The refusal is not a wrong PIN.
    assert alice.get(f"{W}/pin").json()["attempts_left"] == 5

    # The same command ID, after the hint, executes once.
    clock.advance(body["retry_after_ms"] / 1000)
    r = alice.confirm(draft, PIN, command_id)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "settled"
    assert "symorva-replayed" not in r.headers
    assert alice.balances() == {"ORB": "75.00"}
    assert db.query_one("SELECT COUNT(*) AS n FROM wallet_transfers WHERE command_id = ?",
                        (command_id,))["n"] == 1


def test_a_query_during_the_limit_does_not_fence_the_limited_command(limited, verifier, clock):
    # Queries are reads: they still answer while writes are limited, and a rate-limited confirm
    # left nothing behind, so its command ID answers unknown_command (and is fenced) as a
    # command the service never received.
    alice, bob = Member(limited, verifier, ALICE), Member(limited, verifier, BOB)
    bob.get(f"{W}/balances")
    alice.set_pin(PIN)
    alice.credit(ALICE, "10.00")
    draft = alice.draft(BOB, "1.00")
    command_id = new_command_id()
    assert alice.confirm(draft, PIN, command_id).status_code == 429
    assert alice.query(command_id).json()["status"] == "unknown_command"
    clock.advance(2)
    r = alice.confirm(draft, PIN, command_id)
    assert r.json()["failure"]["code"] == "command_fenced"
    assert alice.balances() == {"ORB": "10.00"}


# ----------------------------------------------------------------------------- configuration and docs


def test_settings_default_to_the_default_profile():
    from symorva_server.config import Settings

    assert Settings(homeserver_url=HOMESERVER, server_name=SERVER_NAME).rate_limits == profile("default")


def test_cli_profile_and_overrides():
    from symorva_server.__main__ import parse_args, rate_limits

    base = ["--port", "1", "--db", "x", "--manifest", "m", "--homeserver", "h", "--server-name", "s"]
    assert rate_limits(parse_args(base)) == profile("default")
    args = parse_args(base + ["--rate-limit", "low", "--rate-limit-bucket", "writes=3/0.25"])
    assert rate_limits(args) == RateLimits(openid=profile("low").openid, writes=Bucket(3, 0.25),
                                           reads=profile("low").reads, notify=profile("low").notify)
    with pytest.raises(ValueError):
        rate_limits(parse_args(base + ["--rate-limit-bucket", "writes=3"]))


def test_openapi_documents_429_on_every_limited_operation():
    doc = openapi_document()
    limited = unlimited = 0
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            has_429 = "429" in op["responses"]
            assert has_429 == (route_class(method, path) is not None), (method, path)
            if has_429:
                limited += 1
                assert "Retry-After" in op["responses"]["429"]["headers"]
                assert op["responses"]["429"]["content"]["application/json"]["schema"]["$ref"] \
                    == "#/components/schemas/ErrorBody"
            else:
                unlimited += 1
    assert limited >= 10 and unlimited >= 3
    confirm = doc["paths"]["/_symorva/v1/wallet/transfers/confirm"]["post"]["responses"]["429"]
    assert "writes" in confirm["description"] and "nothing it asked for happened" in confirm["description"]

