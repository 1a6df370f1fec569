"""The wallet's amounts, protocol constants and manifest options (docs/manifest.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ...config import ManifestError

# First line of the sealed confirmation payload (docs/wallet.md, SealingContext.pinPayload):
# UTF-8 lines "symorva-wallet-confirm/1", command ID, draft ID, PIN (or biometric assertion).
CONFIRM_PAYLOAD_VERSION = "symorva-wallet-confirm/1"
# First line of the sealed PIN-setting payload: lines "symorva-wallet-pin/1", the member's
# user ID, the old PIN (empty line when setting the first PIN), the new PIN.
PIN_PAYLOAD_VERSION = "symorva-wallet-pin/1"

DEFAULT_DRAFT_TTL_S = 120
# How long five wrong PINs lock a wallet; then the count starts again (pin.release_expired_lock).
DEFAULT_PIN_LOCK_S = 15 * 60
MAX_PIN_LOCK_S = 7 * 86400
MAX_MINOR_UNITS = 2**63 - 1

_AMOUNT = re.compile(r"[0-9]+(?:\.[0-9]+)?")


# -- amounts


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


# -- manifest options


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
    # Offered and accepted. The reference server has no biometric verifier (it would accept
    # any non-empty assertion), so manifest `biometric: true` is honoured in test mode only.
    biometric: bool
    draft_ttl_ms: int
    # `biometric: true` in the manifest but not honoured (not in test mode).
    biometric_refused: bool = False
    pin_lock_ms: int = DEFAULT_PIN_LOCK_S * 1000
    # Development mode only (Wallet.development): what a member's wallet is credited with when
    # it is created, asset code -> minor units. Parsed in every mode, ignored in production.
    starting_balances: dict[str, int] = field(default_factory=dict)

    @property
    def verification_methods(self) -> list[str]:
        return ["pin", "biometric"] if self.biometric else ["pin"]


def parse_config(options: dict[str, Any], *, test_mode: bool = False) -> WalletConfig:
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
    lock = options.get("pinLockSeconds", DEFAULT_PIN_LOCK_S)
    if not isinstance(lock, int) or isinstance(lock, bool) or not 1 <= lock <= MAX_PIN_LOCK_S:
        raise ManifestError(f"{where}.pinLockSeconds: must be an integer 1..{MAX_PIN_LOCK_S}")
    starting = options.get("startingBalances", {})
    if not isinstance(starting, dict):
        raise ManifestError(f"{where}.startingBalances: must be an object of asset code -> amount")
    starting_balances: dict[str, int] = {}
    for code, text in starting.items():
        if code not in assets:
            raise ManifestError(f"{where}.startingBalances.{code}: not an asset of this wallet")
        if not isinstance(text, str):
            raise ManifestError(f"{where}.startingBalances.{code}: must be a decimal string like \"100.00\"")
        try:
            starting_balances[code] = parse_amount(text, assets[code].precision)
        except AmountError as e:
            raise ManifestError(f"{where}.startingBalances.{code}: {text!r} {e}") from None
    return WalletConfig(assets=assets, biometric=biometric and test_mode, draft_ttl_ms=ttl * 1000,
                        biometric_refused=biometric and not test_mode, pin_lock_ms=lock * 1000,
                        starting_balances={c: m for c, m in starting_balances.items() if m > 0})
