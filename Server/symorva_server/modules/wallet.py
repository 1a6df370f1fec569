"""Wallet module: a small ledger with PIN-confirmed, idempotent transfers.

What the server guarantees (docs/wallet.md, "Server side", has the full contract):

- Amounts are exact: decimal strings on the wire ("25.00"), integer minor units in the
  database, never floats. Each asset has a precision and a fixed fee (manifest).
- A transfer is prepared (a draft with fee, total, expiry, verification methods and the
  server's X25519 sealing key), then confirmed with a client-generated command ID and
  the PIN sealed (libsodium sealed box) together with that command ID and draft ID.
- A command executes at most once. Its first answer is stored and replayed for every
  later confirm with the same ID; the whole confirm runs in one `BEGIN IMMEDIATE`
  transaction, so concurrent confirms cannot both move money.
- A query by command ID answers settled / failed / pending, or `unknown_command`, in
  which case the ID is FENCED: a confirm that arrives later with it is refused
  (`command_fenced`) and never executes.
- PINs are stored only as argon2id hashes (`crypto_pwhash`); five wrong PINs in a row
  lock the member's wallet (unlock in development: `POST /_symorva/v1/test/wallet/unlock`).

Command IDs are scoped per member: (member, command ID) is the key.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import nacl.exceptions
import nacl.pwhash.argon2id as argon2id
from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from ..auth import AUTH_ERRORS, AuthenticatedUser, require_user
from ..config import ManifestError, Settings
from ..db import Database
from ..errors import ErrorBody, ErrorCode, SymorvaError
from ..keys import SealingKey

if TYPE_CHECKING:
    import sqlite3

    from ..context import ServerContext

log = logging.getLogger("symorva_server.wallet")

MODULE_ID = "wallet"

PREFIX = "/_symorva/v1/wallet"
TEST_PREFIX = "/_symorva/v1/test/wallet"

# First line of the sealed confirmation payload (docs/wallet.md, SealingContext.pinPayload):
# UTF-8 lines "symorva-wallet-confirm/1", command ID, draft ID, PIN (or biometric assertion).
CONFIRM_PAYLOAD_VERSION = "symorva-wallet-confirm/1"
# First line of the sealed PIN-setting payload: lines "symorva-wallet-pin/1", the member's
# user ID, the old PIN (empty line when setting the first PIN), the new PIN.
PIN_PAYLOAD_VERSION = "symorva-wallet-pin/1"

MAX_PIN_ATTEMPTS = 5
PIN_MIN_LENGTH = 4
PIN_MAX_LENGTH = 12
DEFAULT_DRAFT_TTL_S = 120
MAX_MINOR_UNITS = 2**63 - 1

# argon2id cost (libsodium's "interactive" limits: 2 passes, 64 MiB). Tests lower them
# for speed; the parameters are stored in each hash string, so verification always uses
# the cost the hash was made with.
PIN_OPSLIMIT = argon2id.OPSLIMIT_INTERACTIVE
PIN_MEMLIMIT = argon2id.MEMLIMIT_INTERACTIVE

_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
_AMOUNT = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_PIN = re.compile(r"[0-9]{4,12}")
_USER_ID = re.compile(r"@[^:\s]+:(\S+)")


class FailureCode:
    """`failure.code` of a failed command answer (confirm / query)."""

    WRONG_PIN = "wrong_pin"  # with attempts_left (1..4); the draft stays confirmable
    LOCKED_OUT = "locked_out"  # the 5th wrong PIN, and every confirm while locked (attempts_left 0)
    INSUFFICIENT_FUNDS = "insufficient_funds"  # balance below the draft's total at confirm time
    DRAFT_EXPIRED = "draft_expired"
    DRAFT_UNKNOWN = "draft_unknown"  # no such draft for this member
    DRAFT_ALREADY_SETTLED = "draft_already_settled"  # another command already settled it
    COMMAND_FENCED = "command_fenced"  # a query answered unknown_command for this ID earlier
    VERIFICATION_FAILED = "verification_failed"  # sealed box cannot be opened, bad format, wrong binding
    METHOD_NOT_OFFERED = "method_not_offered"  # e.g. biometric when not configured
    PIN_NOT_SET = "pin_not_set"


# --------------------------------------------------------------------------- amounts


class AmountError(ValueError):
    pass


def parse_amount(text: str, precision: int) -> int:
    """"25.00" at precision 2 -> 2500. Digits, optionally one '.' with digits on both
    sides, at most `precision` decimals, > 0 is not checked here."""
    if text.startswith("-"):
        raise AmountError("must not be negative")
    if not _AMOUNT.fullmatch(text):
        raise AmountError("must be a decimal string of ASCII digits with an optional '.', e.g. \"25.00\"")
    whole, _, frac = text.partition(".")
    if len(frac) > precision:
        raise AmountError(f"has {len(frac)} decimals; the asset's precision is {precision}")
    if len(whole) > 20:
        raise AmountError("is too large")
    minor = int(whole) * 10**precision + (int(frac.ljust(precision, "0")) if precision else 0)
    if minor > MAX_MINOR_UNITS:
        raise AmountError("is too large")
    return minor


def format_amount(minor: int, precision: int) -> str:
    if precision == 0:
        return str(minor)
    digits = str(minor).rjust(precision + 1, "0")
    return f"{digits[:-precision]}.{digits[-precision:]}"


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class AssetConfig:
    code: str
    precision: int
    fee_minor: int

    def fmt(self, minor: int) -> str:
        return format_amount(minor, self.precision)

    def public(self) -> dict[str, Any]:
        return {"code": self.code, "precision": self.precision, "fee": self.fmt(self.fee_minor)}


@dataclass(frozen=True)
class WalletConfig:
    assets: dict[str, AssetConfig]
    biometric: bool
    draft_ttl_ms: int

    @property
    def verification_methods(self) -> list[str]:
        return ["pin", "biometric"] if self.biometric else ["pin"]


def parse_config(options: dict[str, Any]) -> WalletConfig:
    """The wallet's manifest options (docs/manifest.md). Raises ManifestError."""
    where = "manifest.modules.wallet"
    assets: dict[str, AssetConfig] = {}
    for i, a in enumerate(options.get("assets", [])):
        # code/precision are checked by config.validate_manifest; fee is wallet-specific.
        code, precision = a["code"], a["precision"]
        fee = a.get("fee", "0")
        if not isinstance(fee, str):
            raise ManifestError(f"{where}.assets[{i}].fee: must be a decimal string like \"0.50\"")
        try:
            fee_minor = parse_amount(fee, precision)
        except AmountError as e:
            raise ManifestError(f"{where}.assets[{i}].fee: {fee!r} {e}") from None
        assets[code] = AssetConfig(code, precision, fee_minor)
    biometric = options.get("biometric", False)
    if not isinstance(biometric, bool):
        raise ManifestError(f"{where}.biometric: must be a boolean")
    ttl = options.get("draftTtlSeconds", DEFAULT_DRAFT_TTL_S)
    if not isinstance(ttl, int) or isinstance(ttl, bool) or not 1 <= ttl <= 86400:
        raise ManifestError(f"{where}.draftTtlSeconds: must be an integer 1..86400")
    return WalletConfig(assets=assets, biometric=biometric, draft_ttl_ms=ttl * 1000)


