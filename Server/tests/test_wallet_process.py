"""The wallet against a real server process (uvicorn, production argon2id cost): a confirm
whose connection is dropped after commit is found settled by query, exactly once, and the
PIN appears neither in the database files nor in the server's log output."""

from __future__ import annotations

import http.client
import os
import threading
from http.server import ThreadingHTTPServer

import pytest

from .test_server_process import FakeHomeserver, Server
from .wallet_helpers import CONFIRM_PATH, FAULTS, TW, W, confirm_payload, new_command_id, seal_to

pytestmark = pytest.mark.subprocess

CANARY_PIN = "80706050"


@pytest.fixture(scope="module")
def wallet_server(tmp_path_factory):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeHomeserver)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    FakeHomeserver.tokens = {"good-alice": "@alice:localhost", "good-bob": "@bob:localhost"}
    tmp = tmp_path_factory.mktemp("wallet-server")
    s = Server(tmp, f"http://127.0.0.1:{httpd.server_address[1]}", test_mode=True, log_level="debug")
    s.tmp = tmp
    yield s
    s.stop()
    httpd.shutdown()
    httpd.server_close()


def token(server, who):
    status, body = server.request("POST", "/_symorva/v1/auth/openid",
                                  {"access_token": f"good-{who}", "matrix_server_name": "localhost"})
    assert status == 200, body
    return body["access_token"]


def test_commit_then_drop_over_socket_and_no_pin_in_logs(wallet_server):
    s = wallet_server
    alice, bob = token(s, "alice"), token(s, "bob")
    assert s.request("GET", f"{W}/balances", token=bob)[0] == 200
    key = s.request("GET", "/_symorva/v1/capabilities", token=alice)[1]["modules"]["wallet"]["sealing_key"]
    status, body = s.request("POST", f"{W}/pin", token=alice, body={
        "sealed": seal_to(key["public_key"], f"symorva-wallet-pin/1\n@alice:localhost\n\n{CANARY_PIN}")})
    assert (status, body) == (200, {"pin_set": True, "changed": False})
    assert s.request("POST", f"{TW}/credit", token=alice,
                     body={"user_id": "@alice:localhost", "asset": "ORB", "amount": "50.00"})[0] == 200
    status, draft = s.request("POST", f"{W}/transfers/prepare", token=alice,
                              body={"recipient": "@bob:localhost", "asset": "ORB", "amount": "12.34"})
    assert status == 200, draft

    assert s.request("POST", FAULTS, token=alice,
                     body={"path_prefix": CONFIRM_PATH, "mode": "commit_then_drop"})[0] == 200
    cmd = new_command_id()
    confirm = {"draft_id": draft["draft_id"], "command_id": cmd, "verification": {
        "method": "pin",
        "sealed": seal_to(draft["sealing_key"]["public_key"], confirm_payload(cmd, draft["draft_id"], CANARY_PIN))}}
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        s.request("POST", CONFIRM_PATH, token=alice, body=confirm)

    status, answer = s.request("GET", f"{W}/commands/{cmd}", token=alice)
    assert status == 200 and answer["status"] == "settled", answer
    assert answer["transfer"]["amount"] == "12.34"
    assert s.request("POST", CONFIRM_PATH, token=alice, body=confirm)[1] == answer
    assert s.request("GET", f"{W}/balances", token=alice)[1]["balances"][0]["amount"] == "37.66"
    assert s.request("GET", f"{W}/balances", token=bob)[1]["balances"][0]["amount"] == "12.34"
    history = s.request("GET", f"{W}/transfers", token=bob)[1]["transfers"]
    assert [e["transfer_id"] for e in history] == [answer["transfer"]["transfer_id"]]

    # A wrong PIN too, then look for both PINs everywhere the server writes.
    d2 = s.request("POST", f"{W}/transfers/prepare", token=alice,
                   body={"recipient": "@bob:localhost", "asset": "ORB", "amount": "1.00"})[1]
    c2 = new_command_id()
    wrong = "13572468"
    r = s.request("POST", CONFIRM_PATH, token=alice, body={
        "draft_id": d2["draft_id"], "command_id": c2, "verification": {
            "method": "pin", "sealed": seal_to(key["public_key"], confirm_payload(c2, d2["draft_id"], wrong))}})
    assert r[1]["failure"] == {"code": "wrong_pin", "message": "Wrong PIN (4 attempts left)", "attempts_left": 4}
    s.log.flush()
    log_text = (s.tmp / "server.log").read_text()
    assert CONFIRM_PATH in log_text and "settled as transfer" in log_text  # the log is not empty
    for name in os.listdir(s.tmp):
        data = (s.tmp / name).read_bytes()
        for secret in (CANARY_PIN, wrong):
            assert secret.encode() not in data, name
