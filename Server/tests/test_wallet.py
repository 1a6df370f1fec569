from __future__ import annotations

import base64
import logging
import os
import threading
import time

import nacl.pwhash.argon2id as argon2id
import pytest
from nacl.public import PrivateKey

from symorva_server.config import ManifestError, default_manifest
from symorva_server.faults import ConnectionDropped
from symorva_server.modules.wallet import pin as wallet_pin

from .conftest import HOMESERVER, SERVER_NAME, assert_error
from .wallet_helpers import (CONFIRM_PATH, FAULTS, TW, W, Member, confirm_payload, new_command_id,
                             seal_to)

ALICE, BOB, CAROL = "@alice:localhost", "@bob:localhost", "@carol:localhost"
PIN = "4321"


@pytest.fixture(autouse=True)
def fast_pin_hash(monkeypatch):
    # argon2id at libsodium's minimum cost keeps the suite fast; the production cost is
    # exercised by test_wallet_process.py.
    monkeypatch.setattr(wallet_pin, "PIN_OPSLIMIT", argon2id.OPSLIMIT_MIN)
    monkeypatch.setattr(wallet_pin, "PIN_MEMLIMIT", argon2id.MEMLIMIT_MIN)


def manifest(**wallet_options):
    m = default_manifest(HOMESERVER, SERVER_NAME, "http://127.0.0.1:9")
    m["modules"]["wallet"].update(wallet_options)
    return m


@pytest.fixture
def world(make_client, verifier):
    """Test-mode server; Alice has 100.00 ORB and PIN 4321; Bob has a wallet."""
    return make_world(make_client, verifier)


def make_world(make_client, verifier, test_mode=True, **wallet_options):
    c = make_client(test_mode=test_mode, manifest=manifest(**wallet_options))
    alice, bob = Member(c, verifier, ALICE), Member(c, verifier, BOB)
    assert set(bob.balances().values()) <= {"0", "0.00"}  # first wallet call: Bob now has a wallet
    assert alice.set_pin(PIN).json() == {"pin_set": True, "changed": False}
    if test_mode and any(a["code"] == "ORB" for a in c.app.state.ctx.manifest["modules"]["wallet"]["assets"]):
        alice.credit(ALICE, "100.00")
    return c, alice, bob


def transfer_count(client) -> int:
    return client.app.state.ctx.db.query_one(
        "SELECT COUNT(*) AS n FROM wallet_transfers WHERE kind = 'transfer'")["n"]


def arm(member, **fault) -> str:
    r = member.post(FAULTS, fault)
    assert r.status_code == 200, r.text
    return r.json()["fault_id"]


# ----------------------------------------------------------------------------- happy path


def test_prepare_confirm_settles_and_moves_both_balances(world):
    c, alice, bob = world
    d = alice.draft(BOB, "25.00")
    assert d["recipient"] == BOB and d["asset"] == "ORB" and d["precision"] == 2
    assert (d["amount"], d["fee"], d["total"]) == ("25.00", "0.00", "25.00")
    assert d["verification_methods"] == ["pin"]
    assert d["expires_in_ms"] == 120_000 and d["expires_at_ms"] == d["created_at_ms"] + 120_000
    assert len(base64.b64decode(d["sealing_key"]["public_key"])) == 32
    assert d["sealing_key"]["public_key"] == alice.server_key()
    assert d["payload_version"] == "symorva-wallet-confirm/1"
    assert d["draft_id"].isascii() and "\n" not in d["draft_id"]

    cmd = new_command_id()
    r = alice.confirm(d, PIN, cmd)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["status"] == "settled" and answer["command_id"] == cmd
    t = answer["transfer"]
    assert t["kind"] == "transfer" and t["command_id"] == cmd and t["draft_id"] == d["draft_id"]
    assert (t["sender"], t["recipient"], t["asset"]) == (ALICE, BOB, "ORB")
    assert (t["amount"], t["fee"], t["total"]) == ("25.00", "0.00", "25.00")
    assert "Symorva-Replayed" not in r.headers
    assert alice.balances() == {"ORB": "75.00"}
    assert bob.balances() == {"ORB": "25.00"}
    assert alice.query(cmd).json() == answer

    hist_a = alice.get(f"{W}/transfers").json()
    assert [(e["kind"], e["direction"], e["amount"]) for e in hist_a["transfers"]] == [
        ("transfer", "out", "25.00"), ("credit", "in", "100.00")]
    assert hist_a["next_from"] is None
    hist_b = bob.get(f"{W}/transfers").json()["transfers"]
    assert [(e["transfer_id"], e["direction"]) for e in hist_b] == [(t["transfer_id"], "in")]


