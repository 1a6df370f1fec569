"""The wrong-PIN ladder (modules/wallet/pin.py): one count per member, shared by confirms
and PIN changes, reset by a right PIN, a new PIN or an unlock; the 5th wrong PIN locks."""

from __future__ import annotations

import logging
import threading
import time

import nacl.pwhash.argon2id as argon2id
import pytest

from symorva_server.db import Database
from symorva_server.modules.wallet import MIGRATIONS
from symorva_server.modules.wallet import pin as wallet_pin
from symorva_server.modules.wallet.pin import (MAX_PIN_ATTEMPTS, PinLadder, check_pin, hash_pin, store_pin,
                                               unlock)

from .conftest import assert_error
from .test_wallet import ALICE, BOB, PIN, make_world
from .wallet_helpers import W

NOW = 1_800_000_000_000


@pytest.fixture(autouse=True)
def fast_pin_hash(monkeypatch):
    monkeypatch.setattr(wallet_pin, "PIN_OPSLIMIT", argon2id.OPSLIMIT_MIN)
    monkeypatch.setattr(wallet_pin, "PIN_MEMLIMIT", argon2id.MEMLIMIT_MIN)


# ----------------------------------------------------------------------------- the rule


def test_five_wrong_pins_climb_the_ladder_to_the_lock():
    ladder, lefts = PinLadder(), []
    assert (ladder.attempts_left, ladder.locked) == (MAX_PIN_ATTEMPTS, False) == (5, False)
    for _ in range(5):
        ladder = ladder.after_wrong_pin()
        lefts.append((ladder.attempts_left, ladder.locked))
    assert lefts == [(4, False), (3, False), (2, False), (1, False), (0, True)]


def test_a_right_pin_resets_and_a_locked_ladder_does_not_move():
    assert PinLadder(3).after_right_pin() == PinLadder()
    locked = PinLadder(5, locked=True)
    assert locked.after_wrong_pin() == locked and locked.after_right_pin() == locked
    assert locked.attempts_left == 0


# ----------------------------------------------------------------------------- the stored ladder


@pytest.fixture
def conn():
    db = Database(":memory:")
    db.migrate("module:wallet", MIGRATIONS)
    with db.transaction() as c:
        c.execute("INSERT INTO wallet_members(user_id, pin_hash, created_at_ms) VALUES (?, ?, 0)",
                  (ALICE, hash_pin(PIN)))
        yield c
    db.close()


def member(conn):
    return conn.execute("SELECT * FROM wallet_members WHERE user_id = ?", (ALICE,)).fetchone()


def test_check_pin_counts_wrong_pins_resets_on_the_right_one_and_locks_at_the_fifth(conn, caplog):
    caplog.set_level(logging.WARNING)
    assert [check_pin(conn, member(conn), "0000", NOW).ladder.attempts_left for _ in range(3)] == [4, 3, 2]
    check = check_pin(conn, member(conn), PIN, NOW)
    assert check.right and check.ladder == PinLadder() and member(conn)["failed_pin_attempts"] == 0

    checks = [check_pin(conn, member(conn), "0000", NOW + i) for i in range(5)]
    assert [(c.right, c.ladder.attempts_left, c.ladder.locked) for c in checks] == [
        (False, 4, False), (False, 3, False), (False, 2, False), (False, 1, False), (False, 0, True)]
    assert (member(conn)["failed_pin_attempts"], member(conn)["locked_at_ms"]) == (5, NOW + 4)
    assert "locked after 5 wrong PINs" in caplog.text

    # Locked: the right PIN is refused too, and nothing is counted or re-stamped.
    assert check_pin(conn, member(conn), PIN, NOW + 99) == checks[-1]
    assert (member(conn)["failed_pin_attempts"], member(conn)["locked_at_ms"]) == (5, NOW + 4)


def test_unlock_and_a_new_pin_start_the_count_again(conn):
    for _ in range(5):
        check_pin(conn, member(conn), "0000", NOW)
    unlock(conn, ALICE)
    assert PinLadder.of(member(conn)) == PinLadder() and member(conn)["pin_hash"] is not None
    check_pin(conn, member(conn), "0000", NOW)
    store_pin(conn, ALICE, "5555")
    assert PinLadder.of(member(conn)) == PinLadder()
    assert check_pin(conn, member(conn), "5555", NOW).right
    unlock(conn, ALICE, clear_pin=True)
    assert member(conn)["pin_hash"] is None
    with pytest.raises(ValueError):
        check_pin(conn, member(conn), PIN, NOW)


# ----------------------------------------------------------------------------- through the API


def test_confirms_and_pin_changes_share_one_ladder(make_client, verifier):
    c, alice, bob = make_world(make_client, verifier)
    d = alice.draft(BOB, "1.00")
    assert alice.confirm(d, "0000").json()["failure"]["attempts_left"] == 4
    body = assert_error(alice.set_pin("5555", old="0000"), 403, "SY_WRONG_PIN")
    assert (body["attempts_left"], body["error"]) == (3, "Wrong old PIN (3 attempts left)")
    f = alice.confirm(d, "1111").json()["failure"]
    assert (f["code"], f["attempts_left"], f["message"]) == ("wrong_pin", 2, "Wrong PIN (2 attempts left)")
    assert alice.set_pin("5555", old="1111").json()["attempts_left"] == 1
    # The fifth wrong PIN, in a PIN change, locks the wallet for confirms too.
    body = assert_error(alice.set_pin("5555", old="2222"), 403, "SY_WALLET_LOCKED")
    assert (body["attempts_left"], body["error"]) == (0, "Wrong PIN; too many wrong PINs: the wallet is locked")
    f = alice.confirm(d, PIN).json()["failure"]
    assert (f["code"], f["attempts_left"], f["message"]) == (
        "locked_out", 0, "Too many wrong PINs: the wallet is locked")
    assert alice.get(f"{W}/pin").json() == {"pin_set": True, "locked": True, "attempts_left": 0, "max_attempts": 5}


