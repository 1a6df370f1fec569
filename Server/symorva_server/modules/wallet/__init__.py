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
  lock the member's wallet for `pinLockSeconds` (default 15 minutes), unless a community
  admin unlocks it earlier (`POST /_symorva/v1/wallet/admin/unlock`; in test mode also
  `POST /_symorva/v1/test/wallet/unlock`). Every unlock is audited (wallet_unlocks).

Command IDs are scoped per member: (member, command ID) is the key.
"""

from __future__ import annotations

from .config import CONFIRM_PAYLOAD_VERSION, PIN_PAYLOAD_VERSION, AmountError, format_amount, parse_amount
from .domain import FailureCode, Wallet, create_state
from .models import CreditRequest, HoldRequest, UnlockRequest
from .routes import PREFIX, TEST_PREFIX, capabilities, router, test_router
from .schema import MIGRATIONS

MODULE_ID = "wallet"

__all__ = [
    "CONFIRM_PAYLOAD_VERSION", "MIGRATIONS", "MODULE_ID", "PIN_PAYLOAD_VERSION", "PREFIX", "TEST_PREFIX",
    "AmountError", "CreditRequest", "FailureCode", "HoldRequest", "UnlockRequest", "Wallet", "capabilities",
    "create_state", "format_amount", "parse_amount", "router", "test_router",
]
