"""Wallet module. Placeholder: its API is added by the wallet feature issue.

Already publishes, in the capabilities, the server's public sealing key (X25519,
libsodium sealed boxes) and the list of accepted verification methods (empty until
the wallet issue fills it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..app import ServerContext

MODULE_ID = "wallet"

# Filled by the wallet issue, e.g. ["password", "passkey"].
VERIFICATION_METHODS: list[str] = []


def capabilities(ctx: ServerContext, options: dict[str, Any]) -> dict[str, Any]:
    return {
        "verification_methods": list(VERIFICATION_METHODS),
        "sealing_key": ctx.sealing_key.public_info(),
    }
