"""Wallet PINs: format, argon2id hashing (`crypto_pwhash`) and the wrong-PIN ladder.

PINs are only ever stored as argon2id hashes and never logged.

The comparison (argon2id) runs outside the database lock: see run_with_pin_checks.

The ladder (docs/wallet.md): wrong PINs in a row are counted per member, across
confirms and PIN changes; a right PIN, a new PIN or an unlock starts the count again.
The MAX_PIN_ATTEMPTS-th wrong PIN locks the wallet; a locked wallet refuses every PIN,
the right one too, and counts nothing more, until the lock expires (manifest
`pinLockSeconds`, default 15 minutes: `release_expired_lock`, then the count starts again)
or someone unlocks it (`unlock`: a community admin, or the test endpoint). `PinLadder` is
the rule, `check_pin` the only place a PIN is compared and counted, `store_pin`,
`release_expired_lock` and `unlock` the only other writers of the count and the lock
(columns failed_pin_attempts, locked_at_ms). Every unlock is recorded in wallet_unlocks.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import nacl.exceptions
import nacl.pwhash.argon2id as argon2id

if TYPE_CHECKING:
    import sqlite3

    from ...db import Database

log = logging.getLogger("symorva_server.wallet")

MAX_PIN_ATTEMPTS = 5
PIN_MIN_LENGTH = 4
PIN_MAX_LENGTH = 12

# argon2id cost (libsodium's "interactive" limits: 2 passes, 64 MiB). Tests lower them
# for speed; the parameters are stored in each hash string, so verification always uses
# the cost the hash was made with.
PIN_OPSLIMIT = argon2id.OPSLIMIT_INTERACTIVE
PIN_MEMLIMIT = argon2id.MEMLIMIT_INTERACTIVE

_PIN = re.compile(rf"[0-9]{{{PIN_MIN_LENGTH},{PIN_MAX_LENGTH}}}")


def is_valid_pin(pin: str) -> bool:
    """4 to 12 ASCII digits."""
    return _PIN.fullmatch(pin) is not None


def hash_pin(pin: str) -> str:
    return argon2id.str(pin.encode(), opslimit=PIN_OPSLIMIT, memlimit=PIN_MEMLIMIT).decode("ascii")


def pin_matches(pin_hash: str, pin: str) -> bool:
    if not is_valid_pin(pin):
        return False
    try:
        return argon2id.verify(pin_hash.encode("ascii"), pin.encode())
    except nacl.exceptions.InvalidkeyError:
        return False


# --------------------------------------------------------------------------- the ladder

LOCKED_MESSAGE = "Too many wrong PINs: the wallet is locked"
LOCKED_NOW_MESSAGE = "Wrong PIN; too many wrong PINs: the wallet is locked"  # by this wrong PIN


@dataclass(frozen=True)
class PinLadder:
    """A member's place on the wrong-PIN ladder."""

    failed_attempts: int = 0  # wrong PINs in a row
    locked: bool = False

    @classmethod
    def of(cls, member: sqlite3.Row) -> PinLadder:
        return cls(member["failed_pin_attempts"], member["locked_at_ms"] is not None)

    @property
    def attempts_left(self) -> int:
        """Wrong PINs still accepted before the lock (0 when locked)."""
        return 0 if self.locked else max(0, MAX_PIN_ATTEMPTS - self.failed_attempts)

    def after_wrong_pin(self) -> PinLadder:
        if self.locked:
            return self
        failures = self.failed_attempts + 1
        return PinLadder(failures, failures >= MAX_PIN_ATTEMPTS)

    def after_right_pin(self) -> PinLadder:
        return self if self.locked else PinLadder()


@dataclass(frozen=True)
class PinCheck:
    right: bool
    ladder: PinLadder  # the member's place after this attempt


# ----------------------------------------------------------------- outside the database lock
#
# argon2id (64 MiB, ~0.2 s) must not run inside a transaction: the database has one lock, so
# it would stall every other member's request. A transaction that needs a PIN compared raises
# PinVerificationNeeded; `run_with_pin_checks` rolls it back, compares outside the lock and
# runs the transaction again with the result, which check_pin uses only if it was made for
# the member's PIN hash of that moment (re-checked inside the lock). The ladder itself is
# always read and written inside the transaction, so concurrent attempts all count.


@dataclass(frozen=True)
class PinVerification:
    """The outcome of comparing `pin` with `pin_hash`, computed without the database lock."""

    pin_hash: str
    pin: str
    right: bool


class PinVerificationNeeded(Exception):
    """Raised by check_pin inside a transaction that has no verification for the member's
    current PIN hash yet (see run_with_pin_checks)."""

    def __init__(self, pin_hash: str, pin: str) -> None:
        super().__init__("a PIN must be verified outside the database lock first")
        self.pin_hash = pin_hash
        self.pin = pin


def verify_pin(pin_hash: str, pin: str) -> PinVerification:
    """The slow part (argon2id); call it without holding the database lock."""
    return PinVerification(pin_hash, pin, pin_matches(pin_hash, pin))


INLINE = "inline"  # check_pin(..., verification=INLINE): compare inside the transaction (tests)
# Passes of a transaction whose member's PIN changes under it before check_pin compares inline.
MAX_VERIFICATION_PASSES = 3

T = TypeVar("T")


