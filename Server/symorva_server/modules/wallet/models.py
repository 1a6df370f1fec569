"""The wallet's request and response bodies (pydantic; their names are the OpenAPI schemas)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from .config import CONFIRM_PAYLOAD_VERSION


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
    # The description is published in the OpenAPI document; FailureCode is in domain.py now.
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


class UnlockAuditEntry(BaseModel):
    user_id: str = Field(description="The member whose wallet was unlocked.")
    method: Literal["expired", "admin", "test"] = Field(
        description="expired: the lock duration (pinLockSeconds) passed; admin: an admin's unlock; "
                    "test: the test-mode endpoint.")
    actor: str | None = Field(description="Who unlocked it (the admin, or the test caller); null when expired.")
    at_ms: int
    locked_at_ms: int | None = Field(description="When the lock began (null: the wallet was not locked).")
    failed_attempts: int = Field(description="The wrong-PIN count that was reset.")
    cleared_pin: bool


class UnlockAuditOut(BaseModel):
    unlocks: list[UnlockAuditEntry] = Field(description="Newest first.")
