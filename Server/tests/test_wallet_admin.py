"""Recovering a locked wallet (the lock expires; a community admin unlocks it; both are
audited) and the development-only admin credit."""

from __future__ import annotations

import nacl.pwhash.argon2id as argon2id
import pytest

from symorva_server.config import ManifestError
from symorva_server.modules.wallet import CreditRequest
from symorva_server.modules.wallet import pin as wallet_pin

from .conftest import assert_error
from .test_wallet import ALICE, BOB, CAROL, PIN, manifest, transfer_count
from .wallet_helpers import TW, W, Member

ADMIN = "@admin:localhost"
DAVE = "@dave:localhost"


@pytest.fixture(autouse=True)
def fast_pin_hash(monkeypatch):
    monkeypatch.setattr(wallet_pin, "PIN_OPSLIMIT", argon2id.OPSLIMIT_MIN)
    monkeypatch.setattr(wallet_pin, "PIN_MEMLIMIT", argon2id.MEMLIMIT_MIN)


def community(make_client, verifier, *, test_mode=False, development=None, admins=(ADMIN,), **wallet_options):
    m = manifest(**wallet_options)
    m["services"]["admins"] = list(admins)
    if development is not None:
        m["services"]["development"] = development
    c = make_client(test_mode=test_mode, manifest=m)
    alice, bob, admin = Member(c, verifier, ALICE), Member(c, verifier, BOB), Member(c, verifier, ADMIN)
    bob.balances()
    assert alice.set_pin(PIN).status_code == 200
    c.app.state.ctx.wallet.credit(CreditRequest(user_id=ALICE, asset="ORB", amount="100.00"))
    return c, alice, bob, admin


def lock(member, draft):
    failures = [member.confirm(draft, "0000").json()["failure"] for _ in range(5)]
    assert failures[-1]["code"] == "locked_out"
    assert member.get(f"{W}/pin").json()["locked"] is True


def audit(c):
    return [dict(r) for r in c.app.state.ctx.db.query("SELECT * FROM wallet_unlocks ORDER BY seq")]


# ----------------------------------------------------------------------------- the lock expires


def test_the_lock_lasts_15_minutes_by_default_then_the_count_starts_again(make_client, verifier, clock):
    c, alice, bob, admin = community(make_client, verifier, draftTtlSeconds=3600)
    d = alice.draft(BOB, "10.00")
    lock(alice, d)
    locked_at = int(clock() * 1000)
    clock.advance(15 * 60 - 0.001)
    assert_error(alice.prepare(BOB, "1.00"), 403, "SY_WALLET_LOCKED")
    assert alice.confirm(d, PIN).json()["failure"]["code"] == "locked_out"
    assert audit(c) == []
    clock.advance(0.001)
    assert alice.get(f"{W}/pin").json() == {"pin_set": True, "locked": False, "attempts_left": 5, "max_attempts": 5}
    [entry] = audit(c)
    assert (entry["user_id"], entry["method"], entry["actor"], entry["locked_at_ms"], entry["failed_attempts"],
            entry["at_ms"]) == (ALICE, "expired", None, locked_at, 5, locked_at + 15 * 60 * 1000)
    assert alice.confirm(d, "0000").json()["failure"]["attempts_left"] == 4  # counted afresh
    assert alice.confirm(d, PIN).json()["status"] == "settled"
    assert len(audit(c)) == 1


def test_the_lock_duration_is_configurable(make_client, verifier, clock):
    c, alice, bob, admin = community(make_client, verifier, pinLockSeconds=60)
    d = alice.draft(BOB, "10.00")
    lock(alice, d)
    clock.advance(59)
    assert alice.confirm(d, PIN).json()["failure"]["code"] == "locked_out"
    clock.advance(1)
    assert alice.confirm(d, PIN).json()["status"] == "settled"
    for bad in (0, -1, "60", True, 7 * 86400 + 1):
        with pytest.raises(ManifestError, match="pinLockSeconds"):
            make_client(manifest=manifest(pinLockSeconds=bad))


# ----------------------------------------------------------------------------- an admin unlocks