# --------------------------------------------------------------------------- storage

MIGRATIONS = [
    """
    CREATE TABLE wallet_members (
        user_id TEXT PRIMARY KEY,
        pin_hash TEXT,
        failed_pin_attempts INTEGER NOT NULL DEFAULT 0,
        locked_at_ms INTEGER,
        created_at_ms INTEGER NOT NULL
    );
    CREATE TABLE wallet_balances (
        user_id TEXT NOT NULL REFERENCES wallet_members(user_id),
        asset TEXT NOT NULL,
        balance_minor INTEGER NOT NULL CHECK (balance_minor >= 0),
        PRIMARY KEY (user_id, asset)
    );
    CREATE TABLE wallet_drafts (
        draft_id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        recipient TEXT NOT NULL,
        asset TEXT NOT NULL,
        amount_minor INTEGER NOT NULL,
        fee_minor INTEGER NOT NULL,
        total_minor INTEGER NOT NULL,
        created_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        transfer_id TEXT
    );
    CREATE TABLE wallet_transfers (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        transfer_id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        sender TEXT,
        recipient TEXT NOT NULL,
        asset TEXT NOT NULL,
        amount_minor INTEGER NOT NULL,
        fee_minor INTEGER NOT NULL,
        total_minor INTEGER NOT NULL,
        draft_id TEXT UNIQUE,
        command_id TEXT,
        created_at_ms INTEGER NOT NULL,
        UNIQUE (sender, command_id)
    );
    CREATE INDEX wallet_transfers_sender ON wallet_transfers(sender, seq);
    CREATE INDEX wallet_transfers_recipient ON wallet_transfers(recipient, seq);
    CREATE TABLE wallet_commands (
        user_id TEXT NOT NULL,
        command_id TEXT NOT NULL,
        status TEXT NOT NULL,
        draft_id TEXT,
        answer TEXT,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        PRIMARY KEY (user_id, command_id)
    )
    """,
]


def hash_pin(pin: str) -> str:
    return argon2id.str(pin.encode(), opslimit=PIN_OPSLIMIT, memlimit=PIN_MEMLIMIT).decode("ascii")


def pin_matches(pin_hash: str, pin: str) -> bool:
    if not _PIN.fullmatch(pin):
        return False
    try:
        return argon2id.verify(pin_hash.encode("ascii"), pin.encode())
    except nacl.exceptions.InvalidkeyError:
        return False


# --------------------------------------------------------------------------- API models


class SealingKeyOut(BaseModel):
    algorithm: str = Field(examples=["x25519-xsalsa20poly1305-sealedbox"])
    key_id: str
    public_key: str = Field(description="Base64 (standard, padded) of the 32-byte X25519 public key.")


class BalanceOut(BaseModel):
    asset: str
    precision: int
    amount: str = Field(description="Decimal string at the asset's precision.", examples=["25.00"])


class BalancesOut(BaseModel):
    balances: list[BalanceOut] = Field(description="One entry per configured asset (zero if none).")


class TransferOut(BaseModel):
    transfer_id: str
    kind: Literal["transfer", "credit"] = Field(description="credit = development credit (test endpoint).")
    command_id: str | None = Field(description="The command that executed it (null for credits).")
    draft_id: str | None = Field(description="null for credits.")
    sender: str | None = Field(description="Matrix user ID; null for credits.")
    recipient: str
    asset: str
    amount: str = Field(description="What the recipient received.")
    fee: str
    total: str = Field(description="What left the sender's balance: amount + fee.")
    created_at_ms: int


class LedgerEntryOut(TransferOut):
    direction: Literal["in", "out"] = Field(description="out: the member sent it; in: received.")


class TransferPage(BaseModel):
    transfers: list[LedgerEntryOut] = Field(description="Newest first.")
    next_from: str | None = Field(description="Pass as `from` for the next (older) page; null at the end.")


class PrepareRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    recipient: StrictStr = Field(max_length=255, description="Matrix user ID of a member with a wallet.")
    asset: StrictStr = Field(max_length=32)
    amount: StrictStr = Field(max_length=64, description="What the recipient receives, e.g. \"25.00\".")
    ttl_ms: StrictInt | None = Field(
        default=None, ge=0, le=86_400_000,
        description="Test mode only (ignored otherwise): draft lifetime in ms; 0 = already expired.")


class DraftOut(BaseModel):
    draft_id: str
    recipient: str
    asset: str
    precision: int
    amount: str
    fee: str
    total: str = Field(description="amount + fee: what leaves the sender's balance.")
    created_at_ms: int
    expires_at_ms: int = Field(description="Server clock (Unix ms).")
    expires_in_ms: int = Field(description="Lifetime left when the answer was made (use this against clock skew).")
    verification_methods: list[str] = Field(examples=[["pin"]])
    sealing_key: SealingKeyOut
    payload_version: str = Field(examples=[CONFIRM_PAYLOAD_VERSION],
                                 description="First line of the sealed confirmation payload.")


class VerificationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    method: StrictStr = Field(max_length=32, examples=["pin"])
    sealed: StrictStr = Field(min_length=1, max_length=8192,
                              description="Base64 of crypto_box_seal(payload, server key).")


class ConfirmRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    draft_id: StrictStr = Field(min_length=1, max_length=128)
    command_id: StrictStr = Field(max_length=36, description="Client-generated UUID (8-4-4-4-12 hex).")
    verification: VerificationIn


class FailureOut(BaseModel):
    code: str = Field(description="See FailureCode in modules/wallet.py / docs/wallet.md.")
    message: str
    attempts_left: int | None = Field(default=None, description="Only for wrong_pin and locked_out.")


class CommandAnswer(BaseModel):
    status: Literal["settled", "failed", "pending", "unknown_command"]
    command_id: str
    transfer: TransferOut | None = Field(default=None, description="When settled.")
    failure: FailureOut | None = Field(default=None, description="When failed.")


class PinRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sealed: StrictStr = Field(min_length=1, max_length=8192,
                              description="Base64 of crypto_box_seal(\"symorva-wallet-pin/1\\n<user id>\\n<old PIN or empty>\\n<new PIN>\").")


class PinOut(BaseModel):
    pin_set: bool
    locked: bool
    attempts_left: int
    max_attempts: int


class PinSetOut(BaseModel):
    pin_set: bool
    changed: bool = Field(description="False when this set the first PIN.")


class CreditRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: StrictStr = Field(max_length=255)
    asset: StrictStr = Field(max_length=32)
    amount: StrictStr = Field(max_length=64)


class CreditOut(BaseModel):
    transfer: TransferOut
    balance: str


class UnlockRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: StrictStr = Field(max_length=255)
    clear_pin: StrictBool = Field(default=False, description="Also forget the PIN (the member sets a new one).")


class HoldRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    delay_ms: StrictInt = Field(ge=0, le=60000, description="How long the accepted command stays pending.")
    count: StrictInt = Field(default=1, ge=1, le=1000, description="How many next confirms to hold.")


class HoldOut(BaseModel):
    armed: int = Field(description="Confirms that will still be held.")
    delay_ms: int


# --------------------------------------------------------------------------- the service


def _failure(command_id: str, code: str, message: str, attempts_left: int | None = None) -> dict[str, Any]:
    failure: dict[str, Any] = {"code": code, "message": message}
    if attempts_left is not None:
        failure["attempts_left"] = attempts_left
    return {"status": "failed", "command_id": command_id, "failure": failure}


def _transfer_json(row: sqlite3.Row, asset: AssetConfig | None) -> dict[str, Any]:
    precision = asset.precision if asset else 0
    return {
        "transfer_id": row["transfer_id"],
        "kind": row["kind"],
        "command_id": row["command_id"],
        "draft_id": row["draft_id"],
        "sender": row["sender"],
        "recipient": row["recipient"],
        "asset": row["asset"],
        "amount": format_amount(row["amount_minor"], precision),
        "fee": format_amount(row["fee_minor"], precision),
        "total": format_amount(row["total_minor"], precision),
        "created_at_ms": row["created_at_ms"],
    }


