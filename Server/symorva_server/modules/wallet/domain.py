"""The wallet's ledger: members, balances, drafts, idempotent commands and PINs.

`Wallet` is the module's run-time state (ServerContext.wallet) and its operations; the
routes (routes.py) only call it. It raises SymorvaError for request errors and answers
a confirm or query with a command answer (CommandAnswer in models.py).
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
from typing import TYPE_CHECKING, Any

import nacl.exceptions

from ...config import Settings
from ...db import Database
from ...errors import ErrorCode, SymorvaError
from ...keys import SealingKey
from .config import (CONFIRM_PAYLOAD_VERSION, MAX_MINOR_UNITS, PIN_PAYLOAD_VERSION, AmountError, AssetConfig,
                     WalletConfig, format_amount, parse_amount, parse_config)
from .models import ConfirmRequest, CreditRequest, HoldRequest, PrepareRequest, UnlockRequest
from .pin import (LOCKED_MESSAGE, LOCKED_NOW_MESSAGE, MAX_PIN_ATTEMPTS, PinCheck, PinLadder, PinVerification,
                  UnlockMethod, check_pin, hash_pin, is_valid_pin, release_expired_lock, run_with_pin_checks,
                  store_pin, unlock)

if TYPE_CHECKING:
    import sqlite3

log = logging.getLogger("symorva_server.wallet")

_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
_USER_ID = re.compile(r"@[^:\s]+:(\S+)")
_CURSOR = re.compile(r"[0-9]{1,19}")  # a history cursor (next_from): a transfer's seq


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


def _failure(command_id: str, code: str, message: str, attempts_left: int | None = None) -> dict[str, Any]:
    failure: dict[str, Any] = {"code": code, "message": message}
    if attempts_left is not None:
        failure["attempts_left"] = attempts_left
    return {"status": "failed", "command_id": command_id, "failure": failure}


def _locked_error(message: str = LOCKED_MESSAGE) -> SymorvaError:
    return SymorvaError(403, ErrorCode.WALLET_LOCKED, message, extra={"attempts_left": 0})


def _wrong_pin_failure(command_id: str, check: PinCheck) -> dict[str, Any]:
    """A confirm's answer to a wrong PIN."""
    if check.ladder.locked:
        return _failure(command_id, FailureCode.LOCKED_OUT, LOCKED_NOW_MESSAGE, attempts_left=0)
    left = check.ladder.attempts_left
    return _failure(command_id, FailureCode.WRONG_PIN, f"Wrong PIN ({left} attempts left)", attempts_left=left)


