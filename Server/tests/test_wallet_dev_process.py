"""A newcomer's first transfer against a real server process started as Scripts/dev-server
starts it outside test mode: the manifest from write_manifest with a starting balance, no
--test. The new member's wallet starts with the starting balance and can pay a member who
never used the wallet."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

import pytest

from .test_server_process import FakeHomeserver, Server
from .wallet_helpers import CONFIRM_PATH, W, confirm_payload, new_command_id, seal_to

pytestmark = pytest.mark.subprocess

PIN = "2468"


def test_a_newcomer_pays_a_member_who_never_used_the_wallet(tmp_path):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeHomeserver)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    FakeHomeserver.tokens = {**FakeHomeserver.tokens, "good-carol": "@carol:localhost",
                             "good-dave": "@dave:localhost"}
    s = Server(tmp_path, f"http://127.0.0.1:{httpd.server_address[1]}", test_mode=False,
               manifest_args=("--starting-balance", "ORB=100.00"))
    try:
        def token(who):
            status, body = s.request("POST", "/_symorva/v1/auth/openid",
                                     {"access_token": f"good-{who}", "matrix_server_name": "localhost"})
            assert status == 200, body
            return body["access_token"]

        carol = token("carol")
        assert s.request("GET", "/_symorva/v1/health")[1].get("test_mode") is False
        assert s.request("GET", f"{W}/balances", token=carol)[1]["balances"][0]["amount"] == "100.00"
        key = s.request("GET", "/_symorva/v1/capabilities", token=carol)[1]["modules"]["wallet"]["sealing_key"]
        status, body = s.request("POST", f"{W}/pin", token=carol, body={
            "sealed": seal_to(key["public_key"], f"symorva-wallet-pin/1\n@carol:localhost\n\n{PIN}")})
        assert status == 200, body
        status, draft = s.request("POST", f"{W}/transfers/prepare", token=carol,
                                  body={"recipient": "@dave:localhost", "asset": "ORB", "amount": "5.00"})
        assert status == 200, draft
        cmd = new_command_id()
        status, answer = s.request("POST", CONFIRM_PATH, token=carol, body={
            "draft_id": draft["draft_id"], "command_id": cmd, "verification": {
                "method": "pin",
                "sealed": seal_to(draft["sealing_key"]["public_key"], confirm_payload(cmd, draft["draft_id"], PIN))}})
        assert status == 200 and answer["status"] == "settled", answer
        assert s.request("GET", f"{W}/balances", token=carol)[1]["balances"][0]["amount"] == "95.00"
        dave = token("dave")
        assert s.request("GET", f"{W}/balances", token=dave)[1]["balances"][0]["amount"] == "105.00"
        history = s.request("GET", f"{W}/transfers", token=dave)[1]["transfers"]
        assert [(e["kind"], e["amount"]) for e in history] == [("transfer", "5.00"), ("credit", "100.00")]
    finally:
        s.stop()
        httpd.shutdown()
        httpd.server_close()
