"""Wallet PINs: format and argon2id hashing (`crypto_pwhash`).

PINs are only ever stored as argon2id hashes and never logged.
"""

from __future__ import annotations

import re

import nacl.exceptions
import nacl.pwhash.argon2id as argon2id

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