class Wallet:
    """The wallet module's run-time state and operations (ServerContext.wallet)."""

    def __init__(self, config: WalletConfig, *, db: Database, clock: Callable[[], float],
                 sealing_key: SealingKey, server_name: str, test_mode: bool) -> None:
        self.config = config
        self.db = db
        self.clock = clock
        self.sealing_key = sealing_key
        self.server_name = server_name
        self.test_mode = test_mode
        self._holds_lock = threading.Lock()
        self._holds: list[int] = []  # test mode: delays of the next held confirms

    # -- helpers

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def asset(self, code: str) -> AssetConfig:
        a = self.config.assets.get(code)
        if a is None:
            known = ", ".join(self.config.assets) or "none"
            raise SymorvaError(400, ErrorCode.UNKNOWN_ASSET, f"Unknown asset '{code}' (this wallet has: {known})")
        return a

    def amount(self, text: str, asset: AssetConfig) -> int:
        try:
            minor = parse_amount(text, asset.precision)
        except AmountError as e:
            raise SymorvaError(400, ErrorCode.INVALID_AMOUNT, f"Amount {text!r} {e}") from None
        if minor == 0:
            raise SymorvaError(400, ErrorCode.INVALID_AMOUNT, "Amount must be greater than zero")
        return minor

    def check_member_id(self, user_id: str, what: str) -> None:
        m = _USER_ID.fullmatch(user_id)
        if m is None:
            raise SymorvaError(400, ErrorCode.INVALID_RECIPIENT, f"{what} {user_id!r} is not a Matrix user ID")
        if m.group(1) != self.server_name:
            raise SymorvaError(400, ErrorCode.INVALID_RECIPIENT,
                               f"{what} {user_id} is not a member of this community "
                               f"(server '{self.server_name}')")

    def ensure_member(self, conn: sqlite3.Connection, user_id: str, now: int) -> sqlite3.Row:
        conn.execute("INSERT OR IGNORE INTO wallet_members(user_id, created_at_ms) VALUES (?, ?)", (user_id, now))
        return conn.execute("SELECT * FROM wallet_members WHERE user_id = ?", (user_id,)).fetchone()

    def balance(self, conn: sqlite3.Connection, user_id: str, asset: str) -> int:
        row = conn.execute("SELECT balance_minor FROM wallet_balances WHERE user_id = ? AND asset = ?",
                           (user_id, asset)).fetchone()
        return row[0] if row else 0

    def add_balance(self, conn: sqlite3.Connection, user_id: str, asset: str, delta: int) -> int:
        new = self.balance(conn, user_id, asset) + delta
        if new < 0 or new > MAX_MINOR_UNITS:
            raise SymorvaError(409, ErrorCode.INSUFFICIENT_FUNDS if new < 0 else ErrorCode.INVALID_AMOUNT,
                               "Balance would leave the representable range")
        conn.execute(
            "INSERT INTO wallet_balances(user_id, asset, balance_minor) VALUES (?, ?, ?)"
            " ON CONFLICT(user_id, asset) DO UPDATE SET balance_minor = excluded.balance_minor",
            (user_id, asset, new),
        )
        return new

    def transfer_by_id(self, conn: sqlite3.Connection, transfer_id: str) -> dict[str, Any]:
        row = conn.execute("SELECT * FROM wallet_transfers WHERE transfer_id = ?", (transfer_id,)).fetchone()
        return _transfer_json(row, self.config.assets.get(row["asset"]))

    @staticmethod
    def command_id(raw: str) -> str:
        if not _UUID.fullmatch(raw):
            raise SymorvaError(400, ErrorCode.INVALID_PARAM,
                               "Invalid parameter 'command_id': must be a UUID (8-4-4-4-12 hexadecimal)")
        return raw.lower()

    @staticmethod
    def decode_sealed(text: str, name: str) -> bytes:
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise SymorvaError(400, ErrorCode.INVALID_PARAM,
                               f"Invalid parameter '{name}': must be standard base64") from None

    def pin_state(self, member: sqlite3.Row) -> dict[str, Any]:
        locked = member["locked_at_ms"] is not None
        return {
            "pin_set": member["pin_hash"] is not None,
            "locked": locked,
            "attempts_left": 0 if locked else MAX_PIN_ATTEMPTS - member["failed_pin_attempts"],
            "max_attempts": MAX_PIN_ATTEMPTS,
        }

    def record_wrong_pin(self, conn: sqlite3.Connection, member: sqlite3.Row, now: int) -> int:
        """Counts a wrong PIN; returns the attempts left (0 = now locked)."""
        failures = member["failed_pin_attempts"] + 1
        locked_at = now if failures >= MAX_PIN_ATTEMPTS else None
        conn.execute("UPDATE wallet_members SET failed_pin_attempts = ?, locked_at_ms = ? WHERE user_id = ?",
                     (failures, locked_at, member["user_id"]))
        if locked_at is not None:
            log.warning("wallet of %s locked after %d wrong PINs", member["user_id"], failures)
        return max(0, MAX_PIN_ATTEMPTS - failures)

    # -- endpoints

    def balances(self, user_id: str) -> dict[str, Any]:
        with self.db.transaction() as conn:
            self.ensure_member(conn, user_id, self.now_ms())
            out = [
                {"asset": a.code, "precision": a.precision, "amount": a.fmt(self.balance(conn, user_id, a.code))}
                for a in self.config.assets.values()
            ]
        return {"balances": out}

    def history(self, user_id: str, from_token: str | None, limit: int) -> dict[str, Any]:
        before = MAX_MINOR_UNITS
        if from_token is not None:
            if not from_token.isdigit() or len(from_token) > 19:
                raise SymorvaError(400, ErrorCode.INVALID_PARAM, "Invalid parameter 'from': not a token from next_from")
            before = int(from_token)
        with self.db.transaction() as conn:
            self.ensure_member(conn, user_id, self.now_ms())
            rows = conn.execute(
                "SELECT * FROM wallet_transfers WHERE (sender = ? OR recipient = ?) AND seq < ?"
                " ORDER BY seq DESC LIMIT ?",
                (user_id, user_id, before, limit + 1),
            ).fetchall()
        entries = []
        for row in rows[:limit]:
            e = _transfer_json(row, self.config.assets.get(row["asset"]))
            e["direction"] = "out" if row["sender"] == user_id else "in"
            entries.append(e)
        next_from = str(rows[limit - 1]["seq"]) if len(rows) > limit else None
        return {"transfers": entries, "next_from": next_from}

    def get_pin(self, user_id: str) -> dict[str, Any]:
        with self.db.transaction() as conn:
            member = self.ensure_member(conn, user_id, self.now_ms())
        return self.pin_state(member)

    def set_pin(self, user_id: str, sealed_b64: str) -> dict[str, Any]:
        sealed = self.decode_sealed(sealed_b64, "sealed")
        bad = SymorvaError(400, ErrorCode.BAD_SEALED_PAYLOAD,
                           "The sealed PIN cannot be opened or is not "
                           f"'{PIN_PAYLOAD_VERSION}\\n<your user ID>\\n<old PIN>\\n<new PIN>' for this server")
        try:
            lines = self.sealing_key.open(sealed).decode("utf-8").split("\n")
        except (nacl.exceptions.CryptoError, UnicodeDecodeError):
            raise bad from None
        if len(lines) != 4 or lines[0] != PIN_PAYLOAD_VERSION or lines[1] != user_id:
            raise bad
        old_pin, new_pin = lines[2], lines[3]
        if not _PIN.fullmatch(new_pin):
            raise SymorvaError(400, ErrorCode.INVALID_PIN, "The new PIN must be 4 to 12 ASCII digits")
        error: SymorvaError | None = None
        changed = False
        # Errors are raised after the transaction so that a wrong old PIN is counted.
        with self.db.transaction() as conn:
            now = self.now_ms()
            member = self.ensure_member(conn, user_id, now)
            if member["locked_at_ms"] is not None:
                error = SymorvaError(403, ErrorCode.WALLET_LOCKED, "Too many wrong PINs: the wallet is locked",
                                     extra={"attempts_left": 0})
            elif member["pin_hash"] is None:
                if old_pin != "":
                    error = SymorvaError(409, ErrorCode.PIN_NOT_SET,
                                         "No PIN is set yet: send an empty old PIN line to set the first one")
            elif old_pin == "":
                error = SymorvaError(409, ErrorCode.PIN_ALREADY_SET,
                                     "A PIN is already set: include the old PIN to change it")
            elif not pin_matches(member["pin_hash"], old_pin):
                left = self.record_wrong_pin(conn, member, now)
                if left == 0:
                    error = SymorvaError(403, ErrorCode.WALLET_LOCKED,
                                         "Wrong PIN; too many wrong PINs: the wallet is locked",
                                         extra={"attempts_left": 0})
                else:
                    error = SymorvaError(403, ErrorCode.WRONG_PIN, f"Wrong old PIN ({left} attempts left)",
                                         extra={"attempts_left": left})
            else:
                changed = True
            if error is None:
                conn.execute("UPDATE wallet_members SET pin_hash = ?, failed_pin_attempts = 0 WHERE user_id = ?",
                             (hash_pin(new_pin), user_id))
        if error is not None:
            raise error
        log.info("wallet PIN %s for %s", "changed" if changed else "set", user_id)
        return {"pin_set": True, "changed": changed}

    def prepare(self, user_id: str, body: PrepareRequest) -> dict[str, Any]:
        asset = self.asset(body.asset)
        amount = self.amount(body.amount, asset)
        self.check_member_id(body.recipient, "Recipient")
        if body.recipient == user_id:
            raise SymorvaError(400, ErrorCode.INVALID_RECIPIENT, "You cannot send a transfer to yourself")
        total = amount + asset.fee_minor
        if total > MAX_MINOR_UNITS:
            raise SymorvaError(400, ErrorCode.INVALID_AMOUNT, "Amount plus fee is too large")
        ttl_ms = self.config.draft_ttl_ms
        if body.ttl_ms is not None and self.test_mode:
            ttl_ms = body.ttl_ms
        draft_id = "d_" + secrets.token_urlsafe(16)
        with self.db.transaction() as conn:  # the member has a wallet even if this prepare fails
            self.ensure_member(conn, user_id, self.now_ms())
        with self.db.transaction() as conn:
            now = self.now_ms()
            member = self.ensure_member(conn, user_id, now)
            if conn.execute("SELECT 1 FROM wallet_members WHERE user_id = ?", (body.recipient,)).fetchone() is None:
                raise SymorvaError(404, ErrorCode.RECIPIENT_UNKNOWN,
                                   f"{body.recipient} has no wallet in this community yet")
            if member["locked_at_ms"] is not None:
                raise SymorvaError(403, ErrorCode.WALLET_LOCKED, "Too many wrong PINs: the wallet is locked",
                                   extra={"attempts_left": 0})
            if member["pin_hash"] is None:
                raise SymorvaError(409, ErrorCode.PIN_NOT_SET, "Set a wallet PIN (POST /_symorva/v1/wallet/pin) first")
            balance = self.balance(conn, user_id, asset.code)
            if balance < total:
                raise SymorvaError(409, ErrorCode.INSUFFICIENT_FUNDS,
                                   f"Balance {asset.fmt(balance)} {asset.code} does not cover "
                                   f"{asset.fmt(total)} (amount {asset.fmt(amount)} + fee {asset.fmt(asset.fee_minor)})")
            conn.execute(
                "INSERT INTO wallet_drafts(draft_id, user_id, recipient, asset, amount_minor, fee_minor,"
                " total_minor, created_at_ms, expires_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (draft_id, user_id, body.recipient, asset.code, amount, asset.fee_minor, total, now, now + ttl_ms),
            )
        return {
            "draft_id": draft_id,
            "recipient": body.recipient,
            "asset": asset.code,
            "precision": asset.precision,
            "amount": asset.fmt(amount),
            "fee": asset.fmt(asset.fee_minor),
            "total": asset.fmt(total),
            "created_at_ms": now,
            "expires_at_ms": now + ttl_ms,
            "expires_in_ms": ttl_ms,
            "verification_methods": self.config.verification_methods,
            "sealing_key": self.sealing_key.public_info(),
            "payload_version": CONFIRM_PAYLOAD_VERSION,
        }

    def confirm(self, user_id: str, body: ConfirmRequest) -> tuple[dict[str, Any], bool]:
        """(answer, replayed)."""
        command_id = self.command_id(body.command_id)
        sealed = self.decode_sealed(body.verification.sealed, "verification.sealed")
        with self.db.transaction() as conn:
            now = self.now_ms()
            member = self.ensure_member(conn, user_id, now)
            previous = self._recorded_answer(conn, user_id, command_id, for_confirm=True)
            if previous is not None:
                return previous, True
            hold_ms = self._take_hold()
            if hold_ms is None:
                answer = self._execute(conn, member, command_id, body, sealed, now)
                conn.execute(
                    "INSERT INTO wallet_commands(user_id, command_id, status, draft_id, answer, created_at_ms,"
                    " updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (user_id, command_id, answer["status"], body.draft_id, json.dumps(answer), now, now),
                )
                return answer, False
            # Test mode hold: accept the command as pending now, execute it after the delay.
            conn.execute(
                "INSERT INTO wallet_commands(user_id, command_id, status, draft_id, answer, created_at_ms,"
                " updated_at_ms) VALUES (?, ?, 'pending', ?, NULL, ?, ?)",
                (user_id, command_id, body.draft_id, now, now),
            )
        log.warning("wallet: holding command %s as pending for %d ms (test mode)", command_id, hold_ms)
        time.sleep(hold_ms / 1000)
        with self.db.transaction() as conn:
            now = self.now_ms()
            member = self.ensure_member(conn, user_id, now)
            answer = self._execute(conn, member, command_id, body, sealed, now)
            conn.execute(
                "UPDATE wallet_commands SET status = ?, answer = ?, updated_at_ms = ?"
                " WHERE user_id = ? AND command_id = ?",
                (answer["status"], json.dumps(answer), now, user_id, command_id),
            )
        return answer, False

    def query(self, user_id: str, raw_command_id: str) -> dict[str, Any]:
        command_id = self.command_id(raw_command_id)
        with self.db.transaction() as conn:
            now = self.now_ms()
            self.ensure_member(conn, user_id, now)
            answer = self._recorded_answer(conn, user_id, command_id, for_confirm=False)
            if answer is None:
                # FENCE: from now on this command ID can never execute.
                conn.execute(
                    "INSERT INTO wallet_commands(user_id, command_id, status, draft_id, answer, created_at_ms,"
                    " updated_at_ms) VALUES (?, ?, 'fenced', NULL, NULL, ?, ?)",
                    (user_id, command_id, now, now),
                )
                log.info("wallet: command %s of %s unknown; fenced", command_id, user_id)
                answer = {"status": "unknown_command", "command_id": command_id}
        return answer

    def credit(self, body: CreditRequest) -> dict[str, Any]:
        asset = self.asset(body.asset)
        amount = self.amount(body.amount, asset)
        self.check_member_id(body.user_id, "User")
        transfer_id = "t_" + secrets.token_urlsafe(16)
        with self.db.transaction() as conn:
            now = self.now_ms()
            self.ensure_member(conn, body.user_id, now)
            balance = self.add_balance(conn, body.user_id, asset.code, amount)
            conn.execute(
                "INSERT INTO wallet_transfers(transfer_id, kind, sender, recipient, asset, amount_minor, fee_minor,"
                " total_minor, draft_id, command_id, created_at_ms) VALUES (?, 'credit', NULL, ?, ?, ?, 0, ?,"
                " NULL, NULL, ?)",
                (transfer_id, body.user_id, asset.code, amount, amount, now),
            )
            transfer = self.transfer_by_id(conn, transfer_id)
        return {"transfer": transfer, "balance": asset.fmt(balance)}

    def unlock(self, body: UnlockRequest) -> dict[str, Any]:
        with self.db.transaction() as conn:
            self.ensure_member(conn, body.user_id, self.now_ms())
            conn.execute(
                "UPDATE wallet_members SET failed_pin_attempts = 0, locked_at_ms = NULL"
                + (", pin_hash = NULL" if body.clear_pin else "") + " WHERE user_id = ?",
                (body.user_id,),
            )
            member = conn.execute("SELECT * FROM wallet_members WHERE user_id = ?", (body.user_id,)).fetchone()
        return self.pin_state(member)

    def hold(self, body: HoldRequest) -> dict[str, Any]:
        with self._holds_lock:
            self._holds.extend([body.delay_ms] * body.count)
            return {"armed": len(self._holds), "delay_ms": body.delay_ms}

    # -- internals

    def _take_hold(self) -> int | None:
        if not self.test_mode:
            return None
        with self._holds_lock:
            return self._holds.pop(0) if self._holds else None

    def _recorded_answer(self, conn: sqlite3.Connection, user_id: str, command_id: str,
                         *, for_confirm: bool) -> dict[str, Any] | None:
        row = conn.execute("SELECT status, answer FROM wallet_commands WHERE user_id = ? AND command_id = ?",
                           (user_id, command_id)).fetchone()
        if row is None:
            return None
        if row["status"] == "fenced":
            if for_confirm:
                log.warning("wallet: refused confirm of fenced command %s", command_id)
                return _failure(command_id, FailureCode.COMMAND_FENCED,
                                "This command ID was reported unknown by a query and can never execute; "
                                "prepare the transfer again")
            return {"status": "unknown_command", "command_id": command_id}
        if row["status"] == "pending":
            return {"status": "pending", "command_id": command_id}
        return json.loads(row["answer"])

    def _execute(self, conn: sqlite3.Connection, member: sqlite3.Row, command_id: str,
                 body: ConfirmRequest, sealed: bytes, now: int) -> dict[str, Any]:
        """Runs a new command inside the caller's transaction; returns its answer."""
        user_id = member["user_id"]
        draft = conn.execute("SELECT * FROM wallet_drafts WHERE draft_id = ? AND user_id = ?",
                             (body.draft_id, user_id)).fetchone()
        if draft is None:
            return _failure(command_id, FailureCode.DRAFT_UNKNOWN, "No such draft for this member")
        if draft["transfer_id"] is not None:
            return _failure(command_id, FailureCode.DRAFT_ALREADY_SETTLED,
                            "This draft was already settled by another command")
        if now >= draft["expires_at_ms"]:
            return _failure(command_id, FailureCode.DRAFT_EXPIRED, "The draft has expired; prepare again")
        if member["locked_at_ms"] is not None:
            return _failure(command_id, FailureCode.LOCKED_OUT, "Too many wrong PINs: the wallet is locked",
                            attempts_left=0)
        method = body.verification.method
        if method not in self.config.verification_methods:
            return _failure(command_id, FailureCode.METHOD_NOT_OFFERED,
                            f"Verification method '{method}' is not accepted "
                            f"(accepted: {', '.join(self.config.verification_methods)})")
        try:
            lines = self.sealing_key.open(sealed).decode("utf-8").split("\n")
        except (nacl.exceptions.CryptoError, UnicodeDecodeError):
            lines = []
        if (len(lines) != 4 or lines[0] != CONFIRM_PAYLOAD_VERSION or lines[1].lower() != command_id
                or lines[2] != body.draft_id):
            return _failure(command_id, FailureCode.VERIFICATION_FAILED,
                            "The sealed verification cannot be opened or is not bound to this command and draft")
        secret = lines[3]
        if method == "pin":
            if member["pin_hash"] is None:
                return _failure(command_id, FailureCode.PIN_NOT_SET, "No wallet PIN is set")
            if not pin_matches(member["pin_hash"], secret):
                left = self.record_wrong_pin(conn, member, now)
                if left == 0:
                    return _failure(command_id, FailureCode.LOCKED_OUT,
                                    "Wrong PIN; too many wrong PINs: the wallet is locked", attempts_left=0)
                return _failure(command_id, FailureCode.WRONG_PIN, f"Wrong PIN ({left} attempts left)",
                                attempts_left=left)
            if member["failed_pin_attempts"]:
                conn.execute("UPDATE wallet_members SET failed_pin_attempts = 0 WHERE user_id = ?", (user_id,))
        elif not secret:  # biometric: the reference server accepts any non-empty assertion
            return _failure(command_id, FailureCode.VERIFICATION_FAILED, "Empty biometric assertion")
        asset = self.config.assets.get(draft["asset"])
        if asset is None:  # the manifest changed since the draft was made
            return _failure(command_id, FailureCode.DRAFT_UNKNOWN, f"Asset {draft['asset']} is no longer offered")
        if self.balance(conn, user_id, asset.code) < draft["total_minor"]:
            return _failure(command_id, FailureCode.INSUFFICIENT_FUNDS,
                            f"Balance does not cover {asset.fmt(draft['total_minor'])} {asset.code}")
        transfer_id = "t_" + secrets.token_urlsafe(16)
        self.add_balance(conn, user_id, asset.code, -draft["total_minor"])
        self.add_balance(conn, draft["recipient"], asset.code, draft["amount_minor"])
        conn.execute(
            "INSERT INTO wallet_transfers(transfer_id, kind, sender, recipient, asset, amount_minor, fee_minor,"
            " total_minor, draft_id, command_id, created_at_ms) VALUES (?, 'transfer', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (transfer_id, user_id, draft["recipient"], asset.code, draft["amount_minor"], draft["fee_minor"],
             draft["total_minor"], draft["draft_id"], command_id, now),
        )
        conn.execute("UPDATE wallet_drafts SET transfer_id = ? WHERE draft_id = ?", (transfer_id, draft["draft_id"]))
        log.info("wallet: command %s settled as transfer %s", command_id, transfer_id)
        return {"status": "settled", "command_id": command_id, "transfer": self.transfer_by_id(conn, transfer_id)}


