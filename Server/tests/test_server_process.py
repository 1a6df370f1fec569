"""The server as a real process (uvicorn on a loopback port), verifying OpenID tokens
against a fake homeserver over HTTP. Covers what an in-process client cannot: the
HTTP userinfo verifier, and that commit_then_drop really drops the TCP connection."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from symorva_server.config import default_manifest

pytestmark = pytest.mark.subprocess

SERVER_DIR = Path(__file__).resolve().parents[1]


class FakeHomeserver(BaseHTTPRequestHandler):
    tokens: dict[str, str] = {}

    def do_GET(self):  # noqa: N802
        u = urlparse(self.path)
        token = parse_qs(u.query).get("access_token", [""])[0]
        if u.path != "/_matrix/federation/v1/openid/userinfo":
            status, body = 404, {"errcode": "M_UNRECOGNIZED", "error": "Unrecognized request"}
        elif token in self.tokens:
            status, body = 200, {"sub": self.tokens[token]}
        else:
            status, body = 401, {"errcode": "M_UNKNOWN_TOKEN", "error": "Access Token unknown or expired"}
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, tmp: Path, homeserver_url: str, test_mode: bool, log_level: str = "warning",
                 extra_args: tuple[str, ...] = (), manifest_args: tuple[str, ...] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        manifest = tmp / "symorva.config.json"
        if manifest_args is None:
            manifest.write_text(json.dumps(default_manifest(homeserver_url, "localhost", self.url)))
        else:  # the dev environment's manifest, as Scripts/dev-server writes it
            from symorva_server import write_manifest
            write_manifest.main([str(manifest), "--homeserver", homeserver_url, "--server-name", "localhost",
                                 "--services", self.url, *manifest_args])
        args = [sys.executable, "-m", "symorva_server", "--host", "127.0.0.1",
                "--port", str(self.port), "--db", str(tmp / "services.db"),
                "--manifest", str(manifest), "--homeserver", homeserver_url,
                "--server-name", "localhost", "--log-level", log_level]
        if test_mode:
            args.append("--test")
        args.extend(extra_args)
        self.log = open(tmp / "server.log", "w+")
        env = dict(os.environ, PYTHONPATH=str(SERVER_DIR))
        self.proc = subprocess.Popen(args, cwd=SERVER_DIR, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if self.request("GET", "/_symorva/v1/health")[0] == 200:
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        self.log.seek(0)
        raise RuntimeError("server did not start:\n" + self.log.read())

    def request(self, method, path, body=None, token=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            h = dict(headers or {})
            if token:
                h["Authorization"] = f"Bearer {token}"
            data = None
            if body is not None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                h.setdefault("Content-Type", "application/json")
            conn.request(method, path, body=data, headers=h)
            resp = conn.getresponse()
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw else None)
        finally:
            conn.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def homeserver():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeHomeserver)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    FakeHomeserver.tokens = {"good-alice": "@alice:localhost"}
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def test_server(homeserver, tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("test-server"), homeserver, test_mode=True)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def token(test_server):
    status, body = test_server.request("POST", "/_symorva/v1/auth/openid",
                                       {"access_token": "good-alice", "matrix_server_name": "localhost"})
    assert status == 200, body
    return body["access_token"]


def test_real_verifier_accepts_and_rejects(test_server, token):
    assert test_server.request("GET", "/_symorva/v1/whoami", token=token)[1]["user_id"] == "@alice:localhost"
    status, body = test_server.request("POST", "/_symorva/v1/auth/openid",
                                       {"access_token": "forged", "matrix_server_name": "localhost"})
    assert (status, body["errcode"]) == (401, "SY_UNKNOWN_TOKEN")


def test_unreachable_homeserver(tmp_path):
    s = Server(tmp_path, f"http://127.0.0.1:{free_port()}", test_mode=False)
    try:
        status, body = s.request("POST", "/_symorva/v1/auth/openid",
                                 {"access_token": "t", "matrix_server_name": "localhost"})
        assert (status, body["errcode"]) == (502, "SY_HOMESERVER_UNAVAILABLE")
        # Not in test mode: no test routes, and they are not even reachable unauthenticated.
        assert s.request("GET", "/_symorva/v1/health")[1]["test_mode"] is False
        assert s.request("GET", "/_symorva/v1/test/faults")[0] == 401
    finally:
        s.stop()


def test_size_limit_over_socket(test_server):
    status, body = test_server.request("POST", "/_symorva/v1/auth/openid", b"{" + b" " * 70000 + b"}")
    assert (status, body["errcode"]) == (413, "SY_TOO_LARGE")


def test_commit_then_drop_closes_connection(test_server, token):
    status, _ = test_server.request("POST", "/_symorva/v1/test/faults", token=token, body={
        "path_prefix": "/_symorva/v1/test/kv/", "mode": "commit_then_drop", "method": "PUT"})
    assert status == 200
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        test_server.request("PUT", "/_symorva/v1/test/kv/pay-1", token=token, body={"value": 42})
    status, body = test_server.request("GET", "/_symorva/v1/test/kv/pay-1", token=token)
    assert status == 200 and body == {"key": "pay-1", "value": 42, "writes": 1}
    # The server is fine afterwards.
    assert test_server.request("GET", "/_symorva/v1/whoami", token=token)[0] == 200


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_commit_then_drop_seen_by_curl(test_server, token):
    test_server.request("POST", "/_symorva/v1/test/faults", token=token, body={
        "path_prefix": "/_symorva/v1/test/kv/curl", "mode": "commit_then_drop"})
    p = subprocess.run(["curl", "-sS", "-X", "PUT", "-H", f"Authorization: Bearer {token}",
                        "-H", "Content-Type: application/json", "--data", '{"value": "c"}',
                        f"{test_server.url}/_symorva/v1/test/kv/curl"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode in (52, 56), (p.returncode, p.stdout, p.stderr)  # empty reply / reset
    assert p.stdout == ""
    status, body = test_server.request("GET", "/_symorva/v1/test/kv/curl", token=token)
    assert body["writes"] == 1


def test_error5xx_and_delay_over_socket(test_server, token):
    test_server.request("POST", "/_symorva/v1/test/faults", token=token, body={
        "path_prefix": "/_symorva/v1/capabilities", "mode": "error5xx", "status": 500})
    status, body = test_server.request("GET", "/_symorva/v1/capabilities", token=token)
    assert (status, body["errcode"]) == (500, "SY_INJECTED_FAULT")
    test_server.request("POST", "/_symorva/v1/test/faults", token=token, body={
        "path_prefix": "/_symorva/v1/capabilities", "mode": "delay", "delay_ms": 250})
    t0 = time.monotonic()
    assert test_server.request("GET", "/_symorva/v1/capabilities", token=token)[0] == 200
    assert time.monotonic() - t0 >= 0.25


def test_invalid_manifest_exits_2(tmp_path):
    (tmp_path / "m.json").write_text('{"version": 2}')
    p = subprocess.run([sys.executable, "-m", "symorva_server", "--port", str(free_port()),
                        "--db", str(tmp_path / "d.db"), "--manifest", str(tmp_path / "m.json"),
                        "--homeserver", "http://127.0.0.1:1", "--server-name", "localhost"],
                       cwd=SERVER_DIR, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(SERVER_DIR)))
    assert p.returncode == 2
    assert "manifest.version" in p.stderr


def test_rate_limit_over_socket(homeserver, tmp_path):
    # The CLI's profile and per-class override reach the server; the 429 carries Retry-After.
    s = Server(tmp_path, homeserver, test_mode=False,
               extra_args=("--rate-limit", "low", "--rate-limit-bucket", "reads=2/0.5"))
    try:
        status, body = s.request("POST", "/_symorva/v1/auth/openid",
                                 {"access_token": "good-alice", "matrix_server_name": "localhost"})
        assert status == 200, body
        token = body["access_token"]
        assert [s.request("GET", "/_symorva/v1/whoami", token=token)[0] for _ in range(2)] == [200, 200]
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        try:
            conn.request("GET", "/_symorva/v1/whoami", headers={"Authorization": f"Bearer {token}"})
            resp = conn.getresponse()
            body = json.loads(resp.read())
        finally:
            conn.close()
        assert resp.status == 429
        assert body["errcode"] == "SY_LIMIT_EXCEEDED"
        assert 0 < body["retry_after_ms"] <= 2000
        assert resp.getheader("Retry-After") == str(-(-body["retry_after_ms"] // 1000))
        assert resp.getheader("Content-Type") == "application/json"
    finally:
        s.stop()


def test_invalid_rate_limit_bucket_exits_2(tmp_path):
    (tmp_path / "m.json").write_text(json.dumps(default_manifest("http://127.0.0.1:1", "localhost", "http://x")))
    p = subprocess.run([sys.executable, "-m", "symorva_server", "--port", str(free_port()),
                        "--db", str(tmp_path / "d.db"), "--manifest", str(tmp_path / "m.json"),
                        "--homeserver", "http://127.0.0.1:1", "--server-name", "localhost",
                        "--rate-limit-bucket", "reads=0/1"],
                       cwd=SERVER_DIR, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(SERVER_DIR)))
    assert p.returncode == 2
    assert "--rate-limit-bucket" in p.stderr and "burst" in p.stderr