def test_an_admin_unlocks_a_wallet_and_it_is_audited(make_client, verifier, clock):
    c, alice, bob, admin = community(make_client, verifier)
    d = alice.draft(BOB, "10.00")
    lock(alice, d)
    body = assert_error(bob.post(f"{W}/admin/unlock", {"user_id": ALICE}), 403, "SY_NOT_ADMIN")
    assert BOB in body["error"]
    assert_error(alice.post(f"{W}/admin/unlock", {"user_id": ALICE}), 403, "SY_NOT_ADMIN")
    assert_error(bob.get(f"{W}/admin/unlocks"), 403, "SY_NOT_ADMIN")
    assert_error(admin.post(f"{W}/admin/unlock", {"user_id": DAVE}), 404, "SY_WALLET_UNKNOWN")
    assert_error(admin.post(f"{W}/admin/unlock", {"user_id": "@alice:elsewhere.org"}), 400, "SY_INVALID_RECIPIENT")
    assert_error(admin.post(f"{W}/admin/unlock", {}), 400, "SY_MISSING_PARAM")
    assert alice.get(f"{W}/pin").json()["locked"] is True and audit(c) == []

    clock.advance(30)
    r = admin.post(f"{W}/admin/unlock", {"user_id": ALICE})
    assert r.status_code == 200
    assert r.json() == {"pin_set": True, "locked": False, "attempts_left": 5, "max_attempts": 5}
    assert alice.confirm(d, PIN).json()["status"] == "settled"
    # With clear_pin the member sets a new PIN (no old one needed).
    assert admin.post(f"{W}/admin/unlock", {"user_id": ALICE, "clear_pin": True}).json()["pin_set"] is False
    assert alice.set_pin("5555").json() == {"pin_set": True, "changed": False}

    unlocks = admin.get(f"{W}/admin/unlocks").json()["unlocks"]
    assert [(u["user_id"], u["method"], u["actor"], u["failed_attempts"], u["cleared_pin"]) for u in unlocks] == [
        (ALICE, "admin", ADMIN, 0, True), (ALICE, "admin", ADMIN, 5, False)]
    assert unlocks[1]["locked_at_ms"] == unlocks[1]["at_ms"] - 30_000 and unlocks[0]["locked_at_ms"] is None
    assert admin.get(f"{W}/admin/unlocks", params={"user_id": BOB}).json() == {"unlocks": []}
    assert len(admin.get(f"{W}/admin/unlocks", params={"limit": 1}).json()["unlocks"]) == 1


def test_without_admins_nobody_may_unlock(make_client, verifier):
    c, alice, bob, admin = community(make_client, verifier, admins=())
    assert_error(admin.post(f"{W}/admin/unlock", {"user_id": ALICE}), 403, "SY_NOT_ADMIN")


def test_the_test_unlock_is_audited_too(make_client, verifier):
    c, alice, bob, admin = community(make_client, verifier, test_mode=True)
    lock(alice, alice.draft(BOB, "1.00"))
    assert bob.post(f"{TW}/unlock", {"user_id": ALICE}).status_code == 200
    assert [(e["method"], e["actor"]) for e in audit(c)] == [("test", BOB)]


def test_admins_must_be_matrix_user_ids(make_client):
    for bad in ("@admin:localhost", ["admin"], [1], ["@admin"]):
        m = manifest()
        m["services"]["admins"] = bad
        with pytest.raises(ManifestError, match="services.admins"):
            make_client(manifest=m)
    m = manifest()
    m["services"]["development"] = "yes"
    with pytest.raises(ManifestError, match="services.development"):
        make_client(manifest=m)


def test_admins_are_not_published(make_client, verifier):
    c, alice, bob, admin = community(make_client, verifier, development=True)
    assert ADMIN not in alice.get("/_symorva/v1/capabilities").text


# ----------------------------------------------------------------------------- development credit


CREDIT = f"{W}/admin/credit"


def test_a_newcomer_gets_funds_from_an_admin_in_development_mode(make_client, verifier):
    c, alice, bob, admin = community(make_client, verifier, development=True)
    newcomer = Member(c, verifier, CAROL)
    assert_error(newcomer.post(CREDIT, {"user_id": CAROL, "asset": "ORB", "amount": "50.00"}), 403, "SY_NOT_ADMIN")
    r = admin.post(CREDIT, {"user_id": CAROL, "asset": "ORB", "amount": "50.00"})
    assert r.status_code == 200, r.text
    assert r.json()["balance"] == "50.00" and r.json()["transfer"]["kind"] == "credit"
    assert newcomer.balances() == {"ORB": "50.00"}
    for body, code in [({"user_id": CAROL, "asset": "ORB", "amount": "0"}, "SY_INVALID_AMOUNT"),
                       ({"user_id": CAROL, "asset": "XYZ", "amount": "1"}, "SY_UNKNOWN_ASSET"),
                       ({"user_id": "@carol:elsewhere.org", "asset": "ORB", "amount": "1"}, "SY_INVALID_RECIPIENT"),
                       ({"user_id": CAROL, "asset": "ORB"}, "SY_MISSING_PARAM")]:
        assert_error(admin.post(CREDIT, body), 400, code)
    # The first transfer.
    assert newcomer.set_pin("2468").status_code == 200
    assert newcomer.confirm(newcomer.draft(ALICE, "20.00"), "2468").json()["status"] == "settled"
    assert newcomer.balances() == {"ORB": "30.00"}


