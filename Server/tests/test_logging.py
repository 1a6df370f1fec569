from __future__ import annotations

import logging

import httpx

from symorva_server.__main__ import quiet_http_client_logs


def test_http_client_request_lines_never_reach_the_log(caplog):
    """The OpenID check sends the token in the query string; httpx logs request URLs at INFO."""
    quiet_http_client_logs()
    token = "canary-openid-token-1234567890"

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"sub": "@alice:localhost"})

    with caplog.at_level(logging.DEBUG):
        with httpx.Client(transport=httpx.MockTransport(answer)) as client:
            client.get("http://127.0.0.1:1/_matrix/federation/v1/openid/userinfo", params={"access_token": token})
        logging.getLogger("symorva_server").info("a line of our own")
    assert "a line of our own" in caplog.text
    assert token not in caplog.text