def run_with_pin_checks(db: Database, run: Callable[[sqlite3.Connection, PinVerification | None | str], T]) -> T:
    """Runs `run(conn, verification)` in a transaction. When it raises PinVerificationNeeded
    the transaction is rolled back, the PIN verified outside the lock and `run` called again
    in a new transaction with the verification (it re-reads everything). If the PIN keeps
    changing meanwhile, the last pass compares inline (INLINE) so that it ends."""
    verification: PinVerification | None | str = None
    for _ in range(MAX_VERIFICATION_PASSES):
        try:
            with db.transaction() as conn:
                return run(conn, verification)
        except PinVerificationNeeded as need:
            verification = verify_pin(need.pin_hash, need.pin)
    with db.transaction() as conn:
        return run(conn, INLINE)


def check_pin(conn: sqlite3.Connection, member: sqlite3.Row, pin: str, now_ms: int,
              verification: PinVerification | None | str = INLINE) -> PinCheck:
    """Compares `pin` with the member's PIN (the member must have one) and records the
    attempt on the ladder, inside the caller's transaction. A locked wallet compares
    nothing and counts nothing.

    `verification`: a PinVerification made outside the lock (used when it is for this PIN
    and the member's current hash, else PinVerificationNeeded is raised, as for None), or
    INLINE to compare here (slow: holds the caller's transaction)."""
    if member["pin_hash"] is None:
        raise ValueError("check_pin: the member has no PIN")
    before = PinLadder.of(member)
    if before.locked:
        return PinCheck(right=False, ladder=before)
    if verification == INLINE:
        right = pin_matches(member["pin_hash"], pin)
    elif (isinstance(verification, PinVerification) and verification.pin_hash == member["pin_hash"]
          and verification.pin == pin):
        right = verification.right
    else:
        raise PinVerificationNeeded(member["pin_hash"], pin)
    if right:
        after = before.after_right_pin()
        if after != before:
            conn.execute("UPDATE wallet_members SET failed_pin_attempts = ? WHERE user_id = ?",
                         (after.failed_attempts, member["user_id"]))
        return PinCheck(right=True, ladder=after)
    after = before.after_wrong_pin()
    conn.execute("UPDATE wallet_members SET failed_pin_attempts = ?, locked_at_ms = ? WHERE user_id = ?",
                 (after.failed_attempts, now_ms if after.locked else None, member["user_id"]))
    if after.locked:
        log.warning("wallet of %s locked after %d wrong PINs", member["user_id"], after.failed_attempts)
    return PinCheck(right=False, ladder=after)


def store_pin(conn: sqlite3.Connection, user_id: str, pin: str | None = None, *,
              pin_hash: str | None = None) -> None:
    """Sets the member's PIN (its hash: pass `pin_hash` from hash_pin, computed outside the
    database lock, or `pin` to hash it here); the count of wrong PINs starts again."""
    if pin_hash is None:
        if pin is None:
            raise ValueError("store_pin: pin or pin_hash is required")
        pin_hash = hash_pin(pin)
    conn.execute("UPDATE wallet_members SET pin_hash = ?, failed_pin_attempts = 0 WHERE user_id = ?",
                 (pin_hash, user_id))


class UnlockMethod:
    """wallet_unlocks.method."""

    EXPIRED = "expired"  # the lock duration passed (actor NULL)
    ADMIN = "admin"  # POST /_symorva/v1/wallet/admin/unlock (actor: the admin)
    TEST = "test"  # POST /_symorva/v1/test/wallet/unlock, test mode (actor: the caller)


def _record_unlock(conn: sqlite3.Connection, member: sqlite3.Row, method: str, actor: str | None,
                   now_ms: int, cleared_pin: bool) -> None:
    conn.execute(
        "INSERT INTO wallet_unlocks(user_id, method, actor, at_ms, locked_at_ms, failed_attempts, cleared_pin)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (member["user_id"], method, actor, now_ms, member["locked_at_ms"], member["failed_pin_attempts"],
         int(cleared_pin)),
    )


def release_expired_lock(conn: sqlite3.Connection, member: sqlite3.Row, now_ms: int,
                         lock_ms: int) -> sqlite3.Row:
    """A lock older than `lock_ms` is lifted (and recorded): the count starts again. Returns
    the member as it is now. Called wherever a member's row is read for a request."""
    locked_at = member["locked_at_ms"]
    if locked_at is None or now_ms < locked_at + lock_ms:
        return member
    _record_unlock(conn, member, UnlockMethod.EXPIRED, None, now_ms, False)
    conn.execute("UPDATE wallet_members SET failed_pin_attempts = 0, locked_at_ms = NULL WHERE user_id = ?",
                 (member["user_id"],))
    log.info("wallet of %s unlocked: the lock of %d s expired", member["user_id"], lock_ms // 1000)
    return conn.execute("SELECT * FROM wallet_members WHERE user_id = ?", (member["user_id"],)).fetchone()


def unlock(conn: sqlite3.Connection, user_id: str, *, clear_pin: bool = False,
           method: str = UnlockMethod.TEST, actor: str | None = None, now_ms: int = 0) -> None:
    """Clears the lock and the count, recorded as `method` by `actor`; with clear_pin the
    member also has no PIN any more."""
    member = conn.execute("SELECT * FROM wallet_members WHERE user_id = ?", (user_id,)).fetchone()
    if member is None:
        raise ValueError(f"unlock: {user_id} has no wallet")
    _record_unlock(conn, member, method, actor, now_ms, clear_pin)
    conn.execute(
        "UPDATE wallet_members SET failed_pin_attempts = 0, locked_at_ms = NULL"
        + (", pin_hash = NULL" if clear_pin else "") + " WHERE user_id = ?",
        (user_id,),
    )
    log.info("wallet of %s unlocked (%s by %s)%s", user_id, method, actor or "-",
             "; PIN cleared" if clear_pin else "")