# --------------------------------------------------------------------------- module hooks


def create_state(options: dict[str, Any], *, db: Database, clock: Callable[[], float],
                 sealing_key: SealingKey, settings: Settings) -> Wallet:
    """The module's state, from its manifest options (raises ManifestError); the
    migrations have been applied."""
    return Wallet(parse_config(options), db=db, clock=clock, sealing_key=sealing_key,
                  server_name=settings.server_name, test_mode=settings.test_mode)


def capabilities(ctx: ServerContext, options: dict[str, Any]) -> dict[str, Any]:
    w = _enabled(ctx)
    return {
        "verification_methods": w.config.verification_methods,
        "sealing_key": ctx.sealing_key.public_info(),
        "assets": [a.public() for a in w.config.assets.values()],
        "draft_ttl_ms": w.config.draft_ttl_ms,
        "pin": {"min_length": PIN_MIN_LENGTH, "max_length": PIN_MAX_LENGTH, "max_attempts": MAX_PIN_ATTEMPTS},
        "payload_version": CONFIRM_PAYLOAD_VERSION,
    }


def _enabled(ctx: ServerContext) -> Wallet:
    assert ctx.wallet is not None, "the wallet's routes and capabilities exist only when it is enabled"
    return ctx.wallet


def _wallet(request: Request) -> Wallet:
    return _enabled(request.app.state.ctx)