def test_fee_from_manifest(make_client, verifier):
    c, alice, bob = make_world(make_client, verifier, assets=[{"code": "ORB", "precision": 2, "fee": "0.5"}])
    caps = alice.get("/_symorva/v1/capabilities").json()["modules"]["wallet"]
    assert caps["assets"] == [{"code": "ORB", "precision": 2, "fee": "0.50"}]
    d = alice.draft(BOB, "25")
    assert (d["amount"], d["fee"], d["total"]) == ("25.00", "0.50", "25.50")
    assert alice.confirm(d, PIN).json()["status"] == "settled"
    assert alice.balances() == {"ORB": "74.50"} and bob.balances() == {"ORB": "25.00"}
    assert_error(alice.prepare(BOB, "74.01"), 409, "SY_INSUFFICIENT_FUNDS")
    assert alice.prepare(BOB, "74.00").status_code == 200


def test_precision_zero_asset(make_client, verifier):
    c, alice, bob = make_world(make_client, verifier, assets=[{"code": "PTS", "precision": 0}])
    alice.credit(ALICE, "10", asset="PTS")
    assert_error(alice.prepare(BOB, "1.0", asset="PTS"), 400, "SY_INVALID_AMOUNT")
    d = alice.draft(BOB, "3", asset="PTS")
    assert (d["amount"], d["total"]) == ("3", "3")
    assert alice.confirm(d, PIN).json()["status"] == "settled"
    assert alice.balances() == {"PTS": "7"}


def test_capabilities(world):
    c, alice, bob = world
    w = alice.get("/_symorva/v1/capabilities").json()["modules"]["wallet"]
    assert w["verification_methods"] == ["pin"]
    assert w["assets"] == [{"code": "ORB", "precision": 2, "fee": "0.00"}]
    assert w["draft_ttl_ms"] == 120_000
    assert w["pin"] == {"min_length": 4, "max_length": 12, "max_attempts": 5}
    assert w["payload_version"] == "symorva-wallet-confirm/1"
    assert w["sealing_key"]["algorithm"] == "x25519-xsalsa20poly1305-sealedbox"


# ----------------------------------------------------------------------------- PIN


def test_wrong_pin_has_attempts_left_and_right_pin_resets(world):
    c, alice, bob = world
    d = alice.draft(BOB, "10.00")
    r = alice.confirm(d, "9999")
    assert r.status_code == 200
    assert r.json()["status"] == "failed"
    assert r.json()["failure"]["code"] == "wrong_pin" and r.json()["failure"]["attempts_left"] == 4
    assert alice.get(f"{W}/pin").json() == {"pin_set": True, "locked": False, "attempts_left": 4, "max_attempts": 5}
    assert alice.confirm(d, "1111").json()["failure"]["attempts_left"] == 3
    # The draft stays confirmable with a new command ID.
    assert alice.confirm(d, PIN).json()["status"] == "settled"
    assert alice.get(f"{W}/pin").json()["attempts_left"] == 5
    assert alice.confirm(alice.draft(BOB, "1.00"), "9999").json()["failure"]["attempts_left"] == 4
    assert alice.balances() == {"ORB": "90.00"}


def test_lock_out_after_five_wrong_pins_and_dev_unlock(world):
    c, alice, bob = world
    d = alice.draft(BOB, "10.00")
    lefts = [alice.confirm(d, "0000").json()["failure"] for _ in range(5)]
    assert [f.get("attempts_left") for f in lefts] == [4, 3, 2, 1, 0]
    assert [f["code"] for f in lefts] == ["wrong_pin"] * 4 + ["locked_out"]
    # Locked: even the right PIN is refused, and nothing else is counted.
    f = alice.confirm(d, PIN).json()["failure"]
    assert (f["code"], f["attempts_left"]) == ("locked_out", 0)
    body = assert_error(alice.prepare(BOB, "1.00"), 403, "SY_WALLET_LOCKED")
    assert body["attempts_left"] == 0
    assert_error(alice.set_pin("5555", old=PIN), 403, "SY_WALLET_LOCKED")
    assert alice.get(f"{W}/pin").json() == {"pin_set": True, "locked": True, "attempts_left": 0, "max_attempts": 5}
    assert alice.balances() == {"ORB": "100.00"} and transfer_count(c) == 0

    r = alice.post(f"{TW}/unlock", {"user_id": ALICE})
    assert r.json() == {"pin_set": True, "locked": False, "attempts_left": 5, "max_attempts": 5}
    assert alice.confirm(d, PIN).json()["status"] == "settled"