def test_the_fifth_wrong_pin_in_a_confirm_says_it_locked(make_client, verifier):
    c, alice, bob = make_world(make_client, verifier)
    d = alice.draft(BOB, "1.00")
    for _ in range(4):
        alice.confirm(d, "0000")
    f = alice.confirm(d, "0000").json()["failure"]
    assert (f["code"], f["attempts_left"], f["message"]) == (
        "locked_out", 0, "Wrong PIN; too many wrong PINs: the wallet is locked")
    body = assert_error(alice.set_pin("5555", old=PIN), 403, "SY_WALLET_LOCKED")
    assert body["error"] == "Too many wrong PINs: the wallet is locked"
    # A right PIN after wrong ones resets the count for PIN changes too.
    assert alice.post("/_symorva/v1/test/wallet/unlock", {"user_id": ALICE}).status_code == 200
    alice.confirm(d, "0000")
    assert alice.set_pin("5555", old=PIN).json() == {"pin_set": True, "changed": True}
    assert alice.get(f"{W}/pin").json()["attempts_left"] == 5


# ----------------------------------------------------------------------------- outside the lock


class SlowVerifier:
    """Stands in for argon2id's comparison: signals when it starts, then waits to be released."""

    def __init__(self, monkeypatch, *, hold: bool = True, seconds: float = 0.0) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        if not hold:
            self.release.set()
        self.seconds = seconds
        self.calls = 0
        self._real = wallet_pin.pin_matches
        monkeypatch.setattr(wallet_pin, "pin_matches", self)

    def __call__(self, pin_hash: str, pin: str) -> bool:
        self.calls += 1
        self.started.set()
        assert self.release.wait(10), "the slow verifier was never released"
        time.sleep(self.seconds)
        return self._real(pin_hash, pin)


@pytest.mark.parametrize("request_kind", ["confirm", "pin change"])
def test_a_slow_pin_check_does_not_block_another_members_requests(make_client, verifier, monkeypatch, request_kind):
    c, alice, bob = make_world(make_client, verifier)
    d = alice.draft(BOB, "10.00")
    slow = SlowVerifier(monkeypatch)
    results = {}
    act = (lambda: alice.confirm(d, PIN)) if request_kind == "confirm" else (lambda: alice.set_pin("5555", old=PIN))
    confirming = threading.Thread(target=lambda: results.setdefault("alice", act()))
    reading = threading.Thread(target=lambda: results.setdefault("bob", bob.get(f"{W}/balances")))
    try:
        confirming.start()
        assert slow.started.wait(10)  # Alice's PIN is being compared, right now
        reading.start()
        reading.join(5)
        assert not reading.is_alive(), "Bob's balance read waited for Alice's PIN check"
        assert results["bob"].status_code == 200 and "alice" not in results
    finally:
        slow.release.set()
        confirming.join(10)
        reading.join(10)
    if request_kind == "confirm":
        assert results["alice"].json()["status"] == "settled"
        assert bob.balances() == {"ORB": "10.00"} and alice.balances() == {"ORB": "90.00"}
    else:
        assert results["alice"].json() == {"pin_set": True, "changed": True}


def test_concurrent_wrong_pins_all_count(make_client, verifier, monkeypatch):
    c, alice, bob = make_world(make_client, verifier)
    d = alice.draft(BOB, "10.00")
    slow = SlowVerifier(monkeypatch, hold=False, seconds=0.2)  # the comparisons overlap
    barrier, answers = threading.Barrier(5), []

    def go():
        barrier.wait()
        answers.append(alice.confirm(d, "0000").json()["failure"])

    threads = [threading.Thread(target=go) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(f["attempts_left"] for f in answers) == [0, 1, 2, 3, 4]
    assert sorted(f["code"] for f in answers) == ["locked_out"] + ["wrong_pin"] * 4
    assert alice.get(f"{W}/pin").json() == {"pin_set": True, "locked": True, "attempts_left": 0, "max_attempts": 5}
    assert slow.calls == 5 and alice.balances() == {"ORB": "100.00"}


def test_a_pin_changed_during_the_verification_is_verified_again(tmp_path, monkeypatch):
    db = Database(str(tmp_path / "w.db"))
    db.migrate("module:wallet", MIGRATIONS)
    with db.transaction() as c:
        c.execute("INSERT INTO wallet_members(user_id, pin_hash, created_at_ms) VALUES (?, ?, 0)",
                  (ALICE, hash_pin(PIN)))
    real, seen = wallet_pin.pin_matches, []

    def changing(pin_hash, pin):
        # The first comparison runs outside the lock, so the PIN can change meanwhile.
        if not seen:
            with db.transaction() as c:
                store_pin(c, ALICE, "5555")
        seen.append(pin_hash)
        return real(pin_hash, pin)

    monkeypatch.setattr(wallet_pin, "pin_matches", changing)

    def run(conn, verification):
        m = conn.execute("SELECT * FROM wallet_members WHERE user_id = ?", (ALICE,)).fetchone()
        return check_pin(conn, m, "5555", NOW, verification)

    check = wallet_pin.run_with_pin_checks(db, run)
    assert check.right and len(seen) == 2 and seen[0] != seen[1]  # compared again with the new hash
    db.close()