_E400 = {"model": ErrorBody, "description": "Invalid request (SY_BAD_JSON, SY_MISSING_PARAM, SY_INVALID_PARAM)"}

router = APIRouter(tags=["wallet"], responses=AUTH_ERRORS)


@router.get(f"{PREFIX}/balances", response_model=BalancesOut, summary="The member's balances")
def wallet_balances(request: Request, user: AuthenticatedUser = Depends(require_user)) -> Any:
    return _wallet(request).balances(user.user_id)


@router.get(f"{PREFIX}/transfers", response_model=TransferPage,
            responses={400: _E400}, summary="The member's transfers and credits, newest first")
def wallet_transfers(
    request: Request,
    from_: str | None = Query(default=None, alias="from", max_length=32,
                              description="next_from of the previous page."),
    limit: int = Query(default=20, ge=1, le=100),
    user: AuthenticatedUser = Depends(require_user),
) -> Any:
    return _wallet(request).history(user.user_id, from_, limit)


@router.get(f"{PREFIX}/pin", response_model=PinOut, summary="Whether the member has a PIN, and lock state")
def wallet_pin_state(request: Request, user: AuthenticatedUser = Depends(require_user)) -> Any:
    return _wallet(request).get_pin(user.user_id)


@router.post(
    f"{PREFIX}/pin", response_model=PinSetOut,
    responses={
        400: {"model": ErrorBody, "description": "SY_BAD_SEALED_PAYLOAD, SY_INVALID_PIN, SY_INVALID_PARAM, ..."},
        403: {"model": ErrorBody, "description": "SY_WRONG_PIN (with attempts_left), SY_WALLET_LOCKED"},
        409: {"model": ErrorBody, "description": "SY_PIN_ALREADY_SET, SY_PIN_NOT_SET"},
    },
    summary="Set the first PIN, or change it (sealed, with the old PIN)")