def _wrong_old_pin_error(check: PinCheck) -> SymorvaError:
    """A PIN change's answer to a wrong old PIN."""
    if check.ladder.locked:
        return _locked_error(LOCKED_NOW_MESSAGE)
    left = check.ladder.attempts_left
    return SymorvaError(403, ErrorCode.WRONG_PIN, f"Wrong old PIN ({left} attempts left)",
                        extra={"attempts_left": left})


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
                 sealing_key: SealingKey, server_name: str, test_mode: bool,
                 development: bool = False) -> None:
        self.config = config
        self.db = db
        self.clock = clock
        self.sealing_key = sealing_key
        self.server_name = server_name
        self.test_mode = test_mode
        # Development mode (manifest services.development, or --test): new wallets get the
        # manifest's startingBalances, and a transfer may go to a member without a wallet yet
        # (it creates the recipient's wallet). Never in production.
        self.development = development
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
        """The member's row (created if new), with an expired wrong-PIN lock lifted. In
        development mode a new wallet is credited with the manifest's startingBalances."""
        created = conn.execute("INSERT OR IGNORE INTO wallet_members(user_id, created_at_ms) VALUES (?, ?)",
                               (user_id, now)).rowcount == 1
        if created and self.development:
            for code, minor in self.config.starting_balances.items():
                self.add_balance(conn, user_id, code, minor)
                self.record_credit(conn, user_id, code, minor, now)
        member = conn.execute("SELECT * FROM wallet_members WHERE user_id = ?", (user_id,)).fetchone()
        return release_expired_lock(conn, member, now, self.config.pin_lock_ms)

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

    def record_credit(self, conn: sqlite3.Connection, user_id: str, asset: str, amount: int, now: int) -> str:
        """Writes a credit to the ledger (the balance is the caller's); returns its transfer ID."""
        transfer_id = "t_" + secrets.token_urlsafe(16)
        conn.execute(
            "INSERT INTO wallet_transfers(transfer_id, kind, sender, recipient, asset, amount_minor, fee_minor,"
            " total_minor, draft_id, command_id, created_at_ms) VALUES (?, 'credit', NULL, ?, ?, ?, 0, ?,"
            " NULL, NULL, ?)",
            (transfer_id, user_id, asset, amount, amount, now),
        )
        return transfer_id

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

    @staticmethod
    def pin_state(member: sqlite3.Row) -> dict[str, Any]:
        ladder = PinLadder.of(member)
        return {
            "pin_set": member["pin_hash"] is not None,
            "locked": ladder.locked,
            "attempts_left": ladder.attempts_left,
            "max_attempts": MAX_PIN_ATTEMPTS,
        }

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
            # ASCII digits only (str.isdigit() also accepts '²' and other scripts' digits, which
            # int() refuses) and within SQLite's INTEGER range.
            if _CURSOR.fullmatch(from_token) is None or int(from_token) > MAX_MINOR_UNITS:
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
        if not is_valid_pin(new_pin):
            raise SymorvaError(400, ErrorCode.INVALID_PIN, "The new PIN must be 4 to 12 ASCII digits")
        # Both argon2id computations run outside the database lock: the new hash here, the
        # old PIN's check through run_with_pin_checks.
        new_hash = hash_pin(new_pin)

        def run(conn: sqlite3.Connection, verification: PinVerification | None | str
                ) -> tuple[SymorvaError | None, bool]:
            now = self.now_ms()
            member = self.ensure_member(conn, user_id, now)
            error: SymorvaError | None = None
            changed = False
            if PinLadder.of(member).locked:
                error = _locked_error()
            elif member["pin_hash"] is None:
                if old_pin != "":
                    error = SymorvaError(409, ErrorCode.PIN_NOT_SET,
                                         "No PIN is set yet: send an empty old PIN line to set the first one")
            elif old_pin == "":
                error = SymorvaError(409, ErrorCode.PIN_ALREADY_SET,
                                     "A PIN is already set: include the old PIN to change it")
            else:
                check = check_pin(conn, member, old_pin, now, verification)
                if check.right:
                    changed = True
                else:
                    error = _wrong_old_pin_error(check)
            if error is None:
                store_pin(conn, user_id, pin_hash=new_hash)
            return error, changed

        # Errors are raised after the transaction so that a wrong old PIN is counted.
        error, changed = run_with_pin_checks(self.db, run)
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
            if self.development:
                # Development mode: any member of this server can receive; the first transfer
                # to a member who never used the wallet creates their wallet.
                self.ensure_member(conn, body.recipient, now)
            if conn.execute("SELECT 1 FROM wallet_members WHERE user_id = ?", (body.recipient,)).fetchone() is None:
                raise SymorvaError(404, ErrorCode.RECIPIENT_UNKNOWN,
                                   f"{body.recipient} has no wallet in this community yet")
            if PinLadder.of(member).locked:
                raise _locked_error()
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
        hold: list[int | None] = []  # taken once, in the first pass that gets that far

        def run(conn: sqlite3.Connection, verification: PinVerification | None | str
                ) -> tuple[dict[str, Any], bool] | int:
            # Everything is checked again in each pass (run_with_pin_checks): a pass that needs
            # the PIN verified is rolled back, and another confirm may have run meanwhile.
            now = self.now_ms()
            member = self.ensure_member(conn, user_id, now)
            previous = self._recorded_answer(conn, user_id, command_id, for_confirm=True)
            if previous is not None:
                return previous, True
            if not hold:
                hold.append(self._take_hold())
            hold_ms = hold[0]
            if hold_ms is None:
                answer = self._execute(conn, member, command_id, body, sealed, now, verification)
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
            return hold_ms

        result = run_with_pin_checks(self.db, run)
        if not isinstance(result, int):
            return result
        log.warning("wallet: holding command %s as pending for %d ms (test mode)", command_id, result)
        time.sleep(result / 1000)

        def run_held(conn: sqlite3.Connection, verification: PinVerification | None | str) -> dict[str, Any]:
            now = self.now_ms()
            member = self.ensure_member(conn, user_id, now)
            answer = self._execute(conn, member, command_id, body, sealed, now, verification)
            conn.execute(
                "UPDATE wallet_commands SET status = ?, answer = ?, updated_at_ms = ?"
                " WHERE user_id = ? AND command_id = ?",
                (answer["status"], json.dumps(answer), now, user_id, command_id),
            )
            return answer

        return run_with_pin_checks(self.db, run_held), False

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
        with self.db.transaction() as conn:
            now = self.now_ms()
            self.ensure_member(conn, body.user_id, now)
            balance = self.add_balance(conn, body.user_id, asset.code, amount)
            transfer = self.transfer_by_id(conn, self.record_credit(conn, body.user_id, asset.code, amount, now))
        return {"transfer": transfer, "balance": asset.fmt(balance)}

    def unlock(self, body: UnlockRequest, *, actor: str | None = None) -> dict[str, Any]:
        """Test mode: unlocks (and creates) any member's wallet."""
        with self.db.transaction() as conn:
            now = self.now_ms()
            self.ensure_member(conn, body.user_id, now)
            unlock(conn, body.user_id, clear_pin=body.clear_pin, method=UnlockMethod.TEST, actor=actor, now_ms=now)
            member = conn.execute("SELECT * FROM wallet_members WHERE user_id = ?", (body.user_id,)).fetchone()
        return self.pin_state(member)

    def admin_unlock(self, admin: str, body: UnlockRequest) -> dict[str, Any]:
        """A community admin lifts a member's wrong-PIN lock (recorded in wallet_unlocks)."""
        self.check_member_id(body.user_id, "User")
        with self.db.transaction() as conn:
            now = self.now_ms()
            if conn.execute("SELECT 1 FROM wallet_members WHERE user_id = ?", (body.user_id,)).fetchone() is None:
                raise SymorvaError(404, ErrorCode.WALLET_UNKNOWN, f"{body.user_id} has no wallet in this community")
            self.ensure_member(conn, body.user_id, now)
            unlock(conn, body.user_id, clear_pin=body.clear_pin, method=UnlockMethod.ADMIN, actor=admin, now_ms=now)
            member = conn.execute("SELECT * FROM wallet_members WHERE user_id = ?", (body.user_id,)).fetchone()
        return self.pin_state(member)

    def unlocks(self, user_id: str | None, limit: int) -> dict[str, Any]:
        """The unlock audit, newest first (admins)."""
        sql = "SELECT * FROM wallet_unlocks" + (" WHERE user_id = ?" if user_id else "") + " ORDER BY seq DESC LIMIT ?"
        rows = self.db.query(sql, ((user_id,) if user_id else ()) + (limit,))
        return {"unlocks": [
            {"user_id": r["user_id"], "method": r["method"], "actor": r["actor"], "at_ms": r["at_ms"],
             "locked_at_ms": r["locked_at_ms"], "failed_attempts": r["failed_attempts"],
             "cleared_pin": bool(r["cleared_pin"])}
            for r in rows]}

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
                 body: ConfirmRequest, sealed: bytes, now: int,
                 verification: PinVerification | None | str) -> dict[str, Any]:
        """Runs a new command inside the caller's transaction; returns its answer. Raises
        PinVerificationNeeded (see run_with_pin_checks) when it gets to the PIN without a
        verification for it."""
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
        if PinLadder.of(member).locked:
            return _failure(command_id, FailureCode.LOCKED_OUT, LOCKED_MESSAGE, attempts_left=0)
        method = body.verification.method
        if method == "biometric" and self.config.biometric_refused:
            return _failure(command_id, FailureCode.METHOD_NOT_OFFERED,
                            "Biometric verification is not available: this server has no biometric verifier "
                            "(the reference server honours it in test mode only)")
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
            check = check_pin(conn, member, secret, now, verification)
            if not check.right:
                return _wrong_pin_failure(command_id, check)
        elif not secret:  # biometric (test mode only): the reference server accepts any non-empty assertion
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



def create_state(options: dict[str, Any], *, db: Database, clock: Callable[[], float],
                 sealing_key: SealingKey, settings: Settings, development: bool = False) -> Wallet:
    """The module's state, from its manifest options (raises ManifestError); the
    migrations have been applied."""
    config = parse_config(options, test_mode=settings.test_mode)
    if config.biometric_refused:
        log.warning("wallet: manifest biometric=true ignored outside test mode (no biometric verifier); "
                    "only the PIN is offered")
    if config.starting_balances and not development:
        log.warning("wallet: manifest startingBalances ignored outside development mode")
    return Wallet(config, db=db, clock=clock, sealing_key=sealing_key,
                  server_name=settings.server_name, test_mode=settings.test_mode, development=development)