def test_set_and_change_pin(world):
    c, alice, bob = world
    assert_error(alice.set_pin("5555"), 409, "SY_PIN_ALREADY_SET")
    body = assert_error(alice.set_pin("5555", old="0000"), 403, "SY_WRONG_PIN")
    assert body["attempts_left"] == 4
    assert alice.set_pin("5555", old=PIN).json() == {"pin_set": True, "changed": True}
    assert alice.get(f"{W}/pin").json()["attempts_left"] == 5
    d = alice.draft(BOB, "1.00")
    assert alice.confirm(d, PIN).json()["failure"]["code"] == "wrong_pin"
    assert alice.confirm(d, "5555").json()["status"] == "settled"

    # Bob has no PIN yet.
    assert bob.get(f"{W}/pin").json() == {"pin_set": False, "locked": False, "attempts_left": 5, "max_attempts": 5}
    bob.credit(BOB, "5.00")
    assert_error(bob.prepare(ALICE, "1.00"), 409, "SY_PIN_NOT_SET")
    assert_error(bob.set_pin("1234", old="9999"), 409, "SY_PIN_NOT_SET")
    for bad in ["123", "1234567890123", "12a4", "١٢٣٤"]:
        assert_error(bob.set_pin(bad), 400, "SY_INVALID_PIN")
    # Sealed for another member, with another version line, or garbage: refused.
    assert_error(bob.set_pin("1234", user_id=ALICE), 400, "SY_BAD_SEALED_PAYLOAD")
    r = bob.post(f"{W}/pin", {"sealed": seal_to(bob.server_key(), f"symorva-wallet-pin/2\n{BOB}\n\n1234")})
    assert_error(r, 400, "SY_BAD_SEALED_PAYLOAD")
    r = bob.post(f"{W}/pin", {"sealed": base64.b64encode(os.urandom(80)).decode()})
    assert_error(r, 400, "SY_BAD_SEALED_PAYLOAD")
    assert_error(bob.post(f"{W}/pin", {"sealed": "not base64!"}), 400, "SY_INVALID_PARAM")
    assert bob.set_pin("1234").json() == {"pin_set": True, "changed": False}