def wallet_set_pin(body: PinRequest, request: Request, user: AuthenticatedUser = Depends(require_user)) -> Any:
    return _wallet(request).set_pin(user.user_id, body.sealed)


@router.post(
    f"{PREFIX}/transfers/prepare", response_model=DraftOut,
    responses={
        400: {"model": ErrorBody, "description": "SY_INVALID_AMOUNT, SY_UNKNOWN_ASSET, SY_INVALID_RECIPIENT, SY_INVALID_PARAM, ..."},
        403: {"model": ErrorBody, "description": "SY_WALLET_LOCKED"},
        404: {"model": ErrorBody, "description": "SY_RECIPIENT_UNKNOWN"},
        409: {"model": ErrorBody, "description": "SY_INSUFFICIENT_FUNDS, SY_PIN_NOT_SET"},
    },
    summary="Price a transfer: returns a draft to confirm")
def wallet_prepare(body: PrepareRequest, request: Request, user: AuthenticatedUser = Depends(require_user)) -> Any:
    return _wallet(request).prepare(user.user_id, body)


@router.post(
    f"{PREFIX}/transfers/confirm", response_model=CommandAnswer,
    responses={
        400: {"model": ErrorBody, "description": "Malformed request (not recorded: the command ID is not spent)"},
        429: {"model": ErrorBody,
              "description": "A rate-limited confirm is not recorded: the command ID is not spent, and the "
                             "same confirm may be sent again after the hint."},
    },
    summary="Confirm a draft with a command ID (idempotent: a repeated command ID gets the first answer)")
