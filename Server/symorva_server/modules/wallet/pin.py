"""Wallet PINs: format, argon2id hashing (`crypto_pwhash`) and the wrong-PIN ladder.

PINs are only ever stored as argon2id hashes and never logged.

The ladder (docs/wallet.md): wrong PINs in a row are counted per member, across
confirms and PIN changes; a right PIN, a new PIN or an unlock starts the count again.
The MAX_PIN_ATTEMPTS-th wrong PIN locks the wallet; a locked wallet refuses every PIN,
the right one too, and counts nothing more. `PinLadder` is the rule, `check_pin` the
only place a PIN is compared and counted, `store_pin` and `unlock` the only other
writers of the count and the lock (columns failed_pin_attempts, locked_at_ms).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import nacl.exceptions
import nacl.pwhash.argon2id as argon2id

if TYPE_CHECKING:
    import sqlite3

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


def check_pin(conn: sqlite3.Connection, member: sqlite3.Row, pin: str, now_ms: int) -> PinCheck:
    """Compares `pin` with the member's PIN (the member must have one) and records the
    attempt on the ladder, inside the caller's transaction. A locked wallet compares
    nothing and counts nothing."""
    if member["pin_hash"] is None:
        raise ValueError("check_pin: the member has no PIN")
    before = PinLadder.of(member)
    if before.locked:
        return PinCheck(right=False, ladder=before)
    if pin_matches(member["pin_hash"], pin):
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


def store_pin(conn: sqlite3.Connection, user_id: str, pin: str) -> None:
    """Sets the member's PIN (its hash); the count of wrong PINs starts again."""
    conn.execute("UPDATE wallet_members SET pin_hash = ?, failed_pin_attempts = 0 WHERE user_id = ?",
                 (hash_pin(pin), user_id))


def unlock(conn: sqlite3.Connection, user_id: str, *, clear_pin: bool = False) -> None:
    """Clears the lock and the count (development: POST /_symorva/v1/test/wallet/unlock);
    with clear_pin the member also has no PIN any more."""
    conn.execute(
        "UPDATE wallet_members SET failed_pin_attempts = 0, locked_at_ms = NULL"
        + (", pin_hash = NULL" if clear_pin else "") + " WHERE user_id = ?",
        (user_id,),
    )