def test_pin_never_stored_or_logged_in_plaintext(world, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    c, alice, bob = world
    canary, wrong = "90817263", "31415926"
    assert alice.set_pin(canary, old=PIN).status_code == 200
    d = alice.draft(BOB, "1.00")
    assert alice.confirm(d, wrong).json()["failure"]["code"] == "wrong_pin"
    assert alice.confirm(d, canary).json()["status"] == "settled"
    row = c.app.state.ctx.db.query_one("SELECT pin_hash FROM wallet_members WHERE user_id = ?", (ALICE,))
    assert row["pin_hash"].startswith("$argon2id$")
    db_path = c.app.state.ctx.settings.db_path
    c.app.state.ctx.db.query("PRAGMA wal_checkpoint(FULL)")
    blob = b"".join(open(p, "rb").read() for p in (db_path, db_path + "-wal") if os.path.exists(p))
    for secret in (canary, wrong, PIN):
        assert secret.encode() not in blob
        assert secret not in caplog.text
    assert "wallet" in caplog.text  # the wallet did log (the check above is not vacuous)


# ----------------------------------------------------------------------------- validation


def test_prepare_validation_errors(world):
    c, alice, bob = world
    for amount in ["1.234", "-5.00", "0", "0.00", "1e3", " 5", "5.", ".5", "+5", "5,00", "١٢", "",
                   "99999999999999999999999"]:
        assert_error(alice.prepare(BOB, amount), 400, "SY_INVALID_AMOUNT")
    assert "negative" in alice.prepare(BOB, "-5.00").json()["error"]
    assert "precision" in alice.prepare(BOB, "1.234").json()["error"]
    assert_error(alice.post(f"{W}/transfers/prepare", {"recipient": BOB, "asset": "ORB", "amount": 5}),
                 400, "SY_INVALID_PARAM")
    assert_error(alice.post(f"{W}/transfers/prepare", {"recipient": BOB, "asset": "ORB"}), 400, "SY_MISSING_PARAM")
    assert_error(alice.prepare(BOB, "5.00", asset="XYZ"), 400, "SY_UNKNOWN_ASSET")
    for bad in ["@bob:elsewhere.org", "bob", "@bob", ""]:
        assert_error(alice.prepare(bad, "5.00"), 400, "SY_INVALID_RECIPIENT")
    assert_error(alice.prepare(ALICE, "5.00"), 400, "SY_INVALID_RECIPIENT")
    assert_error(alice.prepare(BOB, "100.01"), 409, "SY_INSUFFICIENT_FUNDS")
    assert alice.prepare(BOB, "100").json()["total"] == "100.00"


def test_confirm_request_validation_is_not_recorded(world):
    c, alice, bob = world
    d = alice.draft(BOB, "1.00")
    cmd = new_command_id()
    sealed = seal_to(d["sealing_key"]["public_key"], confirm_payload(cmd, d["draft_id"], PIN))
    good = {"draft_id": d["draft_id"], "command_id": cmd, "verification": {"method": "pin", "sealed": sealed}}
    assert_error(alice.post(CONFIRM_PATH, {**good, "command_id": "not-a-uuid"}), 400, "SY_INVALID_PARAM")
    assert_error(alice.post(CONFIRM_PATH, {**good, "verification": {"method": "pin", "sealed": "%%%"}}),
                 400, "SY_INVALID_PARAM")
    assert_error(alice.post(CONFIRM_PATH, {"draft_id": d["draft_id"], "command_id": cmd}), 400, "SY_MISSING_PARAM")
    assert_error(alice.query("nope"), 400, "SY_INVALID_PARAM")
    # None of these spent the command ID: it still confirms (upper case is the same ID).
    r = alice.post(CONFIRM_PATH, {**good, "command_id": cmd.upper()})
    assert r.json()["status"] == "settled" and r.json()["command_id"] == cmd


def test_insufficient_balance_at_confirm(world):
    c, alice, bob = world
    d1, d2 = alice.draft(BOB, "60.00"), alice.draft(BOB, "60.00")
    assert alice.confirm(d1, PIN).json()["status"] == "settled"
    f = alice.confirm(d2, PIN).json()
    assert f["status"] == "failed" and f["failure"]["code"] == "insufficient_funds"
    assert alice.balances() == {"ORB": "40.00"} and transfer_count(c) == 1


def test_expired_draft(world, clock):
    c, alice, bob = world
    d = alice.draft(BOB, "5.00", ttl_ms=0)
    assert d["expires_in_ms"] == 0
    assert alice.confirm(d, PIN).json()["failure"]["code"] == "draft_expired"
    d = alice.draft(BOB, "5.00")
    clock.advance(119.9)
    d_late = alice.draft(BOB, "5.00")
    clock.advance(0.1)
    assert alice.confirm(d, PIN).json()["failure"]["code"] == "draft_expired"
    assert alice.confirm(d_late, PIN).json()["status"] == "settled"
    assert transfer_count(c) == 1


def test_ttl_is_configurable_and_ttl_ms_needs_test_mode(make_client, verifier):
    from symorva_server.modules.wallet import CreditRequest

    c, alice, bob = make_world(make_client, verifier, test_mode=False, draftTtlSeconds=30)
    c.app.state.ctx.wallet.credit(CreditRequest(user_id=ALICE, asset="ORB", amount="10.00"))
    d = alice.draft(BOB, "1.00", ttl_ms=0)
    assert d["expires_in_ms"] == 30_000
    for path in ("credit", "unlock", "hold"):
        assert_error(alice.post(f"{TW}/{path}", {"user_id": ALICE}), 404, "SY_NOT_FOUND")


def test_draft_and_command_belong_to_their_member(world):
    c, alice, bob = world
    d = alice.draft(BOB, "5.00")
    bob.set_pin("2468")
    f = bob.confirm(d, "2468").json()["failure"]
    assert f["code"] == "draft_unknown"
    cmd = new_command_id()
    assert alice.confirm(d, PIN, cmd).json()["status"] == "settled"
    # Command IDs are per member: Bob's query does not see (or fence) Alice's command.
    assert bob.query(cmd).json() == {"status": "unknown_command", "command_id": cmd}
    assert alice.query(cmd).json()["status"] == "settled"
    # A settled draft cannot be confirmed again with another command ID.
    assert alice.confirm(d, PIN).json()["failure"]["code"] == "draft_already_settled"


def test_sealed_payload_bound_to_another_draft_or_command_is_refused(world):
    c, alice, bob = world
    d1, d2 = alice.draft(BOB, "5.00"), alice.draft(BOB, "6.00")
    cmd = new_command_id()
    # A payload sealed for d2 presented with d1.
    r = alice.confirm(d1, PIN, cmd, payload=confirm_payload(cmd, d2["draft_id"], PIN))
    assert r.status_code == 200 and r.json()["failure"]["code"] == "verification_failed"
    # Bound to another command ID.
    r = alice.confirm(d1, PIN, payload=confirm_payload(new_command_id(), d1["draft_id"], PIN))
    assert r.json()["failure"]["code"] == "verification_failed"
    # Wrong version line, missing line, sealed to another key, not a sealed box at all.
    c1 = new_command_id()
    assert alice.confirm(d1, PIN, c1, payload=f"symorva-wallet-confirm/2\n{c1}\n{d1['draft_id']}\n{PIN}") \
        .json()["failure"]["code"] == "verification_failed"
    c2 = new_command_id()
    assert alice.confirm(d1, PIN, c2, payload=f"symorva-wallet-confirm/1\n{c2}\n{d1['draft_id']}") \
        .json()["failure"]["code"] == "verification_failed"
    other_key = base64.b64encode(bytes(PrivateKey.generate().public_key)).decode()
    c3 = new_command_id()
    r = alice.confirm({**d1, "sealing_key": {"public_key": other_key}}, PIN, c3)
    assert r.json()["failure"]["code"] == "verification_failed"
    r = alice.post(CONFIRM_PATH, {"draft_id": d1["draft_id"], "command_id": new_command_id(),
                                  "verification": {"method": "pin", "sealed": base64.b64encode(b"x" * 10).decode()}})
    assert r.json()["failure"]["code"] == "verification_failed"
    # None of that counted as a wrong PIN, and nothing moved.
    assert alice.get(f"{W}/pin").json()["attempts_left"] == 5
    assert alice.balances() == {"ORB": "100.00"} and transfer_count(c) == 0
    assert alice.confirm(d1, PIN).json()["status"] == "settled"


def test_biometric_only_when_configured(world, make_client, verifier):
    c, alice, bob = world
    d = alice.draft(BOB, "1.00")
    f = alice.confirm(d, "assertion", method="biometric").json()["failure"]
    assert f["code"] == "method_not_offered"
    assert alice.confirm(d, "x", method="password").json()["failure"]["code"] == "method_not_offered"

    c2, alice2, bob2 = make_world(make_client, verifier, biometric=True)
    caps = alice2.get("/_symorva/v1/capabilities").json()["modules"]["wallet"]
    assert caps["verification_methods"] == ["pin", "biometric"]
    d = alice2.draft(BOB, "1.00")
    assert d["verification_methods"] == ["pin", "biometric"]
    assert alice2.confirm(d, "", method="biometric").json()["failure"]["code"] == "verification_failed"
    assert alice2.confirm(d, "device-assertion", method="biometric").json()["status"] == "settled"


def test_biometric_is_honoured_in_test_mode_only(make_client, verifier, caplog):
    from symorva_server.modules.wallet import CreditRequest

    caplog.set_level(logging.WARNING)
    c, alice, bob = make_world(make_client, verifier, test_mode=False, biometric=True)
    assert "biometric=true ignored outside test mode" in caplog.text
    c.app.state.ctx.wallet.credit(CreditRequest(user_id=ALICE, asset="ORB", amount="10.00"))
    caps = alice.get("/_symorva/v1/capabilities").json()["modules"]["wallet"]
    assert caps["verification_methods"] == ["pin"]
    d = alice.draft(BOB, "1.00")
    assert d["verification_methods"] == ["pin"]
    r = alice.confirm(d, "device-assertion", method="biometric")
    assert r.status_code == 200
    f = r.json()["failure"]
    assert f["code"] == "method_not_offered" and "test mode only" in f["message"]
    assert transfer_count(c) == 0 and alice.balances() == {"ORB": "10.00"}
    assert alice.confirm(d, PIN).json()["status"] == "settled"


def test_invalid_wallet_manifest_options(make_client):
    for opts in [{"assets": [{"code": "ORB", "precision": 2, "fee": "0.001"}]},
                 {"assets": [{"code": "ORB", "precision": 2, "fee": 1}]},
                 {"biometric": "yes"}, {"draftTtlSeconds": 0}]:
        with pytest.raises(ManifestError):
            make_client(manifest=manifest(**opts))


def test_history_pagination(world):
    c, alice, bob = world
    for i in range(1, 5):
        alice.credit(ALICE, f"{i}.00")
    page1 = alice.get(f"{W}/transfers", params={"limit": 2}).json()
    assert [e["amount"] for e in page1["transfers"]] == ["4.00", "3.00"]
    page2 = alice.get(f"{W}/transfers", params={"limit": 2, "from": page1["next_from"]}).json()
    assert [e["amount"] for e in page2["transfers"]] == ["2.00", "1.00"]
    page3 = alice.get(f"{W}/transfers", params={"limit": 2, "from": page2["next_from"]}).json()
    assert [e["amount"] for e in page3["transfers"]] == ["100.00"] and page3["next_from"] is None
    assert_error(alice.get(f"{W}/transfers", params={"from": "x"}), 400, "SY_INVALID_PARAM")
    assert_error(alice.get(f"{W}/transfers", params={"limit": 0}), 400, "SY_INVALID_PARAM")


def test_history_cursor_that_is_not_a_token_is_a_typed_400(world):
    c, alice, bob = world
    # Unicode digits pass str.isdigit() but not int(); 19 digits may overflow SQLite's INTEGER.
    for bad in ["²", "١٢", "9999999999999999999", "9223372036854775808", "-1", "", " 1", "1" * 20]:
        body = assert_error(alice.get(f"{W}/transfers", params={"from": bad}), 400, "SY_INVALID_PARAM")
        assert "from" in body["error"], (bad, body)
    # The largest representable cursor is fine (everything is older than it).
    assert len(alice.get(f"{W}/transfers", params={"from": "9223372036854775807"}).json()["transfers"]) == 1


# ----------------------------------------------------------------------------- idempotency


def test_same_command_id_gets_the_first_answer(world):
    c, alice, bob = world
    d = alice.draft(BOB, "25.00")
    cmd = new_command_id()
    first = alice.confirm(d, PIN, cmd)
    again = alice.confirm(d, PIN, cmd)
    assert again.json() == first.json() and again.headers["Symorva-Replayed"] == "true"
    # Even with another draft or another PIN, the answer is the first one.
    other = alice.draft(BOB, "1.00")
    assert alice.confirm(other, "0000", cmd).json() == first.json()
    assert transfer_count(c) == 1 and alice.balances() == {"ORB": "75.00"}

    # A failed answer is replayed too, without counting another wrong PIN.
    wrong = new_command_id()
    f1 = alice.confirm(other, "0000", wrong).json()
    assert alice.confirm(other, PIN, wrong).json() == f1
    assert alice.get(f"{W}/pin").json()["attempts_left"] == 4


def test_concurrent_confirms_with_the_same_command_id(world):
    c, alice, bob = world
    d = alice.draft(BOB, "30.00")
    cmd = new_command_id()
    answers, errors = [], []
    barrier = threading.Barrier(8)

    def go():
        try:
            barrier.wait()
            answers.append(alice.confirm(d, PIN, cmd).json())
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert len(answers) == 8 and all(a == answers[0] for a in answers)
    assert answers[0]["status"] == "settled"
    assert transfer_count(c) == 1 and alice.balances() == {"ORB": "70.00"} and bob.balances() == {"ORB": "30.00"}


def test_concurrent_confirms_of_one_draft_with_different_command_ids(world):
    c, alice, bob = world
    d = alice.draft(BOB, "30.00")
    answers = []
    barrier = threading.Barrier(6)

    def go():
        barrier.wait()
        answers.append(alice.confirm(d, PIN).json())

    threads = [threading.Thread(target=go) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    statuses = sorted(a["status"] if a["status"] == "settled" else a["failure"]["code"] for a in answers)
    assert statuses == ["draft_already_settled"] * 5 + ["settled"]
    assert transfer_count(c) == 1 and alice.balances() == {"ORB": "70.00"}


# ----------------------------------------------------------------------------- faults, query, fencing


def test_commit_then_drop_then_query_finds_it_settled(world):
    c, alice, bob = world
    arm(alice, path_prefix=CONFIRM_PATH, mode="commit_then_drop")
    d = alice.draft(BOB, "20.00")
    cmd = new_command_id()
    with pytest.raises(ConnectionDropped):  # in-process form of "connection closed, no answer"
        alice.confirm(d, PIN, cmd)
    q = alice.query(cmd).json()
    assert q["status"] == "settled" and q["transfer"]["amount"] == "20.00"
    assert transfer_count(c) == 1 and alice.balances() == {"ORB": "80.00"} and bob.balances() == {"ORB": "20.00"}
    # A (forbidden but possible) resend gets the same answer and moves nothing.
    assert alice.confirm(d, PIN, cmd).json() == q
    assert transfer_count(c) == 1


def test_5xx_after_commit_then_query_finds_it_settled(world):
    c, alice, bob = world
    arm(alice, path_prefix=CONFIRM_PATH, mode="commit_then_error5xx", status=503, retry_after_ms=1000)
    d = alice.draft(BOB, "20.00")
    cmd = new_command_id()
    assert_error(alice.confirm(d, PIN, cmd), 503, "SY_INJECTED_FAULT")
    assert alice.query(cmd).json()["status"] == "settled"
    assert transfer_count(c) == 1 and alice.balances() == {"ORB": "80.00"}


def test_error5xx_before_handler_then_query_fences(world):
    c, alice, bob = world
    arm(alice, path_prefix=CONFIRM_PATH, mode="error5xx")
    d = alice.draft(BOB, "20.00")
    cmd = new_command_id()
    assert_error(alice.confirm(d, PIN, cmd), 503, "SY_INJECTED_FAULT")
    assert alice.query(cmd).json() == {"status": "unknown_command", "command_id": cmd}
    assert alice.confirm(d, PIN, cmd).json()["failure"]["code"] == "command_fenced"
    assert transfer_count(c) == 0


def test_unknown_command_is_fenced(world):
    c, alice, bob = world
    d = alice.draft(BOB, "20.00")
    cmd = new_command_id()
    assert alice.query(cmd).json() == {"status": "unknown_command", "command_id": cmd}
    r = alice.confirm(d, PIN, cmd)
    assert r.status_code == 200
    assert r.json()["status"] == "failed" and r.json()["failure"]["code"] == "command_fenced"
    assert alice.confirm(d, PIN, cmd).json()["failure"]["code"] == "command_fenced"
    # Queries keep telling the truth: it never executed.
    assert alice.query(cmd.upper()).json() == {"status": "unknown_command", "command_id": cmd}
    assert transfer_count(c) == 0 and alice.balances() == {"ORB": "100.00"}
    # A new command ID confirms the same draft.
    assert alice.confirm(d, PIN).json()["status"] == "settled"


def test_delayed_confirm_arriving_after_the_query_is_refused(world):
    c, alice, bob = world
    fault_id = arm(alice, path_prefix=CONFIRM_PATH, mode="delay", delay_ms=1200)
    d = alice.draft(BOB, "20.00")
    cmd = new_command_id()
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", alice.confirm(d, PIN, cmd)))
    t.start()
    # The confirm is "in the network": the delay fault has taken it, before the handler.
    assert c.app.state.ctx.faults.wait_hit(fault_id, timeout=10)
    assert alice.query(cmd).json()["status"] == "unknown_command"
    t.join(10)
    assert result["r"].json()["failure"]["code"] == "command_fenced"
    assert transfer_count(c) == 0 and alice.balances() == {"ORB": "100.00"}


def test_held_confirm_is_pending_until_it_executes(world):
    c, alice, bob = world
    assert alice.post(f"{TW}/hold", {"delay_ms": 1500}).json() == {"armed": 1, "delay_ms": 1500}
    d = alice.draft(BOB, "20.00")
    cmd = new_command_id()
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", alice.confirm(d, PIN, cmd)))
    t.start()
    deadline = time.monotonic() + 5
    # Wait for the accepted command in the database: querying before it is recorded would fence it.
    sql = "SELECT status FROM wallet_commands WHERE command_id = ?"
    while c.app.state.ctx.db.query_one(sql, (cmd,)) is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert alice.query(cmd).json() == {"status": "pending", "command_id": cmd}
    assert alice.confirm(d, PIN, cmd).json() == {"status": "pending", "command_id": cmd}
    t.join(10)
    assert result["r"].json()["status"] == "settled"
    assert alice.query(cmd).json() == result["r"].json()
    assert transfer_count(c) == 1