def wallet_confirm(body: ConfirmRequest, request: Request, user: AuthenticatedUser = Depends(require_user)) -> Any:
    answer, replayed = _wallet(request).confirm(user.user_id, body)
    return JSONResponse(answer, headers={"Symorva-Replayed": "true"} if replayed else None)


@router.get(
    f"{PREFIX}/commands/{{command_id}}", response_model=CommandAnswer,
    responses={400: _E400},
    summary="Outcome of a command; an unknown command ID is fenced (can never execute afterwards)")
def wallet_command(request: Request, command_id: str = Path(max_length=36),
                   user: AuthenticatedUser = Depends(require_user)) -> Any:
    return JSONResponse(_wallet(request).query(user.user_id, command_id))


_TEST_DOC = " Only exists when the server runs with --test."

test_router = APIRouter(tags=["testing"], responses=AUTH_ERRORS)


@test_router.post(f"{TEST_PREFIX}/credit", response_model=CreditOut, responses={400: _E400},
                  summary="Credit a member (creates their wallet)." + _TEST_DOC)
def wallet_test_credit(body: CreditRequest, request: Request,
                       _user: AuthenticatedUser = Depends(require_user)) -> Any:
    return _wallet(request).credit(body)


@test_router.post(f"{TEST_PREFIX}/unlock", response_model=PinOut, responses={400: _E400},
                  summary="Reset a member's wrong-PIN counter and lock (optionally forget the PIN)." + _TEST_DOC)
def wallet_test_unlock(body: UnlockRequest, request: Request,
                       _user: AuthenticatedUser = Depends(require_user)) -> Any:
    return _wallet(request).unlock(body)


@test_router.post(f"{TEST_PREFIX}/hold", response_model=HoldOut, responses={400: _E400},
                  summary="Hold the next confirm(s) as pending for delay_ms before executing." + _TEST_DOC)
def wallet_test_hold(body: HoldRequest, request: Request,
                     _user: AuthenticatedUser = Depends(require_user)) -> Any:
    return _wallet(request).hold(body)