def test_test_mode_is_development_mode(make_client, verifier):
    c, alice, bob, admin = community(make_client, verifier, test_mode=True)
    assert admin.post(CREDIT, {"user_id": BOB, "asset": "ORB", "amount": "5.00"}).status_code == 200


@pytest.mark.parametrize("development", [None, False])
def test_production_mode_never_credits(make_client, verifier, development):
    c, alice, bob, admin = community(make_client, verifier, development=development)
    body = assert_error(admin.post(CREDIT, {"user_id": BOB, "asset": "ORB", "amount": "5.00"}), 403,
                        "SY_NOT_IN_DEVELOPMENT")
    assert "development" in body["error"]
    assert_error(bob.post(CREDIT, {"user_id": BOB, "asset": "ORB", "amount": "5.00"}), 403, "SY_NOT_IN_DEVELOPMENT")
    assert bob.balances() == {"ORB": "0.00"} and transfer_count(c) == 0


# ----------------------------------------------------------------------------- a newcomer's wallet


def wallet_of(c, user_id):
    return c.app.state.ctx.db.query("SELECT * FROM wallet_members WHERE user_id = ?", (user_id,))


def history_kinds(member):
    return [(t["kind"], t["direction"], t["amount"]) for t in member.get(f"{W}/transfers").json()["transfers"]]


def test_in_development_mode_a_new_wallet_starts_with_the_starting_balance(make_client, verifier):
    c, alice, bob, admin = community(make_client, verifier, development=True, startingBalances={"ORB": "100.00"})
    newcomer = Member(c, verifier, CAROL)
    assert newcomer.balances() == {"ORB": "100.00"}
    assert history_kinds(newcomer) == [("credit", "in", "100.00")]
    # Only once: the wallet exists now.
    assert newcomer.balances() == {"ORB": "100.00"}
    assert history_kinds(newcomer) == [("credit", "in", "100.00")]
    # The first transfer needs nothing but a PIN.
    assert newcomer.set_pin("2468").status_code == 200
    assert newcomer.confirm(newcomer.draft(ALICE, "5.00"), "2468").json()["status"] == "settled"
    assert newcomer.balances() == {"ORB": "95.00"}


def test_in_development_mode_a_transfer_creates_the_recipients_wallet(make_client, verifier):
    c, alice, bob, admin = community(make_client, verifier, development=True, startingBalances={"ORB": "100.00"})
    assert wallet_of(c, DAVE) == []
    assert alice.confirm(alice.draft(DAVE, "5.00"), PIN).json()["status"] == "settled"
    dave = Member(c, verifier, DAVE)
    # Created by the transfer, with the starting balance, then the transfer.
    assert dave.balances() == {"ORB": "105.00"}
    assert history_kinds(dave) == [("transfer", "in", "5.00"), ("credit", "in", "100.00")]


def test_test_mode_creates_the_recipients_wallet_without_a_starting_balance(make_client, verifier):
    c, alice, bob, admin = community(make_client, verifier, test_mode=True)
    assert alice.confirm(alice.draft(DAVE, "5.00"), PIN).json()["status"] == "settled"
    assert Member(c, verifier, DAVE).balances() == {"ORB": "5.00"}


@pytest.mark.parametrize("development", [None, False])
def test_production_mode_has_no_starting_balance_and_needs_the_recipients_wallet(make_client, verifier, development):
    c, alice, bob, admin = community(make_client, verifier, development=development,
                                     startingBalances={"ORB": "100.00"})
    assert bob.balances() == {"ORB": "0.00"}
    assert Member(c, verifier, CAROL).balances() == {"ORB": "0.00"}
    assert_error(alice.prepare(DAVE, "5.00"), 404, "SY_RECIPIENT_UNKNOWN")
    assert wallet_of(c, DAVE) == []
    assert transfer_count(c) == 0
    credits = c.app.state.ctx.db.query("SELECT recipient FROM wallet_transfers WHERE kind = 'credit'")
    assert [r["recipient"] for r in credits] == [ALICE]  # the fixture's credit only


@pytest.mark.parametrize("starting, message", [
    ({"XYZ": "1.00"}, "not an asset"), ({"ORB": 100}, "decimal string"), ({"ORB": "1.234"}, "precision"),
    (["ORB"], "must be an object")])
def test_starting_balances_are_checked(make_client, verifier, starting, message):
    with pytest.raises(ManifestError, match=message):
        community(make_client, verifier, development=True, startingBalances=starting)
