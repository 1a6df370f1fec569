"""Wallet end to end against the real dev environment (Synapse accounts, the services as
started by Scripts/dev-server --test). Skipped unless the env vars are set and the
services run in test mode (the credit endpoint and fault injection are needed)."""

from __future__ import annotations

import os

import httpx
import pytest

from .test_integration_synapse import HS, SVC, openid_token, register
from .wallet_helpers import CONFIRM_PATH, FAULTS, TW, W, confirm_payload, new_command_id, seal_to

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (HS and SVC), reason="SYMORVA_HOMESERVER_URL / SYMORVA_SERVICES_URL not set"),
    pytest.mark.skipif(os.environ.get("SYMORVA_TEST_MODE") != "1", reason="services not in test mode"),
]


@pytest.fixture(scope="module")
def http():
    with httpx.Client(timeout=30, trust_env=False) as c:
        yield c


def member(http) -> dict:
    account = register(http)
    r = http.post(f"{SVC}/_symorva/v1/auth/openid", json=openid_token(http, account))
    assert r.status_code == 200, r.text
    account["headers"] = {"Authorization": f"Bearer {r.json()['access_token']}"}
    return account


def test_transfer_between_two_synapse_accounts_survives_a_dropped_answer(http):
    alice, bob = member(http), member(http)
    a, b = alice["headers"], bob["headers"]
    assert http.get(f"{SVC}{W}/balances", headers=b).status_code == 200  # Bob opens his wallet
    caps = http.get(f"{SVC}/_symorva/v1/capabilities", headers=a).json()["modules"]["wallet"]
    key = caps["sealing_key"]["public_key"]
    asset = caps["assets"][0]
    pin = "2580"
    r = http.post(f"{SVC}{W}/pin", headers=a,
                  json={"sealed": seal_to(key, f"symorva-wallet-pin/1\n{alice['user_id']}\n\n{pin}")})
    assert r.json() == {"pin_set": True, "changed": False}, r.text
    r = http.post(f"{SVC}{TW}/credit", headers=a, json={"user_id": alice["user_id"], "asset": asset["code"],
                                                         "amount": "10"})
    assert r.status_code == 200, r.text
    d = http.post(f"{SVC}{W}/transfers/prepare", headers=a,
                  json={"recipient": bob["user_id"], "asset": asset["code"], "amount": "4"}).json()
    assert d["amount"] == "4.00" and d["verification_methods"] == ["pin"]

    r = http.post(f"{SVC}{FAULTS}", headers=a, json={"path_prefix": CONFIRM_PATH, "mode": "commit_then_drop"})
    assert r.status_code == 200, r.text
    cmd = new_command_id()
    body = {"draft_id": d["draft_id"], "command_id": cmd, "verification": {
        "method": "pin", "sealed": seal_to(d["sealing_key"]["public_key"], confirm_payload(cmd, d["draft_id"], pin))}}
    with pytest.raises(httpx.TransportError):
        http.post(f"{SVC}{CONFIRM_PATH}", headers=a, json=body)
    q = http.get(f"{SVC}{W}/commands/{cmd}", headers=a).json()
    assert q["status"] == "settled" and q["transfer"]["recipient"] == bob["user_id"]
    assert http.post(f"{SVC}{CONFIRM_PATH}", headers=a, json=body).json() == q
    assert http.get(f"{SVC}{W}/balances", headers=a).json()["balances"][0]["amount"] == "6.00"
    assert http.get(f"{SVC}{W}/balances", headers=b).json()["balances"][0]["amount"] == "4.00"

    unknown = new_command_id()
    assert http.get(f"{SVC}{W}/commands/{unknown}", headers=a).json()["status"] == "unknown_command"
    d2 = http.post(f"{SVC}{W}/transfers/prepare", headers=a,
                   json={"recipient": bob["user_id"], "asset": asset["code"], "amount": "1.00"}).json()
    late = {"draft_id": d2["draft_id"], "command_id": unknown, "verification": {
        "method": "pin",
        "sealed": seal_to(d2["sealing_key"]["public_key"], confirm_payload(unknown, d2["draft_id"], pin))}}
    assert http.post(f"{SVC}{CONFIRM_PATH}", headers=a, json=late).json()["failure"]["code"] == "command_fenced"
