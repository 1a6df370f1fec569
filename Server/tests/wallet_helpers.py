"""Helpers for the wallet tests: a member session with sealing and transfer shortcuts."""

from __future__ import annotations

import base64
import uuid

from nacl.public import PublicKey, SealedBox

from .conftest import login

W = "/_symorva/v1/wallet"
TW = "/_symorva/v1/test/wallet"
FAULTS = "/_symorva/v1/test/faults"
CONFIRM_PATH = f"{W}/transfers/confirm"


def new_command_id() -> str:
    return str(uuid.uuid4())


def seal_to(public_key_b64: str, text: str) -> str:
    box = SealedBox(PublicKey(base64.b64decode(public_key_b64)))
    return base64.b64encode(box.encrypt(text.encode())).decode()


def confirm_payload(command_id: str, draft_id: str, pin: str) -> str:
    # Exactly SealingContext.pinPayload in the SDK (docs/wallet.md).
    return f"symorva-wallet-confirm/1\n{command_id}\n{draft_id}\n{pin}"


class Member:
    def __init__(self, client, verifier, user_id: str) -> None:
        self.client = client
        self.user_id = user_id
        self.headers = login(client, verifier, user_id)["headers"]

    # raw calls
    def get(self, path, **kw):
        return self.client.get(path, headers=self.headers, **kw)

    def post(self, path, json=None, **kw):
        return self.client.post(path, headers=self.headers, json=json, **kw)

    # wallet shortcuts
    def server_key(self) -> str:
        caps = self.get("/_symorva/v1/capabilities").json()
        return caps["modules"]["wallet"]["sealing_key"]["public_key"]

    def balances(self) -> dict[str, str]:
        r = self.get(f"{W}/balances")
        assert r.status_code == 200, r.text
        return {b["asset"]: b["amount"] for b in r.json()["balances"]}

    def set_pin(self, new: str, old: str = "", user_id: str | None = None):
        text = f"symorva-wallet-pin/1\n{user_id or self.user_id}\n{old}\n{new}"
        return self.post(f"{W}/pin", {"sealed": seal_to(self.server_key(), text)})

    def credit(self, user_id: str, amount: str, asset: str = "ORB") -> dict:
        r = self.post(f"{TW}/credit", {"user_id": user_id, "asset": asset, "amount": amount})
        assert r.status_code == 200, r.text
        return r.json()

    def prepare(self, recipient: str, amount: str, asset: str = "ORB", **extra):
        return self.post(f"{W}/transfers/prepare", {"recipient": recipient, "asset": asset, "amount": amount, **extra})

    def draft(self, recipient: str, amount: str, asset: str = "ORB", **extra) -> dict:
        r = self.prepare(recipient, amount, asset, **extra)
        assert r.status_code == 200, r.text
        return r.json()

    def confirm(self, draft: dict, pin: str, command_id: str | None = None, *, method: str = "pin",
                payload: str | None = None):
        command_id = command_id or new_command_id()
        text = payload if payload is not None else confirm_payload(command_id, draft["draft_id"], pin)
        sealed = seal_to(draft["sealing_key"]["public_key"], text)
        return self.post(CONFIRM_PATH, {"draft_id": draft["draft_id"], "command_id": command_id,
                                        "verification": {"method": method, "sealed": sealed}})

    def query(self, command_id: str):
        return self.get(f"{W}/commands/{command_id}")
